"""Multi-hop neighbor sampling of one mini-batch on an in-process CSR: fused (one queue for every hop) or per hop.

CUDA in ``kernels/gnn.cu``, CPU twins here. Fused (PGSampler): a persistent kernel over a global task queue (the
twin runs the queue in order), then three small kernels that number the vertices and lay the edges out. Per hop
(the bulk-synchronous baseline of DGL's ``NeighborSampler``): each hop samples its frontier into slots laid out by a
prefix sum, then relabels through a unique of the picked neighbors before the next hop can start. The picks of
(vertex, hop) draw from stream ``batch * num_vertices + vertex`` at step ``hop``, so the edges of each hop are the
same sets whatever order the queue runs in, in either mode, on either device. Local ids then depend on those sets
only: the seeds in their order, then each hop's new vertices by id (fused: read off the bit layers of the queue's
deduplication, no sort); each hop's edges are ordered by destination, then in the order they were drawn.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import _rng
from .._search import pick_edge, race_segment
from ..backend import cpu_kernel, device_of, segments, to_host, unique, xp
from ..kernels import Arg, Kernel
from ._blocks import Block, Blocks

TAIL, PENDING, EDGES = 0, 1, 2  # the counters: tasks enqueued, tasks not finished, then each hop's edge slots and
# each hop's edges held
_ONE = np.uint64(1)
_LOW6 = np.uint64(63)


@cpu_kernel()
def _floyd(a, d, k, key, stream, step, out, o):
    """Floyd's algorithm: ``k`` distinct edges of ``a..a+d-1`` (``k < d``) uniformly into ``out[o:o+k]``."""
    for i in range(k):
        m = d - k + i
        e = a + _rng.below(_rng.bits(key, stream, step, i), m + 1)
        for j in range(i):
            if out[o + j] == e:
                e = a + m
                break
        out[o + i] = e


@cpu_kernel()
def _mark(u, layer, words, seen):
    """Set ``u``'s bit of layer ``layer``; whether it was clear."""
    w = np.int64(layer) * words + (u >> 6)
    mask = _ONE << (np.uint64(u) & _LOW6)
    if seen[w] & mask:
        return False
    seen[w] |= mask
    return True


@cpu_kernel()
def _push(u, h, words, hops, tasks, counters, seen):
    """Enqueue (u, h) unless it was enqueued before."""
    if not _mark(u, h, words, seen):
        return
    counters[PENDING] += _ONE
    slot = counters[TAIL]
    counters[TAIL] = slot + _ONE
    tasks[slot] = u * hops + h


@cpu_kernel()
def _every(weighted, replace, d, f):
    """Whether fanout ``f`` takes every out-edge of a vertex of degree ``d``."""
    return f < 0 or (not replace and not weighted and f >= d)


@cpu_kernel()
def _bound(cdf, weighted, replace, a, d, f):
    """The picks of a vertex whose out-edges are ``a..a+d-1`` at fanout ``f``: a bound on those held (exact but for
    weighted picks without replacement, which hold only positive weights)."""
    k = 0 if d == 0 else d if _every(weighted, replace, d, f) else f if replace else min(f, d)
    if k > 0 and replace and weighted and not cdf[a + d - 1] > 0.0:
        k = 0
    return k


@cpu_kernel()
def _pick(cdf, weights, weighted, replace, num_vertices, key, batch, v, h, a, d, f, k, edge_id, race, o):
    """The ``k`` (:func:`_bound`) picks of vertex ``v`` at hop ``h`` into ``edge_id[o:]``; how many are held."""
    stream = np.uint64(batch) * np.uint64(num_vertices) + np.uint64(v)
    if _every(weighted, replace, d, f):
        for i in range(k):
            edge_id[o + i] = a + i
    elif replace:
        for i in range(k):
            edge_id[o + i] = pick_edge(cdf, weighted, a, d, _rng.bits(key, stream, h, i))
    elif weighted:
        k = race_segment(weights, a, d, k, key, stream, h, edge_id, race, o)
    else:
        _floyd(a, d, k, key, stream, h, edge_id, o)
    return k


