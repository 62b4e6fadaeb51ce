"""The one place that imports cupy and numba.

``xp(device)`` is numpy or cupy. gpipe's frames are pandas on every device: cudf is not
installed on any GPU host it is tested on, so no path returns cudf (a cudf frame given to
``from_edges`` is copied to pandas, see the README). GPU libraries
are imported lazily, so ``import gpipe`` works on a machine without them, and
asking for a GPU that is not usable raises :class:`DeviceUnavailableError`
saying what is missing — there is no silent fallback to the CPU.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import threading
from collections.abc import Callable, Iterator
from itertools import pairwise
from types import ModuleType
from typing import Any

import numba
import numpy as np

from ._validate import check_choice
from .errors import DeviceUnavailableError, GpipeError

DEVICES = ("auto", "cpu", "gpu")

_INSTALL_HINT = (
    "install the GPU extra with `pip install 'gpipe[gpu]'` (cupy-cuda13x and dask-cuda; "
    "use cupy-cuda12x on CUDA 12 drivers)"
)


@functools.cache
def gpu_problem() -> str | None:
    """Why no GPU is usable in this process, or None when one is."""
    try:
        import cupy
    except ImportError as exc:
        return f"cupy cannot be imported ({exc}); {_INSTALL_HINT}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # cupy raises CUDARuntimeError without a driver
        return f"cupy found no CUDA driver or device ({exc})"
    if count == 0:
        return "no CUDA device is visible (check CUDA_VISIBLE_DEVICES and nvidia-smi)"
    return None


def resolve(device: str) -> str:
    """Turn 'auto' | 'cpu' | 'gpu' into 'cpu' or 'gpu' for this process."""
    check_choice("device", device, DEVICES)
    if device == "cpu":
        return "cpu"
    problem = gpu_problem()
    if device == "gpu" and problem is not None:
        raise DeviceUnavailableError(f"device='gpu' was asked for, but {problem}")
    return "cpu" if problem is not None else "gpu"


def gpu_count() -> int:
    """Visible CUDA devices, without initialising CUDA in this process when cupy is absent."""
    if gpu_problem() is not None:
        return 0
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


def xp(device: str) -> ModuleType:
    """numpy for 'cpu', cupy for 'gpu'."""
    if device == "gpu":
        resolve("gpu")
        return importlib.import_module("cupy")
    return np


def device_of(array) -> str:
    return "cpu" if isinstance(array, np.ndarray) else "gpu"


STAGE_BYTES = 1 << 26  # a larger copy between a GPU and pageable host memory goes through two pinned buffers this big
_stage_lock = threading.Lock()


def to_host(array) -> np.ndarray:
    """A numpy copy (or the array itself) of a numpy or cupy array."""
    if isinstance(array, np.ndarray):
        return array
    if array.nbytes <= STAGE_BYTES:
        return array.get()
    return _staged_copy(xp("gpu").ascontiguousarray(array), np.empty(array.shape, array.dtype))


_DLPACK_CPU = 1  # DLPack's device type of host memory (kDLCPU); a GPU's is 2 (kDLCUDA)


def as_host(value) -> np.ndarray:
    """``value`` as a numpy array: a numpy or cupy array, any DLPack producer (a torch tensor, on the CPU or on a
    GPU: read through DLPack, no torch import), or what ``np.asarray`` takes (a list). A CPU producer's memory is
    shared, not copied; a GPU's is copied to the host."""
    if isinstance(value, np.ndarray):
        return value
    device = getattr(value, "__dlpack_device__", None)
    if device is not None and device()[0] != _DLPACK_CPU:
        return to_host(xp("gpu").from_dlpack(value))
    if hasattr(value, "__dlpack__"):
        return np.from_dlpack(value)
    return np.asarray(value)


def to_device(array, device: str) -> Any:
    """``array`` (numpy or cupy) on ``device``."""
    if device == "cpu":
        return to_host(array)
    cupy = xp("gpu")
    if isinstance(array, np.ndarray) and array.nbytes > STAGE_BYTES:
        return _staged_copy(np.ascontiguousarray(array), cupy.empty(array.shape, array.dtype))
    return cupy.asarray(array)


def minus_ones(x, shape, dtype) -> Any:
    """An array of -1 of a signed integer ``dtype``: on a GPU one memset of 0xFF bytes (-1 in two's complement),
    no elementwise kernel (CuPy compiles one for each indexing width: a first fill past 2**31 elements on a host
    compiled its own)."""
    if x is np:
        return np.full(shape, -1, dtype)
    out = x.empty(shape, dtype)
    x.cuda.runtime.memsetAsync(out.data.ptr, 0xFF, out.nbytes, x.cuda.get_current_stream().ptr)
    return out


