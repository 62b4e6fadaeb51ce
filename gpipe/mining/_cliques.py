"""k-cliques by vertex extension of embedding tables, one table per range of first vertices."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass

import numpy as np
import psutil

from .. import config
from .._validate import check_bytes, check_graph, check_int
from ..backend import to_host
from ..errors import GpipeValueError
from ._cluster import on_replicas, whole_graph
from ._extend import extend
from ._table import EmbeddingTable, Stats, merged


@dataclass(frozen=True)
class MiningResult:
    """What a mining run found: ``count`` embeddings (``embeddings``, one row each, when they were listed) and
    ``stats`` (embeddings per column, peak table bytes per tier, spilled bytes, seconds of the call and per
    primitive)."""

    count: int
    stats: dict
    embeddings: np.ndarray | None = None

    def __int__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"<gpipe.mining.MiningResult: {self.count} embeddings in {self.stats['seconds']:.3f} s>"


@dataclass(frozen=True)
class CliqueSpec:
    graph_id: str
    k: int
    listing: bool
    capacity: int  # candidate slots per extension batch, so per chunk
    device_budget: int | None  # bytes of table chunks a worker keeps on its device; None: auto, decided there
    host_budget: int | None  # then in host memory; past it chunks go to disk
    spill_directory: str | None


def count_cliques(g, k: int, *, device_budget=None, host_budget=None) -> MiningResult:
    """Count the k-cliques of an undirected graph (GAMMA's vertex extension of embedding tables).

    Each clique is found once, as vertices in increasing id order: the table
    of a range of first vertices is extended column by column, each
    embedding by the neighbors of its last vertex among its later siblings
    (the candidates its prefix already narrowed down). The first vertices are
    cut into ``gpipe.mining.ranges`` fixed ranges of similar work, spread over
    the workers, so the count does not depend on how many there are. Table
    chunks beyond ``device_budget`` go to host memory, and beyond
    ``host_budget`` to files on the worker's disk.

    Parameters
    ----------
    g : Graph
        An undirected graph replicated on the workers (``mode="replicated"``).
    k : int
        Clique size, at least 3.
    device_budget, host_budget : int or str, optional
        Bytes of the table each worker keeps on its device, then in host
        memory (``'2 GB'``); default ``gpipe.mining.device-budget`` and
        ``gpipe.mining.host-budget``.

    Returns
    -------
    MiningResult
        ``count`` and ``stats``: ``embeddings`` per column, peak ``bytes`` on
        device / host / disk and ``spilled_bytes`` (summed over the workers),
        ``primitive_seconds`` (extension, compression, placement) and the
        call's ``seconds``.

    Raises
    ------
    GpipeValueError
        ``k`` below 3, a directed or partitioned graph, or a bad budget.

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> edges = pd.DataFrame({"src": [0, 0, 0, 1, 1, 2], "dst": [1, 2, 3, 2, 3, 3]})  # K4
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges, mode="replicated")
    ...     [gpipe.mining.count_cliques(g, k).count for k in (3, 4)]
    [4, 1]
    """
    return _cliques(g, k, False, device_budget, host_budget)


def list_cliques(g, k: int, *, device_budget=None, host_budget=None) -> MiningResult:
    """List the k-cliques of an undirected graph: :func:`count_cliques`, with every clique.

    Parameters
    ----------
    g, k, device_budget, host_budget
        As for :func:`count_cliques`.

    Returns
    -------
    MiningResult
        ``embeddings``: one row per clique, its vertices (original ids) in
        increasing dense id, rows in lexicographic order of dense ids, the
        same for any number of workers; ``count`` and ``stats`` as for
        :func:`count_cliques`.

    Raises
    ------
    GpipeValueError
        As for :func:`count_cliques`.

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> edges = pd.DataFrame({"src": [0, 0, 1, 2], "dst": [1, 2, 2, 3]})  # a triangle and a tail
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges, mode="replicated")
    ...     gpipe.mining.list_cliques(g, 3).embeddings.tolist()
    [[0, 1, 2]]
    """
    return _cliques(g, k, True, device_budget, host_budget)


def _cliques(g, k, listing: bool, device_budget, host_budget) -> MiningResult:
    start = time.perf_counter()
    g = check_graph(g)
    k = check_int("k", k, minimum=3)
    if g.directed:
        raise GpipeValueError("'g' must be an undirected graph to count cliques, got a directed one")
    if g.mode != "replicated":
        raise GpipeValueError("'g' must be replicated on the workers (mode='replicated'): gpipe.mining does not "
                              "mine partitioned graphs yet")
    spec = CliqueSpec(g.graph_id, k, listing, check_int("gpipe.mining.chunk-embeddings",
                                                        config.get("mining.chunk-embeddings"), minimum=1),
                      _budget("device_budget", device_budget, "mining.device-budget"),
                      _budget("host_budget", host_budget, "mining.host-budget"),
                      config.get("mining.spill-directory"))
    ranges = _ranges(g.degrees().to_numpy(), check_int("gpipe.mining.ranges", config.get("mining.ranges"), minimum=1))
    results, summaries = on_replicas(g, _cliques_here, spec, ranges)
    stats = merged(summaries)
    stats["primitive_seconds"] = stats.pop("seconds")  # summed over the workers
    stats.update(k=k, ranges=len(ranges), workers=len(summaries), device=g.device,
                 seconds=time.perf_counter() - start)
    count = sum(c for c, _ in results)
    rows = None
    if listing:
        rows = g.to_original(np.concatenate([r for _, r in results]) if results else np.empty((0, k), np.int64))
    return MiningResult(count, stats, rows)


def _budget(name: str, value, key: str) -> int | None:
    """A budget in bytes, or None for 'auto' (decided on each worker, by its memory)."""
    if value is None:
        name, value = f"gpipe.{key}", config.get(key)
    return None if value == "auto" else check_bytes(name, value)


def _ranges(degrees: np.ndarray, count: int) -> list[tuple[int, int]]:
    """``count`` ranges of first vertices of similar work (a vertex's degree squared, plus one), non-empty."""
    work = np.cumsum(degrees.astype(np.float64) ** 2 + 1)
    cuts = np.unique(np.searchsorted(work, work[-1] * np.arange(1, count) / count, "right")) if work.size else []
    bounds = [0, *(int(c) for c in cuts if 0 < c < degrees.size), int(degrees.size)]
    return [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]


def _cliques_here(spec: CliqueSpec, ranges: list) -> tuple[list, dict]:
    """On a worker: each range's count (and cliques, dense ids), and what this worker's tables did."""
    graph, device, x = whole_graph(spec.graph_id)
    stats = Stats(synchronize=None if device == "cpu" else x.cuda.get_current_stream().synchronize)
    memory = psutil.virtual_memory().available
    device_budget = spec.device_budget if spec.device_budget is not None else (
        x.cuda.Device().mem_info[0] // 2 if device == "gpu" else memory // 4)
    host_budget = spec.host_budget if spec.host_budget is not None else memory // 2
    results = []
    with tempfile.TemporaryDirectory(prefix="gpipe-mining-", dir=spec.spill_directory) as folder:
        for lo, hi in ranges:
            table = EmbeddingTable(device, device_budget, host_budget, folder, stats)
            try:
                results.append(_one_range(x, graph, spec, table, lo, hi, stats))
            finally:
                table.close()
    return results, stats.summary()


def _one_range(x, graph, spec: CliqueSpec, table: EmbeddingTable, lo: int, hi: int, stats: Stats) -> tuple:
    table.add(0, -1, x.arange(lo, hi, dtype=graph.indices.dtype), None)
    for column in range(1, spec.k):
        stats.count(column, 0)
        for c, chunk in enumerate(table.columns[column - 1]):
            vertex, parent = table.arrays(chunk)
            for new_vertex, new_parent in extend(x, graph, vertex, parent, spec.capacity, stats.timer):
                if new_vertex.shape[0]:
                    table.add(column, c, new_vertex, new_parent)
        if len(table.columns) == column:  # nothing extended: no clique starts in this range
            return 0, np.empty((0, spec.k), np.int64) if spec.listing else None
        if not spec.listing:
            table.drop(column - 1)
    count = sum(chunk.size for chunk in table.columns[-1])
    return count, _rows(x, table, spec.k) if spec.listing else None


def _rows(x, table: EmbeddingTable, k: int) -> np.ndarray:
    """The table's embeddings as rows of vertices: each last-column chunk followed up its parents."""
    blocks = [np.empty((0, k), np.int64)]
    for chunk in table.columns[k - 1]:
        vertex, index = table.arrays(chunk)
        columns = [vertex]
        above = chunk
        for column in range(k - 2, -1, -1):
            above = table.columns[column][above.parent_chunk]
            vertex, parent = table.arrays(above)
            columns.append(vertex[index])
            index = parent[index] if parent is not None else None
        blocks.append(to_host(x.stack(columns[::-1], axis=1)).astype(np.int64))
    return np.concatenate(blocks)
