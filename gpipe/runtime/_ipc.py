"""Walkers between GPU workers of one host through CUDA IPC: device to device, not through sockets.

Dask's TCP comms move a GPU array as device -> host -> socket -> host ->
device (a few GB/s); UCX would go device to device but is not always
installed. Two processes on one host can share device memory directly: the
sender packs a destination's walkers into a device buffer of its own and sends
only the buffer's IPC handle (64 bytes) and the layout; the receiver copies the
walkers out into its own device memory (over NVLink or PCIe peer to peer).

A run keeps one buffer per destination partition (grown when too small) and
each receiver keeps the sender's buffer open, since opening a handle costs far more than the copy
of a superstep's walkers; both are let go when the run ends (``release``). A
send returns only once the receiver has copied, so a buffer is never
overwritten while it is read.
"""

from __future__ import annotations

import threading

from ..backend import xp

ALIGN = 256  # bytes: each field starts on an aligned offset of the buffer
GROWTH = 1.25  # a buffer too small is replaced by one this much larger than needed
_DEFAULT = 4  # cudaMemcpyDefault: the driver tells host, device and peer apart by address


class Buffers:
    """The IPC buffers of one worker: those it sends from and those it opened, per (run, partition[, sender]).

    The buffer is per destination partition, not per peer: one send packs the
    walkers for all of a peer's partitions before any is read.
    """

    def __init__(self):
        self._exports: dict[tuple[str, int], tuple[int, int, bytes]] = {}  # pointer, capacity, handle
        self._imports: dict[tuple[str, int, str], tuple[bytes, int]] = {}  # handle, pointer here
        self._lock = threading.Lock()

    def pack(self, run_id: str, part: int, walkers: dict) -> tuple[bytes, list]:
        """Copy the walker arrays into the run's buffer for ``part``: (its IPC handle, the layout to read it back)."""
        cupy = xp("gpu")
        runtime = cupy.cuda.runtime
        layout, size = [], 0
        for name, array in walkers.items():
            layout.append((name, array.dtype.str, int(array.shape[0]), size))
            size += -(-array.nbytes // ALIGN) * ALIGN
        with self._lock:
            pointer, capacity, handle = self._exports.get((run_id, part), (0, 0, b""))
            if capacity < size:
                if pointer:
                    runtime.free(pointer)
                    del self._exports[(run_id, part)]
                capacity = max(int(size * GROWTH), ALIGN)
                pointer = runtime.malloc(capacity)
                handle = runtime.ipcGetMemHandle(pointer)
                self._exports[(run_id, part)] = (pointer, capacity, handle)
        cupy.cuda.get_current_stream().synchronize()  # the walkers were computed on this thread's stream
        for (_, _, _, offset), array in zip(layout, walkers.values()):
            array = cupy.ascontiguousarray(array)
            if array.nbytes:
                runtime.memcpy(pointer + offset, array.data.ptr, array.nbytes, _DEFAULT)
        return handle, layout

    def unpack(self, run_id: str, part: int, sender: str, handle: bytes, layout: list) -> dict:
        """The walkers ``sender`` packed for partition ``part``, copied into this worker's device memory."""
        cupy = xp("gpu")
        runtime = cupy.cuda.runtime
        key = (run_id, part, sender)
        with self._lock:
            opened, source = self._imports.get(key, (b"", 0))
            if opened != handle:  # the sender's first buffer of the run, or a larger one
                if source:
                    runtime.ipcCloseMemHandle(source)
                    del self._imports[key]
                source = runtime.ipcOpenMemHandle(handle)
                self._imports[key] = (handle, source)
        walkers = {}  # one message per buffer at a time: the copies need no lock
        for name, dtype, length, offset in layout:
            array = cupy.empty(length, dtype)
            if array.nbytes:
                runtime.memcpy(array.data.ptr, source + offset, array.nbytes, _DEFAULT)
            walkers[name] = array
        return walkers

    def release(self, run_id: str) -> None:
        """Close what the run opened and free what it sent from (once no peer will read it again)."""
        runtime = xp("gpu").cuda.runtime
        with self._lock:
            for key in [k for k in self._imports if k[0] == run_id]:
                runtime.ipcCloseMemHandle(self._imports.pop(key)[1])
            for key in [k for k in self._exports if k[0] == run_id]:
                runtime.free(self._exports.pop(key)[0])


def nbytes(walkers: dict) -> int:
    return sum(int(a.nbytes) for a in walkers.values())
