"""GAMMA's primitives on one chunk of an embedding table: extension (``kernels/mining.cu`` and its CPU twin),
filtering and compression (mark, prefix-scan, gather), in batches whose output fits a chunk."""

from __future__ import annotations

import numpy as np

from .._csr import Rows, simple_rows
from .._search import has_edge, lower_bound
from ..backend import cpu_kernel, device_of, prange, segments, to_host, xp
from ..kernels import Arg, Kernel
from ..runtime.workers import replica, worker_device, worker_xp


@cpu_kernel()
def _sibling_merge(e, indptr, indices, vertex, group_end, out, o, write):
    """Embedding ``e``'s extensions, the siblings after it that are neighbors of its vertex (into ``out[o:]`` with
    ``write``); how many."""
    a, a_end = e + 1, group_end[e]
    b, b_end = indptr[vertex[e]], indptr[vertex[e] + 1]
    if a < a_end:
        lo, hi = b, b_end
        while lo < hi:
            mid = lo + (hi - lo) // 2
            if indices[mid] < vertex[a]:
                lo = mid + 1
            else:
                hi = mid
        b = lo
    c = 0
    while a < a_end and b < b_end:
        s, t = vertex[a], indices[b]
        if s < t:
            a += 1
        elif t < s:
            b += 1
        else:
            if write:
                out[o + c] = s
            c += 1
            a += 1
            b += 1
    return c


@cpu_kernel(parallel=True)
def _vertex_extension_cpu(n, first, indptr, indices, vertex, group_end, offset, out, count):
    for i in prange(n):
        count[i] = _sibling_merge(first + i, indptr, indices, vertex, group_end, out, offset[i], True)


@cpu_kernel(parallel=True)
def _vertex_count_cpu(n, indptr, indices, vertex, group_end, count):
    for i in prange(n):
        count[i] = _sibling_merge(i, indptr, indices, vertex, group_end, vertex, 0, False)


VERTEX_EXTENSION = Kernel("mining.cu", "gp_vertex_extension", twin=_vertex_extension_cpu, items="n", args=(
    Arg("n", "i64", note="embeddings of the batch"), Arg("first", "i64", note="the batch's first embedding"),
    Arg("indptr", "i64[]"), Arg("indices", "IdT[]", note="sorted per vertex"),
    Arg("vertex", "IdT[]", note="the chunk's last column; siblings ascending"),
    Arg("group_end", "i64[]", note="end of each embedding's siblings"), Arg("offset", "i64[n]", note="slots"),
    Arg("out", "IdT[]", out=True), Arg("count", "i64[n]", out=True)))
VERTEX_COUNT = Kernel("mining.cu", "gp_vertex_count", twin=_vertex_count_cpu, items="n", args=(
    Arg("n", "i64", note="embeddings of the chunk"), Arg("indptr", "i64[]"),
    Arg("indices", "IdT[]", note="sorted per vertex"),
    Arg("vertex", "IdT[n]", note="the chunk's last column; siblings ascending"),
    Arg("group_end", "i64[n]", note="end of each embedding's siblings"),
    Arg("count", "i64[n]", out=True, note="each embedding's extensions")))


@cpu_kernel()
def _leaf_matches(row, width, w, indptr, indices, leaf, nleaf_above, leaf_above):
    """The matches of a count's last pattern vertex when it is a leaf: the neighbors of the vertex at position
    ``leaf`` of ``row`` extended by ``w`` (``width``: ``w``) above the vertices at ``leaf_above`` and not matched
    already, by binary searches, no list walked."""
    t = w if leaf == width else row[leaf]
    low = -1
    for a in range(nleaf_above):
        low = max(low, np.int64(w if leaf_above[a] == width else row[leaf_above[a]]))
    a0, d = indptr[t], indptr[t + 1] - indptr[t]
    c = a0 + d - lower_bound(indices, a0, d, low + 1)
    for j in range(width + 1):
        m = row[j] if j < width else w
        if m > low and has_edge(indices, a0, d, m):
            c -= 1
    return c


