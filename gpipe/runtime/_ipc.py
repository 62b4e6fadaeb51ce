"""Walkers between GPU workers of one host through CUDA IPC: device to device, not through sockets.

Dask's TCP comms move a GPU array as device -> host -> socket -> host ->
device (a few GB/s); UCX would go device to device but is not always
installed. Two processes on one host can share device memory directly: the
sender packs a destination's walkers into one allocation of its own and sends
only its IPC handle (64 bytes) and layout; the receiver opens the handle, copies
the walkers into its own device memory (over NVLink or PCIe peer to peer) and
closes it; the sender frees the allocation once the receiver has answered.
"""

from __future__ import annotations

from ..backend import xp

ALIGN = 256  # bytes: each field starts on an aligned offset of the shared allocation
_DEFAULT = 4  # cudaMemcpyDefault: the driver tells host, device and peer apart by address


def pack(walkers: dict) -> tuple[int, list]:
    """Copy the walker arrays into one new device allocation: (its pointer, the layout to read it back)."""
    cupy = xp("gpu")
    runtime = cupy.cuda.runtime
    layout, size = [], 0
    for name, array in walkers.items():
        layout.append((name, array.dtype.str, int(array.shape[0]), size))
        size += -(-array.nbytes // ALIGN) * ALIGN
    cupy.cuda.get_current_stream().synchronize()  # the walkers were computed on this thread's stream
    pointer = runtime.malloc(max(size, ALIGN))
    try:
        for (_, _, _, offset), array in zip(layout, walkers.values()):
            array = cupy.ascontiguousarray(array)
            if array.nbytes:
                runtime.memcpy(pointer + offset, array.data.ptr, array.nbytes, _DEFAULT)
    except BaseException:
        runtime.free(pointer)
        raise
    return pointer, layout


def handle(pointer: int) -> bytes:
    return xp("gpu").cuda.runtime.ipcGetMemHandle(pointer)


def free(pointer: int) -> None:
    xp("gpu").cuda.runtime.free(pointer)


def unpack(ipc_handle: bytes, layout: list) -> dict:
    """The walkers another process packed, copied into this process's device memory."""
    cupy = xp("gpu")
    runtime = cupy.cuda.runtime
    source = runtime.ipcOpenMemHandle(ipc_handle)
    try:
        walkers = {}
        for name, dtype, length, offset in layout:
            array = cupy.empty(length, dtype)
            if array.nbytes:
                runtime.memcpy(array.data.ptr, source + offset, array.nbytes, _DEFAULT)
            walkers[name] = array
    finally:
        runtime.ipcCloseMemHandle(source)
    return walkers


def nbytes(walkers: dict) -> int:
    return sum(int(a.nbytes) for a in walkers.values())
