"""Walks on a dynamic graph's snapshot, each step read from the partition's :class:`~gpipe.dynamic.SpaceView`.

First-order (``advance_dynamic``): DeepWalk (uniform, or biased by weight through the sampling space), walks with
jump, walks with restart (PPR) — the semantics and draws of ``_first_order``. Draws per step: 0 = teleport?, then
uniform: 1 = the edge; weighted: 1 .. = ``pick_in_space`` (``gpipe/_space_pick.py``) from draw 1.

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

Each walk is the static one, written once over a graph (``_graphs``' :data:`~._graphs.Space` here): CUDA in
``kernels/walk_first_order.cu`` and ``kernels/walk_node2vec.cu``, the twins' bodies in ``_first_order`` and
``_node2vec``; the same random streams.
"""

from __future__ import annotations

import numpy as np

from .._space_pick import SPACE_ARGS
from ..backend import cpu_kernel, prange, unique
from ..kernels import Arg, Kernel
from ..runtime import VERTEX, Run, Span, StepSpec, step_kernel
from ._borrowed import borrowed_lists
from ._first_order import DEFINES_FIRST_ORDER, TELEPORT, FirstOrder, walkers_cpu
from ._graphs import Space
from ._node2vec import BORROW, DEFINES_NODE2VEC, NO_ARCS, Node2Vec, trials_before_exact, walk_one_cpu


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


@cpu_kernel()
def _advance_cpu(edge_start, degree, dst, units, frac, member_start, members, group_row, group_count, group_kind,
                 group_bit, group_start, group_size, alias_prob, alias_other, weighted, lo, hi, space_vertices,
                 num_vertices, key, length, alpha, teleport, n, walk_id, source, vertex, step, offset, flat, piece_len,
                 out_vertex, out_step, moved):
    graph = Space(dst, units, frac, weighted, edge_start, degree, member_start, members, group_row, group_count,
                  group_kind, group_bit, group_start, group_size, alias_prob, alias_other, dst, space_vertices)
    walkers_cpu(graph, lo, hi, num_vertices, key, length, alpha, teleport, n, walk_id, source, vertex, step, offset,
                flat, piece_len, out_vertex, out_step, moved)


ADVANCE_DYNAMIC = Kernel("walk_first_order.cu", "gp_walk_first_order_dynamic", twin=_advance_cpu, items="n",
                         queued=True, defines=DEFINES_FIRST_ORDER, args=(
    *SPACE_ARGS, Arg("weighted", "i32"), Arg("lo", "i64"), Arg("hi", "i64"),
    Arg("space_vertices", "i64", note="vertices lo.. with a row in the space; the others have no edges"),
    Arg("num_vertices", "i64"), Arg("key", "u64"), Arg("length", "i32"), Arg("alpha", "f64"), Arg("teleport", "i32"),
    Arg("n", "i64"), Arg("walk_id", "i64[n]"), Arg("source", "i64[n]"), Arg("vertex", "i64[n]"),
    Arg("step", "i32[n]"), Arg("offset", "i64[n]"), Arg("flat", "i64[]", out=True),
    Arg("piece_len", "i32[n]", out=True), Arg("out_vertex", "i64[n]", out=True), Arg("out_step", "i32[n]", out=True),
    Arg("moved", "i8[n]", out=True)))


N2V_FIELDS = (("prev", "int64", -1),)  # the vertex a walker came from (-1: none yet, the first step is first-order)
N2V_SPANS = (Span("prev", -1, VERTEX),)


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
    trials = trials_before_exact(walk)
    (ADVANCE_NODE2VEC_DYNAMIC if trials >= 0 else ADVANCE_NODE2VEC_DYNAMIC_REJECTION).launch(
        **part.arrays, adjacency=part.adjacency, borrowed_ids=borrowed_ids, borrowed_indptr=borrowed_indptr,
        borrowed_indices=borrowed_indices, weighted=walk.weighted, lo=part.lo, hi=part.hi,
        space_vertices=part.space_vertices, key=spec.key, length=spec.length, inv_p=1.0 / walk.p, inv_q=1.0 / walk.q,
        trials=trials, borrowed_count=borrowed_ids.shape[0], n=walkers["walk_id"].shape[0],
        walk_id=walkers["walk_id"], vertex=walkers["vertex"], step=walkers["step"], prev=walkers["prev"],
        offset=offset, flat=out["flat"], piece_len=out["length"], out_vertex=out["vertex"], out_step=out["step"],
        out_prev=out["prev"], stopped=stopped, moved=out["moved"])


@cpu_kernel(parallel=True)
def _advance_node2vec_cpu(edge_start, degree, dst, units, frac, member_start, members, group_row, group_count,
                          group_kind, group_bit, group_start, group_size, alias_prob, alias_other, adjacency,
                          borrowed_ids, borrowed_indptr, borrowed_indices, weighted, lo, hi, space_vertices, key,
                          length, inv_p, inv_q, trials, borrowed_count, n, walk_id, vertex, step, prev, offset, flat,
                          piece_len, out_vertex, out_step, out_prev, stopped, moved):
    graph = Space(dst, units, frac, weighted, edge_start, degree, member_start, members, group_row, group_count,
                  group_kind, group_bit, group_start, group_size, alias_prob, alias_other, adjacency, space_vertices)
    borrowed = (borrowed_ids, borrowed_indptr, borrowed_indices, borrowed_count)
    walk = (lo, hi, key, length, inv_p, inv_q, trials, False, NO_ARCS)
    for i in prange(n):
        k, _, v, t, _, s, _, _, st, left = walk_one_cpu(graph, borrowed, walk, (walk_id[i], vertex[i], prev[i],
                                                                                 np.int64(-1), step[i], 0, -1), 0,
                                                         flat, offset[i])
        piece_len[i] = k
        out_vertex[i] = v
        out_step[i] = s
        out_prev[i] = t
        stopped[i] = st == BORROW
        moved[i] = left


# One kernel, two instantiations: <true> draws a step exactly after TRIALS rejections, <false> (for tame p and q,
# trials -1) has no fallback in its loop (as the static walk's gp_walk_node2vec<IdT, false, false>).
ADVANCE_NODE2VEC_DYNAMIC_REJECTION, ADVANCE_NODE2VEC_DYNAMIC = (Kernel(
    "walk_node2vec.cu", "gp_walk_node2vec_dynamic", template=template, twin=_advance_node2vec_cpu, items="n",
    queued=True, defines=DEFINES_NODE2VEC, args=(
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
        Arg("moved", "i8[n]", out=True))) for template in (("false",), ("true",)))