@cpu_kernel()
def _match_candidates(row, width, indptr, indices, nback, back, napart, apart, nabove, above, min_degree, leaf,
                      nleaf_above, leaf_above, out, o, write):
    """The extensions of the embedding ``row`` (into ``out[o:]`` with ``write``); how many, or with ``leaf`` >= 0
    the sum of their leaf matches. A count whose pattern has symmetries keeps one map of each copy: the new vertex
    above the vertices at ``above``."""
    least = back[0]
    for b in range(1, nback):
        v, u = row[back[b]], row[least]
        if indptr[v + 1] - indptr[v] < indptr[u + 1] - indptr[u]:
            least = back[b]
    c = 0
    for e in range(indptr[row[least]], indptr[row[least] + 1]):
        w = indices[e]
        keep = indptr[w + 1] - indptr[w] >= min_degree
        for a in range(nabove):
            keep = keep and w > row[above[a]]
        for j in range(width):
            keep = keep and row[j] != w
        for b in range(nback):
            t = row[back[b]]
            keep = keep and (back[b] == least or has_edge(indices, indptr[t], indptr[t + 1] - indptr[t], w))
        for a in range(napart):
            t = row[apart[a]]
            keep = keep and not has_edge(indices, indptr[t], indptr[t + 1] - indptr[t], w)
        if keep:
            if write:
                out[o + c] = w
            c += 1 if leaf < 0 else _leaf_matches(row, width, w, indptr, indices, leaf, nleaf_above, leaf_above)
    return c


@cpu_kernel(parallel=True)
def _match_extension_cpu(n, width, indptr, indices, prefix, nback, back, napart, apart, nabove, above, min_degree,
                         offset, out, count):
    for i in prange(n):
        count[i] = _match_candidates(prefix[i * width:(i + 1) * width], width, indptr, indices, nback, back, napart,
                                     apart, nabove, above, min_degree, -1, 0, above, out, offset[i], True)


@cpu_kernel(parallel=True)
def _match_count_cpu(n, width, indptr, indices, prefix, nback, back, napart, apart, nabove, above, min_degree, leaf,
                     nleaf_above, leaf_above, count):
    for i in prange(n):
        count[i] = _match_candidates(prefix[i * width:(i + 1) * width], width, indptr, indices, nback, back, napart,
                                     apart, nabove, above, min_degree, leaf, nleaf_above, leaf_above, prefix, 0,
                                     False)


MATCH_EXTENSION = Kernel("mining.cu", "gp_match_extension", twin=_match_extension_cpu, items="n", lanes=32, args=(
    Arg("n", "i64", note="embeddings of the batch"), Arg("width", "i32", note="pattern vertices matched"),
    Arg("indptr", "i64[]"), Arg("indices", "IdT[]", note="sorted per vertex"),
    Arg("prefix", "IdT[n*width]", note="the matched vertices, a row per embedding"), Arg("nback", "i32"),
    Arg("back", "i32[nback]", note="the next vertex's pattern neighbors"), Arg("napart", "i32"),
    Arg("apart", "i32[napart]", note="induced: its non-neighbors"), Arg("nabove", "i32"),
    Arg("above", "i32[nabove]", note="a count's symmetry breaking: the positions it must exceed"),
    Arg("min_degree", "i64"),
    Arg("offset", "i64[n]", note="slots"), Arg("out", "IdT[]", out=True), Arg("count", "i64[n]", out=True)))
MATCH_COUNT = Kernel("mining.cu", "gp_match_count", twin=_match_count_cpu, items="n", lanes=32, args=(
    *MATCH_EXTENSION.args[:12],
    Arg("leaf", "i32", note="-1, or the last pattern vertex is a leaf: its neighbor's position (width: the new one)"),
    Arg("nleaf_above", "i32"), Arg("leaf_above", "i32[nleaf_above]", note="the positions the leaf must exceed"),
    Arg("count", "i64[n]", out=True, note="each embedding's extensions, or their leaf matches")))


