"""Frequent pattern mining (GAMMA's Algorithm 2): edge-induced labeled patterns grown one edge at a time,
aggregated by canonical code into MNI support, and filtered by it before they grow further.

Each level is one call to the workers, within one run whose state on each
worker keeps every range's table between levels (its chunks on the device,
in host memory or on disk by the budgets): level L filters the embeddings
the level before kept (its last column) to those of frequent patterns
(anti-monotonicity of MNI: mark, prefix-scan, gather) and extends them by one
edge, so no level is grown again. A range whose table is not held by its
worker (a worker that joined or restarted) is grown again from its first
edges, filtered at every column. The tables go when the call ends or fails
(``drop_run``). A level's new embeddings are aggregated on the worker: a key
per (pattern, orbit of pattern vertex, data vertex), sorted by :func:`gpipe.sort.external_sort` so
equal keys meet; the client adds the workers' keys up into each pattern's
instances and MNI support.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validate import check_int
from ..backend import to_device, to_host, unique
from ..errors import GpipeValueError
from ..sort import external_sort
from ._edges import extend_edges, first_edges, pattern_codes
from ..runtime import end_run, run_state
from ._extend import compress, whole_graph
from ._grow import check_mined_graph, grow_on_workers, write_parquet
from ._result import MiningState
from ._patterns import _COUNT_SHIFT, MAX_EDGES, MAX_LABELS, canonical_forms, unpack
from ._table import TIERS, EmbeddingTable, Stats, worker_budgets

# A key of the aggregation: (pattern, orbit, vertex) in bits 40-62, 37-39 and 0-36.
_PATTERN_SHIFT, _ORBIT_SHIFT = 40, 37
_BELOW_PATTERN = (1 << _PATTERN_SHIFT) - 1


@dataclass(frozen=True)
class FrequentPatterns:
    """What :func:`frequent_patterns` found: ``patterns`` (a pandas DataFrame, a row per frequent pattern) and
    ``stats``."""

    patterns: pd.DataFrame
    stats: dict

    def __len__(self) -> int:
        return len(self.patterns)

    def to_parquet(self, path) -> str:
        """Write ``patterns`` to one Parquet file (complete or not at all; labels and edges as lists); return
        ``path``."""
        return write_parquet(self.patterns.assign(labels=self.patterns["labels"].map(list),
                                                  edges=self.patterns["edges"].map(lambda e: [list(p) for p in e])),
                             path)

    def __repr__(self) -> str:
        return f"<gpipe.mining.FrequentPatterns: {len(self)} patterns in {self.stats['seconds']:.3f} s>"


@dataclass(frozen=True)
class FpmPlan:
    edges: int  # the level: embeddings of this many edges are aggregated
    frequent: tuple  # per level below: the sorted canonical codes of its frequent patterns
    labels: np.ndarray  # each vertex's label rank (int32)
    run_id: str = ""  # the call's run: each worker keeps its ranges' tables in its state between levels
    keep: bool = False  # whether this level's embeddings are kept for the next one
    degree_ordered = False  # patterns are mined on the graph's own ids

    def grow(self, x, graph, spec, table, lo: int, hi: int, stats, *, kept: bool = False) -> tuple:
        """A range's level: its patterns' codes, its distinct aggregation keys and how often each came.

        ``kept``: ``table`` holds the range's embeddings of the levels below, the last of them as the level
        before found them (not filtered yet); else it is empty and they are grown again from the first edges.
        """
        labels = to_device(self.labels, table.device)
        seen: list = []  # per chunk of this level: its patterns' canonical codes, sorted
        keys: list = []  # per chunk: its distinct aggregation keys (the pattern a rank in its codes), their counts
        last = self.edges - 1
        if kept:
            if last > 0 and len(table.columns) == last:  # only the embeddings of frequent patterns grow
                frequent = self.frequent[last - 1]
                stats.count(last - 1, table.filter(x, last - 1, lambda rows: self._frequent(x, graph, labels, rows, frequent,
                                                                                            table.device, stats)))
        else:
            with stats.timer("extension"):
                edges = first_edges(x, graph, lo, hi)
            self._place(x, graph, labels, table, stats, column=0, parent_chunk=-1, edge=edges, parent=None,
                        rows=edges[:, None], seen=seen, keys=keys)
        for column in range(1 if not kept else last, self.edges):
            if len(table.columns) < column:  # no embedding of this range is frequent
                break
            for c, chunk in enumerate(table.columns[column - 1]):
                rows = table.rows(x, chunk)
                for edge, parent in extend_edges(x, graph, rows, spec.capacity, stats.timer):
                    grown = x.concatenate([rows[parent], edge[:, None]], axis=1)
                    self._place(x, graph, labels, table, stats, column=column, parent_chunk=c, edge=edge, parent=parent,
                                rows=grown, seen=seen, keys=keys)
        with stats.timer("aggregation"):
            codes = unique(np, np.concatenate([np.empty(0, np.int64)] + seen))
            keys = [((np.searchsorted(codes, chunk_codes)[found >> _PATTERN_SHIFT] << _PATTERN_SHIFT)
                     | (found & _BELOW_PATTERN), count) for chunk_codes, (found, count) in zip(seen, keys)]
            return (codes, *_sorted_keys(keys, table.device))

    def _frequent(self, x, graph, labels, rows, frequent, device: str, stats):
        """Whether each row's pattern is one of the sorted codes ``frequent``."""
        with stats.timer("aggregation"):
            codes, _, inverse, _ = _canonical_codes(x, graph, labels, rows)
        with stats.timer("filtering"):
            return x.isin(codes, to_device(frequent, device))[inverse.reshape(-1)]

    def _place(self, x, graph, labels, table, stats, *, column: int, parent_chunk: int, edge, parent, rows, seen,
               keys) -> None:
        """New embeddings (``rows``): filtered by the frequent patterns and put in the table, or, at the level's
        last column, turned into aggregation keys (and kept in the table for the next level)."""
        stats.count(column, 0)
        if not rows.shape[0]:
            return
        with stats.timer("aggregation"):
            codes, orbits, inverse, vertices = _canonical_codes(x, graph, labels, rows)
        if column + 1 < self.edges:
            with stats.timer("filtering"):
                keep = x.isin(codes, to_device(self.frequent[column], table.device))[inverse.reshape(-1)]
                edge, parent = compress(x, edge, x.arange(edge.shape[0]) if parent is None else parent, keep)
            if edge.shape[0]:
                table.add(column, parent_chunk, edge, None if column == 0 else parent)
            return
        stats.count(column, rows.shape[0])
        if self.keep:  # the next level filters them by this level's frequent patterns, then extends them
            table.add(column, parent_chunk, edge, None if column == 0 else parent, count=False)
        with stats.timer("aggregation"):
            chunk_codes, which = np.unique(to_host(codes), return_inverse=True)
            seen.append(chunk_codes)
            inverse = inverse.reshape(-1)
            pattern = to_device(which.astype(np.int64), table.device)[inverse][:, None]
            orbit = orbits[:, :vertices.shape[1]][inverse]
            key = (pattern << _PATTERN_SHIFT) | (orbit << _ORBIT_SHIFT) | vertices.astype(x.int64)
            found, count = x.unique(key[orbit >= 0], return_counts=True)
            keys.append((to_host(found), to_host(count).astype(np.int64)))


