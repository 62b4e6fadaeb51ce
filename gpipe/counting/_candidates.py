"""The candidate graph of a query on a data graph, and the matching order its samples and searches follow."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Graph
from . import _cluster
from ._inputs import Query


@dataclass(frozen=True, eq=False)
class CandidateGraph:
    """Each query vertex's candidate data vertices and the candidate edges between adjacent ones.

    The query's vertices are taken in the matching ``order``: position ``d``
    matches query vertex ``order[d]``. Its candidates are
    ``cand_vertices[cand_offsets[d]:cand_offsets[d + 1]]`` (data vertex ids,
    sorted); a partial match holds, per position, an index into them.

    Position ``d > 0`` has backward neighbors (query neighbors at earlier
    positions) ``back_pos[back_offsets[d]:back_offsets[d + 1]]``, the first one
    its *parent*, whose candidate edges give ``d``'s local candidates. Backward
    neighbor ``t`` comes with a CSR from its candidates to ``d``'s: candidate
    ``c`` of ``back_pos[t]`` is adjacent to ``d``'s candidates
    ``edge_indices[edge_indptr[back_rows[t] + c]:edge_indptr[back_rows[t] + c + 1]]``
    (candidate indices, sorted).

    Candidates pass the label, degree and neighbor-label-frequency filters and
    then keep, for every query neighbor, at least one adjacent candidate (to a
    fixed point), so no embedding is lost.
    """

    order: np.ndarray
    cand_offsets: np.ndarray
    cand_vertices: np.ndarray
    back_offsets: np.ndarray
    back_pos: np.ndarray
    back_rows: np.ndarray
    edge_indptr: np.ndarray
    edge_indices: np.ndarray

    @property
    def num_positions(self) -> int:
        return len(self.order)

    @property
    def counts(self) -> np.ndarray:
        """The number of candidates of each query vertex (by query vertex id, not by position)."""
        out = np.empty(len(self.order), np.int64)
        out[self.order] = np.diff(self.cand_offsets)
        return out

    @property
    def empty(self) -> bool:
        """Whether a query vertex has no candidate: then the query has no embedding."""
        return bool((np.diff(self.cand_offsets) == 0).any())

    @property
    def num_edges(self) -> int:
        """Candidate edges, each once (from the earlier position to the later)."""
        return len(self.edge_indices)

    def arrays(self) -> dict:
        """The arrays the counting kernels read, by their argument names."""
        return {name: getattr(self, name) for name in ("cand_offsets", "cand_vertices", "back_offsets", "back_pos",
                                                       "back_rows", "edge_indptr", "edge_indices")}


def candidates(g: Graph, query: Query) -> CandidateGraph:
    """The candidate graph of ``query`` on the labeled graph ``g``, with its matching order.

    It is built on the worker of ``g``'s first replica when ``g`` is
    replicated; a partitioned graph's partitions are gathered to the client.

    Parameters
    ----------
    g : Graph
        An undirected graph with vertex labels (:func:`read_graph` or
        :meth:`Graph.set_labels`).
    query : Query
        The query graph.

    Returns
    -------
    CandidateGraph
        Its ``counts`` are the candidates per query vertex and its ``order``
        the matching order: the query vertex with the fewest candidates per
        query edge first, then at each position the one with the most query
        edges to the vertices already placed, the fewest candidates breaking ties.

    Raises
    ------
    GpipeValueError
        ``g`` has no labels, or ``query`` has more vertices than ``g`` or a
        label no vertex of ``g`` has.

    Examples
    --------
    >>> import gpipe, pandas as pd
    >>> edges = pd.DataFrame({"src": [0, 1, 2, 2], "dst": [1, 2, 0, 3]})
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges)
    ...     g.set_labels([0, 0, 1, 1])
    ...     c = gpipe.counting.candidates(g, gpipe.counting.Query.from_edges([(0, 1), (1, 2)], [0, 0, 1]))
    ...     c.counts.tolist(), c.order.tolist()
    ([2, 2, 1], [1, 2, 0])
    """
    return _cluster.on_csr(g, build, query.check_against(g), query)


def build(indptr: np.ndarray, indices: np.ndarray, labels: np.ndarray, query: Query) -> CandidateGraph:
    """:func:`candidates` on a data graph's CSR (both directions of each edge) and labels, where they are."""
    n = len(labels)
    degrees = np.diff(indptr)
    rows = np.repeat(np.arange(n), degrees)
    neighbors = query.neighbors()
    masks = _filtered(rows, indices, labels, degrees, query, neighbors)
    changed = True
    while changed:  # drop candidates with no candidate neighbor for some query neighbor, to a fixed point
        changed = False
        for u, mask in enumerate(masks):
            for w in neighbors[u]:
                reaches = np.bincount(rows[masks[w][indices]], minlength=n) > 0
                if (mask & ~reaches).any():
                    mask &= reaches
                    changed = True
    counts = np.array([m.sum() for m in masks])
    order = _order(counts, neighbors)
    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    cand = [np.flatnonzero(masks[u]) for u in order]
    back_pos, back_rows, edge_rows, edge_indices = [], [], [np.zeros(1, np.int64)], []
    back_offsets, rows_so_far, entries_so_far = [0], 0, 0
    for d, u in enumerate(order):
        index_in_d = np.cumsum(masks[u]) - 1  # data vertex -> its index among d's candidates
        edges = []
        for b in sorted(position[w] for w in neighbors[u] if position[w] < d):
            starts, lengths = indptr[cand[b]], degrees[cand[b]]
            flat = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
            row = np.repeat(np.arange(len(cand[b])), lengths)
            keep = masks[u][indices[flat]]
            edges.append((b, np.bincount(row[keep], minlength=len(cand[b])), index_in_d[indices[flat[keep]]]))
        edges.sort(key=lambda e: len(e[2]) / max(len(e[1]), 1))  # the parent: fewest local candidates on average
        for b, row_counts, entries in edges:
            back_pos.append(b)
            back_rows.append(rows_so_far)
            edge_rows.append(entries_so_far + np.cumsum(row_counts))
            edge_indices.append(entries)
            rows_so_far += len(row_counts)
            entries_so_far += len(entries)
        back_offsets.append(len(back_pos))
    return CandidateGraph(
        order=np.asarray(order, np.int64),
        cand_offsets=np.concatenate([[0], np.cumsum([len(c) for c in cand])]).astype(np.int64),
        cand_vertices=np.concatenate(cand).astype(np.int64),
        back_offsets=np.asarray(back_offsets, np.int64),
        back_pos=np.asarray(back_pos, np.int32),
        back_rows=np.asarray(back_rows, np.int64),
        edge_indptr=np.concatenate(edge_rows).astype(np.int64),
        edge_indices=np.concatenate(edge_indices or [np.zeros(0)]).astype(np.int32),
    )


