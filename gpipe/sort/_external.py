"""GAMMA's out-of-core sort: runs sorted within a device budget, then merged by independent multi-merge subtasks.

Keys of every numeric dtype are sorted as order-preserving uint64 codes (so
one kernel serves them all) and decoded on the way out; the float keys that
share a code (zeros of either sign, NaNs) are put back bit for bit, in the
order they came in, since the sort is stable. Sorted runs wait in
host memory; a subtask gathers, from each run of a merge group, the piece
between two consecutive checkpoints, so every subtask fits the budget and the
subtasks come out in order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import psutil

from .. import config
from .._validate import check_bytes, check_choice
from ..backend import DEVICES, device_of, resolve, to_device, to_host, xp
from ..errors import GpipeValueError
from ._merge import merge_pieces
from ._ranges import sort_by_ranges

_SIGN = np.uint64(1 << 63)
# Device bytes per element while a run is sorted or a subtask merged: the key, its code, rank, hits and their
# prefix sum, the merged code, plus the value twice (in and out).
_KEY_WORK_BYTES = 40
_MIN_ITEMS = 64  # the smallest budget, in elements, that still leaves each of two merged runs a piece


def external_sort(keys, values=None, *, budget=None, device: str | None = None) -> Any:
    """Sort keys (and the values that follow them) larger than the device's memory, by GAMMA's multi-merge.

    The input is cut into runs that fit ``budget`` and each run is sorted on
    the device; the sorted runs wait in host memory. Checkpoints taken every
    so many elements of each run cut all runs at the same key boundaries into
    subtasks that each fit the budget; each subtask is merged independently
    (each element finds its place by binary searches in the other pieces and
    a prefix sum) and comes out in order, one chunk after another. When more
    runs are left than a subtask can take pieces of, they are merged in groups
    first (more passes).

    A dask array is sorted lazily as key ranges, one per block: splitters
    placed by a sample of every block cut each block into ranges, and each
    range is sorted as above in one task, wherever Dask runs it (on a
    cluster, spread over the workers, each with its own device and budget).

    Parameters
    ----------
    keys : numpy.ndarray, cupy.ndarray, list of arrays or dask.array.Array
        One-dimensional integer or floating-point keys of at most 64 bits
        (``numpy.longdouble`` is refused: its codes would round it); a list
        of arrays is taken one chunk at a time (a list of numbers is refused:
        ``numpy.asarray`` it first).
    values : same kind as ``keys``, optional
        Values that follow their keys: as many rows as there are keys (in
        chunks of the same lengths when chunked).
    budget : int or str, optional
        Bytes of device memory the sort may use at once (``'256 MB'``);
        default ``gpipe.memory.sort-budget`` (``auto``: half the GPU's free
        memory, or a quarter of the host's available memory on the CPU).
    device : {'auto', 'cpu', 'gpu'}, optional
        Where runs are sorted and merged (default ``gpipe.device``; the GPU
        for cupy input).

    Returns
    -------
    sorted_keys or (sorted_keys, sorted_values)
        Of the input's kind: one array for an array, a list of chunks (the
        merge's subtasks) for a list, a lazy dask array of key ranges (chunks
        of sizes unknown until computed; a range holds every key equal to one
        of its keys, however many) for a dask array.
        The sort is stable: equal keys keep their input order. As in
        :func:`numpy.sort`, ``-0.0`` equals ``0.0`` and NaNs come last; every
        key comes back bit for bit (a ``-0.0`` as ``-0.0``, a NaN with its
        sign and payload).

    Raises
    ------
    GpipeValueError
        Keys that are not one-dimensional integers or floats of at most 64
        bits, values of another length, or a budget too small for 64
        elements.

    Examples
    --------
    >>> import numpy as np
    >>> from gpipe.sort import external_sort
    >>> keys = np.random.default_rng(0).integers(0, 100, 1000)
    >>> out, order = external_sort(keys, np.arange(1000), budget="20 kB", device="cpu")
    >>> bool((out == np.sort(keys)).all()), bool((order == np.argsort(keys, kind="stable")).all())
    (True, True)
    """
    kind = _kind(keys)
    if kind == "dask":
        _check_keys(keys)
        return sort_by_ranges(external_sort, _encode, keys, values, budget, device)
    key_chunks = _chunks(keys)
    value_chunks = None if values is None else _chunks(values)
    device = resolve("gpu" if kind == "cupy" else config.get("device") if device is None else
                     check_choice("device", device, DEVICES))
    runs, pending, dtype, items = [], [], None, 0
    tied: tuple[list, list] = ([], [])
    for i, k in enumerate(key_chunks):
        v = None if value_chunks is None else next(value_chunks, None)
        k, v = _checked(k, v, i, value_chunks is not None, kind == "list")
        if dtype is None:
            dtype, value_bytes = k.dtype, 0 if v is None else v.dtype.itemsize * int(np.prod(v.shape[1:]))
            items = _budget_items(budget, device, value_bytes)
        elif k.dtype != dtype:
            raise GpipeValueError(f"'keys' must be chunks of one dtype, got {dtype} and then {k.dtype} (chunk {i})")
        pending.append((k, v))
        if k.dtype.kind == "f":
            tied[0].append(to_host(k[k == 0]))
            tied[1].append(to_host(k[xp(device_of(k)).isnan(k)]))
        while sum(len(p[0]) for p in pending) >= items:
            pending, run = _take(pending, items)
            runs.append(_sorted_run(device, run))
    if value_chunks is not None and next(value_chunks, None) is not None:
        raise GpipeValueError("'values' must come in as many chunks as 'keys', got more")
    if dtype is None:
        raise GpipeValueError("'keys' must hold at least one chunk, got an empty list")
    if pending and (not runs or sum(len(k) for k, _ in pending)):
        runs.append(_sorted_run(device, _take(pending, None)[1]))
    out = list(_decoded(xp(device), _merged(device, runs, items), dtype, *tied))
    return _as_kind(kind, out, values is not None)


def _kind(data) -> str:
    if isinstance(data, np.ndarray):
        return "numpy"
    if isinstance(data, (list, tuple)):
        return "list"
    if type(data).__module__.startswith("dask.array"):
        return "dask"
    if type(data).__module__.startswith("cupy"):
        return "cupy"
    raise GpipeValueError(f"'keys' must be a numpy or cupy array, a list of them or a dask array, got "
                          f"{type(data).__name__}")


def _chunks(data):
    return iter(data) if isinstance(data, (list, tuple)) else iter([data])


def _checked(keys, values, chunk: int, want_values: bool, listed: bool):
    if listed and np.ndim(keys) == 0:  # [3, 1, 2]: numbers where chunks were expected
        raise GpipeValueError(f"'keys' given as a list must be a list of one-dimensional chunks, got the number "
                              f"{keys!r} as chunk {chunk} (sort a list of numbers as one array: numpy.asarray(keys))")
    keys = keys if hasattr(keys, "dtype") and hasattr(keys, "ndim") else np.asarray(keys)
    _check_keys(keys, chunk)
    if want_values:
        if values is None:
            raise GpipeValueError(f"'values' must come in as many chunks as 'keys', got fewer ({chunk})")
        values = values if hasattr(values, "dtype") else np.asarray(values)
        if values.ndim == 0 or values.shape[0] != keys.shape[0]:
            raise GpipeValueError(f"'values' must have a row per key, got {values.shape[0] if values.ndim else 0} "
                                  f"rows for {keys.shape[0]} keys (chunk {chunk})")
    return keys, values


def _check_keys(keys, chunk: int | None = None) -> None:
    """Keys whose uint64 codes order them exactly: one-dimensional integers, or floats of at most 64 bits (a long
    double's extra bits would be rounded away, making distinct keys equal)."""
    if keys.ndim != 1 or keys.dtype.kind not in "iuf" or keys.dtype.itemsize > 8:
        where = "" if chunk is None else f" (chunk {chunk})"
        raise GpipeValueError(f"'keys' must be one-dimensional integers or floats of at most 64 bits, got "
                              f"{keys.ndim}-d {keys.dtype}{where}")


def _budget_items(budget, device: str, value_bytes: int) -> int:
    """How many elements the budget lets a run sort or a subtask merge at once."""
    name = "budget"
    if budget is None:
        name, budget = "gpipe.memory.sort-budget", config.get("memory.sort-budget")
    if budget == "auto":
        if device == "gpu":
            budget = xp("gpu").cuda.Device().mem_info[0] // 2
        else:
            budget = psutil.virtual_memory().available // 4
    budget = check_bytes(name, budget, minimum=1)
    items = budget // (_KEY_WORK_BYTES + 2 * value_bytes)
    if items < _MIN_ITEMS:
        raise GpipeValueError(f"'{name}' must leave room for {_MIN_ITEMS} elements ({_KEY_WORK_BYTES + 2 * value_bytes}"
                              f" bytes each), got {budget} bytes")
    return items


def _take(pending: list, items: int | None):
    """The first ``items`` elements of the pending chunks (all with None), and what is left."""
    keys = _concat([k for k, _ in pending])
    values = None if pending[0][1] is None else _concat([v for _, v in pending])
    cut = keys.shape[0] if items is None else items
    rest = [(keys[cut:], None if values is None else values[cut:])] if cut < keys.shape[0] else []
    return rest, (keys[:cut], None if values is None else values[:cut])


def _concat(arrays: list):
    return xp(device_of(arrays[0])).concatenate(arrays) if len(arrays) > 1 else arrays[0]


def _sorted_run(device: str, run) -> tuple:
    """One run sorted on the device (stably), kept in host memory as (codes, values)."""
    keys, values = run
    x = xp(device)
    codes = _encode(x, to_device(keys, device))
    order = x.argsort(codes, kind="stable") if x is np else x.argsort(codes)  # cupy's argsort is a stable radix sort
    return to_host(codes[order]), None if values is None else to_host(to_device(values, device)[order])


def _encode(x, keys):
    """uint64 codes in the order of ``keys``: the sign bit flipped for signed ints, IEEE bits folded for floats."""
    if keys.dtype.kind == "u":
        return keys.astype(x.uint64)
    if keys.dtype.kind == "i":
        return keys.astype(x.int64).view(x.uint64) ^ _SIGN
    # one NaN, last; -0.0 with 0.0, as numpy.sort has them (and no signalling NaN cast)
    f = x.where(x.isnan(keys), x.nan, x.where(keys == 0, 0.0, keys)).astype(x.float64)
    bits = f.view(x.uint64)
    return x.where(bits >= _SIGN, ~bits, bits | _SIGN)


def _decode(x, codes, dtype):
    if dtype.kind == "u":
        return codes.astype(dtype)
    if dtype.kind == "i":
        return (codes ^ _SIGN).view(x.int64).astype(dtype)
    return x.where(codes >= _SIGN, codes ^ _SIGN, ~codes).view(x.float64).astype(dtype)


def _decoded(x, chunks, dtype, zeros: list, nans: list):
    """The sorted (codes, values) chunks with their keys decoded, each zero and NaN given back its own bits: the
    ``zeros`` and ``nans`` of the input, in input order, are the order in which the stable sort lets them out."""
    tied = list(zip(_encode(np, np.array([0.0, np.nan])), map(np.concatenate, (zeros, nans)), strict=True)) \
        if dtype.kind == "f" else []
    taken = [0] * len(tied)
    for codes, values in chunks:
        keys = _decode(x, codes, dtype)
        for i, (code, originals) in enumerate(tied):
            where = x.flatnonzero(codes == code)
            keys[where] = x.asarray(originals[taken[i]:taken[i] + where.shape[0]])
            taken[i] += where.shape[0]
        yield keys, values


def _merged(device: str, runs: list, items: int):
    """The merged runs, in order, one subtask's (codes, values) at a time on ``device``."""
    fan_in = max(2, items // _MIN_ITEMS)
    while len(runs) > fan_in:  # too many runs for one subtask to take a piece of each: merge them in groups first
        runs = [_on_host(list(_multimerge(device, runs[i:i + fan_in], items))) for i in range(0, len(runs), fan_in)]
    if len(runs) == 1:
        yield tuple(None if a is None else to_device(a, device) for a in runs[0])
    else:
        yield from _multimerge(device, runs, items)


def _on_host(chunks: list) -> tuple:
    """Merged chunks as one host run."""
    keys = np.concatenate([to_host(k) for k, _ in chunks])
    return keys, None if chunks[0][1] is None else np.concatenate([to_host(v) for _, v in chunks])


def _multimerge(device: str, runs: list, items: int):
    """Merge sorted host ``runs`` subtask by subtask: each takes, from every run, the elements between two
    consecutive checkpoints of the order (key, run, position), so no piece is longer than the checkpoints'
    spacing, however many keys are equal."""
    spacing = max(1, items // len(runs))
    checkpoints = [(k[spacing::spacing], np.full(len(k[spacing::spacing]), r), np.arange(spacing, len(k), spacing))
                   for r, (k, _) in enumerate(runs)]
    key, run, position = (np.concatenate(c) for c in zip(*checkpoints, strict=True))
    order = np.lexsort((position, run, key))
    key, run, position = key[order], run[order], position[order]
    bounds = np.empty((len(runs), key.shape[0] + 2), dtype=np.int64)  # matched index of each checkpoint in each run
    for r, (k, _) in enumerate(runs):
        matched = np.where(run > r, np.searchsorted(k, key, "right"), np.searchsorted(k, key, "left"))
        bounds[r] = np.concatenate([[0], np.where(run == r, position, matched), [len(k)]])
    for t in range(key.shape[0] + 1):
        pieces = [(k[bounds[r, t]:bounds[r, t + 1]], None if v is None else v[bounds[r, t]:bounds[r, t + 1]])
                  for r, (k, v) in enumerate(runs)]
        starts = np.concatenate([[0], np.cumsum([len(p) for p, _ in pieces])])
        if starts[-1] == 0:
            continue
        keys = to_device(np.concatenate([p for p, _ in pieces]), device)
        values = None if runs[0][1] is None else to_device(np.concatenate([v for _, v in pieces]), device)
        yield merge_pieces(xp(device), keys, values, starts)


def _as_kind(kind: str, chunks: list, with_values: bool):
    """The sorted chunks as the input was given: one array or a list."""
    if kind in ("numpy", "cupy"):
        device = "gpu" if kind == "cupy" else "cpu"
        parts = [(to_device(k, device), None if v is None else to_device(v, device)) for k, v in chunks]
        x = xp(device)
        keys = x.concatenate([k for k, _ in parts])
        return (keys, x.concatenate([v for _, v in parts])) if with_values else keys
    return ([k for k, _ in chunks], [v for _, v in chunks]) if with_values else [k for k, _ in chunks]
