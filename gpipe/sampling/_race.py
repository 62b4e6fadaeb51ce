"""Exponential races: per segment, the k candidates with the shortest race ``-log(1 - u) / bias``, in order.

CUDA in ``kernels/race.cu``, CPU twin here (same draws, same winners). The k
shortest races of a pool are a selection without replacement in proportion to
bias — the distribution of updated sampling (Efraimidis & Spirakis) — and the k
shortest of a union are among the k shortest of each of its parts, so a pool
spread over partitions is selected from by keeping k per part and merging.
"""

from __future__ import annotations

from .._search import race_segment
from ..backend import cpu_kernel, device_of, prange, xp
from ..kernels import Arg, Kernel


def race(bias, offsets, want, streams, key, step: int):
    """``(win_offsets, winners, races)``: per segment ``s`` the ``min(want[s], positive biases)`` candidates
    (indices into ``bias``) with the shortest races, shortest first; candidate ``j`` of segment ``s`` draws
    from stream ``streams[s]`` at ``(step, j)``."""
    x = xp(device_of(bias))
    nseg = offsets.shape[0] - 1
    positive = x.zeros(bias.shape[0] + 1, dtype=x.int64)
    x.cumsum(bias > 0, out=positive[1:])
    count = x.minimum(positive[offsets[1:]] - positive[offsets[:-1]], want)
    win_offsets = x.zeros(nseg + 1, dtype=x.int64)
    x.cumsum(count, out=win_offsets[1:])
    total = int(win_offsets[-1])
    winners = x.empty(total, dtype=x.int64)
    races = x.empty(total, dtype=x.float64)
    RACE.launch(nseg=nseg, offsets=offsets, bias=bias, out_offsets=win_offsets, key=key, streams=streams, step=step,
                out=winners, out_race=races)
    return win_offsets, winners, races


@cpu_kernel(parallel=True)
def _race_cpu(nseg, offsets, bias, out_offsets, key, streams, step, out, out_race):
    for s in prange(nseg):
        a = offsets[s]
        o = out_offsets[s]
        race_segment(bias, a, offsets[s + 1] - a, out_offsets[s + 1] - o, key, streams[s], step, out, out_race, o)


RACE = Kernel("race.cu", "gp_race", twin=_race_cpu, items="nseg", args=(
    Arg("nseg", "i64"), Arg("offsets", "i64[nseg+1]"), Arg("bias", "f64[]"), Arg("out_offsets", "i64[nseg+1]"),
    Arg("key", "u64"), Arg("streams", "i64[nseg]"), Arg("step", "i64"), Arg("out", "i64[]", out=True),
    Arg("out_race", "f64[]", out=True)))
