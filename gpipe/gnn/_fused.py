"""Multi-hop neighbor sampling of one mini-batch on an in-process CSR: fused (one queue for every hop) or per hop.

Both pick as ``gpipe.sampling.neighbor`` does, with its fused neighbor sampler (``gpipe._neighbor.neighbor_queue``)
and SELECT's rule: a batch is one instance, its hops the depths, each with its own fanout (below 0: every out-edge,
in order). Fused (PGSampler): the sampler's persistent kernel over a global task
queue, in which a hop's destinations are the next hop's sources too, then four small kernels (CUDA in
``kernels/gnn.cu``, CPU twins here) that mark each hop's vertices, number them and lay the edges out. Per hop (the
bulk-synchronous baseline of DGL's ``NeighborSampler``): each hop's frontier is sampled by a queue of one depth,
then relabeled through a unique of the picked neighbors before the next hop can start. The picks of (vertex, hop)
draw from stream ``batch * num_vertices + vertex`` at step ``hop``, so the edges of each hop are the same sets
whatever order the queue runs in, in either mode, on either device. Local ids then depend on those sets only: the
seeds in their order, then each hop's new vertices by id (fused: read off bit layers, no sort); each hop's edges
are ordered by destination, then in the order they were drawn.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import numpy as np

from .._neighbor import neighbor_queue
from ..backend import cpu_kernel, device_of, segments, to_host, unique, xp
from ..kernels import Arg, Kernel
from ._blocks import Block, Blocks

_ONE = np.uint64(1)
_LOW6 = np.uint64(63)
METHOD = "bipartite"  # SELECT's collision rule for every GNN batch


@cpu_kernel()
def _mark(u, layer, words, seen):
    seen[np.int64(layer) * words + (u >> 6)] |= _ONE << (np.uint64(u) & _LOW6)


@cpu_kernel()
def _layers_cpu(tasks, task_first, task_count, edge_id, indices, hops, words, n, seen):
    for t in range(n):
        v = tasks[t] // hops
        h = tasks[t] % hops
        _mark(v, h, words, seen)
        if h == hops - 1:
            _mark(v, hops, words, seen)
            for i in range(task_count[t]):
                _mark(np.int64(indices[edge_id[task_first[t] + i]]), hops, words, seen)


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


_SEEN = Arg("seen", "u64[]", note="bit layers: layer k holds hop k's frontier, layer hops the last hop's sources")
_TASKS = Arg("tasks", "i64[n]", note="vertex * hops + hop")
_LOCAL = Arg("local", "i64[]", note="vertex -> local id, for the sampled vertices")
LAYERS = Kernel("gnn.cu", "gp_gnn_layers", twin=_layers_cpu, items="n", args=(
    _TASKS, Arg("task_first", "i64[n]"), Arg("task_count", "i64[n]"), Arg("edge_id", "i64[]"), Arg("indices", "IdT[]"),
    Arg("hops", "i32"), Arg("words", "i64"), Arg("n", "i64"), replace(_SEEN, out=True)))
FRESH = Kernel("gnn.cu", "gp_gnn_fresh", twin=_fresh_cpu, items="n", args=(
    _SEEN, Arg("words", "i64"), Arg("n", "i64", note="hops * words"),
    Arg("fresh", "i64[n]", out=True, note="vertices a word of layer k = 1.. adds")))
NODES = Kernel("gnn.cu", "gp_gnn_nodes", twin=_nodes_cpu, items="n", args=(
    _SEEN, Arg("words", "i64"), Arg("size", "i64"), Arg("seeds", "i64[size]"),
    Arg("start", "i64[]", note="exclusive prefix sums of FRESH"), Arg("n", "i64", note="size + hops * words"),
    Arg("nodes", "i64[]", out=True, note="local id -> vertex"), replace(_LOCAL, out=True)))
ROWS = Kernel("gnn.cu", "gp_gnn_rows", twin=_rows_cpu, items="n", args=(
    _TASKS, Arg("task_count", "i64[n]"), _LOCAL, Arg("hop_row", "i64[hops]", note="a hop's first row"),
    Arg("hops", "i32"), Arg("n", "i64"), Arg("row_count", "i64[]", out=True, note="a row per (hop, destination)")))
PLACE = Kernel("gnn.cu", "gp_gnn_place", twin=_place_cpu, items="n", lanes=32, args=(
    _TASKS, Arg("task_first", "i64[n]"), Arg("task_count", "i64[n]"), Arg("edge_id", "i64[]"), Arg("indices", "IdT[]"),
    _LOCAL, Arg("hop_row", "i64[hops]"), Arg("row_start", "i64[]", note="exclusive prefix sums of ROWS"),
    Arg("hops", "i32"), Arg("n", "i64"), Arg("src", "i64[]", out=True), Arg("dst", "i64[]", out=True),
    Arg("eid", "i64[]", out=True)))


def sample(local, seeds, fanouts: list[int], *, replace: bool, weighted: bool, key, batch: int, fused: bool,
           features=None) -> Blocks:
    """The blocks of ``seeds`` (distinct dense ids on the device of ``local``, a :class:`LocalGraph`) drawn with
    ``key`` as batch ``batch``; with ``features``, their rows of the sampled vertices (rows are dense ids)."""
    csr = local.part
    x = xp(device_of(csr.indptr))
    seeds = x.ascontiguousarray(seeds, dtype=x.int64)
    nodes, counted, edges = (_fused if fused else _per_hop)(local, x, seeds, fanouts, replace=replace,
                                                            weighted=weighted, key=key, batch=batch)
    blocks = tuple(Block(src, dst, eid, counted[h + 1], counted[h]) for h, (src, dst, eid) in enumerate(edges))
    id_map, size = local.id_map, int(seeds.shape[0])
    return Blocks(input_nodes=nodes if id_map is None else id_map[nodes],
                  output_nodes=seeds if id_map is None else id_map[seeds], blocks=blocks[::-1],
                  num_sampled_nodes=tuple([size] + [b - a for a, b in pairwise(counted)]),
                  num_sampled_edges=tuple(int(src.shape[0]) for src, _, _ in edges),
                  features=None if features is None else features[nodes])


def _fused(local, x, seeds, fanouts: list[int], *, replace: bool, weighted: bool, key, batch: int) -> tuple:
    """Every hop in one run of the neighbor sampler's queue, then the vertices marked, numbered and the edges placed
    by five small kernels: the sampled vertices (local id -> vertex), the vertex count after each hop, and each
    hop's (src, dst, eid)."""
    csr = local.part
    n, hops, size = csr.hi, len(fanouts), int(seeds.shape[0])
    words = (n + 63) // 64
    queue = neighbor_queue(x, csr, (batch * n + seeds) * hops, instances=1, key=key, num_vertices=n,
                           fanouts=tuple(fanouts), step=0, sources=True, weighted=weighted, replace=replace,
                           method=METHOD, bitmap=True, max_degree=local.max_degree)
    queued = int(queue.tasks.shape[0])
    tasks = queue.tasks // hops % n * hops + queue.tasks % hops  # vertex * hops + hop
    seen = x.zeros((hops + 1) * words, x.uint64)
    LAYERS.launch(tasks=tasks, task_first=queue.task_first, task_count=queue.task_count, edge_id=queue.edge_id,
                  indices=csr.indices, hops=hops, words=words, n=queued, seen=seen)
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
    ROWS.launch(tasks=tasks, task_count=queue.task_count, local=ids, hop_row=hop_row, hops=hops, n=queued,
                row_count=row_count)
    row_end = x.cumsum(row_count)
    ends = [0] + [int(e) for e in to_host(row_end[x.asarray(np.cumsum(counted[:hops]) - 1)])]  # each hop's edges end
    src, dst, eid = (x.empty(ends[-1], x.int64) for _ in range(3))
    PLACE.launch(tasks=tasks, task_first=queue.task_first, task_count=queue.task_count, edge_id=queue.edge_id,
                 indices=csr.indices, local=ids, hop_row=hop_row, row_start=row_end - row_count, hops=hops, n=queued,
                 src=src, dst=dst, eid=eid)
    return nodes, counted, [(src[a:b], dst[a:b], eid[a:b]) for a, b in pairwise(ends)]


