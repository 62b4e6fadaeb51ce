"""Walks on a dynamic graph's snapshot, each step read from the partition's :class:`~gpipe.dynamic.SpaceView`.

First-order (``advance_dynamic``): DeepWalk (uniform, or biased by weight through the sampling space), walks with
jump, walks with restart (PPR) — the semantics and draws of ``_first_order``. Draws per step: 0 = teleport?, then
uniform: 1 = the edge; weighted: 1 .. = :func:`~gpipe.dynamic.pick_in_space` from draw 1.

node2vec (``advance_node2vec_dynamic``): the static walk's rule (``_node2vec``): a candidate x drawn as a first-order
step (uniform over v's edges, or from the space by weight; a duplicated edge counts once per copy) is accepted with
probability bias(x) / max(1/p, 1, 1/q), bias 1/p for x = t, 1 for a neighbor of t (the space's sorted ``adjacency``,
by binary search), else 1/q; for p, q that are not tame, after ``TRIALS`` rejections the step is drawn exactly over
v's edges. A previous vertex t of another partition is read from its borrowed list: a walker that needs t's
neighbors and has not got them stops (``stopped``), its worker borrows the lists of those t (``borrowed_lists``, from
the snapshot's views, one message per partition and launch) and launches it again; it can stop at most once per
launch pair, as a walker leaves the partition once it crosses into another. Trial k's draws are ``k * TRIAL_DRAWS``
(the acceptance) and ``k * TRIAL_DRAWS + 1 ..`` (the candidate: the edge, or ``pick_in_space`` from there; the first,
first-order, step is trial 0's candidate); the exact draw takes ``TRIALS * TRIAL_DRAWS`` and the next. A relaunched
walker redoes its step from trial 0, the same draws: the walks are the same for any partitioning.

CUDA in ``kernels/walk_dynamic.cu``, CPU twins here; the same random streams.
"""

from __future__ import annotations

import numpy as np

from .. import _rng
from .._search import has_edge, lower_bound
from ..backend import cpu_kernel, prange, unique
from ..dynamic import PICK_DEFINES, SPACE_ARGS, pick_in_space
from ..kernels import Arg, Kernel
from ..runtime import Run, StepSpec, step_kernel
from ._borrowed import borrowed_lists
from ._common import uniform_vertex
from ._first_order import TELEPORT, FirstOrder
from ._node2vec import Node2Vec, trials_before_exact

_NONE, _UNIFORM = TELEPORT["none"], TELEPORT["uniform"]


@step_kernel
def advance_dynamic(x, part, walkers: dict, spec: StepSpec, out: dict, run: Run) -> None:
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
def _advance_cpu(edge_start, degree, dst, units, frac, member_start, members, group_row, group_count, group_kind,
                 group_bit, group_start, group_size, alias_prob, alias_other, weighted, lo, hi, space_vertices,
                 num_vertices, key, length, alpha, teleport, n, walk_id, source, vertex, step, offset, flat, piece_len,
                 out_vertex, out_step, moved):
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
                d = degree[local]
                if d == 0:
                    break
                if weighted:
                    e = pick_in_space(edge_start, degree, units, frac, member_start, members, group_row, group_count,
                                      group_kind, group_bit, group_start, group_size, alias_prob, alias_other, key,
                                      walk_id[i], s, 1, local)
                else:
                    e = edge_start[local] + _rng.below(_rng.bits(key, walk_id[i], s, 1), d)
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


# The draws of one rejection trial: 2**20 leaves pick_in_space 2**19 tries in a group before it reads the next
# trial's draws, and 2**12 trials before the draw index (32 bits) wraps (with tame p, q each is accepted with
# probability at least 1/16; otherwise the exact draw comes at TRIALS = 256).
TRIAL_DRAWS = 2**20
# walk_dynamic.cu is compiled whole with a kernel's defines: both of its kernels take all of them
_DEFINES = {**PICK_DEFINES, "GP_TRIAL_DRAWS": f"{TRIAL_DRAWS}ULL",
            **{f"TELEPORT_{k.upper()}": v for k, v in TELEPORT.items()}}
