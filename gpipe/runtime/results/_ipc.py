"""Results the workers write straight into the client's GPU memory (CUDA IPC): ``compute(device=True)``.

The client makes one allocation of the result's size on its current GPU and
exports it (``cudaIpcGetMemHandle``); each worker holding blocks opens it
(``cudaIpcOpenMemHandle``, peer access enabled where the GPUs differ), writes
its blocks' rows there from its own device memory, synchronizes and closes it.
No byte passes through host memory or Dask's comms: the reply is a ``None``.
The client and the workers must share a host, the workers must compute on
GPUs; otherwise ``compute(device=True)`` is refused, naming why (there is no
other path it would take instead).
"""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass

import numpy as np

from ...backend import gpu_problem, xp
from ...errors import DeviceUnavailableError, GpipeError, GpipeValueError
from .._session import current
from .._superstep import worker_device

ALIGN = 256  # each column starts on a 256-byte boundary of the allocation


@dataclass(frozen=True)
class Column:
    """One array of a result in the client's allocation: ``shape`` of ``dtype`` at byte ``offset``."""

    name: str
    offset: int
    shape: tuple
    dtype: np.dtype


@dataclass(frozen=True)
class DeviceRows:
    """Where a block's rows go in the client's allocation: from row ``first`` of each column, on ``host``."""

    handle: bytes
    host: str
    columns: tuple[Column, ...]
    first: int

    def write(self, values: dict) -> None:
        """On a worker: ``values`` (a column name -> array of this block's rows, on this worker's device or in
        host memory) into the client's allocation, finished when this returns."""
        if worker_device() != "gpu":
            raise GpipeValueError("device=True: the result goes from the workers' GPUs to the client's, and this "
                                  "worker computes on the CPU; use compute() without device=True")
        if socket.gethostname() != self.host:
            raise GpipeValueError(f"device=True: the workers write into the client's GPU memory, which needs the "
                                  f"client on their host; this worker is on {socket.gethostname()!r}, the client "
                                  f"on {self.host!r}")
        cupy = xp("gpu")
        runtime = cupy.cuda.runtime
        ptr = runtime.ipcOpenMemHandle(self.handle, runtime.cudaIpcMemLazyEnablePeerAccess)
        try:
            sent = []  # kept until the copies are done
            for c in self.columns:
                rows = cupy.ascontiguousarray(cupy.asarray(values[c.name]).astype(c.dtype, copy=False))
                if rows.shape[1:] != c.shape[1:] or self.first + len(rows) > c.shape[0]:
                    raise GpipeError(f"device=True: a block's {c.name} of shape {rows.shape} does not fit from row "
                                     f"{self.first} of the result's {c.shape}")
                at = c.offset + self.first * math.prod(c.shape[1:]) * c.dtype.itemsize
                if rows.nbytes:  # a copy between GPUs where they differ (peer access), else within this one
                    runtime.memcpyAsync(ptr + at, rows.data.ptr, rows.nbytes, runtime.memcpyDefault,
                                        cupy.cuda.get_current_stream().ptr)
                sent.append(rows)
        finally:
            cupy.cuda.get_current_stream().synchronize()
            runtime.ipcCloseMemHandle(ptr)


class DeviceResult:
    """The client's allocation of a result's columns on its current GPU (:meth:`allocate`), for each block where
    its rows go (:meth:`rows`), and the arrays once written (:meth:`arrays`), those of dense ids mapped by
    ``id_map`` (None: dense). Refused when made, naming the rule, before any work (the result's sizing too) and
    before anything is allocated: a CPU cluster, no GPU here, ids a GPU array cannot hold."""

    def __init__(self, client, id_map):
        if current(client).device != "gpu":
            raise GpipeValueError("device=True: the result goes from the workers' GPUs to this process's, and this "
                                  "cluster computes on the CPU; use compute() without device=True")
        problem = gpu_problem()
        if problem is not None:
            raise DeviceUnavailableError(f"device=True puts the result on this process's GPU, but {problem}")
        if id_map is not None and id_map.dtype.kind not in "iu":
            raise GpipeValueError(f"device=True needs integer vertex ids (a GPU array holds no strings or objects); "
                                  f"this graph's ids are {id_map.dtype}: use compute()")
        cupy = xp("gpu")
        # with a -1 after them: a dense id of -1 (a walk's padding) maps to -1
        self._ids = None if id_map is None else cupy.asarray(np.append(id_map.astype(np.int64, copy=False),
                                                                       np.int64(-1)))
        self._host = socket.gethostname()

    def allocate(self, columns: dict[str, tuple[tuple, np.dtype]]) -> None:
        """The allocation of ``columns`` (name -> (shape, dtype)), exported for the workers."""
        cupy = xp("gpu")
        laid, offset = [], 0
        for name, (shape, dtype) in columns.items():
            laid.append(Column(name, offset, tuple(shape), np.dtype(dtype)))
            offset += -(-math.prod(shape) * np.dtype(dtype).itemsize // ALIGN) * ALIGN
        self._memory = cupy.cuda.Memory(max(offset, ALIGN))  # its own allocation (not the pool's): it is exported
        self._columns = tuple(laid)
        self._handle = cupy.cuda.runtime.ipcGetMemHandle(self._memory.ptr)

    def rows(self, first: int) -> DeviceRows:
        return DeviceRows(self._handle, self._host, self._columns, first)

    def arrays(self, ids: tuple[str, ...]) -> dict:
        """The columns as written, those named in ``ids`` mapped to original ids."""
        cupy = xp("gpu")
        out = {c.name: cupy.ndarray(c.shape, c.dtype, cupy.cuda.MemoryPointer(self._memory, c.offset))
               for c in self._columns}
        return {k: self._ids[v] if self._ids is not None and k in ids else v for k, v in out.items()}


def written(block, rows: DeviceRows, part, *args) -> None:
    """On a worker: ``part(block, *args)`` (a column name -> the block's rows) written into the client's GPU."""
    rows.write(part(block, *args))

