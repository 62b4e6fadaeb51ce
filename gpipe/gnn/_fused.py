"""Multi-hop neighbor sampling of one mini-batch on an in-process CSR: fused (one queue for every hop) or per hop.

CUDA in ``kernels/gnn.cu`` (a persistent kernel over a global task queue), CPU twin here (the same queue, run in
order). The picks of (vertex, hop) draw from stream ``batch * num_vertices + vertex`` at step ``hop``, so the edges
of each hop are the same sets whatever order the queue runs in, fused or per hop, on either device; local ids are
then given in an order that depends on those sets only (see :func:`_relabel`), and each hop's edges are ordered
by destination, then in the order they were drawn.
"""

from __future__ import annotations

import numpy as np

from .. import _rng
from .._search import pick_edge, race_segment
from ..backend import cpu_kernel, device_of, to_host, xp
from ..kernels import Arg, Kernel
from ._blocks import Block, Blocks

TAIL, PENDING, EDGES = 0, 1, 2  # the counters: tasks enqueued, tasks not finished, then each hop's edges
_ONE = np.uint64(1)
_LOW6 = np.uint64(63)
_SIX = np.uint64(6)


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
def _push(u, h, num_vertices, hops, tasks, counters, seen):
    """Enqueue (u, h) unless it was enqueued before."""
    bit = np.uint64(h) * np.uint64(num_vertices) + np.uint64(u)
    mask = _ONE << (bit & _LOW6)
    word = bit >> _SIX
    if seen[word] & mask:
        return
    seen[word] |= mask
    counters[PENDING] += _ONE
    slot = counters[TAIL]
    counters[TAIL] = slot + _ONE
    tasks[slot] = u * hops + h


@cpu_kernel()
def _sample_cpu(indptr, indices, cdf, weights, weighted, replace, num_vertices, key, batch, hops, stop, fanouts,
                capacity, tasks, counters, seen, edge_base, edge_dst, edge_id, race):
    t = 0
    while t < capacity and tasks[t] >= 0:  # in order, slot t is filled exactly when t < tail
        v = tasks[t] // hops
        h = tasks[t] % hops
        if h < stop:
            a = indptr[v]
            d = indptr[v + 1] - a
            f = fanouts[h]
            every = f < 0 or (not replace and not weighted and f >= d)
            k = 0 if d == 0 else d if every else f if replace else min(f, d)
            if k > 0 and replace and weighted and not cdf[a + d - 1] > 0.0:
                k = 0
            o = edge_base[h] + np.int64(counters[EDGES + h])
            counters[EDGES + h] += np.uint64(k)
            stream = np.uint64(batch) * np.uint64(num_vertices) + np.uint64(v)
            if every:
                for i in range(k):
                    edge_id[o + i] = a + i
            elif replace:
                for i in range(k):
                    edge_id[o + i] = pick_edge(cdf, weighted, a, d, _rng.bits(key, stream, h, i))
            elif weighted:
                for i in range(race_segment(weights, a, d, k, key, stream, h, edge_id, race, o), k):
                    edge_id[o + i] = -1
            else:
                _floyd(a, d, k, key, stream, h, edge_id, o)
            for i in range(k):
                edge_dst[o + i] = v
            if h + 1 < hops:
                _push(v, h + 1, num_vertices, hops, tasks, counters, seen)
                for i in range(k):
                    if edge_id[o + i] >= 0:
                        _push(np.int64(indices[edge_id[o + i]]), h + 1, num_vertices, hops, tasks, counters, seen)
        counters[PENDING] -= _ONE
        t += 1


SAMPLE = Kernel("gnn.cu", "gp_gnn_sample", twin=_sample_cpu, items="capacity", queued=True,
                defines={"GP_GNN_TAIL": TAIL, "GP_GNN_PENDING": PENDING, "GP_GNN_EDGES": EDGES}, args=(
    Arg("indptr", "i64[]"), Arg("indices", "IdT[]"), Arg("cdf", "f64[]", note="per-vertex weight prefix sums"),
    Arg("weights", "f32[]"), Arg("weighted", "i32"), Arg("replace", "i32"), Arg("num_vertices", "i64"),
    Arg("key", "u64"), Arg("batch", "i64"), Arg("hops", "i32"),
    Arg("stop", "i32", note="tasks of later hops are only recorded"), Arg("fanouts", "i64[hops]"), Arg("capacity", "i64"),
    Arg("tasks", "i64[capacity]", out=True, note="vertex * hops + hop; -1 empty"),
    Arg("counters", "u64[2+hops]", out=True, note="TAIL, PENDING, EDGES + hop"),
    Arg("seen", "u64[]", out=True, note="a bit per (hop, vertex)"), Arg("edge_base", "i64[hops]"),
    Arg("edge_dst", "i64[]", out=True), Arg("edge_id", "i64[]", out=True, note="-1 unused"),
    Arg("race", "f64[]", out=True, note="weighted races")))


