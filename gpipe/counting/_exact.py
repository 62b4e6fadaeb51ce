"""Exact subgraph counts: backtracking over the candidate graph, its root candidates spread over the workers."""

from __future__ import annotations

import time

import numpy as np

from ..backend import cpu_kernel, prange
from ..graph import check_graph
from ..runtime.calls import spread
from ._candidates import candidates
from ._common import extends, local_candidates
from ._inputs import Query, check_query


class Count(int):
    """An exact count: an ``int``, with ``stats`` as every result of gpipe has (the whole call's ``seconds``, the
    root candidates it split over the workers)."""

    stats: dict

    def __new__(cls, value: int, stats: dict):
        count = super().__new__(cls, value)
        count.stats = stats
        return count

    def __reduce__(self):
        return Count, (int(self), self.stats)


def count_exact(g, query: Query) -> Count:
    """The number of embeddings of ``query`` in the labeled graph ``g``.

    Embeddings are subgraph isomorphisms in the sense of the subgraph-matching
    literature (non-induced): injective maps of the query's vertices to data
    vertices with the same label under which every query edge is a data edge.
    Automorphic images count separately. Backtracking over the candidate graph
    (:func:`candidates`) in its matching order, the root candidates split over
    the graph's workers (numba on their CPU threads).

    Parameters
    ----------
    g : Graph
        An undirected graph with vertex labels. A multigraph
        (``keep_duplicates=True``) is counted as the simple graph
        underneath: an edge repeated is one edge and a self-loop is no part
        of any embedding.
    query : Query
        The query graph.

    Returns
    -------
    Count
        The count, an ``int``; its ``stats`` say how long the call took.

    Raises
    ------
    GpipeValueError
        ``g`` is directed or has no labels, or ``query`` is not a
        :class:`Query`, is larger than ``g`` or has a label no vertex of ``g``
        has.

    Examples
    --------
    A star of three leaves labeled 1 around a center labeled 0 holds the
    query's two-leaf star in 3 x 2 ways, its leaves' images taken in order:

    >>> import gpipe, pandas as pd
    >>> star = pd.DataFrame({"src": [0, 0, 0], "dst": [1, 2, 3]})
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(star)
    ...     g.set_labels([0, 1, 1, 1])
    ...     gpipe.counting.count_exact(g, gpipe.counting.Query.from_edges([(0, 1), (0, 2)], [0, 1, 1]))
    6
    """
    check_graph("g", g)
    t0 = time.perf_counter()
    cg = candidates(g, check_query(query))
    roots = 0 if cg.empty else int(cg.cand_offsets[1])
    count = int(sum(spread(g, "counting", _count_roots, roots, cg.arrays()))) if roots else 0
    return Count(count, {"algorithm": "count_exact", "roots": roots, "seconds": time.perf_counter() - t0})


def _count_roots(start: int, count: int, arrays: dict) -> int:
    """Embeddings whose first position takes root candidates ``start .. start+count-1`` (on a worker)."""
    out = np.zeros(count, np.int64)
    _count_cpu(**arrays, start=start, count=count, out=out)
    return int(out.sum())


@cpu_kernel(parallel=True)
def _count_cpu(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows, edge_indptr, edge_indices, start,
               count, out):
    k = cand_offsets.shape[0] - 1
    for i in prange(count):
        match = np.zeros(k, np.int64)
        matched = np.zeros(k, np.int64)
        cursor = np.zeros(k, np.int64)
        end = np.zeros(k, np.int64)
        match[0] = start + i
        matched[0] = cand_vertices[start + i]
        if k == 1:
            out[i] = 1
            continue
        found = 0
        d = 1
        cursor[1], end[1] = local_candidates(back_offsets, back_pos, back_rows, edge_indptr, 1, match)
        while d > 0:
            if cursor[d] == end[d]:
                d -= 1
                continue
            c = edge_indices[cursor[d]]
            cursor[d] += 1
            if not extends(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows, edge_indptr,
                           edge_indices, d, c, match, matched):
                continue
            if d == k - 1:
                found += 1
                continue
            match[d] = c
            matched[d] = cand_vertices[cand_offsets[d] + c]
            d += 1
            cursor[d], end[d] = local_candidates(back_offsets, back_pos, back_rows, edge_indptr, d, match)
        out[i] = found