def group_max(x, values, group) -> Any:
    """Per-group maximum of non-negative ``values``; ``group`` is sorted, dense from 0."""
    out = x.zeros(int(group[-1]) + 1, dtype=values.dtype)
    if x is np:
        np.maximum.at(out, group, values)
    elif values.dtype.kind == "f":  # as integers of their bits, which order non-negative floats as their values:
        # cupyx.scatter_max of float64 gave inf for groups of biases up to 1.8e308 (CuPy 14.2 on an H100)
        signed = np.dtype(f"int{values.dtype.itemsize * 8}")
        importlib.import_module("cupyx").scatter_max(out.view(signed), group, values.view(signed))
    else:
        importlib.import_module("cupyx").scatter_max(out, group, values)
    return out


def scatter_min(x, out, index, values) -> None:
    """``out[index] = min(out[index], values)`` with repeated indices, in place (integers)."""
    if x is np:
        np.minimum.at(out, index, values)
    else:
        importlib.import_module("cupyx").scatter_min(out, index, values)


def free_memory(x) -> int:
    """Bytes this process can allocate now on the device of array module ``x`` (cupy: its current GPU's free
    memory and what CuPy's pool holds unused, which the driver counts as taken: after a large run, nearly all of
    an H200, and work sized by the driver's count alone went in batches of megabytes; numpy: the host's available
    memory)."""
    if x is np:
        return importlib.import_module("psutil").virtual_memory().available
    return x.cuda.Device().mem_info[0] + x.get_default_memory_pool().free_bytes()


def can_allocate(x, nbytes: int) -> bool:
    """Whether one allocation of ``nbytes`` fits now on the device of array module ``x``: within the driver's free
    memory, once CuPy's pool has given back the blocks it holds unused if that is short. What :func:`free_memory`
    counts of the pool is the free pieces of its allocations, which one large allocation cannot use: a 27 GB block
    was refused with 128 GB allocated of an H200's 141 (metropolis-hastings, R-MAT 24 x10 on two H200s)."""
    if x is np:
        return nbytes <= free_memory(np)
    if nbytes <= x.cuda.Device().mem_info[0]:
        return True
    x.get_default_memory_pool().free_all_blocks()
    return nbytes <= x.cuda.Device().mem_info[0]


def ranges_within(ends: np.ndarray, most: int) -> list[slice]:
    """Consecutive ranges of items whose sizes (``ends``: their running total, on the host) add up to at most
    ``most`` each; an item larger than ``most`` is a range of its own."""
    count = int(ends.shape[0])
    cuts = [0]
    while cuts[-1] < count:
        before = int(ends[cuts[-1] - 1]) if cuts[-1] else 0
        cuts.append(max(cuts[-1] + 1, int(np.searchsorted(ends, before + most, side="right"))))
    return [slice(a, b) for a, b in pairwise(cuts)]


def segments(x, sizes) -> tuple[Any, Any]:
    """For items laid out segment after segment (``sizes[i]`` in segment ``i``): each item's segment and its
    position within it."""
    ends = x.cumsum(sizes)
    total = int(ends[-1]) if sizes.shape[0] else 0
    item = x.arange(total, dtype=x.int64)
    if x is np:  # O(items); cupy's repeat takes no array of counts
        segment = np.repeat(np.arange(sizes.shape[0], dtype=np.int64), sizes)
    else:
        segment = x.searchsorted(ends, item, side="right")
    return segment, item - (ends - sizes)[segment]


def unique(x, values) -> Any:
    """The sorted distinct ``values`` (an array of ``x``). On the host by a sort: NumPy's own (a hash table since
    2.3) takes ~80x as long on a million mostly distinct integers."""
    if x is not np:
        return x.unique(values)
    values = np.sort(values, axis=None)
    keep = np.ones(values.shape[0], bool)
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def cpu_kernel(*, parallel: bool = False, fastmath: bool = False) -> Callable[[Callable], Any]:
    """Decorator compiling a CPU twin with numba (cached on disk, GIL released); ``fastmath``: its float sums may
    be reordered (vectorized), as a CUDA kernel's sums across lanes are."""
    return numba.njit(cache=True, nogil=True, parallel=parallel, fastmath=fastmath)


prange = numba.prange


def set_cpu_threads(n: int) -> None:
    """Threads the numba CPU twins may use in this process."""
    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]


_FORKED_AFTER_OPENMP = False  # whether this process was forked from one whose parallel CPU twins ran on OpenMP


