"""Fused neighbor sampling: every depth of every instance of a worker's share in one launch.

Taken by the Sampler for neighbor-style sampling (edge bias uniform or weight, update 'all', no frontier
selection, picks per vertex) on a graph whose whole CSR is on each worker (replicated mode, or one partition).
CUDA in ``kernels/neighbor.cu`` (a persistent kernel, a warp per task from a global queue), CPU twin here (the
same queue, run in order). A task ``(instance, vertex, depth)`` picks with :func:`select_segment`, from the
stream and at the step the superstep path's ``select`` uses for that entry, so the sample is the same rows.
"""

from __future__ import annotations

import numpy as np

from .. import _rng
from .._alias import tables
from ..backend import cpu_kernel, device_of, prange, unique, xp
from ..kernels import Arg, Kernel
from ._select import _WITH_REPLACEMENT, LANES, METHODS, ROUNDS, positive_counts, segment_cdf, select_segment

TAIL, PENDING, ITERATIONS = range(3)  # the counters
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
def _sample_cpu(indptr, indices, weights, weighted, replace, method, use_bitmap, num_vertices, key, depth, fanout,
                step, capacity, per_vertex, tasks, counters, seen, table_size, edge_dst, slots, max_degree, lo, cdf,
                positive, bitmap, use_table, table):
    mask = np.uint64(table_size - 1)
    ones = np.ones(max(max_degree, 1))
    t = 0
    while t < capacity and tasks[t] >= 0:  # in order, slot t is filled exactly when t < tail
        item = tasks[t]
        stream = item // depth
        level = item % depth
        v = stream % num_vertices
        instance = stream // num_vertices
        a = indptr[v - lo]
        d = indptr[v - lo + 1] - a
        mine = positive[v - lo] if weighted else d  # the positive biases
        k = (fanout if mine > 0 else 0) if replace else min(mine, fanout)
        o = t * per_vertex
        for i in range(o + k, o + per_vertex):
            edge_dst[i] = -1
        if k > 0:
            how = _WITH_REPLACEMENT if replace else method
            if weighted:
                iters = select_segment(weights, a, d, k, key, stream, step + level, how, use_bitmap, cdf, a, True,
                                       bitmap, 0, (d + 7) // 8, edge_dst, o, table, a, use_table)
                base = 0
            else:  # the ones of a row: candidates 0..d-1
                iters = select_segment(ones, 0, d, k, key, stream, step + level, how, use_bitmap, cdf, 0, False,
                                       bitmap, 0, (d + 7) // 8, edge_dst, o, table, 0, False)
                base = a
            counters[ITERATIONS] += np.uint64(iters)
            for i in range(o, o + k):
                u = np.int64(indices[base + edge_dst[i]])
                edge_dst[i] = u
                if level + 1 < depth:
                    _push((instance * num_vertices + u) * depth + level + 1, tasks, counters, seen, mask)
        counters[PENDING] -= _ONE
        t += 1


SAMPLE = Kernel("neighbor.cu", "gp_sample_neighbors", twin=_sample_cpu, items="capacity", queued=True, defines={
    "GP_NBR_TAIL": TAIL, "GP_NBR_PENDING": PENDING, "GP_NBR_ITERATIONS": ITERATIONS, "GP_NBR_TICKETS": TICKETS,
    "GP_NBR_BLOCK": BLOCK, "GP_NBR_MIN_BLOCKS": MIN_BLOCKS, "GP_SELECT_ROUNDS": ROUNDS, "GP_LANES": LANES,
    "GP_SELECT_BIPARTITE": METHODS["bipartite"], "GP_SELECT_UPDATED": METHODS["updated"],
    "GP_SELECT_WITH_REPLACEMENT": _WITH_REPLACEMENT}, args=(
    Arg("indptr", "i64[]"), Arg("indices", "IdT[]"), Arg("weights", "f32[]"), Arg("weighted", "i32"),
    Arg("replace", "i32"), Arg("method", "i32"), Arg("use_bitmap", "i32"), Arg("num_vertices", "i64"),
    Arg("key", "u64"), Arg("depth", "i32"), Arg("fanout", "i64"), Arg("step", "i64", note="of depth 0"),
    Arg("capacity", "i64"), Arg("per_vertex", "i64", note="edge rows per task"),
    Arg("tasks", "i64[capacity]", out=True, note="(instance * n + vertex) * depth + d; -1 empty"),
    Arg("counters", "u64[3]", out=True, note="TAIL, PENDING, ITERATIONS"),
    Arg("seen", "u64[table_size]", out=True, note="the tasks enqueued, + 1; 0 empty"), Arg("table_size", "i64"),
    Arg("edge_dst", "i64[capacity * per_vertex]", out=True, note="slot t's picked vertices at t * per_vertex, then -1"),
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
def _pieces_cpu(picked, n, tasks, edge_dst, per_vertex, num_vertices, depth, instance, level, src, dst):
    for i in prange(n):
        slot = picked[i]
        item = tasks[slot // per_vertex]
        stream = item // depth
        instance[i] = stream // num_vertices
        level[i] = item % depth
        src[i] = stream % num_vertices
        dst[i] = edge_dst[slot]


PIECES = Kernel("neighbor.cu", "gp_nbr_pieces", twin=_pieces_cpu, items="n", defines=SAMPLE.defines, args=(
    Arg("picked", "i64[n]", note="slots of edge_dst that hold a pick"), Arg("n", "i64"), Arg("tasks", "i64[]"),
    Arg("edge_dst", "i64[]"), Arg("per_vertex", "i64"), Arg("num_vertices", "i64"), Arg("depth", "i32"),
    Arg("instance", "i64[n]", out=True), Arg("level", "i32[n]", out=True), Arg("src", "i64[n]", out=True),
    Arg("dst", "i64[n]", out=True)))


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


def sample(x, part, instance, vertex, *, key, num_vertices: int, depth: int, fanout: int, step: int, weighted: bool,
           replace: bool, method: str, bitmap: bool, max_degree: int) -> dict:
    """The sample of the entries ``(instance, vertex)`` at depth 0, in one launch: the pieces the superstep path
    leaves (edges ``instance, depth, src, dst``, the expanded ``node_instance, node_vertex``, ``picks`` and
    SELECT's ``iterations``), in queue order. ``part`` is the whole graph or, for one depth (``depth`` 1, ``step``
    that depth's), the partition owning the entries' vertices; entries may repeat only then, each picking alone."""
    first = instance * num_vertices + vertex
    rising = first.shape[0] < 2 or bool((first[1:] > first[:-1]).all())  # e.g. a seed per instance: distinct
    if depth > 1 and not rising:  # a task's picks enqueue each (instance, vertex) of the next depth once
        first = unique(x, first)
    first *= depth  # the depth-0 tasks, each pair once
    instances = int(first.shape[0])  # at most: the bounds below only need one at least as large
    per_vertex = fanout if replace else min(fanout, max_degree)
    nnz = int(part.indices.shape[0])
    capacity, frontier = 0, int(first.shape[0])
    for level in range(depth):
        capacity += frontier
        picks = frontier * per_vertex if replace else min(frontier * per_vertex, instances * nnz)
        frontier = min(picks, instances * num_vertices)
    table_size = 1 << max(1, 2 * (capacity - int(first.shape[0]))).bit_length()
    tasks = x.full(capacity, -1, x.int64)
    tasks[:first.shape[0]] = first
    counters = np.zeros(3, np.uint64)
    counters[TAIL] = counters[PENDING] = first.shape[0]
    counters = x.asarray(counters)
    width = max(max_degree, 1)
    use_bitmap = bool(bitmap) and not replace and fanout > LINEAR_PICKS
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
    # each task its own rows, at its queue slot: no shared counter hands them out
    edge_dst = x.empty(capacity * per_vertex, x.int64)
    SAMPLE.launch(indptr=part.indptr, indices=part.indices,
                  weights=part.weights if weighted else x.zeros(1, x.float32), weighted=weighted, replace=replace,
                  method=METHODS[method], use_bitmap=use_bitmap, num_vertices=num_vertices, key=key, depth=depth,
                  fanout=fanout, step=step, capacity=capacity, per_vertex=per_vertex, tasks=tasks, counters=counters,
                  seen=x.zeros(table_size, x.uint64), table_size=table_size, edge_dst=edge_dst, slots=slots,
                  max_degree=width, lo=part.lo, cdf=cdf, positive=positive,
                  bitmap=x.empty(max(1, slots * bit_width), x.uint8), use_table=use_table, table=table)
    tail, _, iterations = (int(c) for c in counters.tolist())
    stream = tasks[:tail] // depth
    picked = x.flatnonzero(edge_dst[:tail * per_vertex] >= 0)  # the tasks' slots less their -1s
    n = int(picked.shape[0])
    pieces = {"instance": x.empty(n, x.int64), "depth": x.empty(n, x.int32), "src": x.empty(n, x.int64),
              "dst": x.empty(n, x.int64)}
    PIECES.launch(picked=picked, n=n, tasks=tasks, edge_dst=edge_dst, per_vertex=per_vertex, num_vertices=num_vertices,
                  depth=depth, instance=pieces["instance"], level=pieces["depth"], src=pieces["src"],
                  dst=pieces["dst"])
    pieces.update(node_instance=stream // num_vertices, node_vertex=stream % num_vertices,
                  picks=x.full(1, n, x.int64), iterations=x.full(1, iterations, x.int64))
    return pieces