def _canonical_codes(x, graph, labels, rows) -> tuple:
    """The embeddings' patterns: the canonical code and the orbit of each raw position of each distinct raw code,
    each row's index among those, and each row's vertices in order of appearance."""
    raw, vertices = pattern_codes(x, graph, labels, rows)
    distinct, inverse = x.unique(raw, return_inverse=True)
    return (*canonical_forms(x, distinct), inverse, vertices)


class _Kept:
    """One worker's part of a call, kept in its run state between levels: the spill folder, the budgets, each
    range's table (a folder of its own) and the bytes they hold per tier."""

    def __init__(self, spec, device: str, x):
        self.folder = tempfile.TemporaryDirectory(prefix="gpipe-fpm-", dir=spec.spill_directory)
        self.budgets = worker_budgets(spec.device_budget, spec.host_budget, device, x)
        self.tables: dict[tuple[int, int], EmbeddingTable] = {}
        self.held = dict.fromkeys(TIERS, 0)
        self.made = 0  # tables made so far, which name their folders

    def table(self, device: str, stats: Stats) -> EmbeddingTable:
        folder = os.path.join(self.folder.name, f"table{self.made}")
        self.made += 1
        os.makedirs(folder)
        return EmbeddingTable(device, *self.budgets, folder, stats)

    def close(self) -> None:
        for table in self.tables.values():
            table.close()
        self.tables.clear()
        self.folder.cleanup()


def _grow_kept(spec, ranges: list) -> tuple[list, dict]:
    """On a worker: a level of each of its ranges, extending the range's table kept from the level before
    (grown again from the first edges where none was kept here), kept for the next level when it has one."""
    graph, device, x = whole_graph(spec.graph_id)
    plan: FpmPlan = spec.plan
    state = run_state(plan.run_id, MiningState, made=plan.edges == 1)
    if state.kept is None:
        state.kept = _Kept(spec, device, x)
    held: _Kept = state.kept
    stats = Stats(synchronize=None if device == "cpu" else x.cuda.get_current_stream().synchronize)
    stats.held_bytes, stats.peak_bytes = dict(held.held), dict(held.held)  # the kept tables count to the budgets
    results = []
    try:
        for lo, hi in ranges:
            table = held.tables.pop((lo, hi), None)
            kept = table is not None
            if kept:
                table.stats = stats
            else:
                table = held.table(device, stats)
            try:
                results.append(plan.grow(x, graph, spec, table, lo, hi, stats, kept=kept))
            except BaseException:
                table.close()
                raise
            if plan.keep:
                held.tables[(lo, hi)] = table
            else:
                table.close()
    finally:
        held.held = dict(stats.held_bytes)
    if not plan.keep:
        held.close()
    return results, stats.summary()