def _note_fork() -> None:
    global _FORKED_AFTER_OPENMP
    try:
        _FORKED_AFTER_OPENMP = numba.threading_layer() == "omp"
    except ValueError:  # no parallel twin ran before the fork: this process starts numba's threads afresh
        pass


os.register_at_fork(after_in_child=_note_fork)


def check_cpu_kernels_run_here(who: str, remedy: str) -> None:
    """Raise :class:`GpipeError` where numba's parallel CPU twins cannot run: in a process forked from one in which
    they ran on GNU OpenMP's threads, which numba's OpenMP layer ends at its first parallel kernel (GNU OpenMP is not
    fork-safe), so that the caller learns why and ``remedy`` instead of a process gone."""
    if _FORKED_AFTER_OPENMP:
        raise GpipeError(f"{who} cannot run in this process: it was forked from one whose numba CPU kernels ran on "
                         f"OpenMP threads, which do not survive a fork; start the process with 'spawn' or "
                         f"'forkserver' ({remedy})")


@contextlib.contextmanager
def cpu_threads(n: int) -> Iterator[None]:
    """The numba CPU twins called in this block (on this thread) use at most ``n`` threads: a small job's thread pool
    costs more to wake than it saves (a streaming update: 0.6 ms on one thread, 11 ms on a busy pool of two)."""
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n), before)))
    try:
        yield
    finally:
        numba.set_num_threads(before)


@functools.cache
def _stage_buffers(device_id: int, size: int) -> tuple[np.ndarray, ...]:
    """This process's two pinned buffers of ``size`` bytes for copies to and from GPU ``device_id``."""
    cupy = xp("gpu")
    return tuple(np.frombuffer(cupy.cuda.alloc_pinned_memory(size), np.uint8, size) for _ in range(2))


@cpu_kernel(parallel=True)
def _copy_bytes(src, dst):
    """``dst[:] = src`` (uint8 arrays), in ranges on every thread: the page faults of fresh host memory too."""
    parts = 64
    size = (src.shape[0] + parts - 1) // parts
    for i in prange(parts):
        dst[i * size:(i + 1) * size] = src[i * size:(i + 1) * size]


def _staged_copy(src, dst):
    """``src`` (contiguous) copied into ``dst`` of the same shape, one on the GPU and one in pageable host memory,
    through two pinned buffers in turn: one chunk crosses the bus while the threads move the one before between the
    pinned buffer and pageable memory (a pageable copy of its own crosses at a few GB/s, page faults and all)."""
    cupy = xp("gpu")
    runtime = cupy.cuda.runtime
    to_gpu = isinstance(src, np.ndarray)
    device, host = (dst, src) if to_gpu else (src, dst)
    host_bytes = host.reshape(-1).view(np.uint8)
    n, size = device.nbytes, STAGE_BYTES
    chunks = [(lo, min(n, lo + size)) for lo in range(0, n, size)]
    stream = cupy.cuda.get_current_stream()
    with _stage_lock:
        buffers = _stage_buffers(device.device.id, size)
        done = []  # each chunk's copy across the bus
        for k, (lo, hi) in enumerate(chunks):
            buffer = buffers[k % 2][:hi - lo]
            if to_gpu:
                if k >= 2:
                    done[k - 2].synchronize()  # the buffer's last chunk has crossed
                _copy_bytes(host_bytes[lo:hi], buffer)
                runtime.memcpyAsync(device.data.ptr + lo, buffer.ctypes.data, hi - lo, runtime.memcpyHostToDevice,
                                    stream.ptr)
                done.append(stream.record())
                continue
            runtime.memcpyAsync(buffer.ctypes.data, device.data.ptr + lo, hi - lo, runtime.memcpyDeviceToHost,
                                stream.ptr)
            done.append(stream.record())
            if k:
                _unstage(done[k - 1], buffers[(k - 1) % 2], host_bytes, chunks[k - 1])
        if not to_gpu:
            _unstage(done[-1], buffers[(len(chunks) - 1) % 2], host_bytes, chunks[-1])
        done[-1].synchronize()  # the buffers are free for the next copy
    return dst


def _unstage(event, buffer, host_bytes, chunk) -> None:
    lo, hi = chunk
    event.synchronize()
    _copy_bytes(buffer[:hi - lo], host_bytes[lo:hi])


def versions() -> dict:
    """Versions of the stack, for `gpipe info` and run summaries."""
    out = {}
    for name in ("gpipe", "dask", "distributed", "numpy", "pandas", "pyarrow", "numba", "cupy", "cudf", "dask_cuda"):
        try:
            out[name] = importlib.import_module(name).__version__
        except Exception:
            out[name] = None
    out["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    out["gpus"] = gpu_count()
    return out
