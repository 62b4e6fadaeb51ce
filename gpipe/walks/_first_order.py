"""First-order step kernel: DeepWalk (uniform or weighted), walks with jump, walks with restart.

CUDA in ``kernels/walk_first_order.cu``, CPU twin here; the same random stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _rng
from ..backend import cpu_kernel, prange
from ..kernels import function, id_type, launch_queued
from ..runtime import StepSpec, step_kernel
from ._common import pick_edge, uniform_vertex

TELEPORT = {"none": 0, "uniform": 1, "source": 2}


@dataclass(frozen=True)
class FirstOrder:
    """A first-order walk's parameters: at each step, teleport with probability ``alpha`` (to a uniform vertex of
    ``num_vertices``, or to the walk's source, as ``teleport`` says), else move to an out-neighbor."""

    weighted: bool
    alpha: float
    teleport: str  # a key of TELEPORT
    num_vertices: int


@step_kernel
def advance_first_order(x, part, walkers: dict, spec: StepSpec, out: dict) -> None:
    """Move every walker while it stays inside ``part``: teleport with probability ``alpha``, else to a neighbor."""
    n = walkers["walk_id"].shape[0]
    walk: FirstOrder = spec.params
    weighted = walk.weighted
    cdf = part.cdf() if weighted else x.zeros(1, x.float64)
    source = walkers.get("source", walkers["vertex"])
    scalars = (int(weighted), part.lo, part.hi, walk.num_vertices, spec.key, spec.length,
               walk.alpha, TELEPORT[walk.teleport], n)
    arrays = (walkers["walk_id"], source, walkers["vertex"], walkers["step"], out["offset"], out["flat"],
              out["length"], out["vertex"], out["step"], out["moved"])
    if x is np:
        _advance_cpu(part.indptr, part.indices, cdf, *scalars, *arrays)
    else:
        kernel = function("walk_first_order.cu", "gp_walk_first_order", template=id_type(part.indices.dtype))
        types = (np.int32, np.int64, np.int64, np.int64, np.uint64, np.int32, np.float64, np.int32, np.int64)
        launch_queued(kernel, n, (part.indptr, part.indices, cdf, *(t(v) for t, v in zip(types, scalars)), *arrays))


@cpu_kernel(parallel=True)
def _advance_cpu(indptr, indices, cdf, weighted, lo, hi, num_vertices, key, length, alpha, teleport, n, walk_id,
                 source, vertex, step, offset, flat, piece_len, out_vertex, out_step, moved):
    for i in prange(n):
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
            if teleport != 0 and _rng.unit(_rng.bits(key, walk_id[i], s, 0)) < alpha:
                if teleport == 1:
                    u = uniform_vertex(_rng.bits(key, walk_id[i], s, 1), num_vertices)
                else:
                    u = source[i]
            else:
                a = indptr[v - lo]
                d = indptr[v - lo + 1] - a
                if d == 0:
                    break
                e = pick_edge(cdf, weighted, a, d, _rng.bits(key, walk_id[i], s, 1))
                if e < 0:
                    break
                u = np.int64(indices[e])
            s += 1
            v = u
            if u < lo or u >= hi:
                left = 1
                break
        piece_len[i] = k
        out_vertex[i] = v
        out_step[i] = s
        moved[i] = left
