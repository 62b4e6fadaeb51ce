"""A file's bytes read by several threads at once: into host memory, or to a GPU worker's device through pinned
stages (an uncompressed edge list's piece, a CSR ``.npz``'s slices)."""

from __future__ import annotations

import concurrent.futures
import os
from typing import Any

import numpy as np

from ...errors import GpipeFileError

_READ_THREADS = min(8, os.cpu_count() or 1)  # threads reading a piece into a GPU worker's pinned memory
_STAGE_BYTES = 8 << 20  # what each of them reads at a time, into one of its two pinned buffers


def read_to_device(x, path: str, start: int, end: int):
    """Bytes ``start..end`` of a file as a device array of ``x`` (cupy), read by ``_READ_THREADS`` threads at once, a
    range each, each thread reading its range in stages of ``_STAGE_BYTES``, alternately into two pinned buffers of its
    own, each stage copied to the device while the thread reads the next.

    A worker's pinned memory for reading stays ``2 * _READ_THREADS * _STAGE_BYTES``, the same buffers each piece, and
    no thread waits for another. (A pinned buffer of a whole piece, fresh for each piece size, took longer to pin
    than to fill on a VM: the first 1.7 GB edge list read in 512 MB pieces took 1.10 s from the page cache, the next
    0.33 s; stages that were a barrier to every thread made a cold read 1.7 s, not 1.1.)"""
    size = end - start
    text = x.empty(size, x.uint8)
    device = x.cuda.Device()
    step = max(1 << 20, -(-size // _READ_THREADS))
    stage = min(_STAGE_BYTES, step)

    def read(first: int) -> None:
        last = min(first + step, size)
        with device, open(path, "rb") as f:  # a file of its own: the kernel reads ahead of each range
            stream = x.cuda.Stream(non_blocking=True)
            buffers = [np.frombuffer(x.cuda.alloc_pinned_memory(stage), np.uint8, stage) for _ in range(2)]
            copied: list[Any] = [None, None]
            try:
                for k, offset in enumerate(range(first, last, stage)):
                    host = buffers[k % 2][:min(stage, last - offset)]
                    if copied[k % 2] is not None:
                        copied[k % 2].synchronize()  # the buffer's last stage is on the device
                    _pread(f.fileno(), host, path, start + offset)
                    # (asarray would stage it through pinned memory of its own)
                    text[offset:offset + host.size].data.copy_from_host_async(host.ctypes.data, host.size, stream)
                    copied[k % 2] = stream.record()
            finally:  # a read that fails leaves no copy running into memory the pool may hand out again
                stream.synchronize()

    with concurrent.futures.ThreadPoolExecutor(_READ_THREADS) as pool:
        list(pool.map(read, range(0, size, step)))
    return text


def read_into(host: np.ndarray, path: str, start: int) -> None:
    """Bytes ``start..start + host.size`` of the file at ``path`` into ``host`` (uint8), read by ``_READ_THREADS``
    threads at once, a range each."""
    size = host.shape[0]
    step = max(1 << 20, -(-size // _READ_THREADS))
    with open(path, "rb") as f, concurrent.futures.ThreadPoolExecutor(_READ_THREADS) as pool:
        list(pool.map(lambda first: _pread(f.fileno(), host[first:first + step], path, start + first),
                      range(0, size, step)))


def _pread(fd: int, into: np.ndarray, path: str, position: int) -> None:
    """``into.size`` bytes of the open file ``fd`` (at ``path``) from ``position`` into ``into``."""
    view = into.data  # a memoryview
    while len(view):  # a read may return fewer bytes than asked
        got = os.preadv(fd, [view], position)
        if not got:
            raise GpipeFileError(path, None, f"the file ended at byte {position} while it was read")
        view, position = view[got:], position + got