@cpu_kernel()
def _sample_cpu(indptr, indices, cdf, weights, weighted, replace, num_vertices, key, batch, hops, fanouts,
                capacity, tasks, counters, seen, edge_base, edge_id, task_first, task_count, race):
    words = (num_vertices + 63) >> 6
    t = 0
    while t < capacity and tasks[t] >= 0:  # in order, slot t is filled exactly when t < tail
        v = tasks[t] // hops
        h = tasks[t] % hops
        if h == 0:
            _mark(v, 0, words, seen)
        a = indptr[v]
        d = indptr[v + 1] - a
        k = _bound(cdf, weighted, replace, a, d, fanouts[h])
        o = edge_base[h] + np.int64(counters[EDGES + h])
        counters[EDGES + h] += np.uint64(k)
        k = _pick(cdf, weights, weighted, replace, num_vertices, key, batch, v, h, a, d, fanouts[h], k, edge_id,
                  race, o)
        task_first[t] = o
        task_count[t] = k
        counters[EDGES + hops + h] += np.uint64(k)
        if h + 1 < hops:
            _push(v, h + 1, words, hops, tasks, counters, seen)
            for i in range(k):
                _push(np.int64(indices[edge_id[o + i]]), h + 1, words, hops, tasks, counters, seen)
        else:
            _mark(v, hops, words, seen)
            for i in range(k):
                _mark(np.int64(indices[edge_id[o + i]]), hops, words, seen)
        counters[PENDING] -= _ONE
        t += 1


@cpu_kernel()
def _bounds_cpu(indptr, cdf, weighted, replace, fanout, frontier, n, bound):
    for i in range(n):
        a = indptr[frontier[i]]
        bound[i] = _bound(cdf, weighted, replace, a, indptr[frontier[i] + 1] - a, fanout)


@cpu_kernel()
def _hop_cpu(indptr, cdf, weights, weighted, replace, num_vertices, key, batch, hop, fanout, frontier, n, first,
             edge_id, held, race):
    for i in range(n):
        v = frontier[i]
        a = indptr[v]
        d = indptr[v + 1] - a
        k = _bound(cdf, weighted, replace, a, d, fanout)
        held[i] = _pick(cdf, weights, weighted, replace, num_vertices, key, batch, v, hop, a, d, fanout, k, edge_id,
                        race, first[i])


@cpu_kernel()
def _fresh_cpu(seen, words, n, fresh):
    for i in range(n):
        bits = seen[i + words] & ~seen[i]
        c = 0
        while bits:
            bits &= bits - _ONE
            c += 1
        fresh[i] = c


@cpu_kernel()
def _nodes_cpu(seen, words, size, seeds, start, n, nodes, local):
    for i in range(size):
        nodes[i] = seeds[i]
        local[seeds[i]] = i
    for w in range(n - size):
        bits = seen[w + words] & ~seen[w]
        at = size + start[w]
        base = (w % words) << 6
        b = 0
        while bits:
            if bits & _ONE:
                nodes[at] = base + b
                local[base + b] = at
                at += 1
            bits >>= _ONE
            b += 1


