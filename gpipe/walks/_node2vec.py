"""node2vec step kernel: CUDA in ``kernels/walk_node2vec.cu``, CPU twin here (same random stream).

Exact second-order walks by rejection sampling: at v coming from t, a
candidate x is proposed in proportion to w(v, x) (or uniformly) and accepted
with probability bias(x) / max(1/p, 1, 1/q). When the decision needs to know
whether x is a neighbor of t and t lives in another partition, the walker
travels to t's partition as a query and comes back with the answer.

Rejection alone has no bound: with p = 1e4, q = 1e-4 a walk at a vertex whose
neighbors are all t or t's neighbors accepts one proposal in 1e4 (and one in
1e300 with p = 1e300, q = 1e-300), each undecided one a round trip when t is
elsewhere. Unless every candidate's acceptance is at least ``TAME`` (p = 0.5,
q = 2: 1/4), after ``TRIALS`` rejected proposals a step is drawn exactly
instead: one pass over v's neighbors sums their weights per bias class (t, t's
neighbors, the others), a draw picks a class by weight times bias, a second an
edge of it by weight, both by inverse transform and with draw indices no trial
uses. That needs t's whole neighbor list, which the query protocol cannot carry
(one round trip per neighbor of v), so a walker whose t lives in another
partition stops where it is (state 2) and its worker borrows t's list from t's
partition (:func:`borrowed_lists`: one message per partition and launch) and
launches it again; a walker needing a second answer in one step borrows the
same way rather than travel again, so a step costs at most one round trip. The
lists borrowed are kept for the run on that worker and passed to every launch:
a walker whose t's list is there asks no query at all. And a walker leaving a
worker takes the list of the vertex it came from along (``StepSpec.lends``,
``runtime/_lent.py``, through NCCL between GPU workers): the other side has
t's list when the walker arrives, and neither queries nor borrows. On
the GPU the first launch runs a kernel without the exact draw, which stops
there too, or, for tame p and q, one without the fallback at all (its code in
the hot loop cost 40 % of the speed); the CPU twin is the kernel with it, on
both launches. On a graph whole on its worker, with tame p and q, no walker
asks, stops or leaves: one launch of a kernel that keeps t's row from the step
before walks every walker to its end, and the step waits for it with nothing
to bring to the host; there "is x a neighbor of t?" is asked of the
partition's arc filter first (``Partition.arc_filter``: one load says "no" for
most candidates, where the search of t's list takes log d), on both devices.
Rejection is exact, so is falling back after a fixed number of rejections, and
where t's list is read does not change a draw: the walks stay the same for any
partitioning, on the CPU and on the GPU.

The walk is written once (:func:`_walk_one`, CUDA's ``gp_n2v_walker``) over a
graph (``_graphs``): a static partition here, a dynamic graph's snapshot in
``_dynamic``, whose walkers borrow rather than ask (no queries).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _rng
from .._search import arc_maybe, has_edge, lower_bound
from ..backend import cpu_kernel, prange, unique
from ..kernels import Arg, Kernel
from ..runtime import VERTEX, Run, Span, StepSpec, step_kernel
from ._borrowed import borrowed_lists
from ._graphs import DEFINES, NO_TABLE, Csr, degree, head, pick, sorted_of, start, trial_draws, weight

FIELDS = (("cur", "int64", "vertex"), ("prev", "int64", -1), ("cand", "int64", -1), ("trial", "int32", 0),
          ("answer", "int8", -1), ("state", "int8", 0))
# Rejected proposals at a step before it is drawn exactly (the kernel's ``trials``). The exact draw reads all
# of v's edges, a long serial tail at hubs: at 32, p = 0.5, q = 2 (rejections up to 3 in 4) drew ~1e-4 of the
# steps exactly and R-MAT 22 node2vec ran 3.5x slower on an H200. At 256 only p, q whose rejection sampling
# would crawl fall back (0.75 ** 256 ~ 1e-32).
TRIALS = 256
# p, q under which every candidate is accepted with probability at least this need no fallback (at most 16
# proposals a step on average): they walk by rejection alone (trials -1), in a kernel without the fallback's
# code, whose mere test cost 27 % of the speed. Either way the walks are exact and the same on both devices.
TAME = 1 / 16
NO_ARCS = np.zeros(0, np.uint32)  # no arc filter (walk_one_cpu's walk): t's list searched at once
BORROW = 2  # walker state: stopped before the exact draw (for t's neighbors, or on the GPU for the draw)
_WRITES = ("vertex", "step", "cur", "prev", "cand", "trial", "answer", "state")  # what the kernel writes per walker
# The values of FIELDS (a trial's number: see spans): the answer to a query is -1 (none asked), 0 or 1, -2 once used
SPANS = (Span("cur", 0, VERTEX), Span("prev", -1, VERTEX), Span("cand", -1, VERTEX), Span("answer", -2, 1),
         Span("state", 0, BORROW))


@dataclass(frozen=True)
class Node2Vec:
    """node2vec's parameters, and the graph whose partitions lend a walker t's neighbors (its id and placement)."""

    weighted: bool
    p: float
    q: float
    graph: tuple[str, tuple[str, ...]]


def advance_node2vec(part, walkers: dict, spec: StepSpec, run: Run):
    """Move every walker while it stays inside ``part`` (a runtime step: pieces, movers, steps)."""
    if part.whole and trials_before_exact(spec.params) < 0:
        return _advance_whole(part, walkers, spec, run)
    return _advance_part(part, walkers, spec, run)


@step_kernel(writes=("step",), ends=True)
def _advance_whole(x, part, walkers: dict, spec: StepSpec, out: dict, run: Run) -> None:
    """The walk on a graph whole in ``part`` with tame p and q (no exact draw): every t's list is here and no walker
    leaves, so none stops and every one walks to its end in one launch, which the step waits for with no count to
    bring to the host, and whose walkers write nothing but their rows and last steps. (On the peers' R-MAT 20 on an
    H200 the step went 8.1-8.3 -> 7.5-7.7 ms: the copies of every field, the search for stopped walkers and the
    gather of movers, and t's row read again at every step.) The partition's arc filter spares most searches of
    t's list."""
    walk: Node2Vec = spec.params
    arcs = part.arc_filter()
    ADVANCE_WHOLE.launch(
        indptr=part.indptr, indices=part.indices, cdf=_cdf(x, part, spec), weighted=walk.weighted, arcs=arcs,
        arc_size=arcs.shape[0] * 32, vertices=part.hi, key=spec.key, length=spec.length, inv_p=1.0 / walk.p,
        inv_q=1.0 / walk.q, n=walkers["walk_id"].shape[0], walk_id=walkers["walk_id"], step=walkers["step"],
        cur=walkers["cur"], prev=walkers["prev"], offset=out["offset"], flat=out["flat"], piece_len=out["length"],
        out_step=out["step"])


@step_kernel
def _advance_part(x, part, walkers: dict, spec: StepSpec, out: dict, run: Run) -> None:
    """The walk on one partition of several (or with p and q that may need the exact draw): walkers stop to borrow
    t's list, or leave."""
    cdf = _cdf(x, part, spec)
    nothing = _nothing(x, part)
    kept = borrowed_lists(run, spec.params.graph, part.bounds) or nothing  # t's list there: no query trip
    # the first pass stops a walker at the exact draw; the second, on those stopped, makes it
    first = ADVANCE if trials_before_exact(spec.params) >= 0 else ADVANCE_REJECTION
    _launch(first, part, cdf, spec, kept, walkers=walkers, offset=out["offset"], out=out)
    stopped = x.flatnonzero(out["state"] == BORROW)
    if stopped.size:
        ids = unique(x, out["prev"][stopped])
        ids = ids[(ids < part.lo) | (ids >= part.hi)]  # the kernel reads this partition's lists in place
        borrowed = borrowed_lists(run, spec.params.graph, part.bounds, ids) if ids.size else nothing
        again = {k: out[k][stopped] for k in walkers}
        again["state"][:] = 0
        rest = {k: v.copy() for k, v in again.items()}
        rest.update(flat=out["flat"], length=x.empty(stopped.size, x.int32), moved=x.empty(stopped.size, x.int8))
        # on from the vertex each stopped at, in the rest of its output region
        _launch(ADVANCE_EXACT, part, cdf, spec, borrowed, walkers=again,
                offset=out["offset"][stopped] + out["length"][stopped] - 1, out=rest)
        for k in (*_WRITES, "moved"):
            out[k][stopped] = rest[k]
        out["length"][stopped] += rest["length"] - 1


def _cdf(x, part, spec: StepSpec):
    """The weights' per-vertex prefix sums the kernel reads (a placeholder for an unweighted walk)."""
    return part.cdf() if spec.params.weighted else x.zeros(1, x.float64)


def _nothing(x, part) -> tuple:
    """No borrowed lists: ``(ids, indptr, indices)``, empty."""
    return x.zeros(0, x.int64), x.zeros(1, x.int64), x.zeros(0, part.indices.dtype)


def spans(walk: Node2Vec) -> tuple[Span, ...]:
    """The values of the walkers' own fields: :data:`SPANS`, and a trial's number, up to :func:`trials_before_exact`
    where a step is drawn exactly after so many rejections (where never, tame p and q, it has no bound)."""
    trials = trials_before_exact(walk)
    return SPANS + ((Span("trial", 0, trials),) if trials >= 0 else ())


def trials_before_exact(walk: Node2Vec) -> int:
    """Rejections before a step is drawn exactly: ``TRIALS``, or -1 (never) when p and q are tame."""
    biases = (1 / walk.p, 1.0, 1 / walk.q)
    return -1 if min(biases) / max(biases) >= TAME else TRIALS


def _launch(kernel: Kernel, part, cdf, spec: StepSpec, borrowed: tuple, *, walkers: dict, offset, out: dict) -> None:
    """One pass of ``kernel`` (an instantiation of ``gp_walk_node2vec``) over ``walkers``, their output regions
    starting at ``offset``."""
    n = walkers["walk_id"].shape[0]
    walk: Node2Vec = spec.params
    borrowed_ids, borrowed_indptr, borrowed_indices = borrowed
    kernel.launch(
        indptr=part.indptr, indices=part.indices, cdf=cdf, borrowed_ids=borrowed_ids,
        borrowed_indptr=borrowed_indptr, borrowed_indices=borrowed_indices, weighted=walk.weighted,
        lo=part.lo, hi=part.hi, key=spec.key, length=spec.length, inv_p=1.0 / walk.p,
        inv_q=1.0 / walk.q, trials=trials_before_exact(walk), borrowed_count=borrowed_ids.shape[0], n=n,
        walk_id=walkers["walk_id"], step=walkers["step"], cur=walkers["cur"], prev=walkers["prev"],
        cand=walkers["cand"], trial=walkers["trial"], answer=walkers["answer"], state=walkers["state"],
        offset=offset, flat=out["flat"], piece_len=out["length"], **{f"out_{k}": out[k] for k in _WRITES},
        moved=out["moved"])


@cpu_kernel()
def _neighbors_of(graph, borrowed, t, lo, hi):
    """Where t's sorted neighbors are, ``(list, a, d, found)``: this partition's, or borrowed."""
    borrowed_ids, borrowed_indptr, borrowed_indices, borrowed_count = borrowed
    if t >= lo and t < hi:
        return sorted_of(graph), start(graph, t - lo), degree(graph, t - lo), True
    b = lower_bound(borrowed_ids, 0, borrowed_count, t)
    if b == borrowed_count or borrowed_ids[b] != t:
        return sorted_of(graph), np.int64(0), np.int64(0), False
    a = borrowed_indptr[b]
    return borrowed_indices, a, borrowed_indptr[b + 1] - a, True


@cpu_kernel()
def _bias_class(x, t, tn, ta, td):
    """Which bias ``x`` takes: 0 (x is t), 1 (a neighbor of t: ``tn[ta:ta+td]``), 2 (neither)."""
    if x == t:
        return 0
    return 1 if has_edge(tn, ta, td, x) else 2


@cpu_kernel()
def _exact(graph, a, d, t, tn, ta, td, inv_p, inv_q, r_class, r_edge):
    """The step from v (edges a..a+d-1) drawn exactly: a class by its mass (its edges' weight times its bias,
    the biases scaled by the largest present so that none overflows), then an edge of it by weight."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for e in range(a, a + d):
        w = weight(graph, a, e)
        c = _bias_class(head(graph, e), t, tn, ta, td)
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
        if _bias_class(head(graph, e), t, tn, ta, td) != c:
            continue
        w = weight(graph, a, e)
        total += w
        if w > 0.0:
            last = np.int64(e)
        if total > target:
            return np.int64(e)
    return last


@cpu_kernel()
def walk_one_cpu(graph, borrowed, walk, walker, state, flat, o):
    """One walker by node2vec's rule while it stays inside ``lo..hi-1`` of ``graph`` (``_graphs``), its vertices
    written from ``flat[o]`` (the kernels' ``gp_n2v_walker``, exact): ``borrowed`` the lists of previous vertices
    elsewhere ``(ids, indptr, indices, count)``, ``walk`` its parameters ``(lo, hi, key, length, 1/p, 1/q, trials,
    queries, arcs)`` (without queries, a walker that needs a list it has not got stops, ``BORROW``; ``arcs`` the
    partition's arc filter where the graph is whole in it, asked before t's list is searched, else ``NO_ARCS``),
    ``walker`` where it stands ``(walk id, v, t, x, step, trial, answer)`` in ``state``. Returns how many vertices
    it wrote and where it stands after: ``(k, route, v, t, x, step, trial, answer, state, left)``."""
    lo, hi, key, length, inv_p, inv_q, trials, queries, arcs = walk
    stream, v, t, x, s, kk, known = walker
    draws, candidate, accept = trial_draws(graph)
    bound = max(inv_p, max(1.0, inv_q))
    sure = min(1.0, inv_q)
    never = max(1.0, inv_q)
    route = v
    st = 0
    left = 0
    k = 0
    if queries and state == 1:  # a query: is x a neighbor of t (here)?
        flat[o + k] = v
        k += 1
        known = 1 if has_edge(sorted_of(graph), start(graph, t - lo), degree(graph, t - lo), x) else 0
        left = 1
        return k, route, v, t, x, s, kk, known, st, left
    while True:
        flat[o + k] = v
        k += 1
        if s >= length:
            break
        a = start(graph, v - lo)
        d = degree(graph, v - lo)
        if d == 0:
            break
        tn, ta, td, near = _neighbors_of(graph, borrowed, t, lo, hi)  # (the kernel searches borrowed lists lazily)
        while True:
            base = np.int64(kk) * draws
            if kk == trials and t >= 0:  # rejection is slow at this step: draw it exactly (never if trials < 0)
                if not near:
                    st = BORROW  # with t's neighbors borrowed
                    break
                e = _exact(graph, a, d, t, tn, ta, td, inv_p, inv_q, _rng.bits(key, stream, s, base),
                           _rng.bits(key, stream, s, base + 1))
                break
            e = pick(graph, (key, stream, s), base + candidate, v - lo, a, d)
            if e < 0 or t < 0:  # the first step is first-order: trial 0's candidate
                break
            x = head(graph, e)
            u = _rng.unit(_rng.bits(key, stream, s, base + accept)) * bound
            if x == t:
                ok = u < inv_p
            elif u < sure:
                ok = True
            elif u >= never:
                ok = False
            else:
                if near:
                    member = 1 if (arcs.shape[0] == 0 or arc_maybe(arcs, t, x)) and has_edge(tn, ta, td, x) else 0
                elif known >= 0:
                    member = known
                else:
                    # ask t's partition; a second time, borrow t's neighbors
                    st = 1 if queries and known == -1 else BORROW
                    break
                ok = u < (1.0 if member == 1 else inv_q)
            if known >= 0:
                known = -2  # an answer serves one trial
            if ok:
                break
            kk += 1
        if st == 1:
            left = 1
            route = t
            break
        if st == BORROW:
            break
        if e < 0:
            break
        nx = head(graph, e)
        t = v
        v = nx
        s += 1
        kk = 0
        known = -1
        if nx < lo or nx >= hi:
            left = 1
            route = nx
            break
    if left == 0:
        route = v
    return k, route, v, t, x, s, kk, known, st, left


@cpu_kernel(parallel=True)
def _advance_cpu(indptr, indices, cdf, borrowed_ids, borrowed_indptr, borrowed_indices, weighted, lo, hi, key, length,
                 inv_p, inv_q, trials, borrowed_count, n, walk_id, step, cur, prev, cand, trial, answer, state, offset,
                 flat, piece_len, out_vertex, out_step, out_cur, out_prev, out_cand, out_trial, out_answer, out_state,
                 moved):
    graph = Csr(indices, cdf, weighted, indptr, NO_TABLE)
    borrowed = (borrowed_ids, borrowed_indptr, borrowed_indices, borrowed_count)
    walk = (lo, hi, key, length, inv_p, inv_q, trials, True, NO_ARCS)
    for i in prange(n):
        (piece_len[i], out_vertex[i], out_cur[i], out_prev[i], out_cand[i], out_step[i], out_trial[i], out_answer[i],
         out_state[i], moved[i]) = walk_one_cpu(graph, borrowed, walk, (walk_id[i], cur[i], prev[i], cand[i], step[i],
                                                                         trial[i], answer[i]), state[i], flat,
                                                 offset[i])


@cpu_kernel(parallel=True)
def _advance_whole_cpu(indptr, indices, cdf, weighted, arcs, arc_size, vertices, key, length, inv_p, inv_q, n,
                       walk_id, step, cur, prev, offset, flat, piece_len, out_step):
    """Every walker to its end on a graph whole here (the exact walker, which never falls back with tame p and q),
    asking the arc filter before it searches t's list, as the kernel does."""
    graph = Csr(indices, cdf, weighted, indptr, NO_TABLE)
    borrowed = (np.zeros(0, np.int64), np.zeros(1, np.int64), indices[:0], 0)
    walk = (0, vertices, key, length, inv_p, inv_q, -1, False, arcs)
    for i in prange(n):
        ran = walk_one_cpu(graph, borrowed, walk, (walk_id[i], cur[i], prev[i], -1, step[i], 0, -1), 0, flat,
                           offset[i])
        piece_len[i] = ran[0]
        out_step[i] = ran[5]


# One kernel, three instantiations: gp_walk_node2vec<IdT, true, false> stops a walker at the exact draw (state
# BORROW), <IdT, true, true> makes it, and <IdT, false, false> has none (trials -1); the twin is the exact one,
# which gives the same walks in one launch. And one for a graph whole in the partition, with tame p and q.
# walk_node2vec.cu is compiled whole with a kernel's defines: each of its kernels takes all of them.
DEFINES_NODE2VEC = {**DEFINES, "GP_N2V_BORROW": BORROW}
_ARGS = (
    Arg("indptr", "i64[]"), Arg("indices", "IdT[]"), Arg("cdf", "f64[]"), Arg("borrowed_ids", "i64[m]"),
    Arg("borrowed_indptr", "i64[m+1]"),
    Arg("borrowed_indices", "IdT[]", note="neighbors of previous vertices in other partitions, borrowed"),
    Arg("weighted", "i32"), Arg("lo", "i64"), Arg("hi", "i64"), Arg("key", "u64"), Arg("length", "i32"),
    Arg("inv_p", "f64"), Arg("inv_q", "f64"),
    Arg("trials", "i32", note="rejections before the exact draw: TRIALS, or -1: none"),
    Arg("borrowed_count", "i64", note="m"), Arg("n", "i64"), Arg("walk_id", "i64[n]"), Arg("step", "i32[n]"),
    Arg("cur", "i64[n]"), Arg("prev", "i64[n]"), Arg("cand", "i64[n]"), Arg("trial", "i32[n]"),
    Arg("answer", "i8[n]"), Arg("state", "i8[n]"), Arg("offset", "i64[n]"), Arg("flat", "IdT[]", out=True),
    Arg("piece_len", "i32[n]", out=True), Arg("out_vertex", "i64[n]", out=True), Arg("out_step", "i32[n]", out=True),
    Arg("out_cur", "i64[n]", out=True), Arg("out_prev", "i64[n]", out=True), Arg("out_cand", "i64[n]", out=True),
    Arg("out_trial", "i32[n]", out=True), Arg("out_answer", "i8[n]", out=True),
    Arg("out_state", "i8[n]", out=True, note="1 a query, BORROW stopped for t's list"),
    Arg("moved", "i8[n]", out=True))
ADVANCE_REJECTION, ADVANCE, ADVANCE_EXACT = (
    Kernel("walk_node2vec.cu", "gp_walk_node2vec", template=template, twin=_advance_cpu, items="n", queued=True,
           defines=DEFINES_NODE2VEC, args=_ARGS)
    for template in (("false", "false"), ("true", "false"), ("true", "true")))
ADVANCE_WHOLE = Kernel(
    "walk_node2vec.cu", "gp_walk_node2vec_whole", twin=_advance_whole_cpu, items="n", queued=True,
    defines=DEFINES_NODE2VEC, args=(
        Arg("indptr", "i64[]"), Arg("indices", "IdT[]"), Arg("cdf", "f64[]"), Arg("weighted", "i32"),
        Arg("arcs", "u32[]", note="the partition's arc filter"), Arg("arc_size", "i64"), Arg("vertices", "i64"),
        Arg("key", "u64"), Arg("length", "i32"), Arg("inv_p", "f64"), Arg("inv_q", "f64"), Arg("n", "i64"),
        Arg("walk_id", "i64[n]"), Arg("step", "i32[n]"), Arg("cur", "i64[n]"), Arg("prev", "i64[n]"),
        Arg("offset", "i64[n]"), Arg("flat", "IdT[]", out=True), Arg("piece_len", "i32[n]", out=True),
        Arg("out_step", "i32[n]", out=True)))
