"""First-order step kernel: DeepWalk (uniform or weighted), walks with jump, walks with restart.

CUDA in ``kernels/walk_first_order.cu``, CPU twin here; the same random stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _rng
from .._search import pick_edge
from ..backend import cpu_kernel, prange
from ..kernels import Arg, Kernel
from ..runtime import Run, StepSpec, step_kernel
from ._common import uniform_vertex

TELEPORT = {"none": 0, "uniform": 1, "source": 2}  # the kernel's TELEPORT_NONE, _UNIFORM, _SOURCE (its defines)
_NONE, _UNIFORM = TELEPORT["none"], TELEPORT["uniform"]


@dataclass(frozen=True)
class FirstOrder:
    """A first-order walk's parameters: at each step, teleport with probability ``alpha`` (to a uniform vertex of
    ``num_vertices``, or to the walk's source, as ``teleport`` says), else move to an out-neighbor."""

    weighted: bool
    alpha: float
    teleport: str  # a key of TELEPORT
    num_vertices: int


@step_kernel(writes=("vertex", "step"))
def advance_first_order(x, part, walkers: dict, spec: StepSpec, out: dict, run: Run) -> None:
    """Move every walker while it stays inside ``part``: teleport with probability ``alpha``, else to a neighbor."""
    n = walkers["walk_id"].shape[0]
    walk: FirstOrder = spec.params
    weighted = walk.weighted
    cdf = part.cdf() if weighted else x.zeros(1, x.float64)
    source = walkers.get("source", walkers["vertex"])
    ADVANCE.launch(indptr=part.indptr, indices=part.indices, cdf=cdf, weighted=weighted, lo=part.lo, hi=part.hi,
                   num_vertices=walk.num_vertices, key=spec.key, length=spec.length,
                   alpha=walk.alpha, teleport=TELEPORT[walk.teleport], n=n, walk_id=walkers["walk_id"],
                   source=source, vertex=walkers["vertex"], step=walkers["step"], offset=out["offset"],
                   flat=out["flat"], piece_len=out["length"], out_vertex=out["vertex"], out_step=out["step"],
                   moved=out["moved"])


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
            if teleport != _NONE and _rng.unit(_rng.bits(key, walk_id[i], s, 0)) < alpha:
                if teleport == _UNIFORM:
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


ADVANCE = Kernel("walk_first_order.cu", "gp_walk_first_order", twin=_advance_cpu, items="n", queued=True,
                 defines={f"TELEPORT_{k.upper()}": v for k, v in TELEPORT.items()}, args=(
    Arg("indptr", "i64[]"), Arg("indices", "IdT[]"), Arg("cdf", "f64[]"), Arg("weighted", "i32"), Arg("lo", "i64"),
    Arg("hi", "i64"), Arg("num_vertices", "i64"), Arg("key", "u64"), Arg("length", "i32"), Arg("alpha", "f64"),
    Arg("teleport", "i32"), Arg("n", "i64"), Arg("walk_id", "i64[n]"), Arg("source", "i64[n]"),
    Arg("vertex", "i64[n]"), Arg("step", "i32[n]"), Arg("offset", "i64[n]"), Arg("flat", "IdT[]", out=True),
    Arg("piece_len", "i32[n]", out=True), Arg("out_vertex", "i64[n]", out=True), Arg("out_step", "i32[n]", out=True),
    Arg("moved", "i8[n]", out=True)))
