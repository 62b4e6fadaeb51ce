"""What a family's functions find on a worker: the state a run keeps there (in its :class:`~gpipe.runtime.Run`,
ended as one), its outputs, a graph's partitions and arrays as they are held there, and the worker's own memory and
address. Each is called on a worker, in a task or a direct call the family made through :mod:`gpipe.runtime.calls`.
"""

from __future__ import annotations

from typing import Any

from .._store import store


def end_here(run_id: str) -> None:
    """On a worker: end run ``run_id`` here; what it holds goes, and what comes for it later finds it ended."""
    store().drop_run(run_id)


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
