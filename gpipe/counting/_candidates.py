"""The candidate graph of a query on a data graph, and the matching order its samples and searches follow."""

from __future__ import annotations

import dataclasses
import functools
import itertools
from dataclasses import dataclass

import numpy as np

from ..backend import device_of, to_host, xp
from ..errors import GpipeError
from ..graph import Graph
from ..runtime.calls import holder_workers, on_each
from ..runtime.workers import call_peer, run_state, worker_xp
from ._candidate_kernels import DEGREE, EDGES, FILTER, REFINE
from ._common import on_partition_rows
from ._inputs import Query

LIST_PASS = 1 << 28  # the bits _candidate_lists tests in one pass (4 bytes each: 1 GB)


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

    Candidates pass the label, degree and neighbor-label-frequency filters
    (a multigraph's in the simple graph underneath: each neighbor once, no
    self-loop) and then keep, for every query neighbor, at least one adjacent
    candidate (to a fixed point), so no embedding is lost.
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
    def counts(self) -> np.ndarray:
        """The number of candidates of each query vertex (by query vertex id, not by position)."""
        out = np.empty(len(self.order), np.int64)
        out[self.order] = np.diff(to_host(self.cand_offsets))
        return out

    @property
    def empty(self) -> bool:
        """Whether a query vertex has no candidate: then the query has no embedding."""
        return bool((np.diff(to_host(self.cand_offsets)) == 0).any())

    @property
    def num_positions(self) -> int:
        """Positions of the matching order, one a query vertex."""
        return len(self.order)

    def arrays(self) -> dict:
        """The arrays the counting kernels read, by their argument names."""
        return {name: getattr(self, name) for name in ("cand_offsets", "cand_vertices", "back_offsets", "back_pos",
                                                       "back_rows", "edge_indptr", "edge_indices")}

    def moved(self, convert) -> CandidateGraph:
        """This candidate graph with ``convert`` applied to its kernels' arrays (``to_host``, a module's
        ``asarray``)."""
        return dataclasses.replace(self, **{name: convert(a) for name, a in self.arrays().items()})


