"""Fused neighbor sampling, the one sampler of ``gpipe.sampling.neighbor`` and ``gpipe.gnn``: every depth of every
instance in one launch.

Taken by the Sampler for neighbor-style sampling (edge bias uniform or weight, update 'all', no frontier
selection, picks per vertex) on a graph whose whole CSR is on each worker (replicated mode, or one partition),
and by every GNN mini-batch (:func:`neighbor_queue`: a batch is one instance, its hops the depths, each with its own
fanout).
CUDA in ``kernels/neighbor.cu`` (a persistent kernel, a warp per task from a global queue), CPU twin here (the
same queue, run in order). A task ``(instance, vertex, depth)`` picks with :func:`select_segment`, from the
stream and at the step the superstep path's ``select`` uses for that entry, so the sample is the same rows; a
fanout below 0 takes every out-edge, in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _rng
from ._alias import tables
from ._csr import row_span
from ._select import LANES, METHODS, ROUNDS, _WITH_REPLACEMENT, positive_counts, segment_cdf, select_segment
from .backend import cpu_kernel, device_of, prange, unique, xp
from .kernels import Arg, Kernel

TAIL, PENDING, ITERATIONS, EDGES = range(4)  # the counters (EDGES + depth: that depth's edge slots taken)
TICKETS = 4  # queue slots a warp takes at once (one add to the shared `next` per 4 tasks)
# The sampler's threads per block, at most, and blocks kept on a multiprocessor, at least: the registers a thread may
# use (64 here) are what bounds how many tasks are in flight, and a task mostly waits on memory.
BLOCK, MIN_BLOCKS = 256, 4
SCRATCH_BYTES = 256 << 20  # the most SELECT scratch (a CTPS and a bitmap per warp) one launch takes on a GPU
MOST_WARPS = 16384
# Up to this many picks per task, a pick is checked against the earlier ones rather than a bitmap the size of the
# row (which a task would clear first: O(degree) at a hub); the same picks either way.
LINEAR_PICKS = 32
_ONE = np.uint64(1)


@cpu_kernel()
def _push(item, tasks, counters, seen, mask):
    """Enqueue task ``item`` unless it was enqueued before (``seen``: an open-addressing set of item + 1)."""
    want = np.uint64(item) + _ONE
    slot = _rng.mix64(np.uint64(item)) & mask
    while True:
        held = seen[slot]
        if held == want:
            return
        if held == 0:
            seen[slot] = want
            break
        slot = (slot + _ONE) & mask
    counters[PENDING] += _ONE
    t = counters[TAIL]
    counters[TAIL] = t + _ONE
    tasks[t] = item


@cpu_kernel()
def _sample_cpu(indptr, indices, weights, weighted, replace, method, use_bitmap, num_vertices, key, depth, fanouts,
                step, sources, per_vertex, capacity, tasks, counters, seen, table_size, edge_base, edge_id, task_first,
                task_count, slots, max_degree, lo, cdf, positive, bitmap, use_table, table):
    mask = np.uint64(table_size - 1)
    ones = np.ones(max(max_degree, 1))
    t = 0
    while t < capacity and tasks[t] >= 0:  # in order, slot t is filled exactly when t < tail
        item = tasks[t]
        stream = item // depth
        level = item % depth
        v = stream % num_vertices
        instance = stream // num_vertices
        a, d = row_span(indptr, v - lo)
        f = fanouts[level]
        mine = positive[v - lo] if weighted else d  # the positive biases
        k = d if f < 0 else (f if mine > 0 else 0) if replace else min(mine, f)
        o = t * per_vertex  # a region per slot, or per depth (per_vertex 0)
        if per_vertex == 0:
            o = edge_base[level] + np.int64(counters[EDGES + level])
            counters[EDGES + level] += np.uint64(k)
        task_first[t] = o
        task_count[t] = k
        if f < 0:  # every out-edge, in order
            for i in range(k):
                edge_id[o + i] = a + i
        elif k > 0:
            how = _WITH_REPLACEMENT if replace else method
            if weighted:
                iters = select_segment(weights, a, d, k, key, stream, step + level, how, use_bitmap, cdf, a, True,
                                       bitmap, 0, (d + 7) // 8, edge_id, o, table, a, use_table)
            else:  # the ones of a row: candidates 0..d-1
                iters = select_segment(ones, 0, d, k, key, stream, step + level, how, use_bitmap, cdf, 0, False,
                                       bitmap, 0, (d + 7) // 8, edge_id, o, table, 0, False)
                for i in range(o, o + k):
                    edge_id[i] += a
            counters[ITERATIONS] += np.uint64(iters)
        if level + 1 < depth:
            for i in range(o, o + k):
                _push((instance * num_vertices + np.int64(indices[edge_id[i]])) * depth + level + 1, tasks, counters,
                      seen, mask)
            if sources:
                _push((instance * num_vertices + v) * depth + level + 1, tasks, counters, seen, mask)
        counters[PENDING] -= _ONE
        t += 1


SAMPLE = Kernel("neighbor.cu", "gp_sample_neighbors", twin=_sample_cpu, items="capacity", queued=True, defines={
    "GP_NBR_TAIL": TAIL, "GP_NBR_PENDING": PENDING, "GP_NBR_ITERATIONS": ITERATIONS, "GP_NBR_EDGES": EDGES,
    "GP_NBR_TICKETS": TICKETS, "GP_NBR_BLOCK": BLOCK, "GP_NBR_MIN_BLOCKS": MIN_BLOCKS, "GP_SELECT_ROUNDS": ROUNDS,
    "GP_LANES": LANES, "GP_SELECT_BIPARTITE": METHODS["bipartite"], "GP_SELECT_UPDATED": METHODS["updated"],
    "GP_SELECT_WITH_REPLACEMENT": _WITH_REPLACEMENT}, args=(
    Arg("indptr", "i64[]"), Arg("indices", "IdT[]"), Arg("weights", "f32[]"), Arg("weighted", "i32"),
    Arg("replace", "i32"), Arg("method", "i32"), Arg("use_bitmap", "i32"), Arg("num_vertices", "i64"),
    Arg("key", "u64"), Arg("depth", "i32"), Arg("fanouts", "i64[depth]", note="picks per task of each depth; < 0 all"),
    Arg("step", "i64", note="of depth 0"), Arg("sources", "i32", note="a task's own vertex goes on to the next depth"),
    Arg("per_vertex", "i64", note="edge slots per task; 0: per depth, from edge_base"), Arg("capacity", "i64"),
    Arg("tasks", "i64[capacity]", out=True, note="(instance * n + vertex) * depth + d; -1 empty"),
    Arg("counters", "u64[4+depth]", out=True,
        note="TAIL, PENDING, ITERATIONS, EDGES + depth: its slots taken (per_vertex 0)"),
    Arg("seen", "u64[table_size]", out=True, note="the tasks enqueued, + 1; 0 empty"), Arg("table_size", "i64"),
    Arg("edge_base", "i64[depth]", note="each depth's first edge slot"),
    Arg("edge_id", "i64[]", out=True,
        note="the picks (edge ids): slot t's from t * per_vertex, or each depth's from its edge_base"),
    Arg("task_first", "i64[capacity]", out=True, note="slot t's task's first pick"),
    Arg("task_count", "i64[capacity]", out=True, note="its picks"),
    Arg("slots", "i64", note="warps with scratch"), Arg("max_degree", "i64"),
    Arg("lo", "i64", note="the rows' first vertex (indptr[v - lo])"),
    Arg("cdf", "f64[]", out=True, note="weighted: every row's CDF (ROW_CDF); else the twin's scratch (max_degree)"),
    Arg("positive", "i64[]", note="weighted: each row's positive weights (ROW_CDF)"),
    Arg("bitmap", "u8[]", out=True, note="slots * ((max_degree + 7) / 8) with use_bitmap"),
    Arg("use_table", "i32", note="weighted: draw through the rows' alias tables"),
    Arg("table", "u64[]", note="with use_table: every row's packed alias table (_row_alias)")))


@cpu_kernel(parallel=True)
def _row_cdf_cpu(indptr, weights, num_rows, cdf, positive):
    for v in prange(num_rows):
        a = indptr[v]
        d = indptr[v + 1] - a
        segment_cdf(weights, a, d, cdf, a)
        count = 0
        for e in range(a, a + d):
            count += weights[e] > 0.0
        positive[v] = count


ROW_CDF = Kernel("neighbor.cu", "gp_row_cdf", twin=_row_cdf_cpu, items="num_rows", lanes=LANES, defines=SAMPLE.defines,
                 args=(Arg("indptr", "i64[]"), Arg("weights", "f32[]"), Arg("num_rows", "i64"),
                       Arg("cdf", "f64[]", out=True, note="indptr[-1]: each row's CDF as SELECT sums it"),
                       Arg("positive", "i64[num_rows]", out=True)))


@cpu_kernel(parallel=True)
def _pieces_cpu(tasks, task_first, task_count, at, edge_id, indices, n, num_vertices, depth, instance, level, src,
                dst):
    for t in prange(n):
        stream = tasks[t] // depth
        o = at[t]
        first = task_first[t]
        for i in range(task_count[t]):
            instance[o + i] = stream // num_vertices
            level[o + i] = tasks[t] % depth
            src[o + i] = stream % num_vertices
            dst[o + i] = indices[edge_id[first + i]]


PIECES = Kernel("neighbor.cu", "gp_nbr_pieces", twin=_pieces_cpu, items="n", lanes=LANES, defines=SAMPLE.defines,
                args=(Arg("tasks", "i64[n]"), Arg("task_first", "i64[n]"), Arg("task_count", "i64[n]"),
                      Arg("at", "i64[n]", note="exclusive prefix sums of task_count: each task's first edge"),
                      Arg("edge_id", "i64[]"), Arg("indices", "IdT[]"), Arg("n", "i64"), Arg("num_vertices", "i64"),
                      Arg("depth", "i32"), Arg("instance", "i64[]", out=True), Arg("level", "i32[]", out=True),
                      Arg("src", "i64[]", out=True), Arg("dst", "i64[]", out=True)))


def _row_alias(part) -> tuple:
    """Every row's packed alias table of the weights (:mod:`gpipe._alias`), and its count of positive weights."""
    x = xp(device_of(part.indptr))
    return tables(part.indptr, part.weights.astype(x.float64)), positive_counts(x, part.weights, part.indptr)


