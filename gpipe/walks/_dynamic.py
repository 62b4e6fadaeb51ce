"""First-order walks on a dynamic graph's snapshot: DeepWalk (uniform, or biased by weight through the sampling
space), walks with jump, walks with restart (PPR) — the semantics and draws of ``_first_order``, each step read from
the partition's :class:`~gpipe.dynamic.SpaceView`.

CUDA in ``kernels/walk_dynamic.cu``, CPU twin here; the same random stream. Draws per step: 0 = teleport?, then
uniform: 1 = the edge; weighted: 1 .. = :func:`~gpipe.dynamic.pick_in_space` from draw 1.
"""

from __future__ import annotations

import numpy as np

from .. import _rng
from ..backend import cpu_kernel, prange
from ..dynamic import PICK_DEFINES, pick_in_space
from ..kernels import Arg, Kernel
from ..runtime import StepSpec, step_kernel
from ._common import uniform_vertex
from ._first_order import TELEPORT, FirstOrder

_NONE, _UNIFORM = TELEPORT["none"], TELEPORT["uniform"]


@step_kernel
def advance_dynamic(x, part, walkers: dict, spec: StepSpec, out: dict) -> None:
    """Move every walker while it stays inside ``part`` (a snapshot's space): teleport with probability ``alpha``,
    else to a neighbor, uniform over the edges or drawn from the space by weight."""
    walk: FirstOrder = spec.params
    ADVANCE_DYNAMIC.launch(**part.arrays, weighted=walk.weighted, lo=part.lo, hi=part.hi,
                           space_vertices=part.space_vertices, num_vertices=walk.num_vertices, key=spec.key,
                           length=spec.length, alpha=walk.alpha, teleport=TELEPORT[walk.teleport],
                           n=walkers["walk_id"].shape[0], walk_id=walkers["walk_id"],
                           source=walkers.get("source", walkers["vertex"]), vertex=walkers["vertex"],
                           step=walkers["step"], offset=out["offset"], flat=out["flat"], piece_len=out["length"],
                           out_vertex=out["vertex"], out_step=out["step"], moved=out["moved"])


@cpu_kernel(parallel=True)
def _advance_cpu(indptr, dst, units, frac, member_indptr, members, group_indptr, group_kind, group_bit, group_start,
                 group_size, alias_prob, alias_other, weighted, lo, hi, space_vertices, num_vertices, key, length,
                 alpha, teleport, n, walk_id, source, vertex, step, offset, flat, piece_len, out_vertex, out_step,
                 moved):
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
                local = v - lo
                if local >= space_vertices:  # a vertex only named as a destination so far: no edges
                    break
                d = indptr[local + 1] - indptr[local]
                if d == 0:
                    break
                if weighted:
                    e = pick_in_space(indptr, units, frac, member_indptr, members, group_indptr, group_kind,
                                      group_bit, group_start, group_size, alias_prob, alias_other, key, walk_id[i], s,
                                      1, local)
                else:
                    e = indptr[local] + _rng.below(_rng.bits(key, walk_id[i], s, 1), d)
                u = dst[e]
            s += 1
            v = u
            if u < lo or u >= hi:
                left = 1
                break
        piece_len[i] = k
        out_vertex[i] = v
        out_step[i] = s
        moved[i] = left


ADVANCE_DYNAMIC = Kernel("walk_dynamic.cu", "gp_walk_dynamic", twin=_advance_cpu, items="n", queued=True,
                         defines={**PICK_DEFINES, **{f"TELEPORT_{k.upper()}": v for k, v in TELEPORT.items()}}, args=(
    Arg("indptr", "i64[]"), Arg("dst", "i64[]"), Arg("units", "i64[]"), Arg("frac", "f64[]"),
    Arg("member_indptr", "i64[]"), Arg("members", "i64[]"), Arg("group_indptr", "i64[]"), Arg("group_kind", "i8[]"),
    Arg("group_bit", "i32[]"), Arg("group_start", "i64[]"), Arg("group_size", "i64[]"), Arg("alias_prob", "f64[]"),
    Arg("alias_other", "i32[]"), Arg("weighted", "i32"), Arg("lo", "i64"), Arg("hi", "i64"),
    Arg("space_vertices", "i64", note="vertices lo.. with a row in the space; the others have no edges"),
    Arg("num_vertices", "i64"), Arg("key", "u64"), Arg("length", "i32"), Arg("alpha", "f64"), Arg("teleport", "i32"),
    Arg("n", "i64"), Arg("walk_id", "i64[n]"), Arg("source", "i64[n]"), Arg("vertex", "i64[n]"),
    Arg("step", "i32[n]"), Arg("offset", "i64[n]"), Arg("flat", "i64[]", out=True),
    Arg("piece_len", "i32[n]", out=True), Arg("out_vertex", "i64[n]", out=True), Arg("out_step", "i32[n]", out=True),
    Arg("moved", "i8[n]", out=True)))
