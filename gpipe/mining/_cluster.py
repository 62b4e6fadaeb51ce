"""What mining needs of the Dask runtime, in one place and through its public door only."""

from __future__ import annotations

from ..runtime import call_workers, store, worker_xp


def on_replicas(g, function, spec, ranges: list) -> tuple[list, list]:
    """``function(spec, ranges)`` on the workers holding the replicated graph ``g``: range ``i`` goes to the
    ``i % W``-th of its ``W`` workers. ``function`` returns (a result per range, a stats summary); the results
    come back in range order, with the summaries of the workers."""
    held, unit = g.holders
    workers = [held[r] for r in sorted(held)]
    calls = [(w, function, (spec, ranges[i::len(workers)]), {}) for i, w in enumerate(workers)]
    replies = call_workers(g.client, calls, held, "mining", unit)
    results = [None] * len(ranges)
    for i, (part, _) in enumerate(replies):
        results[i::len(workers)] = part
    return results, [summary for _, summary in replies]


def whole_graph(graph_id: str):
    """On a worker: the replicated graph (its CSR ``indptr``, ``indices``), its device and array module."""
    here = store()
    return here.partitions.get(graph_id, 0), here.device, worker_xp()