ADVANCE_DYNAMIC = Kernel("walk_dynamic.cu", "gp_walk_dynamic", twin=_advance_cpu, items="n", queued=True,
                         defines=_DEFINES, args=(
    *SPACE_ARGS, Arg("weighted", "i32"), Arg("lo", "i64"), Arg("hi", "i64"),
    Arg("space_vertices", "i64", note="vertices lo.. with a row in the space; the others have no edges"),
    Arg("num_vertices", "i64"), Arg("key", "u64"), Arg("length", "i32"), Arg("alpha", "f64"), Arg("teleport", "i32"),
    Arg("n", "i64"), Arg("walk_id", "i64[n]"), Arg("source", "i64[n]"), Arg("vertex", "i64[n]"),
    Arg("step", "i32[n]"), Arg("offset", "i64[n]"), Arg("flat", "i64[]", out=True),
    Arg("piece_len", "i32[n]", out=True), Arg("out_vertex", "i64[n]", out=True), Arg("out_step", "i32[n]", out=True),
    Arg("moved", "i8[n]", out=True)))


N2V_FIELDS = (("prev", "int64", -1),)  # the vertex a walker came from (-1: none yet, the first step is first-order)


@step_kernel
def advance_node2vec_dynamic(x, part, walkers: dict, spec: StepSpec, out: dict, run: Run) -> None:
    """Move every walker while it stays inside ``part`` by node2vec's rule; those that need the neighbors of a
    previous vertex of another partition go on in a second launch with them borrowed."""
    nothing = (x.zeros(0, x.int64), x.zeros(1, x.int64), x.zeros(0, x.int64))
    stopped = x.zeros(walkers["walk_id"].shape[0], x.int8)
    kept = borrowed_lists(run, spec.params.graph, part.bounds) or nothing  # t's list there: no stop for it
    _launch_node2vec(part, spec, kept, walkers, out["offset"], out, stopped)
    again_at = x.flatnonzero(stopped)
    if not again_at.size:
        return
    ids = unique(x, out["prev"][again_at])  # all in other partitions: this one's lists are read in place
    borrowed = borrowed_lists(run, spec.params.graph, part.bounds, ids)
    again = {k: out[k][again_at] for k in walkers}
    rest = {k: v.copy() for k, v in again.items()}
    rest.update(flat=out["flat"], length=x.empty(again_at.size, x.int32), moved=x.empty(again_at.size, x.int8))
    # on from the vertex each stopped at, in the rest of its output region
    _launch_node2vec(part, spec, borrowed, again, out["offset"][again_at] + out["length"][again_at] - 1, rest,
                     stopped[again_at])
    for k in ("vertex", "step", "prev", "moved"):
        out[k][again_at] = rest[k]
    out["length"][again_at] += rest["length"] - 1


def _launch_node2vec(part, spec: StepSpec, borrowed: tuple, walkers: dict, offset, out: dict, stopped) -> None:
    walk: Node2Vec = spec.params
    borrowed_ids, borrowed_indptr, borrowed_indices = borrowed
    ADVANCE_NODE2VEC_DYNAMIC.launch(
        **part.arrays, adjacency=part.adjacency, borrowed_ids=borrowed_ids, borrowed_indptr=borrowed_indptr,
        borrowed_indices=borrowed_indices, weighted=walk.weighted, lo=part.lo, hi=part.hi,
        space_vertices=part.space_vertices, key=spec.key, length=spec.length, inv_p=1.0 / walk.p, inv_q=1.0 / walk.q,
        trials=trials_before_exact(walk), borrowed_count=borrowed_ids.shape[0], n=walkers["walk_id"].shape[0],
        walk_id=walkers["walk_id"], vertex=walkers["vertex"], step=walkers["step"], prev=walkers["prev"],
        offset=offset, flat=out["flat"], piece_len=out["length"], out_vertex=out["vertex"], out_step=out["step"],
        out_prev=out["prev"], stopped=stopped, moved=out["moved"])


