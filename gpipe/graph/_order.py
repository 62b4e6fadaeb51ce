"""Vertex orders that keep arcs inside partitions (the builders' ``vertex_order``), and the arcs a cut crosses.

A partition owns a contiguous range of dense ids, so a walker leaves its partition when a step's ends lie in
different ranges. An order computed from the graph alone renumbers the dense ids before the ranges are cut: the
order is the same for any number of workers and partitions, and so are the results.
"""

from __future__ import annotations

import numpy as np

from ..backend import cpu_kernel, device_of, scatter_min, segments, to_host, unique, xp
from ..runtime.workers import partition, worker_xp
from ._build import balanced_bounds, bucket_width, csr

# METIS cuts the graph by recursive bisection into this many parts of about equal arcs, laid out part after part:
# any 2, 4, 8 ... of the builders' edge-balanced ranges then end where bisections did.
METIS_PARTS = 64


def order_of(kind: str, n: int, directed: bool, *chunks: dict) -> np.ndarray:
    """The vertex order ``kind`` ('rcmk' or 'metis') of the graph of the dense-id edge ``chunks``, on the host: the
    old dense id of each new one. It sees the arcs both ways and no self-loops, once each, so it depends on the
    graph alone, not on how its edges were chunked."""
    x = worker_xp()
    pieces = []
    for chunk in chunks:
        src, dst = x.asarray(chunk["src"]), x.asarray(chunk["dst"])
        loops = src == dst
        if bool(loops.any()):  # kept by keep_self_loops: copied without them (else the chunk is not copied)
            src, dst = src[~loops], dst[~loops]
        pieces.append({"src": src, "dst": dst})
        if directed:
            pieces.append({"src": dst, "dst": src})
    indptr, indices, _, _ = csr(x, pieces, lo=0, hi=n, n=n, keep_duplicates=False, index_dtype=x.int64)
    del pieces
    if kind == "metis":
        return _metis(to_host(indptr), to_host(indices))
    return to_host(reverse_cuthill_mckee(x, indptr, indices))


def ranks(order: np.ndarray) -> np.ndarray:
    """The new dense id of each old one: the inverse of ``order``, on this worker's device."""
    x = worker_xp()
    rank = x.empty(order.shape[0], x.int64)
    rank[x.asarray(order)] = x.arange(order.shape[0], dtype=x.int64)
    return rank


def relabel(chunk: dict, rank) -> dict:
    """The prepared ``chunk`` with its ends in the new dense ids (``rank``, from :func:`ranks`)."""
    x = worker_xp()
    rank = x.asarray(rank)
    return {**chunk, "src": rank[x.asarray(chunk["src"])], "dst": rank[x.asarray(chunk["dst"])]}


def reverse_cuthill_mckee(x, indptr, indices):
    """Reverse Cuthill-McKee of a symmetric CSR (arrays of ``x``): each component breadth first from its vertex of
    least degree, the vertices a vertex reaches first in increasing degree, components in order of their first
    vertex, the whole reversed; ties of degree by id. A breadth-first order keeps a vertex's arcs within a few
    levels of it. numba on the host; a level at a time on a GPU (the same order)."""
    n = indptr.shape[0] - 1
    by_key = x.argsort((indptr[1:] - indptr[:-1]) * n + x.arange(n, dtype=x.int64))  # by (degree, id)
    key = x.empty(n, x.int64)
    key[by_key] = x.arange(n, dtype=x.int64)
    if x is np:
        order = np.empty(n, np.int64)
        _cuthill_mckee_cpu(indptr, indices, by_key, key, order)
    else:
        order = cuthill_mckee_levels(x, indptr, indices, by_key, key)
    return order[::-1].copy()


@cpu_kernel()
def _cuthill_mckee_cpu(indptr, indices, by_key, key, order):
    seen = np.zeros(by_key.shape[0], np.bool_)
    tail = 0
    for root in by_key:
        if seen[root]:
            continue
        seen[root] = True
        order[tail] = root
        head, tail = tail, tail + 1
        while head < tail:
            v = order[head]
            head += 1
            first = tail
            for e in range(indptr[v], indptr[v + 1]):
                w = indices[e]
                if not seen[w]:
                    seen[w] = True
                    order[tail] = w
                    tail += 1
            if tail - first > 1:
                reached = order[first:tail].copy()
                order[first:tail] = reached[np.argsort(key[reached])]


