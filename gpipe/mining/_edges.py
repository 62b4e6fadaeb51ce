"""Edge extension of edge-oriented embedding tables and the raw pattern code of each embedding
(``kernels/fpm.cu`` and their CPU twins).

An edge is named by its CSR slot in its lower endpoint's list, so edge ids
order edges by (lower, higher) endpoint. An embedding is a row of edge ids in
its canonical order (Arabesque's): the least edge first, then each time the
least edge adjacent to those before it. Extending a canonical row only by
edges that keep it canonical finds every connected edge set once.
"""

from __future__ import annotations

import numpy as np

from .._search import lower_bound
from ..backend import cpu_kernel, prange
from ..kernels import Arg, Kernel
from ._extend import _batches, _room, compress
from ._patterns import _ADJACENCY_SHIFT, _COUNT_SHIFT, LABEL_BITS, MAX_EDGES, MAX_VERTICES, _label_shift, pair


@cpu_kernel()
def _source(indptr, num_vertices, e):
    """The vertex whose CSR list holds slot ``e``."""
    lo, hi = 0, num_vertices - 1
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if indptr[mid + 1] <= e:
            lo = mid + 1
        else:
            hi = mid
    return lo


@cpu_kernel(parallel=True)
def _edge_extension_cpu(n, width, num_vertices, indptr, indices, prefix, offset, out, count):
    for i in prange(n):
        row = prefix[i * width:(i + 1) * width]
        ends = np.empty(2 * MAX_EDGES, np.int64)
        verts = np.empty(MAX_VERTICES, np.int64)
        nv = 0
        for j in range(width):
            ends[2 * j] = _source(indptr, num_vertices, row[j])
            ends[2 * j + 1] = indices[row[j]]
            for t in range(2):
                seen = False
                for a in range(nv):
                    seen = seen or verts[a] == ends[2 * j + t]
                if not seen:
                    verts[nv] = ends[2 * j + t]
                    nv += 1
        o, c = offset[i], 0
        for p in range(nv):
            v = verts[p]
            for s in range(indptr[v], indptr[v + 1]):
                w = indices[s]
                q = nv
                for a in range(nv):
                    if verts[a] == w:
                        q = a
                if w == v or q < p:  # an edge between two of the embedding's vertices is met from the first
                    continue
                e = s if v < w else lower_bound(indices, indptr[w], indptr[w + 1] - indptr[w], v)  # v is there
                keep = e > row[0]
                available = width  # the first edge of the row that e touches: from then on e was a candidate
                for j in range(width):
                    keep = keep and row[j] != e
                    touches = ends[2 * j] == v or ends[2 * j + 1] == v or ends[2 * j] == w or ends[2 * j + 1] == w
                    if available == width and touches:
                        available = j
                for j in range(available + 1, width):
                    keep = keep and row[j] < e
                if keep:
                    out[o + c] = e
                    c += 1
        count[i] = c


EDGE_EXTENSION = Kernel(
    "fpm.cu", "gp_edge_extension", twin=_edge_extension_cpu, items="n",
    defines={"GP_FPM_MAX_EDGES": MAX_EDGES, "GP_FPM_LABEL_BITS": LABEL_BITS}, args=(
        Arg("n", "i64", note="embeddings of the batch"), Arg("width", "i32", note="edges per embedding"),
        Arg("num_vertices", "i64"), Arg("indptr", "i64[]"), Arg("indices", "IdT[]", note="sorted per vertex"),
        Arg("prefix", "i64[n*width]", note="edge ids (lower endpoint's slots), a canonical row per embedding"),
        Arg("offset", "i64[n]", note="slots"), Arg("out", "i64[]", out=True, note="edge ids"),
        Arg("count", "i64[n]", out=True)))