@cpu_kernel()
def _rows_cpu(tasks, task_count, local, hop_row, hops, n, row_count):
    for t in range(n):
        row_count[hop_row[tasks[t] % hops] + local[tasks[t] // hops]] = task_count[t]


@cpu_kernel()
def _place_cpu(tasks, task_first, task_count, edge_id, indices, local, hop_row, row_start, hops, n, src, dst, eid):
    for t in range(n):
        v = local[tasks[t] // hops]
        at = row_start[hop_row[tasks[t] % hops] + v]
        first = task_first[t]
        for i in range(task_count[t]):
            e = edge_id[first + i]
            src[at + i] = local[indices[e]]
            dst[at + i] = v
            eid[at + i] = e


_DEFINES = {"GP_GNN_TAIL": TAIL, "GP_GNN_PENDING": PENDING, "GP_GNN_EDGES": EDGES}  # one module for the file
_SEEN = Arg("seen", "u64[]", note="bit layers: layer k holds hop k's frontier, layer hops the last hop's sources")
_TASKS = Arg("tasks", "i64[n]", note="vertex * hops + hop")
_LOCAL = Arg("local", "i64[]", note="vertex -> local id, for the sampled vertices")
SAMPLE = Kernel("gnn.cu", "gp_gnn_sample", twin=_sample_cpu, items="capacity", queued=True, defines=_DEFINES, args=(
    Arg("indptr", "i64[]"), Arg("indices", "IdT[]"), Arg("cdf", "f64[]", note="per-vertex weight prefix sums"),
    Arg("weights", "f32[]"), Arg("weighted", "i32"), Arg("replace", "i32"), Arg("num_vertices", "i64"),
    Arg("key", "u64"), Arg("batch", "i64"), Arg("hops", "i32"), Arg("fanouts", "i64[hops]"), Arg("capacity", "i64"),
    Arg("tasks", "i64[capacity]", out=True, note="vertex * hops + hop; -1 empty"),
    Arg("counters", "u64[2+2*hops]", out=True, note="TAIL, PENDING, EDGES + hop: slots, EDGES + hops + hop: held"),
    replace(_SEEN, out=True), Arg("edge_base", "i64[hops]"),
    Arg("edge_id", "i64[]", out=True), Arg("task_first", "i64[capacity]", out=True, note="a task's first edge"),
    Arg("task_count", "i64[capacity]", out=True, note="its edges held"),
    Arg("race", "f64[]", out=True, note="weighted races")))
FRESH = Kernel("gnn.cu", "gp_gnn_fresh", twin=_fresh_cpu, items="n", defines=_DEFINES, args=(
    _SEEN, Arg("words", "i64"), Arg("n", "i64", note="hops * words"),
    Arg("fresh", "i64[n]", out=True, note="vertices a word of layer k = 1.. adds")))
NODES = Kernel("gnn.cu", "gp_gnn_nodes", twin=_nodes_cpu, items="n", defines=_DEFINES, args=(
    _SEEN, Arg("words", "i64"), Arg("size", "i64"), Arg("seeds", "i64[size]"),
    Arg("start", "i64[]", note="exclusive prefix sums of FRESH"), Arg("n", "i64", note="size + hops * words"),
    Arg("nodes", "i64[]", out=True, note="local id -> vertex"), replace(_LOCAL, out=True)))
ROWS = Kernel("gnn.cu", "gp_gnn_rows", twin=_rows_cpu, items="n", defines=_DEFINES, args=(
    _TASKS, Arg("task_count", "i64[n]"), _LOCAL, Arg("hop_row", "i64[hops]", note="a hop's first row"),
    Arg("hops", "i32"), Arg("n", "i64"), Arg("row_count", "i64[]", out=True, note="a row per (hop, destination)")))
PLACE = Kernel("gnn.cu", "gp_gnn_place", twin=_place_cpu, items="n", lanes=32, defines=_DEFINES, args=(
    _TASKS, Arg("task_first", "i64[n]"), Arg("task_count", "i64[n]"), Arg("edge_id", "i64[]"), Arg("indices", "IdT[]"),
    _LOCAL, Arg("hop_row", "i64[hops]"), Arg("row_start", "i64[]", note="exclusive prefix sums of ROWS"),
    Arg("hops", "i32"), Arg("n", "i64"), Arg("src", "i64[]", out=True), Arg("dst", "i64[]", out=True),
    Arg("eid", "i64[]", out=True)))


_FRONTIER = Arg("frontier", "i64[n]", note="the hop's frontier: its vertices in local-id order")
BOUNDS = Kernel("gnn.cu", "gp_gnn_bounds", twin=_bounds_cpu, items="n", defines=_DEFINES, args=(
    Arg("indptr", "i64[]"), Arg("cdf", "f64[]"), Arg("weighted", "i32"), Arg("replace", "i32"), Arg("fanout", "i64"),
    _FRONTIER, Arg("n", "i64"), Arg("bound", "i64[n]", out=True, note="a vertex's slots")))
HOP = Kernel("gnn.cu", "gp_gnn_hop", twin=_hop_cpu, items="n", defines=_DEFINES, args=(
    Arg("indptr", "i64[]"), Arg("cdf", "f64[]"), Arg("weights", "f32[]"), Arg("weighted", "i32"),
    Arg("replace", "i32"), Arg("num_vertices", "i64"), Arg("key", "u64"), Arg("batch", "i64"), Arg("hop", "i32"),
    Arg("fanout", "i64"), _FRONTIER, Arg("n", "i64"),
    Arg("first", "i64[n]", note="exclusive prefix sums of BOUNDS"), Arg("edge_id", "i64[]", out=True),
    Arg("held", "i64[n]", out=True, note="the picks held"), Arg("race", "f64[]", out=True, note="weighted races")))


def sample(local, seeds, fanouts: list[int], *, replace: bool, weighted: bool, key, batch: int, fused: bool,
           features=None) -> Blocks:
    """The blocks of ``seeds`` (distinct dense ids on the device of ``local``, a :class:`LocalGraph`) drawn with
    ``key`` as batch ``batch``; with ``features``, their rows of the sampled vertices (rows are dense ids)."""
    csr = local.part
    x = xp(device_of(csr.indptr))
    seeds = x.ascontiguousarray(seeds, dtype=x.int64)
    picks = {"cdf": csr.cdf() if weighted and replace else x.zeros(1, x.float64),
             "weights": csr.weights if weighted else x.zeros(1, x.float32), "weighted": weighted, "replace": replace,
             "num_vertices": csr.hi, "key": key, "batch": batch}
    nodes, counted, edges = (_fused if fused else _per_hop)(local, x, seeds, fanouts, picks)
    blocks = tuple(Block(src, dst, eid, counted[h + 1], counted[h]) for h, (src, dst, eid) in enumerate(edges))
    id_map, size = local.id_map, int(seeds.shape[0])
    return Blocks(input_nodes=nodes if id_map is None else id_map[nodes],
                  output_nodes=seeds if id_map is None else id_map[seeds], blocks=blocks[::-1],
                  num_sampled_nodes=tuple([size] + [b - a for a, b in zip(counted, counted[1:])]),
                  num_sampled_edges=tuple(int(src.shape[0]) for src, _, _ in edges),
                  features=None if features is None else features[nodes])


def _fused(local, x, seeds, fanouts: list[int], picks: dict) -> tuple:
    """Every hop in one persistent kernel, then the vertices numbered and the edges placed by four small kernels:
    the sampled vertices (local id -> vertex), the vertex count after each hop, and each hop's (src, dst, eid)."""
    csr = local.part
    n, hops, size = csr.hi, len(fanouts), int(seeds.shape[0])
    words = (n + 63) // 64
    capacity, edge_caps = _capacity(size, fanouts, n, csr.num_edges, local.max_degree, picks["replace"])
    edge_base = np.zeros(hops, np.int64)
    edge_base[1:] = np.cumsum(edge_caps)[:-1]
    total = int(sum(edge_caps))
    tasks = x.full(capacity, -1, x.int64)
    tasks[:size] = seeds * hops  # hop 0's tasks: vertex * hops + 0
    counters = np.zeros(EDGES + 2 * hops, np.uint64)
    counters[TAIL] = counters[PENDING] = size
    on = x.asarray(counters)
    seen = x.zeros((hops + 1) * words, x.uint64)
    task_first, task_count = x.empty(capacity, x.int64), x.empty(capacity, x.int64)
    edge_id = x.empty(total, x.int64)
    SAMPLE.launch(**picks, indptr=csr.indptr, indices=csr.indices, hops=hops,
                  fanouts=x.asarray(fanouts, dtype=x.int64), capacity=capacity, tasks=tasks, counters=on, seen=seen,
                  edge_base=x.asarray(edge_base), edge_id=edge_id, task_first=task_first, task_count=task_count,
                  race=x.empty(total if picks["weighted"] and not picks["replace"] else 1, x.float64))
    counters = to_host(on)
    queued, held = int(counters[TAIL]), counters[EDGES + hops:].astype(np.int64)
    # local ids: the seeds, then each layer's new vertices by id (bits of seen), counted per word and summed
    fresh = x.empty(hops * words, x.int64)
    FRESH.launch(seen=seen, words=words, n=hops * words, fresh=fresh)
    found = x.cumsum(fresh)
    counted = [size] + [size + int(c) for c in to_host(found[words - 1::words])]
    nodes, ids = x.empty(counted[-1], x.int64), x.empty(n, x.int64)
    NODES.launch(seen=seen, words=words, size=size, seeds=seeds, start=found - fresh, n=size + hops * words,
                 nodes=nodes, local=ids)
    # each hop's edges by destination: a row per (hop, destination) holding its task's edge count, then the rows'
    # prefix sums place every task's edges
    hop_row = x.asarray(np.concatenate([[0], np.cumsum(counted[:hops - 1])]).astype(np.int64))
    row_count = x.empty(sum(counted[:hops]), x.int64)
    ROWS.launch(tasks=tasks[:queued], task_count=task_count[:queued], local=ids, hop_row=hop_row, hops=hops, n=queued,
                row_count=row_count)
    src, dst, eid = (x.empty(int(held.sum()), x.int64) for _ in range(3))
    PLACE.launch(tasks=tasks[:queued], task_first=task_first[:queued], task_count=task_count[:queued],
                 edge_id=edge_id, indices=csr.indices, local=ids, hop_row=hop_row,
                 row_start=x.cumsum(row_count) - row_count, hops=hops, n=queued, src=src, dst=dst, eid=eid)
    ends = np.cumsum(held)
    return nodes, counted, [(src[e - k:e], dst[e - k:e], eid[e - k:e]) for e, k in zip(ends.tolist(), held.tolist())]


def _per_hop(local, x, seeds, fanouts: list[int], picks: dict) -> tuple:
    """Bulk-synchronous, as DGL's ``NeighborSampler`` with ``to_block``: each hop samples its frontier (the vertices
    so far, in local-id order) into slots laid out by a prefix sum of the bounds, then numbers the picked neighbors
    not seen before through a unique, before the next hop can start. Returns what :func:`_fused` does."""
    csr = local.part
    size = int(seeds.shape[0])
    ids = x.full(csr.hi, -1, x.int64)  # vertex -> local id
    ids[seeds] = x.arange(size, dtype=x.int64)
    nodes, counted, edges = seeds, [size], []
    for h, fanout in enumerate(fanouts):
        m = counted[-1]
        bound = x.empty(m, x.int64)
        BOUNDS.launch(indptr=csr.indptr, cdf=picks["cdf"], weighted=picks["weighted"], replace=picks["replace"],
                      fanout=fanout, frontier=nodes, n=m, bound=bound)
        ends = x.cumsum(bound)
        slots = int(ends[-1])
        edge_id, held = x.empty(slots, x.int64), x.empty(m, x.int64)
        HOP.launch(**picks, indptr=csr.indptr, hop=h, fanout=fanout, frontier=nodes, n=m, first=ends - bound,
                   edge_id=edge_id, held=held,
                   race=x.empty(slots if picks["weighted"] and not picks["replace"] else 1, x.float64))
        if picks["weighted"] and not picks["replace"]:  # the slots past a vertex's held picks are left out
            owner, at = segments(x, bound)
            edge_id = edge_id[at < held[owner]]
        dst = segments(x, held)[0]
        neighbors = csr.indices[edge_id].astype(x.int64)
        found = unique(x, neighbors)
        new = found[ids[found] < 0]
        ids[new] = x.arange(m, m + new.shape[0], dtype=x.int64)
        nodes = x.concatenate([nodes, new])
        counted.append(m + int(new.shape[0]))
        edges.append((ids[neighbors], dst, edge_id))
    return nodes, counted, edges


def _capacity(size: int, fanouts: list[int], n: int, nnz: int, max_degree: int, replace: bool):
    """Bounds on the tasks of a batch of ``size`` seeds (every hop's frontier) and on each hop's edges."""
    frontier, tasks, edges = size, 0, []
    for f in fanouts:
        per_vertex = max_degree if f < 0 else f if replace else min(f, max_degree)
        most = frontier * per_vertex
        edges.append(most if replace and f >= 0 else min(most, nnz))  # without: a vertex's edges once per hop
        tasks += frontier
        frontier = min(n, frontier + edges[-1])
    return tasks, edges
