"""A mining run: tables grown column by column from fixed ranges of first vertices, on the graph's workers.

A plan (cliques, a pattern match) says how many columns a table has, which
first vertices it keeps, and how a chunk extends to the next column; the
rest is the same for every algorithm: the ranges, the budgets, the chunks'
placement, the counts, the listing and the stats.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from .. import config
from .._files import atomic_file
from ..backend import to_host
from ..errors import GpipeValueError
from ..graph import check_graph
from ..runtime.calls import end_run, on_each
from ..runtime.workers import run_state, worker_address
from ._extend import compress, degrees, whole_graph
from ._partitioned import grow_partitioned
from ._result import Listed, MiningResult, MiningState, keep_rows
from ._table import EmbeddingTable, Stats, merged, worker_budgets


@dataclass(frozen=True)
class Spec:
    graph_id: str
    run_id: str  # a listing run keeps its rows in this run's state on the workers
    plan: Any  # grow(x, graph, spec, table, lo, hi, stats): a range's result (ColumnPlan: cliques, matches);
    # degree_ordered: whether the graph it grows on is the degree-ordered orientation
    listing: bool
    capacity: int  # candidate slots per extension batch, so per chunk
    device_budget: int | None  # bytes of table chunks a worker keeps on its device; None: auto, decided there
    host_budget: int | None  # then in host memory; past it chunks go to disk
    spill_directory: str | None


def write_parquet(frame: pd.DataFrame, path) -> str:
    """``frame`` to one Parquet file, which appears complete or not at all."""
    path = os.fspath(path)
    with atomic_file(path, "wb") as out:
        frame.to_parquet(out, index=False)
    return path


def check_mined_graph(g, replicated: str | None = None):
    """``g`` if gpipe.mining can mine it: undirected, and replicated on the workers when ``replicated`` (the
    function that needs it) says so."""
    g = check_graph("g", g)
    if g.directed:
        raise GpipeValueError("'g' must be an undirected graph to mine patterns, got a directed one")
    if replicated and g.mode != "replicated":
        raise GpipeValueError(f"'g' must be replicated on the workers (mode='replicated') for {replicated}, got a "
                              f"partitioned graph ({g.num_partitions} partitions)")
    return g


def mine(g, plan, listing: bool, device_budget, host_budget) -> MiningResult:
    """Grow the tables of ``plan`` on ``g``'s workers: the count and the stats, and, when listing, the rows left
    on the workers (``plan.listed``'s columns), a block per range of first vertices (in range order) or per
    partition owning the first vertex (each sorted: a partitioned graph's rows are in lexicographic order of the
    matching order's columns)."""
    start = time.perf_counter()
    spec = _spec(g, plan, listing, device_budget, host_budget)
    try:
        if g.mode == "partitioned":
            count, blocks, stats = grow_partitioned(g, spec)
        else:
            results, stats = _grow_on_replicas(g, spec)
            count = sum(c for c, _ in results)
            blocks = [(worker, lo, c) for c, (worker, lo) in results]
    except BaseException:
        if listing:
            end_run(g, spec.run_id)
        raise
    stats["seconds"] = time.perf_counter() - start
    if not listing:
        return MiningResult(count, stats)
    found = [block for block in blocks if block[2]] or blocks[:1]  # one empty block when none found any
    return MiningResult(count, stats, Listed(g.client, spec.run_id, tuple(found), plan.columns, g.id_map, g.holders))


def _spec(g, plan, listing: bool, device_budget, host_budget) -> Spec:
    return Spec(g.graph_id, uuid.uuid4().hex, plan, listing, _capacity(g.device),
                config.budget("mining.device-budget", device_budget, "device_budget"),
                config.budget("mining.host-budget", host_budget, "host_budget"), config.get("mining.spill-directory"))


def _capacity(device: str) -> int:
    """``gpipe.mining.chunk-embeddings``; 'auto': 2**24 on GPU workers, whose batches pay their launches and host
    round trips once per chunk (the embedding-table FPM on a labeled R-MAT 12: 105 s at 2**20, 27 s at 2**24 on an
    H200), 2**20 on CPU ones."""
    value = config.get("mining.chunk-embeddings")
    if value == "auto":
        return 1 << 24 if device == "gpu" else 1 << 20
    return value


def _grow_on_replicas(g, spec: Spec) -> tuple[list, dict]:
    degree = g.degrees().to_numpy()
    if spec.plan.degree_ordered:  # vertex r of the renumbered graph: at most its degree and n - 1 - r later ones
        degree = np.minimum(np.sort(degree), np.arange(degree.size)[::-1])
    ranges = _ranges(degree, config.get("mining.ranges"))
    results, summaries = _on_replicas(g, _grow_here, spec, ranges)
    stats = merged(summaries)
    stats["primitive_seconds"] = stats.pop("seconds")
    stats.update(ranges=len(ranges), workers=len(summaries), device=g.device)
    return results, stats


def _on_replicas(g, function, spec: Spec, ranges: list) -> tuple[list, list]:
    """``function(spec, ranges)`` on the workers holding the replicated graph ``g``: range ``i`` goes to the
    ``i % W``-th of its ``W`` workers. ``function`` returns (a result per range, a stats summary); the results
    come back in range order, with the summaries of the workers."""
    workers = [g.holders[0][r] for r in sorted(g.holders[0])]
    replies = on_each(g, "mining", [(w, function, (spec, ranges[i::len(workers)])) for i, w in enumerate(workers)])
    results = [None] * len(ranges)
    for i, (part, _) in enumerate(replies):
        results[i::len(workers)] = part
    return results, [summary for _, summary in replies]


def _ranges(degree: np.ndarray, count: int) -> list[tuple[int, int]]:
    """``count`` ranges of first vertices of similar work (a vertex's degree squared, plus one), non-empty."""
    work = np.cumsum(degree.astype(np.float64) ** 2 + 1)
    cuts = np.searchsorted(work, work[-1] * np.arange(1, count) / count, "right") if work.size else []
    bounds = [0, *(int(c) for c in cuts if 0 < c < degree.size), int(degree.size)]
    return [(lo, hi) for lo, hi in pairwise(bounds) if hi > lo]


def _grow_here(spec: Spec, ranges: list) -> tuple[list, dict]:
    """On a worker: each range's count and where a listing run keeps its rows (this worker, the key ``lo``: the
    range's first vertex), and what this worker's tables did."""
    if spec.listing:  # made before any work: a run that ended meanwhile (the client interrupted) stops here
        run_state(spec.run_id, MiningState)
    graph, device, x = whole_graph(spec.graph_id, spec.plan.degree_ordered)
    stats = Stats(synchronize=None if device == "cpu" else x.cuda.get_current_stream().synchronize)
    device_budget, host_budget = worker_budgets(spec.device_budget, spec.host_budget, device, x)
    results = []
    with tempfile.TemporaryDirectory(prefix="gpipe-mining-", dir=spec.spill_directory) as folder:
        for lo, hi in ranges:
            table = EmbeddingTable(device, device_budget, host_budget, folder, stats)
            try:
                count, rows = spec.plan.grow(x, graph, spec, table, lo, hi, stats)
            finally:
                table.close()
            if spec.listing:
                keep_rows(spec.run_id, lo, spec.plan.listed(rows))
            results.append((count, (worker_address(), lo)))
    return results, stats.summary()


class ColumnPlan:
    """A plan whose tables grow one vertex column at a time, each chunk by ``extend`` (cliques, matches), on the
    graph as it is or, with ``degree_ordered``, on its degree-ordered orientation (``_extend._degree_ordered``: a
    count, whose embeddings need not be listed in the graph's ids)."""

    degree_ordered = False
    counted_columns = 1  # a count's last columns counted by ``extend(counting=True)``, never stored

    def listed(self, rows: np.ndarray) -> np.ndarray:
        """Rows of the table's columns as the embeddings are listed (cliques: as they are)."""
        return rows

    def grow(self, x, graph, spec: Spec, table: EmbeddingTable, lo: int, hi: int, stats: Stats) -> tuple:
        return _grow(x, graph, spec, table, lo, hi, stats)


def _grow(x, graph, spec: Spec, table: EmbeddingTable, lo: int, hi: int, stats: Stats) -> tuple:
    plan, none = spec.plan, np.empty((0, spec.plan.columns), np.int64)
    first = x.arange(lo, hi, dtype=graph.indices.dtype)
    with stats.timer("filtering"):  # a first vertex needs the degree of its pattern vertex
        first, _ = compress(x, first, first, degrees(x, graph, first) >= plan.first_degree)
    stats.count(0, 0)
    if first.shape[0]:
        table.add(0, -1, first, None)
    for column in range(1, plan.columns):
        stats.count(column, 0)
        if len(table.columns) < column:  # nothing was extended: no embedding starts in this range
            return 0, none if spec.listing else None
        if column == plan.columns - plan.counted_columns and not spec.listing:  # a count's last columns are counted
            count = sum(found for chunk in table.columns[column - 1]
                        for found in plan.extend(x, graph, table, chunk, spec.capacity, stats.timer, counting=True))
            stats.count(plan.columns - 1, count)
            return count, None
        for c, chunk in enumerate(table.columns[column - 1]):
            for vertex, parent in plan.extend(x, graph, table, chunk, spec.capacity, stats.timer):
                if vertex.shape[0]:
                    table.add(column, c, vertex, parent)
        if not spec.listing and not plan.reads_ancestors:
            table.drop(column - 1)
    if len(table.columns) < plan.columns:
        return 0, none if spec.listing else None
    count = sum(chunk.size for chunk in table.columns[-1])
    with stats.timer("listing"):
        rows = [to_host(table.rows(x, chunk)).astype(np.int64) for chunk in table.columns[-1]]
    return count, np.concatenate([none] + rows)