def candidates(g: Graph, query: Query) -> CandidateGraph:
    """The candidate graph of ``query`` on the labeled graph ``g``, with its matching order.

    It is built where ``g`` is held: on the worker of its first replica when
    ``g`` is replicated; partition by partition on the workers holding them
    when it is partitioned, each filtering and refining its rows' candidates
    against the others' in rounds until no candidate is dropped, then building
    its rows' share of the candidate edges, which the client joins. The
    result is the same for any layout and number of partitions.

    Parameters
    ----------
    g : Graph
        An undirected graph with vertex labels (:func:`read_graph` or
        :meth:`Graph.set_labels`). A multigraph (``keep_duplicates=True``)
        is read as the simple graph underneath: an edge repeated is one
        edge and a self-loop none, so its candidates and candidate edges are
        those of the simple graph.
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
        ``g`` is directed or has no labels, or ``query`` has more vertices
        than ``g`` or a label no vertex of ``g`` has.

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
    query.check_against(g)
    if g.num_partitions == 1:
        return on_partition_rows(g, "counting: candidate graph", _whole, query)[0]
    sets = _partitioned_sets(g, query)  # on the host, as are the partitions' candidate edges joined here
    lists = _candidate_lists(sets, query.num_vertices)
    order = _order(np.diff(lists[1]), query.neighbors())
    return _assemble(lists, order, on_partition_rows(g, "counting: candidate edges", _edges_part, query, sets,
                                                     order))


@dataclass(frozen=True)
class CandidateSummary:
    """What the client keeps of a candidate graph held on the workers (:func:`hold`): its candidates per query
    vertex, its matching order and whether a query vertex has no candidate."""

    counts: np.ndarray
    order: np.ndarray
    empty: bool
    source: str | None = None  # the worker the others fetch it from, when first read there (see :func:`kept`)


def hold(g: Graph, query: Query, run_id: str) -> CandidateSummary:
    """:func:`candidates`, kept on every worker holding ``g`` (those that sample) in the state of run ``run_id``
    (``state["candidates"]``), until the run ends there: built on a replica's worker, from which the others fetch
    it when they first read it (:func:`kept`, given ``CandidateSummary.source``); or, on a partitioned graph, its
    candidate edges built partition by partition where they are held and gathered by each worker. Only its summary
    comes to the client; an empty one is not built further."""
    query.check_against(g)
    workers = holder_workers(g)
    if g.num_partitions == 1:
        held = on_partition_rows(g, "counting: candidate graph", _whole_kept, query, run_id)[0]
        return dataclasses.replace(held, source=g.holders[0][0])
    sets = _partitioned_sets(g, query)
    counts = np.diff(_candidate_lists(sets, query.num_vertices)[1])
    order = _order(counts, query.neighbors())
    held = CandidateSummary(counts, np.asarray(order, np.int64), bool((counts == 0).any()))
    if held.empty:
        return held
    on_partition_rows(g, "counting: candidate edges",
                      functools.partial(_edges_kept, query=query, sets=sets, order=order, run_id=run_id))
    on_each(g, "counting: candidate graph gathered", [(w, _assemble_kept, (run_id, workers, sets, order))
                                                      for w in workers])
    return held


@dataclass
class CountingState:
    """A counting run's state on a worker: its candidate graph, and the candidate edges of the partitions held
    here by their rows, until the candidate graph is assembled from them."""

    candidates: CandidateGraph | None = None
    edges: dict = dataclasses.field(default_factory=dict)


def kept(run_id: str, source: str | None = None) -> CandidateGraph:
    """On a worker: the candidate graph :func:`hold` keeps here for run ``run_id``; fetched from worker ``source``
    (``CandidateSummary.source``) and kept here, the first time it is read here."""
    state = run_state(run_id, CountingState)
    if state.candidates is None:
        if source is None:
            raise GpipeError(f"counting run {run_id} keeps no candidate graph here")
        state.candidates = call_peer(source, _kept_here, run_id).moved(worker_xp().asarray)
    return state.candidates


def _summary(cg: CandidateGraph) -> CandidateSummary:
    return CandidateSummary(cg.counts, cg.order, cg.empty)


def _whole_kept(indptr, indices, lo: int, labels: np.ndarray, query: Query, run_id: str) -> CandidateSummary:
    cg = build(indptr, indices, labels, query)
    run_state(run_id, CountingState).candidates = cg
    return _summary(cg)


def _kept_here(run_id: str) -> CandidateGraph:
    return kept(run_id).moved(to_host)


def _edges_kept(indptr, indices, lo: int, labels: np.ndarray, *, query: Query, sets: np.ndarray, order: list[int],
                run_id: str) -> None:
    edges = _candidate_edges(indptr, indices, lo, xp(device_of(indptr)).asarray(sets), order, query)
    run_state(run_id, CountingState).edges[lo, indptr.shape[0] - 1] = _pieces_as(to_host, edges)  # row order


def _edges_here(run_id: str) -> dict:
    return run_state(run_id, CountingState).edges


def _assemble_kept(run_id: str, sources: list[str], sets: np.ndarray, order: list[int]) -> None:
    """Gather the candidate edges of every partition (from the ``sources`` holding them) and keep the candidate
    graph assembled from them in row order."""
    edges = {}
    for worker in sources:
        edges.update(call_peer(worker, _edges_here, run_id))
    x = worker_xp()
    pieces = [_pieces_as(x.asarray, edges[rows]) for rows in sorted(edges)]
    run_state(run_id, CountingState).candidates = _assemble(_candidate_lists(x.asarray(sets), len(order)), order,
                                                            pieces)


def _partitioned_sets(g: Graph, query: Query) -> np.ndarray:
    """The final candidate sets of a partitioned graph's vertices: filtered partition by partition, then refined
    against the others' candidates in rounds, to a fixed point."""
    sets = np.concatenate(on_partition_rows(g, "counting: candidate filter", _filter_part, query))
    stale = (1 << query.num_vertices) - 1
    for step in itertools.count(1):  # each partition refines its rows against the others' candidates: to a fixed point
        pieces = on_partition_rows(g, f"counting: candidate refinement {step}", _refine_part, query, sets, stale)
        if not any(dropped for dropped, _ in pieces):
            break
        refined = np.concatenate([rows for _, rows in pieces])
        stale = int(np.bitwise_or.reduce(sets ^ refined))  # the query vertices that lost candidates this round
        sets = refined
    return sets


def build(indptr, indices, labels, query: Query) -> CandidateGraph:
    """:func:`candidates` on a whole data graph's CSR (both directions of each edge) and labels, on its device
    (numpy or cupy arrays; the labels may be on the host)."""
    sets = _filtered(indptr, indices, 0, labels, query)
    _refine(indptr, indices, 0, sets, query)
    lists = _candidate_lists(sets, query.num_vertices)
    order = _order(np.diff(lists[1]), query.neighbors())
    return _assemble(lists, order, [_candidate_edges(indptr, indices, 0, sets, order, query, lists)])


def _whole(indptr, indices, lo: int, labels, query: Query) -> CandidateGraph:
    return build(indptr, indices, labels, query).moved(to_host)


def _filter_part(indptr, indices, lo: int, labels, query: Query) -> np.ndarray:
    return to_host(_filtered(indptr, indices, lo, labels, query)[lo:lo + indptr.shape[0] - 1])


