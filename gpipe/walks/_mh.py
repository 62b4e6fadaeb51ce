"""Metropolis-Hastings step kernel: CUDA in ``kernels/walk_mh.cu``, CPU twin here (same random stream).

A walker proposes a uniform neighbor u of its vertex v and moves with
probability min(1, deg(v) / deg(u)), else stays (the step is taken). A
proposal to a vertex of another partition travels there with deg(v); the owner
of u decides, and a rejected walker is sent back to v's partition.
"""

from __future__ import annotations

import numpy as np

from .. import _rng
from ..backend import cpu_kernel, prange
from ..kernels import function, id_type, launch_queued
from ..runtime import StepSpec, step_kernel

FIELDS = (("cur", "int64", "vertex"), ("degv", "int64", 0), ("state", "int8", 0))


@step_kernel
def advance_mh(x, part, walkers: dict, spec: StepSpec, out: dict) -> None:
    n = walkers["walk_id"].shape[0]
    arrays = (walkers["walk_id"], walkers["vertex"], walkers["step"], walkers["cur"], walkers["degv"],
              walkers["state"], out["offset"], out["flat"], out["length"], out["vertex"], out["step"], out["cur"],
              out["degv"], out["state"], out["moved"])
    if x is np:
        _advance_cpu(part.indptr, part.indices, part.lo, part.hi, spec.key, spec.length, n, *arrays)
    else:
        kernel = function("walk_mh.cu", "gp_walk_mh", template=id_type(part.indices.dtype))
        launch_queued(kernel, n, (part.indptr, part.indices, np.int64(part.lo), np.int64(part.hi),
                                  np.uint64(spec.key), np.int32(spec.length), np.int64(n), *arrays))


@cpu_kernel(parallel=True)
def _advance_cpu(indptr, indices, lo, hi, key, length, n, walk_id, vertex, step, cur, degv, state, offset, flat,
                 piece_len, out_vertex, out_step, out_cur, out_degv, out_state, moved):
    for i in prange(n):
        v = cur[i]
        s = step[i]
        o = offset[i]
        k = 0
        left = 0
        st = 0
        route = np.int64(-1)
        dv = np.int64(0)
        walking = True
        if state[i] == 1:  # a proposal from v (elsewhere) to u (here)
            u = vertex[i]
            du = indptr[u - lo + 1] - indptr[u - lo]
            flat[o + k] = v
            k += 1
            accept = _rng.unit(_rng.bits(key, walk_id[i], s, 1)) * np.float64(du) < np.float64(degv[i])
            s += 1
            if accept:
                v = u
            else:
                flat[o + k] = v
                k += 1
                walking = False
                left = 1 if s < length else 0
        while walking:
            flat[o + k] = v
            k += 1
            if s >= length:
                break
            a = indptr[v - lo]
            d = indptr[v - lo + 1] - a
            if d == 0:
                break
            u = np.int64(indices[a + _rng.below(_rng.bits(key, walk_id[i], s, 0), d)])
            if u < lo or u >= hi:
                left = 1
                st = 1
                route = u
                dv = d
                break
            du = indptr[u - lo + 1] - indptr[u - lo]
            if _rng.unit(_rng.bits(key, walk_id[i], s, 1)) * np.float64(du) < np.float64(d):
                v = u
            s += 1
        if st == 0:
            route = v
        piece_len[i] = k
        out_vertex[i] = route
        out_step[i] = s
        out_cur[i] = v
        out_degv[i] = dv
        out_state[i] = st
        moved[i] = left
