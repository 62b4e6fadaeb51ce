"""How a family's own work reaches the workers holding its graph, and what it finds there.

Walks and samplers run as supersteps (``run_supersteps``); mining and counting
run their own steps, and reach the workers only through these: where to run
(on each worker holding the graph, on each partition where it is held, on
explicit workers, or over ranges of a total spread across the holders), the
state a run keeps on a worker (in its :class:`Run`, ended as one), a
partition's rows and the graph's arrays as they are held on the worker, and
how a run's state is let go. Each wait names what a lost worker held.
"""

from __future__ import annotations

import contextlib

from ..errors import GpipeError
from ._session import run_later
from ._store import drop_run, store
from ._watch import call_workers, gather_pinned


def holder_workers(g) -> list[str]:
    """The workers holding ``g`` (its partitions or replicas), in address order."""
    return sorted(set(g.holders[0].values()))


def on_holders(g, phase: str, function, *args) -> list:
    """``function(*args)`` on each worker holding ``g``, in address order; their results."""
    return on_each(g, phase, [(w, function, args) for w in holder_workers(g)])


def on_each(g, phase: str, calls: list[tuple]) -> list:
    """Each ``(worker, function, args)`` on that worker (one of ``g``'s); the results in that order."""
    held, unit = g.holders
    return call_workers(g.client, [(w, function, args, {}) for w, function, args in calls], held, phase, unit)


def on_partitions(g, phase: str, function, *args) -> list:
    """``function(graph_id, part, *args)`` on the worker holding each of ``g``'s partitions (a replicated graph's
    one partition: on its first replica); the results in partition order."""
    held, unit = g.holders
    calls = [(held[p], function, (g.graph_id, p, *args), {}) for p in range(g.num_partitions)]
    return call_workers(g.client, calls, held, phase, unit)


def spread(g, phase: str, function, total: int, *args) -> list:
    """``function(start, count, *args)`` on each worker holding ``g``, for contiguous ranges covering
    ``0..total-1`` in order; the results in that order (a worker with an empty range is not called)."""
    workers = holder_workers(g)
    cuts = [total * i // len(workers) for i in range(len(workers) + 1)]
    return on_each(g, phase, [(w, function, (lo, hi - lo, *args)) for w, lo, hi in zip(workers, cuts, cuts[1:])
                              if hi > lo])


def on_worker(client, worker: str, function, *args):
    """A future of ``function(*args)`` run as a task on ``worker`` and no other (where a run keeps its rows)."""
    return client.submit(function, *args, workers=[worker], allow_other_workers=False, pure=False)


def on_every_worker(client, value):
    """A future of ``value``, copied to every worker once (a table each block's task reads: the id map)."""
    [future] = client.scatter([value], broadcast=True, hash=False)
    return future


def gathered(client, futures: list, holders: tuple, phase: str) -> list:
    """The results of ``futures`` in order; a worker of ``holders`` (a graph's) that leaves meanwhile is named."""
    held, unit = holders
    return gather_pinned(client, futures, held, phase, unit)


def end_run(g, run_id: str) -> None:
    """Let what a run keeps on the graph's workers (the only ones it reaches) go: straight from the client, or,
    should that fail, through the scheduler to every worker."""
    try:
        on_holders(g, "end of the run", _drop_here, run_id)
    except Exception:
        with contextlib.suppress(Exception):
            g.client.run(drop_run, run_id)


def end_later(client, run_id: str) -> None:
    """:func:`end_run` on every worker from any thread (a garbage collector's too), without waiting."""
    run_later(client, drop_run, run_id)


def _drop_here(run_id: str) -> None:
    store().drop_run(run_id)


# -- on a worker


def run_state(run_id: str, family: str, made: bool = False) -> dict:
    """On a worker: the state a ``family`` run keeps here, held by its :class:`Run` until the run ends (``made``:
    the run starts here, else it must be running here; a run that has ended is not made again)."""
    here = store()
    run = here.run(run_id, late=not made)
    if run is None:
        raise GpipeError(f"{family} run {run_id} has ended on worker {here.worker_address}")
    return run.state


def worker_address() -> str:
    """On a worker: its address."""
    return store().worker_address


def held_partition(graph_id: str, part: int):
    """On a worker: partition ``part`` of a graph where it is held (an out-of-memory one where it sits, staged in
    host memory or on the device, not copied in)."""
    return store().partitions.as_held(graph_id, part)


def replica(graph_id: str):
    """On a worker: its whole copy of a replicated graph (partition 0)."""
    return store().partitions.get(graph_id, 0)


def graph_array(graph_id: str, name: str):
    """On a worker: an array of a graph put on every worker (``Graph.put_on_workers``: its degrees, labels ...)."""
    return store().partitions.array(graph_id, name)