def cuthill_mckee_levels(x, indptr, indices, by_key, key):
    """Cuthill-McKee a breadth-first level at a time, every component at once (the GPU's way; numpy gives the same
    order as the numba twin). A vertex of level d + 1 is placed by (the position of its first-placed neighbor in
    level d, its key), which is where the one-vertex-at-a-time queue puts it; the order is by (component's least
    key, level, that position)."""
    n = indptr.shape[0] - 1
    low = _least_keys(x, indptr, indices, by_key, key)
    level = x.full(n, -1, x.int64)
    place = x.zeros(n, x.int64)
    frontier = by_key[unique(x, low)]  # each component's vertex of least key, in key order
    first = x.full(n, n, x.int64)  # a vertex's first-placed neighbor in the level before its own
    depth = 0
    while frontier.shape[0]:
        level[frontier] = depth
        place[frontier] = x.arange(frontier.shape[0], dtype=x.int64)
        parent, offset = segments(x, indptr[frontier + 1] - indptr[frontier])
        reached = indices[indptr[frontier][parent] + offset]
        new = level[reached] < 0
        reached, parent = reached[new], parent[new]
        scatter_min(x, first, reached, parent)
        reached = unique(x, reached)
        frontier = reached[x.argsort(first[reached] * n + key[reached])]
        depth += 1
    return x.lexsort(x.stack([place, level, low]))


def _least_keys(x, indptr, indices, by_key, key):
    """Each vertex's component, named by its least key: the keys spread over the arcs, a vertex jumping to the
    label of the vertex its label names until that changes nothing."""
    rows = segments(x, indptr[1:] - indptr[:-1])[0]
    low = key.copy()
    while True:
        before = low.copy()
        scatter_min(x, low, rows, low[indices])
        jumped = low[by_key[low]]
        while not bool((jumped == low).all()):
            low, jumped = jumped, jumped[by_key[jumped]]
        if bool((low == before).all()):
            return low


def _metis(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """METIS's recursive bisection into :data:`METIS_PARTS` parts of about equal degree, its parts one after the
    other, each in dense-id order."""
    import pymetis  # checked where the user asked for it (gpipe._validate.check_vertex_order)

    n = indptr.shape[0] - 1
    parts = min(METIS_PARTS, n)
    if parts < 2 or indices.shape[0] == 0:
        return np.arange(n, dtype=np.int64)
    weights = np.maximum(indptr[1:] - indptr[:-1], 1)  # METIS wants each vertex's weight positive
    _, membership = pymetis.part_graph(parts, pymetis.CSRAdjacency(indptr, indices), vweights=weights,
                                       recursive=True)
    return np.argsort(np.asarray(membership), kind="stable").astype(np.int64)


def crossing_fractions(g, parts: int) -> tuple[float, float]:
    """``g`` cut as the builders would cut it into ``parts`` ranges of its dense ids, edge-balanced over its stored
    degrees: the fraction of its arcs whose ends lie in different ranges (the chance that a uniform step from a
    uniformly drawn arc leaves its partition), and the mean, over the vertices with arcs, of the fraction of each
    one's arcs that do (a uniform step from a uniformly drawn vertex)."""
    degrees = g.degrees().to_numpy()
    n = g.num_vertices
    bounds = balanced_bounds(np.bincount(np.arange(n) // bucket_width(n), weights=degrees).astype(np.int64), n,
                             parts)
    crossing, arcs, shares, vertices = np.sum(g._on_partitions("graph crossings", _crossings, bounds), axis=0)
    return float(crossing / max(arcs, 1)), float(shares / max(vertices, 1))


def _crossings(graph_id: str, part: int, bounds: np.ndarray) -> tuple[int, int, float, int]:
    """Of partition ``part``'s arcs, those whose ends ``bounds`` put in different ranges; all of them; the sum over its
    vertices with arcs of the fraction that do; those vertices."""
    p = partition(graph_id, part)
    x = xp(device_of(p.indptr))
    degrees = p.indptr[1:] - p.indptr[:-1]
    rows = segments(x, degrees)[0]
    cuts = x.asarray(bounds[1:-1])
    crossing = (x.searchsorted(cuts, rows + p.lo, side="right")
                != x.searchsorted(cuts, p.indices.astype(x.int64), side="right"))
    per_vertex = x.bincount(rows, weights=crossing, minlength=p.hi - p.lo)
    has = degrees > 0
    return (int(crossing.sum()), int(p.num_edges), float((per_vertex[has] / degrees[has]).sum()),
            int(has.sum()))
