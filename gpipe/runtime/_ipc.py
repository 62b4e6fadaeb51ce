"""Walkers between GPU workers of one host through CUDA IPC: device to device, not through sockets.

Dask's TCP comms move a GPU array as device -> host -> socket -> host ->
device (a few GB/s); UCX would go device to device but is not always
installed. Two processes on one host can share device memory directly: the
sender packs a destination's walkers into a device buffer of its own and sends
only the buffer's IPC handle (64 bytes) and the layout; the receiver copies the
walkers out into its own device memory (over NVLink or PCIe peer to peer).

A run keeps one buffer per destination partition and each receiver keeps the
sender's buffer open, since opening a handle costs far more than the copy of a
superstep's walkers; both are let go when the run ends (``release``).

Two processes share nothing that orders their GPU work, so the protocol orders
every copy on the host, where the messages are:

1. ``pack`` returns the handle only once its copies into the buffer are
   complete (a device-to-device ``cudaMemcpy`` does not wait for the copy on
   the host side: a handle sent before it ends lets the receiver read
   half-written walkers; the copy also queues behind any other work on the
   device, e.g. another run's kernels).
2. ``unpack`` returns only once its copies out of the buffer are complete, and
   the receiver answers the sender after it returns; the sender's ``send``
   waits for that answer before anything else may write the buffer (the next
   ``pack`` for the same partition comes after it). So a buffer is never
   rewritten while it is read.
3. A buffer too small for a message is not freed when a larger one replaces it:
   the receiver may still hold it open. It is retired, and freed at the next
   ``pack`` for the same partition: by then the message with the new handle
   was answered, and the receiver closes the old mapping before it opens the
   new one. Whatever is left is freed by ``release`` when the run's walkers are
   all delivered (no receiver reads after that).
"""

from __future__ import annotations

import threading

from ..backend import xp

ALIGN = 256  # bytes: each field starts on an aligned offset of the buffer
GROWTH = 1.25  # a buffer too small is replaced by one this much larger than needed
_DEFAULT = 4  # cudaMemcpyDefault: the driver tells host, device and peer apart by address


class Buffers:
    """The IPC buffers of one run on one worker: those it sends from and those it opened, per partition[, sender].

    The buffer is per destination partition, not per peer: one send packs the
    walkers for all of a peer's partitions before any is read.
    """

    def __init__(self):
        self._exports: dict[int, tuple[int, int, bytes]] = {}  # pointer, capacity, handle
        self._retired: dict[int, list[int]] = {}  # replaced buffers a receiver may still hold open
        self._imports: dict[tuple[int, str], tuple[bytes, int]] = {}  # handle, pointer here
        self._lock = threading.Lock()

    def pack(self, part: int, walkers: dict) -> tuple[bytes, list]:
        """Copy the walker arrays into the run's buffer for ``part``: (its IPC handle, the layout to read it back).

        The copies are complete when it returns (rule 1 of the module's protocol).
        """
        cupy = xp("gpu")
        runtime = cupy.cuda.runtime
        layout, size = [], 0
        for name, array in walkers.items():
            layout.append((name, array.dtype.str, int(array.shape[0]), size))
            size += -(-array.nbytes // ALIGN) * ALIGN
        with self._lock:
            for pointer in self._retired.pop(part, ()):  # rule 3: the receiver has let these go
                runtime.free(pointer)
            pointer, capacity, handle = self._exports.get(part, (0, 0, b""))
            if capacity < size:
                if pointer:
                    self._retired[part] = [pointer]
                capacity = max(int(size * GROWTH), ALIGN)
                pointer = runtime.malloc(capacity)
                handle = runtime.ipcGetMemHandle(pointer)
                self._exports[part] = (pointer, capacity, handle)
        stream = cupy.cuda.get_current_stream()  # the walkers were computed on this thread's stream: copy after them
        for (_, _, _, offset), array in zip(layout, walkers.values()):
            array = cupy.ascontiguousarray(array)
            if array.nbytes:
                runtime.memcpyAsync(pointer + offset, array.data.ptr, array.nbytes, _DEFAULT, stream.ptr)
        stream.synchronize()
        return handle, layout

    def unpack(self, part: int, sender: str, handle: bytes, layout: list) -> dict:
        """The walkers ``sender`` packed for partition ``part``, copied into this worker's device memory.

        The copies are complete when it returns (rule 2 of the module's protocol).
        """
        cupy = xp("gpu")
        runtime = cupy.cuda.runtime
        key = (part, sender)
        with self._lock:
            opened, source = self._imports.get(key, (b"", 0))
            if opened != handle:  # the sender's first buffer of the run, or a larger one
                if source:
                    runtime.ipcCloseMemHandle(source)
                    del self._imports[key]
                source = runtime.ipcOpenMemHandle(handle)
                self._imports[key] = (handle, source)
        walkers = {}  # one message per buffer at a time: the copies need no lock
        stream = cupy.cuda.get_current_stream()
        for name, dtype, length, offset in layout:
            array = cupy.empty(length, dtype)
            if array.nbytes:
                runtime.memcpyAsync(array.data.ptr, source + offset, array.nbytes, _DEFAULT, stream.ptr)
            walkers[name] = array
        stream.synchronize()
        return walkers

    def release(self) -> None:
        """Close what the run opened and free what it sent from (its walkers are all delivered: no one reads)."""
        runtime = xp("gpu").cuda.runtime
        with self._lock:
            for _, source in self._imports.values():
                runtime.ipcCloseMemHandle(source)
            for pointer, _, _ in self._exports.values():
                runtime.free(pointer)
            for pointers in self._retired.values():
                for pointer in pointers:
                    runtime.free(pointer)
            self._imports.clear()
            self._exports.clear()
            self._retired.clear()


def nbytes(walkers: dict) -> int:
    return sum(int(a.nbytes) for a in walkers.values())