def extend_cliques(x, graph, vertex, parent, capacity: int, timer, counting: bool = False):
    """The next column of a clique table's chunk (``vertex``, and ``parent`` None at the first column) in batches
    of at most ``capacity`` candidate slots: each yields the new vertices and their parents (indices into
    ``vertex``); with ``counting`` (a count's last column, never stored: not the first), how many there are."""
    assert parent is not None or not counting
    degree = degrees(x, graph, vertex)
    if parent is None:
        group_end, bound = None, degree
    else:
        group_end = x.searchsorted(parent, parent, side="right")  # siblings share a parent, stored together
        if counting:  # no slots: one pass counts every embedding's extensions
            with timer("counting"):
                count = x.empty(vertex.shape[0], x.int64)
                VERTEX_COUNT.launch(n=vertex.shape[0], indptr=graph.indptr, indices=graph.indices, vertex=vertex,
                                    group_end=group_end, count=count)
                found = int(count.sum())
            yield found  # outside the timer: what the caller does with it is not counting
            return
        bound = x.minimum(group_end - x.arange(vertex.shape[0]) - 1, degree)
    for first, last in _batches(bound, capacity):
        with timer("extension"):
            if parent is None:
                slots, owner, mark = _upper_neighbors(x, graph, vertex[first:last], bound[first:last])
            else:
                slots, owner, mark = _vertex_extension(x, graph, vertex, group_end, first, bound[first:last])
        yield _kept(x, slots, owner + first, mark, timer)


def extend_match(x, graph, rows, *, back, apart, min_degree: int, capacity: int, timer, counting: bool = False,
                 above: tuple = (), leaf: tuple | None = None):
    """The next column of a match table's chunk, given its embeddings as ``rows`` (matched vertices, in the
    matching order) and the next pattern vertex's earlier neighbors ``back`` and non-neighbors ``apart`` (for
    induced matches), in batches of at most ``capacity`` slots: new vertices and their parents (rows); with
    ``counting``, how many there are, or with ``leaf`` (the position of the neighbor of a last pattern vertex of
    degree one, ``rows``' width for the new vertex, and the positions that leaf must exceed) how many matches the
    leaf has over all of them. ``above``: the earlier positions whose vertices the new one must exceed (a count's
    symmetry breaking)."""
    columns = list(back)
    checks = {name: x.asarray(np.asarray(a, dtype=np.int32))
              for name, a in (("back", back), ("apart", apart), ("above", above))}
    checks.update({f"n{name}": int(a.shape[0]) for name, a in list(checks.items())})
    if counting:  # no slots: one pass counts every embedding's extensions
        position, leaf_above = (-1, ()) if leaf is None else leaf
        with timer("counting"):
            count = x.empty(rows.shape[0], x.int64)
            MATCH_COUNT.launch(n=rows.shape[0], width=rows.shape[1], indptr=graph.indptr, indices=graph.indices,
                               prefix=x.ascontiguousarray(rows).reshape(-1), **checks, min_degree=min_degree,
                               leaf=position, nleaf_above=len(leaf_above),
                               leaf_above=x.asarray(np.asarray(leaf_above, dtype=np.int32)), count=count)
            found = int(count.sum())
        yield found
        return
    bound = degrees(x, graph, rows[:, columns]).min(axis=1)
    for first, last in _batches(bound, capacity):
        with timer("extension"):
            slots, owner, mark = _match_extension(x, graph, rows[first:last], checks, min_degree, bound[first:last])
        yield _kept(x, slots, owner + first, mark, timer)


def _kept(x, slots, owner, mark, timer):
    """A batch's marked slots, compressed (values, owners)."""
    with timer("compression"):
        return compress(x, slots, owner, mark)


def degrees(x, graph, vertex):
    """The degree of each of ``vertex`` (an array of any shape)."""
    return graph.indptr[vertex.astype(x.int64) + 1] - graph.indptr[vertex]


def _batches(bound, capacity: int):
    """Consecutive ``[first, last)`` embeddings whose bounds add up to at most ``capacity`` (or one embedding)."""
    ends = to_host(bound.cumsum())
    first = 0
    while first < ends.shape[0]:
        last = max(first + 1, int(np.searchsorted(ends, (ends[first - 1] if first else 0) + capacity, "right")))
        yield first, last
        first = last


