"""What mining needs of the Dask runtime, in one place and through its public door only."""

from __future__ import annotations

import contextlib

from .._csr import simple_rows
from ..errors import GpipeError
from ..runtime import call_peer, call_workers, drop_run, gather_pinned, run_later, store, worker_xp


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


def on_worker(client, worker: str, function, *args):
    """A future of ``function(*args)`` run as a task on ``worker`` and no other (where a run keeps its rows)."""
    return client.submit(function, *args, workers=[worker], allow_other_workers=False, pure=False)


def gathered(client, futures: list, holders: tuple, phase: str) -> list:
    """The results of ``futures`` in order; a worker of ``holders`` (a graph's) that leaves meanwhile is named."""
    held, unit = holders
    return gather_pinned(client, futures, held, phase, unit)


def on_every_worker(client, value):
    """A future of ``value``, copied to every worker once (a table each block's task reads: the id map)."""
    [future] = client.scatter([value], broadcast=True, hash=False)
    return future


def whole_graph(graph_id: str):
    """On a worker: the replicated graph as mining reads it (:class:`Rows`: each neighbor once), its device and
    array module."""
    here, x = store(), worker_xp()
    whole = here.partitions.get(graph_id, 0)
    return simple_rows(x, whole.indptr, whole.indices), here.device, x


def on_partition_workers(g, phase: str, function, *args) -> list:
    """``function(*args)`` on each worker holding partitions of the partitioned graph ``g`` (in address order);
    their results."""
    held, unit = g.holders
    return call_workers(g.client, [(w, function, args, {}) for w in sorted(set(held.values()))], held, phase, unit)


def end_run(g, run_id: str) -> None:
    """Let what a run holds on every worker go (its tables, their spill folders)."""
    with contextlib.suppress(Exception):
        g.client.run(drop_run, run_id)


def end_later(client, run_id: str) -> None:
    """:func:`end_run` from any thread (a garbage collector's too), without waiting: a result let go."""
    run_later(client, drop_run, run_id)


def run_state(run_id: str, made: bool = False) -> dict:
    """On a worker: the run's own state here (``made``: the run starts here, else it must be running)."""
    run = store().run(run_id, late=not made)
    if run is None:
        raise GpipeError(f"mining run {run_id} has ended on worker {store().worker_address}")
    return run.state


def address() -> str:
    """On a worker: its address."""
    return store().worker_address


def here() -> tuple:
    """On a worker: its address, its partitions (``Partitions``), its device and array module."""
    at = store()
    return at.worker_address, at.partitions, at.device, worker_xp()


def from_peer(peer: str, function, *args):
    """On a worker: ``function(*args)`` run on worker ``peer`` (here, without a message, when it is this one)."""
    return call_peer(peer, function, *args)


def adjacency(graph_id: str, placement: list, bounds, vertices) -> tuple:
    """On a worker: the CSR ``(indptr, indices)`` of ``vertices`` (sorted, unique), read here or fetched."""
    return store().neighbor_lists(graph_id, list(placement), bounds, vertices)
