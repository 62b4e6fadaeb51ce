"""The counting package's one contact with the cluster (through public ``gpipe.runtime`` names only): the data
graph's CSR brought to the client, and work split by contiguous ranges over the graph's workers."""

from __future__ import annotations

import numpy as np

from ..backend import to_host
from ..graph import Graph
from ..runtime import call_workers, store


def data_csr(g: Graph) -> tuple[np.ndarray, np.ndarray]:
    """The whole graph's ``indptr`` (int64) and ``indices`` (int64, sorted in each row), gathered to the client."""
    held, unit = g.holders
    parts = range(g.num_partitions)  # a replicated graph is one partition, whole on every replica
    calls = [(held[0] if g.mode == "replicated" else held[p], _partition_csr, (g.graph_id, p), {}) for p in parts]
    pieces = call_workers(g.client, calls, held, "counting: data graph", unit)
    degrees = np.concatenate([np.diff(indptr) for indptr, _ in pieces])
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    return indptr, np.concatenate([indices for _, indices in pieces]).astype(np.int64)


def _partition_csr(graph_id: str, part: int) -> tuple[np.ndarray, np.ndarray]:
    p = store().partition(graph_id, part, in_place=True)
    return to_host(p.indptr), to_host(p.indices)


def spread(g: Graph, function, total: int, *args) -> list:
    """``function(start, count, *args)`` on each of the graph's workers, for contiguous ranges covering
    ``0..total-1`` in order; the results in that order (a worker with an empty range is not called)."""
    held, unit = g.holders
    workers = sorted(set(held.values()))
    cuts = [total * i // len(workers) for i in range(len(workers) + 1)]
    calls = [(w, function, (lo, hi - lo, *args), {}) for w, lo, hi in zip(workers, cuts, cuts[1:]) if hi > lo]
    return call_workers(g.client, calls, held, "counting", unit)