def _upper_neighbors(x, graph, vertex, degree):
    """A first column's candidates, every neighbor of each vertex, filtered to those above it (cliques are listed
    in increasing ids: each once)."""
    owner, position = segments(x, degree)
    candidates = graph.indices[graph.indptr[vertex][owner] + position]
    return candidates, owner, candidates > vertex[owner]


def _vertex_extension(x, graph, vertex, group_end, first: int, bound):
    """Each embedding's candidates (the kernel), marked valid up to the count it found."""
    owner, position, offset, out, count = _room(x, bound, vertex.dtype)
    VERTEX_EXTENSION.launch(n=bound.shape[0], first=first, indptr=graph.indptr, indices=graph.indices,
                            vertex=vertex, group_end=group_end, offset=offset, out=out, count=count)
    return out, owner, position < count[owner]


def _match_extension(x, graph, rows, checks: dict, min_degree: int, bound):
    """Each embedding's candidates (the kernel; ``checks``: its back, apart and above positions and their counts),
    marked valid up to the count it found."""
    owner, position, offset, out, count = _room(x, bound, rows.dtype)
    MATCH_EXTENSION.launch(n=rows.shape[0], width=rows.shape[1], indptr=graph.indptr, indices=graph.indices,
                           prefix=x.ascontiguousarray(rows).reshape(-1), **checks, min_degree=min_degree,
                           offset=offset, out=out, count=count)
    return out, owner, position < count[owner]


def _room(x, bound, dtype) -> tuple:
    """Slots for ``bound`` results of each embedding: each slot's embedding and place in it, each embedding's
    first slot, the slots, and room for the counts the kernel finds."""
    owner, position = segments(x, bound)
    offset = (x.cumsum(bound) - bound).astype(x.int64)
    return owner, position, offset, x.empty(owner.shape[0], dtype=dtype), x.empty(bound.shape[0], dtype=x.int64)


def compress(x, values, owner, mark):
    """GAMMA's compression: the marked slots (their values and owners) moved together, in order; the prefix
    scan of the marks (``flatnonzero``) gives each kept slot its place."""
    kept = x.flatnonzero(mark)
    return values[kept], owner[kept]


def whole_graph(graph_id: str, degree_ordered: bool = False):
    """On a worker: the replicated graph as mining reads it (:class:`Rows`: each neighbor once), its device and
    array module; with ``degree_ordered``, its degree-ordered orientation (:func:`_degree_ordered`)."""
    x = worker_xp()
    whole = replica(graph_id)
    if degree_ordered:
        return Rows(*whole.kept("mining_degree_ordered", _degree_ordered)), worker_device(), x
    return simple_rows(x, whole.indptr, whole.indices), worker_device(), x


def _degree_ordered(part) -> tuple:
    """The simple graph of ``part`` renumbered by (degree, id), vertex ``r`` the ``r``-th lowest, each edge kept
    once, from its lower end: rows of later neighbors only, sorted. A clique's vertices in increasing id there are
    in increasing degree, so a row holds at most about sqrt(2m) neighbors however large the vertex's degree: a hub
    is reached last, not extended by its whole neighborhood (Chiba and Nishizeki's order). Built once per replica
    and kept with it."""
    x = xp(device_of(part.indptr))
    rows = simple_rows(x, part.indptr, part.indices)
    n = rows.indptr.shape[0] - 1
    degree = rows.indptr[1:] - rows.indptr[:-1]
    rank = x.empty(n, x.int64)
    rank[x.argsort(degree * n + x.arange(n, dtype=x.int64))] = x.arange(n, dtype=x.int64)
    tail, head = rank[segments(x, degree)[0]], rank[rows.indices]
    up = head > tail
    key = x.sort(tail[up] * n + head[up])
    indptr = x.zeros(n + 1, x.int64)
    x.cumsum(x.bincount(key // n, minlength=n), out=indptr[1:])
    return indptr, (key % n).astype(rows.indices.dtype)