def _per_hop(local, x, seeds, fanouts: list[int], *, replace: bool, weighted: bool, key, batch: int) -> tuple:
    """Bulk-synchronous, as DGL's ``NeighborSampler`` with ``to_block``: each hop samples its frontier (the vertices
    so far, in local-id order) with a queue of one depth, then numbers the picked neighbors not seen before through
    a unique, before the next hop can start. Returns what :func:`_fused` does."""
    csr = local.part
    n, size = csr.hi, int(seeds.shape[0])
    ids = x.full(n, -1, x.int64)  # vertex -> local id
    ids[seeds] = x.arange(size, dtype=x.int64)
    nodes, counted, edges = seeds, [size], []
    for h, fanout in enumerate(fanouts):
        m = counted[-1]
        queue = neighbor_queue(x, csr, batch * n + nodes, instances=1, key=key, num_vertices=n, fanouts=(fanout,),
                               step=h, sources=False, weighted=weighted, replace=replace, method=METHOD,
                               bitmap=True, max_degree=local.max_degree)
        dst, at = segments(x, queue.task_count)  # the frontier's tasks run in its order: a task's slot is its id
        edge_id = queue.edge_id[queue.task_first[dst] + at]
        neighbors = csr.indices[edge_id].astype(x.int64)
        found = unique(x, neighbors)
        new = found[ids[found] < 0]
        ids[new] = x.arange(m, m + new.shape[0], dtype=x.int64)
        nodes = x.concatenate([nodes, new])
        counted.append(m + int(new.shape[0]))
        edges.append((ids[neighbors], dst, edge_id))
    return nodes, counted, edges