@cpu_kernel(parallel=True)
def _pattern_code_cpu(n, width, num_vertices, indptr, indices, label, edges, code, vertices):
    for i in prange(n):
        base = i * (width + 1)
        nv = 0
        adjacency = np.int64(0)
        ends, ab = np.empty(2, np.int64), np.empty(2, np.int64)
        for j in range(width):
            e = edges[i * width + j]
            ends[0], ends[1] = _source(indptr, num_vertices, e), indices[e]
            for t in range(2):
                ab[t] = nv
                for a in range(nv):
                    if vertices[base + a] == ends[t]:
                        ab[t] = a
                if ab[t] == nv:
                    vertices[base + nv] = ends[t]
                    nv += 1
            lo, hi = min(ab[0], ab[1]), max(ab[0], ab[1])
            adjacency |= np.int64(1) << pair(lo, hi)
        packed = (np.int64(nv) << _COUNT_SHIFT) | (adjacency << _ADJACENCY_SHIFT)
        for a in range(nv):
            packed |= np.int64(label[vertices[base + a]]) << _label_shift(a)
        for a in range(nv, width + 1):
            vertices[base + a] = -1
        code[i] = packed


PATTERN_CODE = Kernel(
    "fpm.cu", "gp_pattern_code", twin=_pattern_code_cpu, items="n",
    defines={"GP_FPM_MAX_EDGES": MAX_EDGES, "GP_FPM_LABEL_BITS": LABEL_BITS}, args=(
        Arg("n", "i64", note="embeddings"), Arg("width", "i32", note="edges per embedding"),
        Arg("num_vertices", "i64"), Arg("indptr", "i64[]"), Arg("indices", "IdT[]"),
        Arg("label", "i32[]", note="each vertex's label rank"), Arg("edges", "i64[n*width]", note="a row each"),
        Arg("code", "i64[n]", out=True, note="raw pattern code (gpipe/mining/_patterns.py)"),
        Arg("vertices", "IdT[n*(width+1)]", out=True, note="in order of appearance, -1 past the last")))


def first_edges(x, graph, lo: int, hi: int):
    """The ids of the edges whose lower endpoint is in ``[lo, hi)``, ascending."""
    slots = x.arange(int(graph.indptr[lo]), int(graph.indptr[hi]), dtype=x.int64)
    source = x.searchsorted(graph.indptr, slots, side="right") - 1
    return slots[graph.indices[slots] > source]


def extend_edges(x, graph, rows, capacity: int, timer):
    """The next column of an edge table's chunk, given its embeddings as ``rows`` of edge ids, in batches of at
    most ``capacity`` candidate slots: the new edge ids and their parents (rows)."""
    num_vertices = graph.indptr.shape[0] - 1
    source = x.searchsorted(graph.indptr, rows, side="right") - 1
    degree = graph.indptr[1:] - graph.indptr[:-1]
    bound = (degree[source] + degree[graph.indices[rows]]).sum(axis=1)  # each vertex's list, at least once
    prefix = x.ascontiguousarray(rows).reshape(-1)
    width = rows.shape[1]
    for first, last in _batches(bound, capacity):
        with timer("extension"):
            owner, position, offset, out, count = _room(x, bound[first:last], x.int64)
            EDGE_EXTENSION.launch(n=last - first, width=width, num_vertices=num_vertices, indptr=graph.indptr,
                                  indices=graph.indices, prefix=prefix[first * width:last * width], offset=offset,
                                  out=out, count=count)
        with timer("compression"):
            kept = compress(x, out, owner + first, position < count[owner])
        yield kept  # outside the timer: the caller's aggregation is timed as its own


def pattern_codes(x, graph, label, rows) -> tuple:
    """Each row's raw pattern code and its vertices in order of appearance (-1 past the pattern's)."""
    n, width = rows.shape
    code = x.empty(n, dtype=x.int64)
    vertices = x.empty((n, width + 1), dtype=graph.indices.dtype)
    PATTERN_CODE.launch(n=n, width=width, num_vertices=graph.indptr.shape[0] - 1, indptr=graph.indptr,
                        indices=graph.indices, label=label, edges=x.ascontiguousarray(rows).reshape(-1), code=code,
                        vertices=vertices.reshape(-1))
    return code, vertices
