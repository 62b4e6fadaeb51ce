"""The multi-merge kernel (``kernels/multimerge.cu``) and its CPU twin, and one subtask's merge on either device."""

from __future__ import annotations

import numpy as np

from ..backend import cpu_kernel, segments
from ..kernels import Arg, Kernel


@cpu_kernel()
def _merge_rank_cpu(total, pieces, starts, keys, rank, hits):
    j = 0
    for e in range(total):
        while starts[j + 1] <= e:
            j += 1
        x = keys[e]
        r = e - starts[j]
        for k in range(j):
            lo, hi = starts[k], starts[k + 1]
            while lo < hi:
                mid = lo + (hi - lo) // 2
                if keys[mid] <= x:
                    lo = mid + 1
                else:
                    hi = mid
            r += lo - starts[k]
            if lo < starts[k + 1]:
                hits[lo] += 1
        rank[e] = r


MERGE_RANK = Kernel("multimerge.cu", "gp_merge_rank", twin=_merge_rank_cpu, items="total", args=(
    Arg("total", "i64", note="elements of the subtask"), Arg("pieces", "i32"), Arg("starts", "i64[pieces+1]"),
    Arg("keys", "u64[total]", note="each piece sorted"), Arg("rank", "i64[total]", out=True),
    Arg("hits", "u64[total]", out=True, note="zeroed by the caller")))


def merge_pieces(x, keys, values, starts: np.ndarray):
    """The stable merge of the sorted pieces ``keys[starts[j]:starts[j+1]]`` (and their ``values``), on ``x``'s device.

    Every element's place is its rank within its piece, plus the elements of
    the earlier pieces not above it (searched by the kernel), plus those of
    the later pieces below it (the kernel's hits, prefix-summed per piece).
    """
    total = keys.shape[0]
    starts = x.asarray(starts, dtype=x.int64)
    rank = x.empty(total, dtype=x.int64)
    hits = x.zeros(total, dtype=x.uint64)
    MERGE_RANK.launch(total=total, pieces=starts.shape[0] - 1, starts=starts, keys=keys, rank=rank, hits=hits)
    below = x.cumsum(hits.astype(x.int64))
    before = x.concatenate([x.zeros(1, dtype=x.int64), below])[starts[:-1]]  # the count ahead of each piece's start
    piece, _ = segments(x, starts[1:] - starts[:-1])
    rank += below - before[piece]
    out_keys = x.empty_like(keys)
    out_keys[rank] = keys
    if values is None:
        return out_keys, None
    out_values = x.empty_like(values)
    out_values[rank] = values
    return out_keys, out_values
