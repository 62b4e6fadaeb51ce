"""How a family's own work reaches the workers holding its graph, and what it finds there.

Walks and samplers run as supersteps (``run_supersteps``); the rest of every
family (mining, counting, dynamic graphs, GNN training, PPR's scores) reaches
the workers only through these: where to run (on each worker holding the
graph, on each partition where it is held, or over ranges of a total spread
across the holders; a task anywhere else is Dask's, ``_tasks.submit``), the state a run keeps on a
worker (in its :class:`Run`, ended as one), a partition and the graph's arrays
as they are held on the worker, and how a run's state or a graph is let go.
Each wait names what a lost worker held.
"""

from __future__ import annotations

import contextlib
from itertools import pairwise
from typing import Any

from ._session import run_later
from ._store import drop_graph, drop_run, store
from ._watch import call_workers


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


def end_here(run_id: str) -> None:
    """On a worker: end run ``run_id`` here; what it holds goes, and what comes for it later finds it ended."""
    store().drop_run(run_id)


# -- on a worker


def run_state(run_id: str, kind: type) -> Any:
    """On a worker: the state a run keeps here, an object of the family's state type ``kind`` (made by ``kind()``
    on first use), held by its :class:`Run` until the run ends; an error once the run has ended here (it is not
    made again)."""
    return store().going(run_id).state(kind)


def run_outputs(run_id: str, key, partitions: dict[int, str], group) -> list:
    """On a worker: group ``key`` of a run's outputs on each of ``partitions`` (partition -> worker), in their order:
    taken here, or by the worker holding them and fetched from it (``group``: piece sets -> every group by key,
    applied once per partition)."""
    return store().outputs.gather_group(run_id, key, partitions, group)


def output_on_device(limit: int | str | None) -> bool:
    """On a worker: whether an output block made now stays on its device (its live arrays within ``limit``,
    ``gpipe.memory.output-limit`` as the client read it), else goes to host memory."""
    return store().outputs.keeps_on_device(limit)


def run_going(run_id: str) -> bool:
    """On a worker: whether run ``run_id`` goes on here (made here on first use; false once it has ended: another
    rank failed, or the client let it go)."""
    return store().run(run_id) is not None


def worker_address() -> str:
    """On a worker: its address."""
    return store().worker_address


def held_partition(graph_id: str, part: int) -> Any:
    """On a worker: partition ``part`` of a graph where it is held (an out-of-memory one where it sits, staged in
    host memory or on the device, not copied in)."""
    return store().partitions.as_held(graph_id, part)


def partition(graph_id: str, part: int) -> Any:
    """On a worker: partition ``part`` of a graph held here, on the worker's device."""
    return store().partitions.get(graph_id, part)


def keep_partition(graph_id: str, part: int, value, budget: int | None = None) -> None:
    """On a worker: hold ``value`` (a partition, a dynamic graph's sampling space or a snapshot's view of one) as
    partition ``part`` of ``graph_id``, until the graph is let go (:func:`end_graph`); with a ``budget`` of
    partitions on the device, staged in host memory (an out-of-memory graph)."""
    store().partitions.put(graph_id, part, value, budget)


def keep_arrays(graph_id: str, arrays: dict) -> None:
    """On a worker: hold per-vertex arrays of a graph by name, read by :func:`graph_array`; they go with it."""
    store().partitions.put_arrays(graph_id, arrays)


def fetch_partitions(graph_id: str, placement: list[str]) -> list[dict]:
    """On a worker: every partition of a graph (its ``indptr``, ``indices`` and ``weights``), from the workers of
    ``placement`` holding them, this one's own as they are."""
    return store().peers.fetch_partitions(graph_id, placement)


def holds_partition(graph_id: str, part: int) -> bool:
    """On a worker: whether it holds partition ``part`` of ``graph_id``."""
    return store().partitions.holds(graph_id, part)


def worker_memory() -> tuple:
    """On a worker: ``(host bytes, device bytes or None, the output limit 'auto' means)`` it can hold."""
    return store().memory()


def replica(graph_id: str) -> Any:
    """On a worker: its whole copy of a replicated graph (partition 0)."""
    return store().partitions.get(graph_id, 0)


def graph_array(graph_id: str, name: str) -> Any:
    """On a worker: an array of a graph put on every worker (``Graph.put_on_workers``: its degrees, labels ...)."""
    return store().partitions.array(graph_id, name)
