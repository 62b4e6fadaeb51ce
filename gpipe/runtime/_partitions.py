"""A worker's graph partitions, and the per-vertex arrays of its graphs that runs read.

Tasks pass keys, never the arrays: a partition is put here once when the graph
is built and looked up by ``(graph_id, partition)`` by every task that runs on
this worker. An out-of-memory graph's partitions are staged in host memory and
copied in as runs need them (:class:`Residency`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..backend import xp
from ..errors import GpipeError
from ._residency import Residency


class Partitions:
    """The partitions and graph arrays of one worker (``address``), by graph id."""

    def __init__(self, device: str, address: str):
        self.device = device
        self._address = address
        self._held: dict[tuple[str, int], object] = {}  # on the device
        self._arrays: dict[tuple[str, str], object] = {}  # (graph, name) -> a per-vertex array its runs read
        self.residency = Residency(device)  # the partitions of out-of-memory graphs
        self._spans: dict[tuple[str, int, int], object] = {}  # (graph, first, last) -> those partitions as one
        self._joining = threading.Lock()

    def put(self, graph_id: str, part: int, partition, budget: int | None = None) -> None:
        """Keep a partition: on the device, or — with a ``budget`` of device partitions — staged in host memory."""
        if budget is None:
            self._held[(graph_id, part)] = partition
        else:
            self.residency.put((graph_id, part), partition, budget)

    def get(self, graph_id: str, part: int, pending: Callable[[tuple], int] | None = None, in_place: bool = False):
        """Partition ``part`` on this worker's device (an out-of-memory one is copied in if it is not there).

        For an out-of-memory graph, ``pending`` (a run's walkers waiting for a
        partition) chooses what is evicted to make room: the partition the
        fewest wait for, or without it the least recently used; with
        ``in_place`` a partition not on the device is read where it is staged.
        """
        key = (graph_id, part)
        if self.residency.manages(key):
            if in_place:
                return self.residency.read_in_place(key)
            return self.residency.get(key, pending)
        try:
            return self._held[key]
        except KeyError:
            raise GpipeError(
                f"partition {part} of graph {graph_id} is not on worker {self._address} "
                "(the worker restarted or the graph was released)"
            ) from None

    def span(self, graph_id: str, parts: list[int]):
        """Partitions ``parts`` of a graph (consecutive, held on the device) as one over all their vertices, made on
        first use and kept with the graph, or None where they cannot be joined (an out-of-memory graph's, of a
        kind that does not join, a dynamic graph's spaces, or no room now for the copy that joins them). Each
        becomes a view of the span's arrays, so its edges are held once (see ``Partition.join``): a run reading a
        partition still reads the same rows."""
        key = (graph_id, parts[0], parts[-1])
        with self._joining:
            if key in self._spans:
                return self._spans[key]
            keys = [(graph_id, p) for p in parts]
            if parts != list(range(parts[0], parts[-1] + 1)) or not all(k in self._held for k in keys):
                return None
            kind = type(self._held[keys[0]])
            if not hasattr(kind, "join") or not all(type(self._held[k]) is kind for k in keys):
                return None
            try:
                span, views = kind.join([self._held[k] for k in keys])
            except MemoryError:  # (CuPy's out of memory is one) no room to join them now: each walks on its own
                return None
            self._held.update(zip(keys, views, strict=True))
            self._spans[key] = span
            return span

    def holds(self, graph_id: str, part: int) -> bool:
        """Whether this worker keeps partition ``part`` of graph ``graph_id``."""
        return (graph_id, part) in self._held or self.residency.manages((graph_id, part))

    def as_held(self, graph_id: str, part: int):
        """Partition ``part`` where it is, to read a few rows: an out-of-memory one resident on the device or
        staged in host memory, neither copied in nor counted as a read in place."""
        key = (graph_id, part)
        if self.residency.manages(key):
            return self.residency.resident.get(key) or self.residency.staged[key]
        return self.get(graph_id, part)

    def prefetch(self, graph_id: str, part: int, keep: int, pending: Callable[[tuple], int] | None) -> None:
        """Start copying an out-of-memory partition in while partition ``keep`` computes (GPU workers)."""
        if self.residency.manages((graph_id, part)):
            self.residency.prefetch((graph_id, part), (graph_id, keep), pending)

    def put_arrays(self, graph_id: str, arrays: dict) -> None:
        """Keep per-vertex arrays of a graph (e.g. its degrees) on this worker's device, for its runs to read by name.

        They are the store's, as the partitions are, and go with the graph: not
        Dask data, which Dask may move or drop (its memory manager drops the
        replicas of a broadcast value) without the runs that read it here knowing.
        """
        x = xp(self.device)
        for name, array in arrays.items():
            self._arrays[(graph_id, name)] = x.asarray(array)

    def array(self, graph_id: str, name: str):
        try:
            return self._arrays[(graph_id, name)]
        except KeyError:
            raise GpipeError(f"worker {self._address} holds no {name!r} of graph {graph_id} "
                             "(the worker restarted or the graph was released)") from None

    def transfers(self, graph_id: str) -> list:
        """Copies of this graph's partitions onto the device so far: [count, bytes, seconds, reads in place]."""
        return list(self.residency.counters.get(graph_id, [0, 0, 0.0, 0]))

    def drop(self, graph_id: str) -> int:
        """Let a graph's partitions and arrays go; how many partitions went."""
        keys = [k for k in self._held if k[0] == graph_id]
        for k in keys:
            del self._held[k]
        for array_key in [k for k in self._arrays if k[0] == graph_id]:
            del self._arrays[array_key]
        for span_key in [k for k in self._spans if k[0] == graph_id]:
            del self._spans[span_key]
        staged = sum(1 for k in self.residency.staged if k[0] == graph_id)
        self.residency.drop(graph_id)
        return len(keys) + staged
