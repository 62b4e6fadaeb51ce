"""Out-of-memory partitions: staged in host memory, at most a budget of them on the device at once.

A graph built with ``gpipe.memory.device-partitions = B`` keeps every partition
of a worker in host memory (pinned on a GPU worker, so copies are asynchronous
DMA) and at most ``B`` of them on the device. A task asking for a partition that
is not resident copies it in, after evicting the resident partition the next
superstep needs least: the fewest walkers waiting for it in the inbox
(``workload`` policy), or the least recently used (``round-robin``). The next
partition a worker will run can be copied in on a side stream while the current
one computes (``prefetch``). A partition that only a few walkers or frontier
entries wait for is not copied in at all: the device reads it in place, in
pinned host memory (``read_in_place``, as UVA sampling in DGL does). Every copy
is counted per graph: transfers, bytes, seconds, and reads in place. On a CPU
worker "the device" is a second copy in memory, so that the same bookkeeping,
prefetching included, is exercised (and tested) everywhere.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from ..backend import xp


class Residency:
    """The staged partitions of one worker and which of them are on its device."""

    def __init__(self, device: str):
        self.device = device
        self.budgets: dict[str, int] = {}
        self.staged: dict[tuple[str, int], Any] = {}  # a graph Partition each
        self.resident: OrderedDict[tuple[str, int], object] = OrderedDict()  # least recently used first
        self.counters: dict[str, list] = {}  # graph id -> [transfers, bytes, seconds, reads in place]
        self._views: dict[tuple[str, int], object] = {}  # staged partitions as the device sees them in place
        self._copies: dict[tuple[str, int], Future] = {}
        self._lock = threading.RLock()
        self._count_lock = threading.Lock()  # apart: a prefetch counts its copy while get() waits for it
        self._copier = ThreadPoolExecutor(1, thread_name_prefix="gpipe-prefetch")

    def manages(self, key: tuple[str, int]) -> bool:
        return key in self.staged

    def put(self, key: tuple[str, int], partition, budget: int) -> None:
        """Stage ``partition`` (built on the device) in host memory; it stays resident while the budget allows."""
        with self._lock:
            self.budgets[key[0]] = budget
            self.counters.setdefault(key[0], [0, 0, 0.0, 0])
            self.staged[key] = partition.with_arrays(
                self._host(partition.indptr), self._host(partition.indices),
                None if partition.weights is None else self._host(partition.weights))
            if len(self._resident_of(key[0])) < budget:
                self.resident[key] = partition

    def get(self, key: tuple[str, int], pending: Callable[[tuple], int] | None = None):
        """The partition on the device: resident, prefetched, or copied in now (evicting one if the budget is full)."""
        with self._lock:
            if key in self.resident:
                self.resident.move_to_end(key)
                return self.resident[key]
            copy = self._copies.pop(key, None)
            if copy is None:
                self._make_room(key, pending, keep=())
                partition = self._copy_in(key)
            else:
                partition = copy.result()  # room was made when the copy started
            self.resident[key] = partition
            return partition

    def in_place(self, key: tuple[str, int], waiting: int, below: float) -> bool:
        """Whether to read ``key`` in place: not on the device, and ``waiting`` < ``below`` x its vertices."""
        with self._lock:
            staged = self.staged.get(key)
            return (staged is not None and key not in self.resident and key not in self._copies
                    and waiting < below * (staged.hi - staged.lo))

    def read_in_place(self, key: tuple[str, int]):
        """The staged partition as the device reads it where it is, in pinned host memory (zero-copy): no copy in.

        A few walkers or frontier entries touch a few of its edges; copying all
        of it in for them would cost more than those reads over the bus. (On a
        CPU worker: the staged copy itself.)
        """
        with self._lock:
            view = self._views.get(key)
            if view is None:
                staged = self.staged[key]
                arrays = [None if a is None else self._in_place(a) for a in (staged.indptr, staged.indices,
                                                                            staged.weights)]
                view = self._views[key] = staged.with_arrays(*arrays)
        with self._count_lock:
            self.counters[key[0]][3] += 1
        return view

    def prefetch(self, key: tuple[str, int], keep: tuple[str, int], pending: Callable[[tuple], int] | None) -> None:
        """Start copying ``key`` in (on a side stream on a GPU), keeping ``keep`` resident; the next get waits."""
        with self._lock:
            if key in self.resident or key in self._copies or key not in self.staged or self.budgets[key[0]] < 2:
                return
            self._make_room(key, pending, keep=(keep,))
            self._copies[key] = self._copier.submit(self._copy_in, key, True)

    def resident_parts(self, graph_id: str) -> list[int]:
        with self._lock:
            return sorted(k[1] for k in self._resident_of(graph_id))

    def drop(self, graph_id: str) -> None:
        with self._lock:
            for key in [k for k in self._copies if k[0] == graph_id]:
                self._copies.pop(key).result()
            for table in (self.staged, self.resident, self._views):
                for key in [k for k in table if k[0] == graph_id]:
                    del table[key]
            self.budgets.pop(graph_id, None)
            self.counters.pop(graph_id, None)

    def _resident_of(self, graph_id: str) -> list[tuple[str, int]]:
        return [k for k in (*self.resident, *self._copies) if k[0] == graph_id]

    def _make_room(self, key: tuple[str, int], pending, keep: tuple) -> None:
        """Evict until one more of ``key``'s graph fits: the fewest waiting walkers first, then least recently used."""
        budget = self.budgets[key[0]]
        while True:
            held = [k for k in self._resident_of(key[0]) if k not in keep and k != key]
            if len(held) + len(keep) < budget or not held:
                return
            order = {k: i for i, k in enumerate(self.resident)}
            candidates = [k for k in held if k in self.resident]  # copies in flight are not evicted
            if not candidates:
                return
            victim = min(candidates, key=lambda k: (pending(k) if pending else 0, order[k]))
            del self.resident[victim]

    def _copy_in(self, key: tuple[str, int], side_stream: bool = False):
        staged = self.staged[key]
        t0 = time.perf_counter()
        if self.device == "gpu":
            cupy = xp("gpu")
            stream = cupy.cuda.Stream(non_blocking=True) if side_stream else cupy.cuda.get_current_stream()
            with stream:
                arrays = [None if a is None else cupy.asarray(a) for a in (staged.indptr, staged.indices,
                                                                            staged.weights)]
            stream.synchronize()
        else:
            arrays = [None if a is None else a.copy() for a in (staged.indptr, staged.indices, staged.weights)]
        seconds = time.perf_counter() - t0
        nbytes = sum(a.nbytes for a in arrays if a is not None)
        with self._count_lock:
            counter = self.counters[key[0]]
            counter[0] += 1
            counter[1] += nbytes
            counter[2] += seconds
        return staged.with_arrays(*arrays)

    def _in_place(self, array):
        if self.device != "gpu":
            return array
        cupy = xp("gpu")  # pinned memory is mapped: with unified addressing the device uses the host pointer
        memory = cupy.cuda.UnownedMemory(array.ctypes.data, array.nbytes, array, cupy.cuda.Device().id)
        return cupy.ndarray(array.shape, array.dtype, cupy.cuda.MemoryPointer(memory, 0))

    def _host(self, array):
        """A host copy: pinned on a GPU worker (asynchronous copies), a plain one on a CPU worker."""
        if self.device != "gpu":
            return np.array(array, copy=True)
        cupy = xp("gpu")
        pinned = cupy.cuda.alloc_pinned_memory(array.nbytes)
        host = np.frombuffer(pinned, array.dtype, array.size).reshape(array.shape)
        array.get(out=host)
        return host


def bandwidth(counter: list) -> float:
    """Bytes per second of a graph's copies."""
    return counter[1] / counter[2] if counter[2] > 0 else 0.0
