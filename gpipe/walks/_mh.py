"""Metropolis-Hastings step kernel: CUDA in ``kernels/walk_mh.cu``, CPU twin here (same random stream).

A walker proposes a uniform neighbor u of its vertex v and moves with
probability min(1, deg(v) / deg(u)), else stays (the step is taken). A
proposal to a vertex of another partition travels there with deg(v); the owner
of u decides, and a rejected walker is sent back to v's partition.
"""

from __future__ import annotations

import numpy as np

from .. import _rng
from .._csr import row_span
from ..backend import cpu_kernel, prange
from ..kernels import Arg, Kernel
from ..runtime import VERTEX, Run, Span, StepSpec, step_kernel

FIELDS = (("cur", "int64", "vertex"), ("degv", "int64", 0), ("state", "int8", 0))
# their values (state 1: a proposal); a degree's, up to the graph's largest, is not among a run's sizes: it travels
# whole
SPANS = (Span("cur", 0, VERTEX), Span("state", 0, 1))


@step_kernel
def advance_mh(x, part, walkers: dict, spec: StepSpec, out: dict, run: Run) -> None:
    n = walkers["walk_id"].shape[0]
    ADVANCE.launch(indptr=part.indptr, indices=part.indices, lo=part.lo, hi=part.hi, key=spec.key,
                   length=spec.length, n=n, walk_id=walkers["walk_id"], vertex=walkers["vertex"],
                   step=walkers["step"], cur=walkers["cur"], degv=walkers["degv"], state=walkers["state"],
                   offset=out["offset"], flat=out["flat"], piece_len=out["length"], out_vertex=out["vertex"],
                   out_step=out["step"], out_cur=out["cur"], out_degv=out["degv"], out_state=out["state"],
                   moved=out["moved"])


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
            a, d = row_span(indptr, v - lo)
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


ADVANCE = Kernel("walk_mh.cu", "gp_walk_mh", twin=_advance_cpu, items="n", queued=True, args=(
    Arg("indptr", "i64[]"), Arg("indices", "IdT[]"), Arg("lo", "i64"), Arg("hi", "i64"), Arg("key", "u64"),
    Arg("length", "i32"), Arg("n", "i64"), Arg("walk_id", "i64[n]"), Arg("vertex", "i64[n]"), Arg("step", "i32[n]"),
    Arg("cur", "i64[n]"), Arg("degv", "i64[n]"), Arg("state", "i8[n]"), Arg("offset", "i64[n]"),
    Arg("flat", "IdT[]", out=True), Arg("piece_len", "i32[n]", out=True), Arg("out_vertex", "i64[n]", out=True),
    Arg("out_step", "i32[n]", out=True), Arg("out_cur", "i64[n]", out=True), Arg("out_degv", "i64[n]", out=True),
    Arg("out_state", "i8[n]", out=True), Arg("moved", "i8[n]", out=True)))