def sample(local, seeds, fanouts: list[int], *, replace: bool, weighted: bool, key, batch: int, fused: bool,
           features=None) -> Blocks:
    """The blocks of ``seeds`` (distinct dense ids on the device of ``local``, a :class:`LocalGraph`) drawn with
    ``key`` as batch ``batch``; with ``features``, their rows of the sampled vertices (rows are dense ids)."""
    csr = local.part
    x = xp(device_of(csr.indptr))
    n, hops, size = csr.hi, len(fanouts), int(seeds.shape[0])
    capacity, edge_caps = _capacity(size, fanouts, n, csr.num_edges, local.max_degree, replace)
    edge_base = np.zeros(hops, np.int64)
    edge_base[1:] = np.cumsum(edge_caps)[:-1]
    total = int(sum(edge_caps))
    races = weighted and not replace
    args = dict(indptr=csr.indptr, indices=csr.indices,
                cdf=csr.cdf() if weighted and replace else x.zeros(1, x.float64),
                weights=csr.weights if weighted else x.zeros(1, x.float32), weighted=weighted, replace=replace,
                num_vertices=n, key=key, batch=batch, hops=hops, fanouts=x.asarray(fanouts, dtype=x.int64),
                capacity=capacity, seen=x.zeros((n * hops + 63) // 64, x.uint64), edge_base=x.asarray(edge_base),
                edge_dst=x.empty(total, x.int64), edge_id=x.empty(total, x.int64),
                race=x.empty(total if races else 1, x.float64))

    def run(frontier, hop: int, stop: int):
        """One launch from ``frontier`` at ``hop``; each hop's edge count, and the tasks it enqueued."""
        tasks = x.full(capacity, -1, x.int64)
        tasks[:frontier.shape[0]] = frontier * hops + hop
        counters = np.zeros(EDGES + hops, np.uint64)
        counters[TAIL] = counters[PENDING] = frontier.shape[0]
        args["counters"] = x.asarray(counters)
        SAMPLE.launch(**args, tasks=tasks, stop=stop)
        counters = to_host(args["counters"]).astype(np.int64)
        return counters[EDGES:], tasks[frontier.shape[0]:counters[TAIL]] // hops

    if fused:
        counts = run(seeds, 0, hops)[0]
    else:  # bulk-synchronous: a barrier per hop, whose recorded next-hop tasks are the next frontier (deduplicated)
        counts, frontier = np.zeros(hops, np.int64), seeds
        for h in range(hops):
            hop_counts, frontier = run(frontier, h, h + 1)
            counts[h] = hop_counts[h]
    dsts, eids = [], []
    for h in range(hops):
        a = int(edge_base[h])
        dst, eid = args["edge_dst"][a:a + counts[h]], args["edge_id"][a:a + counts[h]]
        if races:
            kept = eid >= 0
            dst, eid = dst[kept], eid[kept]
        dsts.append(dst)
        eids.append(eid)
    ends = np.cumsum([e.shape[0] for e in eids])
    cuts = [slice(int(a), int(b)) for a, b in zip(np.concatenate([[0], ends[:-1]]), ends)]
    dst, eid = x.concatenate(dsts), x.concatenate(eids)
    nodes, counted, src_local, dst_local = _relabel(x, n, seeds, cuts, csr.indices[eid].astype(x.int64), dst)
    hop = x.concatenate([x.full(c.stop - c.start, h, x.int64) for h, c in enumerate(cuts)])
    # by hop, then destination; a destination's edges stay in draw order (one task wrote them, in order)
    order = x.argsort(hop * counted[-1] + dst_local, kind="stable")
    blocks = tuple(Block(src_local[order[c]], dst_local[order[c]], eid[order[c]], counted[h + 1], counted[h])
                   for h, c in enumerate(cuts))
    ids = local.id_map
    return Blocks(input_nodes=nodes if ids is None else ids[nodes], output_nodes=seeds if ids is None else ids[seeds],
                  blocks=blocks[::-1], num_sampled_nodes=tuple([size] + [b - a for a, b in zip(counted, counted[1:])]),
                  num_sampled_edges=tuple(int(c.stop - c.start) for c in cuts),
                  features=None if features is None else features[nodes])


def _relabel(x, n: int, seeds, cuts: list[slice], src, dst):
    """Local ids for every hop at once: the seeds, then the vertices hop 0 found (by id), then hop 1's, ...

    A vertex's first hop is the hop that first picked it (0 for the seeds); sorting the sources by (first hop,
    id) orders the new vertices of every layer in one pass. ``cuts`` are each hop's edges. Returns the nodes,
    the node count of each layer (seeds, after hop 0, ...), and the local ids of the edges' ends.
    """
    hops = len(cuts)
    first = x.empty(n, x.int64)
    for h in range(hops - 1, -1, -1):  # the earliest hop writes last
        first[src[cuts[h]]] = h + 1
    first[seeds] = 0
    keys = x.unique(first[src] * n + src)
    keys = keys[keys >= n]  # not the seeds
    nodes = x.concatenate([seeds, keys % n])
    counted = np.cumsum(np.concatenate([[seeds.shape[0]], to_host(x.bincount(keys // n, minlength=hops + 1))[1:]]))
    local = x.empty(n, x.int64)
    local[nodes] = x.arange(nodes.shape[0], dtype=x.int64)
    return nodes, [int(c) for c in counted], local[src], local[dst]


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
