"""The uniform step kernel (DeepWalk): CUDA in ``kernels/walk_uniform.cu``, CPU twin here."""

from __future__ import annotations

import numpy as np

from .. import _rng
from ..backend import cpu_kernel, prange
from ..kernels import function, id_type, launch_queued
from ..runtime import step_kernel


@step_kernel
def advance_uniform(x, part, walkers: dict, params: dict, out: dict) -> None:
    """Move every walker uniformly at random while it stays inside ``part``."""
    n = walkers["walk_id"].shape[0]
    arrays = (walkers["walk_id"], walkers["vertex"], walkers["step"], out["offset"], out["flat"], out["length"],
              out["vertex"], out["step"], out["moved"])
    if x is np:
        _advance_cpu(part.indptr, part.indices, part.lo, part.hi, params["key"], params["length"], n, *arrays)
    else:
        kernel = function("walk_uniform.cu", "gp_walk_uniform", template=id_type(part.indices.dtype))
        launch_queued(kernel, n, (part.indptr, part.indices, np.int64(part.lo), np.int64(part.hi), np.uint64(params["key"]),
                           np.int32(params["length"]), np.int64(n), *arrays))


@cpu_kernel(parallel=True)
def _advance_cpu(indptr, indices, lo, hi, key, length, n, walk_id, vertex, step, offset, flat, piece_len,
                 out_vertex, out_step, moved):
    for i in prange(n):
        stream = _rng.stream(np.uint64(key), walk_id[i])
        v = vertex[i]
        s = step[i]
        o = offset[i]
        k = 0
        left = 0
        while True:
            flat[o + k] = v
            k += 1
            if s >= length:
                break
            a = indptr[v - lo]
            d = indptr[v - lo + 1] - a
            if d == 0:
                break
            u = np.int64(indices[a + _rng.below(_rng.bits(stream, s, 0), d)])
            s += 1
            v = u
            if u < lo or u >= hi:
                left = 1
                break
        piece_len[i] = k
        out_vertex[i] = v
        out_step[i] = s
        moved[i] = left
