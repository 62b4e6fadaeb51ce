"""How a family's own work reaches the workers holding its graph, and how what it left there is let go.

Walks and samplers run as supersteps (``run_supersteps``); the rest of every
family (mining, counting, dynamic graphs, GNN training, PPR's scores) reaches
the workers holding its graph through these: on each of them, on each
partition where it is held, or over ranges of a total spread across them
(what the calls find there: :mod:`gpipe.runtime.workers`); and a run's state
(in its :class:`~gpipe.runtime.Run`, ended as one) or a graph is let go.
Each wait names what a lost worker held.
"""

from __future__ import annotations

import contextlib
from itertools import pairwise

from .._session import run_later
from .._store import drop_graph, drop_run
from .._watch import call_workers
from ..workers import end_here


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
    calls: list[tuple] = [(held[p], function, (g.graph_id, p, *args), {}) for p in range(g.num_partitions)]
    return call_workers(g.client, calls, held, phase, unit)


def spread(g, phase: str, function, total: int, *args) -> list:
    """``function(start, count, *args)`` on each worker holding ``g``, for contiguous ranges covering
    ``0..total-1`` in order; the results in that order (a worker with an empty range is not called)."""
    workers = holder_workers(g)
    cuts = [total * i // len(workers) for i in range(len(workers) + 1)]
    return on_each(g, phase, [(w, function, (lo, hi - lo, *args))
                              for w, (lo, hi) in zip(workers, pairwise(cuts), strict=True) if hi > lo])


def end_run(g, run_id: str) -> None:
    """Let what a run keeps on the graph's workers (the only ones it reaches) go: straight from the client, or,
    should that fail, through the scheduler to every worker."""
    try:
        on_holders(g, "end of the run", end_here, run_id)
    except Exception:
        with contextlib.suppress(Exception):
            g.client.run(drop_run, run_id)


def end_graph(client, graph_id: str) -> None:
    """Let a graph's partitions (or a snapshot's views of them) go on every worker now."""
    client.run(drop_graph, graph_id)


def end_graph_later(client, graph_id: str) -> None:
    """:func:`end_graph` from any thread (a garbage collector's too), without waiting."""
    run_later(client, drop_graph, graph_id)


def end_later(client, run_id: str) -> None:
    """:func:`end_run` on every worker from any thread (a garbage collector's too), without waiting."""
    run_later(client, drop_run, run_id)