def _refine_part(indptr, indices, lo: int, labels, query: Query, sets: np.ndarray, stale: int) -> tuple:
    sets = xp(device_of(indptr)).array(sets)  # on the rows' device; as it arrived, it may be read-only
    return _refine(indptr, indices, lo, sets, query, stale), to_host(sets[lo:lo + indptr.shape[0] - 1])


def _edges_part(indptr, indices, lo: int, labels, query: Query, sets: np.ndarray, order: list[int]):
    edges = _candidate_edges(indptr, indices, lo, xp(device_of(indptr)).asarray(sets), order, query)
    return _pieces_as(to_host, edges)


# The steps below take the rows lo.. of a CSR (a partition's: local indptr, global indices; the whole graph's from
# 0) and, for all n data vertices, the set of query vertices each is a candidate of: bit u of sets[v] (k <= 32),
# numpy or cupy arrays: they run where the rows are.

def _filtered(indptr, indices, lo: int, labels, query: Query):
    """The rows' candidate sets (the other vertices' empty), on the rows' device: the query vertices whose label a
    data vertex has, with at most its degree and, for each label, at most as many neighbors with that label (only
    the query's labels are counted)."""
    x = xp(device_of(indptr))
    labels = x.asarray(labels)
    kinds = np.unique(query.labels)  # at most 32: a data vertex's kind is its label's rank among them, as an int8
    known = x.asarray(kinds)
    kind = x.searchsorted(known, labels).clip(max=len(kinds) - 1)
    kind = x.where(known[kind] == labels, kind, -1).astype(x.int8)
    query_indptr, query_indices = _query_csr(query)
    query_kind = np.searchsorted(kinds, query.labels)
    need = np.zeros((query.num_vertices, len(kinds)), np.int64)
    np.add.at(need, (np.repeat(np.arange(query.num_vertices), np.diff(query_indptr)), query_kind[query_indices]), 1)
    sets = x.zeros(labels.shape[0], x.uint32)
    FILTER.launch(n=indptr.shape[0] - 1, indptr=indptr, indices=indices, lo=lo, kind=kind, k=query.num_vertices,
                  kinds=len(kinds), query_kind=x.asarray(query_kind, x.int64),
                  query_degree=x.asarray(np.diff(query_indptr)), need=x.asarray(need), sets=sets)
    return sets


def _refine(indptr, indices, lo: int, sets, query: Query, stale: int | None = None) -> bool:
    """Drop, in place, each of the rows' candidates with no candidate neighbor for some query neighbor, pass after
    pass to a fixed point (the other vertices' sets held as they are); whether any was dropped. ``stale`` (bits,
    default all): the query vertices whose candidates may have changed since the rows were last refined."""
    x = xp(device_of(sets))
    neighbor_bits = x.asarray([sum(1 << w for w in n) for n in query.neighbors()], x.int64)
    stale = (1 << query.num_vertices) - 1 if stale is None else stale
    changed = x.zeros(1, x.uint64)
    dropped = False
    while stale:  # a pass checks the rows' candidates against the query vertices that lost candidates in the last
        changed.fill(0)
        REFINE.launch(n=indptr.shape[0] - 1, indptr=indptr, indices=indices, lo=lo, k=query.num_vertices,
                      neighbor_bits=neighbor_bits, stale=stale, sets=sets, changed=changed)
        stale = int(changed[0])
        dropped |= stale != 0
    return dropped