def _row_cdf(part) -> tuple:
    """Every row's CDF of the weights as SELECT sums it, and its count of positive weights."""
    x = xp(device_of(part.indptr))
    rows = int(part.indptr.shape[0]) - 1
    cdf, positive = x.empty(max(1, part.num_edges), x.float64), x.empty(max(1, rows), x.int64)
    ROW_CDF.launch(indptr=part.indptr, weights=part.weights, num_rows=rows, cdf=cdf, positive=positive)
    return cdf, positive


@dataclass(frozen=True)
class Queue:
    """What a queue's run leaves: its tasks in queue order, each one's picks (edge ids) at ``edge_id[task_first:
    task_first + task_count]``, and SELECT's draws."""

    tasks: Any
    task_first: Any
    task_count: Any
    edge_id: Any
    iterations: int


def neighbor_queue(x, part, first, *, instances: int, key, num_vertices: int, fanouts: tuple[int, ...], step: int,
                   sources: bool, weighted: bool, replace: bool, method: str, bitmap: bool,
                   max_degree: int) -> Queue:
    """Run the queue from the depth-0 tasks ``first`` (distinct items ``(instance * num_vertices + vertex) *
    depth`` of ``instances`` instances at most) over ``part`` (its rows from ``part.lo``). Each task's picks go to
    a region of its own, sized for any task's, unless a fanout is below 0 (a row whole: the largest degree per
    task); then each depth's tasks share the slots :func:`_bounds` allows it, taken from one counter."""
    depth = len(fanouts)
    starts = first.shape[0]
    capacity, edge_caps = _bounds(starts, instances, fanouts, sources=sources, n=num_vertices,
                                  nnz=int(part.indices.shape[0]), max_degree=max_degree, replace=replace)
    table_size = 1 << max(1, 2 * (capacity - starts)).bit_length()
    tasks = x.full(capacity, -1, x.int64)
    tasks[:starts] = first
    counters = np.zeros(EDGES + depth, np.uint64)
    counters[TAIL] = counters[PENDING] = starts
    counters = x.asarray(counters)
    width = max(max_degree, 1)
    use_bitmap = bool(bitmap) and not replace and max(fanouts) > LINEAR_PICKS
    bit_width = (width + 7) // 8 if use_bitmap or x is np else 0
    # A warp's bitmap is all its scratch (weights: every row's CDF summed once, in O(edges), rather than per task
    # in O(degree) -- at a hub, for each instance that reaches it), so more warps run when it is not needed.
    slots = 1 if x is np else max(1, min(MOST_WARPS, capacity, SCRATCH_BYTES // max(1, bit_width)))
    use_table = weighted and method == "alias"
    table = x.zeros(1, x.uint64)
    if use_table:  # built at the first weighted sample of the partition, kept with it; as the CDF below
        table, positive = part.kept("select_alias", _row_alias)
        cdf = x.empty(1, x.float64)
    elif weighted:
        cdf, positive = part.kept("select_cdf", _row_cdf)
    else:  # the twin sums its ones in a scratch CDF; the kernel needs none
        cdf, positive = x.empty(width if x is np else 1, x.float64), x.zeros(1, x.int64)
    per_vertex = 0 if min(fanouts) < 0 else max(f if replace else min(f, max_degree) for f in fanouts)
    edge_base = np.zeros(depth, np.int64)
    edge_base[1:] = np.cumsum(edge_caps)[:-1]
    task_first, task_count = x.empty(capacity, x.int64), x.empty(capacity, x.int64)
    edge_id = x.empty(max(1, capacity * per_vertex if per_vertex else int(sum(edge_caps))), x.int64)
    SAMPLE.launch(indptr=part.indptr, indices=part.indices,
                  weights=part.weights if weighted else x.zeros(1, x.float32), weighted=weighted, replace=replace,
                  method=METHODS[method], use_bitmap=use_bitmap, num_vertices=num_vertices, key=key, depth=depth,
                  fanouts=x.asarray(fanouts, dtype=x.int64), step=step, sources=sources, per_vertex=per_vertex,
                  capacity=capacity,
                  tasks=tasks, counters=counters, seen=x.zeros(table_size, x.uint64), table_size=table_size,
                  edge_base=x.asarray(edge_base), edge_id=edge_id, task_first=task_first, task_count=task_count,
                  slots=slots, max_degree=width, lo=part.lo, cdf=cdf, positive=positive,
                  bitmap=x.empty(max(1, slots * bit_width), x.uint8), use_table=use_table, table=table)
    counted = [int(c) for c in counters.tolist()]
    tail = counted[TAIL]
    return Queue(tasks[:tail], task_first[:tail], task_count[:tail], edge_id, counted[ITERATIONS])


def _bounds(starts: int, instances: int, fanouts, *, sources: bool, n: int, nnz: int, max_degree: int,
            replace: bool) -> tuple[int, list[int]]:
    """Bounds on a queue's tasks (every depth's frontier, from ``starts`` tasks) and on each depth's picks: an
    instance's frontier holds a vertex once, and without replacement picks each of its edges once per depth."""
    frontier, tasks, picks = starts, 0, []
    for f in fanouts:
        most = frontier * (max_degree if f < 0 else f if replace else min(f, max_degree))
        picks.append(most if replace and f >= 0 else min(most, instances * nnz))
        tasks += frontier
        frontier = min(instances * n, picks[-1] + (frontier if sources else 0))
    return tasks, picks


def sample(x, part, instance, vertex, *, key, num_vertices: int, fanouts: tuple[int, ...], step: int,
           weighted: bool, replace: bool, method: str, bitmap: bool, max_degree: int) -> dict:
    """The sample of the entries ``(instance, vertex)`` at depth 0, ``fanouts[d]`` picks a vertex at depth ``d``,
    in one launch: the pieces the superstep path leaves (edges ``instance, depth, src, dst``, the expanded
    ``node_instance, node_vertex``, ``picks`` and SELECT's ``iterations``), in queue order. ``part`` is the whole
    graph or, for one depth (one fanout, ``step`` that depth's), the partition owning the entries' vertices; entries
    may repeat only then, each picking alone."""
    depth = len(fanouts)
    first = instance * num_vertices + vertex
    rising = first.shape[0] < 2 or bool((first[1:] > first[:-1]).all())  # e.g. a seed per instance: distinct
    if depth > 1 and not rising:  # a task's picks enqueue each (instance, vertex) of the next depth once
        first = unique(x, first)
    first *= depth  # the depth-0 tasks, each pair once
    queue = neighbor_queue(x, part, first, instances=int(first.shape[0]), key=key, num_vertices=num_vertices,
                           fanouts=tuple(fanouts), step=step, sources=False, weighted=weighted, replace=replace,
                           method=method, bitmap=bitmap, max_degree=max_degree)
    tail = int(queue.tasks.shape[0])
    at = x.cumsum(queue.task_count) - queue.task_count
    n = int(at[-1] + queue.task_count[-1]) if tail else 0
    pieces = {"instance": x.empty(n, x.int64), "depth": x.empty(n, x.int32), "src": x.empty(n, x.int64),
              "dst": x.empty(n, x.int64)}
    PIECES.launch(tasks=queue.tasks, task_first=queue.task_first, task_count=queue.task_count, at=at,
                  edge_id=queue.edge_id, indices=part.indices, n=tail, num_vertices=num_vertices, depth=depth,
                  instance=pieces["instance"], level=pieces["depth"], src=pieces["src"], dst=pieces["dst"])
    stream = queue.tasks // depth
    pieces.update(node_instance=stream // num_vertices, node_vertex=stream % num_vertices,
                  picks=x.full(1, n, x.int64), iterations=x.full(1, queue.iterations, x.int64))
    return pieces