def _filtered(rows, indices, labels, degrees, query: Query, neighbors) -> list[np.ndarray]:
    """Per query vertex, the data vertices with its label, at least its degree and, for each label, at least as
    many neighbors with that label as it has (only the query's labels are counted)."""
    n = len(labels)
    kinds = np.unique(query.labels)
    kind = np.searchsorted(kinds, labels).clip(max=len(kinds) - 1)
    counted = kinds[kind] == labels
    hit = counted[indices]
    per_vertex = np.bincount(rows[hit] * len(kinds) + kind[indices[hit]], minlength=n * len(kinds))
    per_vertex = per_vertex.reshape(n, len(kinds))
    masks = []
    for u, label in enumerate(query.labels):
        need = np.bincount(np.searchsorted(kinds, query.labels[neighbors[u]]), minlength=len(kinds))
        masks.append((labels == label) & (degrees >= len(neighbors[u])) & (per_vertex >= need).all(axis=1))
    return masks


def _order(counts: np.ndarray, neighbors) -> list[int]:
    """Fewest candidates per query edge first; then most edges back to the placed vertices, fewest candidates."""
    k = len(counts)
    first = min(range(k), key=lambda u: (counts[u] / max(len(neighbors[u]), 1), u))
    order, placed = [first], {first}
    while len(order) < k:
        frontier = {w for u in order for w in neighbors[u]} - placed
        best = min(frontier, key=lambda w: (-sum(x in placed for x in neighbors[w]), counts[w], w))
        order.append(best)
        placed.add(best)
    return order
