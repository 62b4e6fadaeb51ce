"""The counting package's one contact with the cluster (through public ``gpipe.runtime`` names only): work on each
partition of the data graph where it is held, and work split by contiguous ranges over the graph's workers."""

from __future__ import annotations

from ..backend import to_host
from ..graph import Graph
from ..runtime import call_workers, store


def on_partitions(g: Graph, phase: str, function, *args) -> list:
    """``function(indptr, indices, lo, labels, *args)`` on the rows of each of the graph's partitions, where they
    are held (a replicated graph's one partition: on its first replica); the results in partition order.

    ``indptr`` (local) and ``indices`` (global vertex ids) are the partition's CSR of rows ``lo..`` and ``labels``
    the whole graph's vertex labels, all host numpy arrays."""
    g.put_on_workers(["labels"])
    held, unit = g.holders
    calls = [(held[p], _on_partition, (g.graph_id, p, function, *args), {}) for p in range(g.num_partitions)]
    return call_workers(g.client, calls, held, phase, unit)


def _on_partition(graph_id: str, part: int, function, *args):
    p = store().partitions.as_held(graph_id, part)
    labels = to_host(store().partitions.array(graph_id, "labels"))
    return function(to_host(p.indptr), to_host(p.indices), int(p.lo), labels, *args)


def spread(g: Graph, function, total: int, *args) -> list:
    """``function(start, count, *args)`` on each of the graph's workers, for contiguous ranges covering
    ``0..total-1`` in order; the results in that order (a worker with an empty range is not called)."""
    held, unit = g.holders
    workers = sorted(set(held.values()))
    cuts = [total * i // len(workers) for i in range(len(workers) + 1)]
    calls = [(w, function, (lo, hi - lo, *args), {}) for w, lo, hi in zip(workers, cuts, cuts[1:]) if hi > lo]
    return call_workers(g.client, calls, held, "counting", unit)
