"""The counting package's one contact with the cluster (through public ``gpipe.runtime`` names only): work on the
whole data graph's CSR, and work split by contiguous ranges over the graph's workers."""

from __future__ import annotations

import numpy as np

from ..backend import to_host
from ..graph import Graph
from ..runtime import call_workers, store


def on_csr(g: Graph, function, *args):
    """``function(indptr, indices, *args)`` on the whole graph's CSR (int64 numpy arrays, rows sorted): on the
    worker of its first replica, where it already is, or, for a partitioned graph, on the client, which gathers
    the partitions."""
    held, unit = g.holders
    if g.mode == "replicated":
        return call_workers(g.client, [(held[0], _on_partition, (g.graph_id, 0, function, *args), {})], held,
                            "counting: candidate graph", unit)[0]
    calls = [(held[p], _partition_csr, (g.graph_id, p), {}) for p in range(g.num_partitions)]
    pieces = call_workers(g.client, calls, held, "counting: data graph", unit)
    degrees = np.concatenate([np.diff(indptr) for indptr, _ in pieces])
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    return function(indptr, np.concatenate([indices for _, indices in pieces]).astype(np.int64), *args)


def _partition_csr(graph_id: str, part: int) -> tuple[np.ndarray, np.ndarray]:
    p = store().partitions.as_held(graph_id, part)
    return to_host(p.indptr).astype(np.int64), to_host(p.indices).astype(np.int64)


def _on_partition(graph_id: str, part: int, function, *args):
    return function(*_partition_csr(graph_id, part), *args)


def spread(g: Graph, function, total: int, *args) -> list:
    """``function(start, count, *args)`` on each of the graph's workers, for contiguous ranges covering
    ``0..total-1`` in order; the results in that order (a worker with an empty range is not called)."""
    held, unit = g.holders
    workers = sorted(set(held.values()))
    cuts = [total * i // len(workers) for i in range(len(workers) + 1)]
    calls = [(w, function, (lo, hi - lo, *args), {}) for w, lo, hi in zip(workers, cuts, cuts[1:]) if hi > lo]
    return call_workers(g.client, calls, held, "counting", unit)