def _sorted_keys(keys: list, device: str) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys of a range's chunks and how often each came: the chunks' keys sorted by the external
    sort (their counts following), then equal keys added up."""
    if not keys:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    ordered, counts = external_sort([k for k, _ in keys], [c for _, c in keys], device=device)
    ordered, counts = np.concatenate([to_host(k) for k in ordered]), np.concatenate([to_host(c) for c in counts])
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return ordered[starts], np.add.reduceat(counts, starts)


def frequent_patterns(g, max_edges: int, min_support: int, labels=None, *, device_budget=None,
                      host_budget=None) -> FrequentPatterns:
    """Find the frequent edge-induced labeled patterns of an undirected graph (GAMMA's FPM).

    Patterns are connected, of 1 to ``max_edges`` edges, with the labels of
    their vertices. Embeddings (connected sets of edges, each found once) grow
    one adjacent edge at a time; each is mapped to its pattern's canonical code
    (the least packing of its labeled adjacency over every order of its
    vertices), and embeddings are grouped by code with
    :func:`gpipe.sort.external_sort`. A pattern's support is its MNI
    (minimum image-based support): the least, over its vertices, of the number
    of distinct graph vertices that vertex is mapped to by some isomorphism
    onto an embedding. MNI never grows when a pattern does, so only the
    embeddings of frequent patterns are extended further. The table of each
    range of first edges spills past ``device_budget`` to host memory and past
    ``host_budget`` to disk, as in :func:`count_cliques`.

    Parameters
    ----------
    g : Graph
        An undirected graph replicated on the workers (``mode="replicated"``):
        an edge is named by its slot in the whole graph's CSR, which a
        partitioned graph's workers do not hold. A multigraph is mined as the
        simple graph underneath: an edge repeated is one edge of a pattern and
        of its embeddings; self-loops are none.
    max_edges : int
        The largest patterns' edge count, 1 to 4.
    min_support : int
        The least MNI support of a pattern reported (and extended), >= 1.
    labels : sequence or pandas.Series, optional
        Each vertex's non-negative integer label (below 2**63; floats are
        refused, not truncated), as :meth:`Graph.set_labels` takes them (at
        most 1024 distinct values); default ``g.labels``.
    device_budget, host_budget : int or str, optional
        As for :func:`count_cliques`.

    Returns
    -------
    FrequentPatterns
        ``patterns``: a DataFrame, a row per frequent pattern ordered by size
        and code, with ``code`` (int64, the canonical code), ``size`` (edges),
        ``labels`` (the label of each pattern vertex), ``edges`` (pairs of
        pattern vertices), ``support`` (MNI) and ``instances`` (embeddings:
        distinct edge sets); ``stats``: per level the ``embeddings`` grown,
        ``patterns`` seen and ``frequent`` ones, peak table ``bytes`` per tier
        and ``spilled_bytes`` over the levels, ``primitive_seconds``, the
        call's ``seconds`` and ``levels`` (each level's run).

    Raises
    ------
    GpipeValueError
        ``max_edges`` not in 1..4, ``min_support`` below 1, no labels or labels
        of the wrong length, type or count, a directed or partitioned graph,
        or a bad budget.

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> edges = pd.DataFrame({"src": [0, 1, 2, 3], "dst": [1, 2, 3, 0]})  # a 4-cycle
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges, mode="replicated")
    ...     found = gpipe.mining.frequent_patterns(g, 2, 2, labels=[0, 1, 0, 1])
    >>> found.patterns[["size", "labels", "edges", "support", "instances"]].to_dict("records")
    [{'size': 1, 'labels': (0, 1), 'edges': ((0, 1),), 'support': 2, 'instances': 4}, \
{'size': 2, 'labels': (0, 1, 1), 'edges': ((0, 1), (0, 2)), 'support': 2, 'instances': 2}, \
{'size': 2, 'labels': (1, 0, 0), 'edges': ((0, 1), (0, 2)), 'support': 2, 'instances': 2}]
    """
    start = time.perf_counter()
    g = check_mined_graph(g, replicated="frequent_patterns")
    max_edges = check_int("max_edges", max_edges, minimum=1, maximum=MAX_EDGES)
    min_support = check_int("min_support", min_support, minimum=1)
    if labels is None and g.labels is None:
        raise GpipeValueError("'labels' must be given when 'g' has none (Graph.set_labels), got None")
    values = g.labels if labels is None else g.label_array(labels)
    names, ranks = np.unique(values, return_inverse=True)
    if names.size > MAX_LABELS:
        raise GpipeValueError(f"'labels' must take at most {MAX_LABELS} distinct values, got {names.size}")
    frequent, found, levels, run_id = [], [], [], uuid.uuid4().hex
    try:
        for size in range(1, max_edges + 1):
            plan = FpmPlan(size, tuple(frequent), ranks.astype(np.int32).reshape(-1), run_id, size < max_edges)
            results, stats = grow_on_workers(g, plan, False, device_budget, host_budget, _grow_kept)
            level = _supports(results)
            stats.update(patterns=len(level), frequent=int((level.support >= min_support).sum()))
            levels.append(stats)
            level = level[level.support >= min_support]
            found.append(level)
            frequent.append(np.sort(level.code.to_numpy()))
            if level.empty:
                break
    finally:
        end_run(g, run_id)  # the kept tables go, their spill folders too
    return FrequentPatterns(_readable(pd.concat(found, ignore_index=True), names),
                            _fpm_stats(levels, max_edges, min_support, time.perf_counter() - start))


def _supports(results: list) -> pd.DataFrame:
    """Every pattern of a level (``code``) with its MNI ``support`` and ``instances``, from the ranges'
    (pattern codes, distinct keys, counts)."""
    codes = unique(np, np.concatenate([np.empty(0, np.int64)] + [r[0] for r in results]))
    keys, counts = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    for range_codes, range_keys, range_counts in results:
        pattern = np.searchsorted(codes, range_codes)[range_keys >> _PATTERN_SHIFT]
        keys.append((pattern << _PATTERN_SHIFT) | (range_keys & _BELOW_PATTERN))
        counts.append(range_counts)
    keys, counts = np.concatenate(keys), np.concatenate(counts)
    per_key = pd.DataFrame({"key": keys, "count": counts}).groupby("key", sort=True)["count"].sum()
    pattern, orbit = per_key.index.to_numpy() >> _PATTERN_SHIFT, per_key.index.to_numpy() >> _ORBIT_SHIFT
    images = pd.Series(1, index=orbit).groupby(level=0).sum()  # distinct vertices per (pattern, orbit)
    support = images.groupby(images.index.to_numpy() >> (_PATTERN_SHIFT - _ORBIT_SHIFT)).min()
    positions = pd.Series(per_key.to_numpy(), index=pattern).groupby(level=0).sum()
    vertices = codes >> _COUNT_SHIFT
    return pd.DataFrame({"code": codes, "support": support.reindex(range(codes.size), fill_value=0).to_numpy(),
                         "instances": positions.reindex(range(codes.size), fill_value=0).to_numpy() // vertices})


def _readable(patterns: pd.DataFrame, names: np.ndarray) -> pd.DataFrame:
    """Each pattern's size, labels and edges (pairs of its vertices in canonical order) beside its code."""
    forms = [unpack(int(code)) for code in patterns.code]
    out = pd.DataFrame({
        "code": patterns.code.to_numpy(np.int64),
        "size": np.array([len(edges) for _, edges in forms], np.int64),
        "labels": [tuple(int(names[r]) for r in ranks) for ranks, _ in forms],
        "edges": [tuple(sorted(edges)) for _, edges in forms],
        "support": patterns.support.to_numpy(np.int64),
        "instances": patterns.instances.to_numpy(np.int64)})
    return out.sort_values(["size", "code"], ignore_index=True)


def _fpm_stats(levels: list[dict], max_edges: int, min_support: int, seconds: float) -> dict:
    """The levels' stats in one: per level what grew, over the levels the peaks and sums."""
    return {"max_edges": max_edges, "min_support": min_support,
            "embeddings": [s["embeddings"][size] if len(s["embeddings"]) > size else 0
                           for size, s in enumerate(levels)],
            "patterns": [s["patterns"] for s in levels], "frequent": [s["frequent"] for s in levels],
            "bytes": {t: max(s["bytes"][t] for s in levels) for t in TIERS},
            "spilled_bytes": sum(s["spilled_bytes"] for s in levels),
            "primitive_seconds": {p: sum(s["primitive_seconds"].get(p, 0.0) for s in levels)
                                  for p in sorted({p for s in levels for p in s["primitive_seconds"]})},
            "ranges": levels[0]["ranges"], "workers": levels[0]["workers"], "device": levels[0]["device"],
            "seconds": seconds, "levels": levels}