@cpu_kernel()
def _candidate(edge_start, degree, units, frac, member_start, members, group_row, group_count, group_kind, group_bit,
               group_start, group_size, alias_prob, alias_other, weighted, key, stream, step, trial, local):
    """Trial ``trial``'s candidate edge from vertex ``local`` (which has edges): uniform, or from the space."""
    first = np.int64(trial) * TRIAL_DRAWS + 1
    if weighted:
        return pick_in_space(edge_start, degree, units, frac, member_start, members, group_row, group_count,
                             group_kind, group_bit, group_start, group_size, alias_prob, alias_other, key, stream, step,
                             first, local)
    return edge_start[local] + _rng.below(_rng.bits(key, stream, step, first), degree[local])


@cpu_kernel()
def _bias_class(x, t, tn, ta, td):
    """Which bias ``x`` takes: 0 (x is t), 1 (a neighbor of t: in the sorted ``tn[ta:ta+td]``), 2 (neither)."""
    if x == t:
        return 0
    return 1 if has_edge(tn, ta, td, x) else 2


@cpu_kernel()
def _exact(dst, units, frac, weighted, a, d, t, tn, ta, td, inv_p, inv_q, r_class, r_edge):
    """The step from v (edges a..a+d-1) drawn exactly, as ``_node2vec._exact`` (a class by its mass, then an edge of
    it by weight), an edge's weight its scaled bias ``units + frac`` (or 1)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for e in range(a, a + d):
        w = np.float64(units[e]) + frac[e] if weighted else 1.0
        c = _bias_class(dst[e], t, tn, ta, td)
        if c == 0:
            s0 += w
        elif c == 1:
            s1 += w
        else:
            s2 += w
    top = 0.0
    if s0 > 0.0:
        top = inv_p
    if s1 > 0.0:
        top = max(top, 1.0)
    if s2 > 0.0:
        top = max(top, inv_q)
    m0 = s0 * (inv_p / top)
    m1 = s1 * (1.0 / top)
    m2 = s2 * (inv_q / top)
    u = _rng.unit(r_class) * ((m0 + m1) + m2)
    c = 0 if m0 > u else (1 if m0 + m1 > u else 2)
    if c == 2 and not m2 > 0.0:  # rounding reached the end: the last class with mass
        c = 1 if m1 > 0.0 else 0
    target = _rng.unit(r_edge) * (s0 if c == 0 else (s1 if c == 1 else s2))
    total = 0.0
    last = np.int64(-1)
    for e in range(a, a + d):
        if _bias_class(dst[e], t, tn, ta, td) != c:
            continue
        total += np.float64(units[e]) + frac[e] if weighted else 1.0
        last = np.int64(e)
        if total > target:
            return np.int64(e)
    return last


@cpu_kernel(parallel=True)
def _advance_node2vec_cpu(edge_start, degree, dst, units, frac, member_start, members, group_row, group_count,
                          group_kind, group_bit, group_start, group_size, alias_prob, alias_other, adjacency,
                          borrowed_ids, borrowed_indptr, borrowed_indices, weighted, lo, hi, space_vertices, key,
                          length, inv_p, inv_q, trials, borrowed_count, n, walk_id, vertex, step, prev, offset, flat,
                          piece_len, out_vertex, out_step, out_prev, stopped, moved):
    bound = max(inv_p, max(1.0, inv_q))
    sure = min(1.0, inv_q)
    never = max(1.0, inv_q)
    for i in prange(n):
        v = vertex[i]
        t = prev[i]
        s = step[i]
        o = offset[i]
        k = 0
        left = 0
        stop = 0
        while True:
            flat[o + k] = v
            k += 1
            if s >= length:
                break
            local = v - lo
            if local >= space_vertices:  # a vertex only named as a destination so far: no edges
                break
            a = edge_start[local]
            d = degree[local]
            if d == 0:
                break
            if t < 0:  # the first step is first-order
                e = _candidate(edge_start, degree, units, frac, member_start, members, group_row, group_count,
                               group_kind, group_bit, group_start, group_size, alias_prob, alias_other, weighted, key,
                               walk_id[i], s, 0, local)
            else:
                near = True  # t's sorted neighbors: tn[ta:ta+td]
                tn = adjacency
                ta = np.int64(0)
                td = np.int64(0)
                if t >= lo and t < hi:
                    if t - lo < space_vertices:
                        ta = edge_start[t - lo]
                        td = degree[t - lo]
                else:
                    b = lower_bound(borrowed_ids, 0, borrowed_count, t)
                    near = b < borrowed_count and borrowed_ids[b] == t
                    if near:
                        tn = borrowed_indices
                        ta = borrowed_indptr[b]
                        td = borrowed_indptr[b + 1] - ta
                kk = 0
                while True:
                    base = np.int64(kk) * TRIAL_DRAWS
                    if kk == trials:  # rejection is slow at this step: draw it exactly (never if trials < 0)
                        if not near:
                            stop = 1
                            break
                        e = _exact(dst, units, frac, weighted, a, d, t, tn, ta, td, inv_p, inv_q,
                                   _rng.bits(key, walk_id[i], s, base), _rng.bits(key, walk_id[i], s, base + 1))
                        break
                    e = _candidate(edge_start, degree, units, frac, member_start, members, group_row, group_count,
                                   group_kind, group_bit, group_start, group_size, alias_prob, alias_other, weighted,
                                   key, walk_id[i], s, kk, local)
                    x = dst[e]
                    u = _rng.unit(_rng.bits(key, walk_id[i], s, base)) * bound
                    if x == t:
                        ok = u < inv_p
                    elif u < sure:
                        ok = True
                    elif u >= never:
                        ok = False
                    elif not near:
                        stop = 1  # for t's neighbors, borrowed
                        break
                    else:
                        ok = u < (1.0 if has_edge(tn, ta, td, x) else inv_q)
                    if ok:
                        break
                    kk += 1
                if stop:
                    break
            nx = dst[e]
            t = v
            v = nx
            s += 1
            if nx < lo or nx >= hi:
                left = 1
                break
        piece_len[i] = k
        out_vertex[i] = v
        out_step[i] = s
        out_prev[i] = t
        stopped[i] = stop
        moved[i] = left


ADVANCE_NODE2VEC_DYNAMIC = Kernel(
    "walk_dynamic.cu", "gp_walk_node2vec_dynamic", twin=_advance_node2vec_cpu, items="n", queued=True,
    defines=_DEFINES, args=(
        *SPACE_ARGS, Arg("adjacency", "i64[]", note="each vertex's destinations, sorted"),
        Arg("borrowed_ids", "i64[m]"), Arg("borrowed_indptr", "i64[m+1]"),
        Arg("borrowed_indices", "i64[]", note="sorted neighbors of previous vertices in other partitions, borrowed"),
        Arg("weighted", "i32"), Arg("lo", "i64"), Arg("hi", "i64"), Arg("space_vertices", "i64"), Arg("key", "u64"),
        Arg("length", "i32"), Arg("inv_p", "f64"), Arg("inv_q", "f64"),
        Arg("trials", "i32", note="rejections before the exact draw: TRIALS, or -1: none"),
        Arg("borrowed_count", "i64", note="m"), Arg("n", "i64"), Arg("walk_id", "i64[n]"), Arg("vertex", "i64[n]"),
        Arg("step", "i32[n]"), Arg("prev", "i64[n]"), Arg("offset", "i64[n]"), Arg("flat", "i64[]", out=True),
        Arg("piece_len", "i32[n]", out=True), Arg("out_vertex", "i64[n]", out=True),
        Arg("out_step", "i32[n]", out=True), Arg("out_prev", "i64[n]", out=True),
        Arg("stopped", "i8[n]", out=True, note="1: stopped for a previous vertex's neighbors"),
        Arg("moved", "i8[n]", out=True)))