def _candidate_lists(sets, k: int) -> tuple:
    """Each of the ``k`` query vertices' candidates, ascending, one list after the other: ``(vertices, offsets)``,
    ``offsets`` a host array of k + 1. Found for every query vertex at once (a few launches, not a few per query
    vertex: on a small graph the launches are the cost), LIST_PASS bits at most at a time."""
    x = xp(device_of(sets))
    some = x.flatnonzero(sets)  # the candidates of any query vertex
    values = sets[some]
    per = max(1, LIST_PASS // max(some.shape[0], 1))  # query vertices a pass
    vertices, counts = [], []
    for first in range(0, k, per):
        shifts = x.arange(first, min(first + per, k), dtype=x.uint32)
        u, at = x.nonzero((values[None, :] >> shifts[:, None]) & np.uint32(1))  # by query vertex, then vertex
        vertices.append(some[at])
        counts.append(np.diff(to_host(x.searchsorted(u, x.arange(shifts.shape[0] + 1)))))
    offsets = np.concatenate([[0], np.cumsum(np.concatenate(counts))]).astype(np.int64)
    return (vertices[0] if len(vertices) == 1 else x.concatenate(vertices)), offsets


def _candidate_edges(indptr, indices, lo: int, sets, order: list[int], query: Query, lists=None) -> list[list]:
    """The rows' share of the candidate edges, on the rows' device: per position ``d``, per backward position ``b``
    (ascending), ``(b, counts, entries)``: how many of ``d``'s candidates each of ``b``'s candidates among the rows
    is adjacent to, and their indices among ``d``'s candidates, row after row. ``lists``: the
    :func:`_candidate_lists` of ``sets``, if made already."""
    x = xp(device_of(sets))
    vertices, offsets = lists if lists is not None else _candidate_lists(sets, query.num_vertices)
    rows_end = lo + indptr.shape[0] - 1
    whole = lo == 0 and rows_end == sets.shape[0]

    @functools.cache
    def rows_of(u: int):  # u's candidates among the rows
        mine = vertices[offsets[u]:offsets[u + 1]]
        if whole:
            return mine
        first, last = to_host(x.searchsorted(mine, x.asarray([lo, rows_end])))
        return mine[first:last]

    position = np.empty(len(order), np.int64)
    position[order] = np.arange(len(order))
    neighbors = query.neighbors()
    out = []
    for d, u in enumerate(order):
        backward = sorted(int(position[w]) for w in neighbors[u] if position[w] < d)
        if backward:  # each of u's candidates' index among them (read at u's candidates only)
            rank = x.empty(sets.shape[0], x.int32)
            rank[vertices[offsets[u]:offsets[u + 1]]] = x.arange(offsets[u + 1] - offsets[u], dtype=x.int32)
        pieces = []
        for b in backward:
            rows = rows_of(order[b])
            counts = x.empty(rows.shape[0], x.int64)
            DEGREE.launch(n=rows.shape[0], rows=rows, indptr=indptr, indices=indices, lo=lo, sets=sets, u=u,
                          count=counts)
            ends = x.cumsum(counts)
            entries = x.empty(int(ends[-1]) if rows.shape[0] else 0, x.int32)
            EDGES.launch(n=rows.shape[0], rows=rows, indptr=indptr, indices=indices, lo=lo, sets=sets, u=u,
                         rank=rank, offset=ends - counts, entries=entries)
            pieces.append((b, counts, entries))
        out.append(pieces)
    return out


def _pieces_as(convert, pieces: list[list]) -> list[list]:
    """:func:`_candidate_edges` with ``convert`` applied to its arrays (to the host, or to a worker's device)."""
    return [[(b, convert(counts), convert(entries)) for b, counts, entries in position] for position in pieces]


def _assemble(lists: tuple, order: list[int], pieces: list[list]) -> CandidateGraph:
    """The candidate graph from the final candidates (:func:`_candidate_lists`) and the :func:`_candidate_edges` of
    row ranges covering the graph, in row order, on their device."""
    vertices, offsets = lists
    x = xp(device_of(vertices))
    join = (lambda arrays: arrays[0]) if len(pieces) == 1 else x.concatenate
    back_pos, back_rows, edge_rows, edge_indices = [], [], [x.zeros(1, x.int64)], []
    back_offsets, rows_so_far, entries_so_far = [0], 0, 0
    for d in range(len(order)):
        edges = [(b, join([p[d][t][1] for p in pieces]), join([p[d][t][2] for p in pieces]))
                 for t, (b, _, _) in enumerate(pieces[0][d])]
        edges.sort(key=lambda e: e[2].shape[0] / max(e[1].shape[0], 1))  # the parent: fewest local candidates
        for b, row_counts, entries in edges:
            back_pos.append(b)
            back_rows.append(rows_so_far)
            edge_rows.append(entries_so_far + x.cumsum(row_counts))
            edge_indices.append(entries)
            rows_so_far += row_counts.shape[0]
            entries_so_far += entries.shape[0]
        back_offsets.append(len(back_pos))
    return CandidateGraph(
        order=np.asarray(order, np.int64),
        cand_offsets=x.asarray(np.concatenate([[0], np.cumsum(np.diff(offsets)[order])]), x.int64),
        cand_vertices=x.concatenate([vertices[offsets[u]:offsets[u + 1]] for u in order]).astype(x.int64,
                                                                                                 copy=False),
        back_offsets=x.asarray(back_offsets, x.int64),
        back_pos=x.asarray(back_pos, x.int32),
        back_rows=x.asarray(back_rows, x.int64),
        edge_indptr=x.concatenate(edge_rows).astype(x.int64, copy=False),
        edge_indices=x.concatenate(edge_indices or [x.zeros(0, x.int32)]).astype(x.int32, copy=False),
    )


def _query_csr(query: Query) -> tuple[np.ndarray, np.ndarray]:
    neighbors = query.neighbors()
    indptr = np.concatenate([[0], np.cumsum([len(n) for n in neighbors])]).astype(np.int64)
    return indptr, np.asarray([w for n in neighbors for w in n], np.int64)


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
