"""A dask array sorted as key ranges: sampled splitters cut every block into ranges, and each range is sorted
by the multi-merge sort where Dask runs it (a worker, with its device), all lazily."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from ..backend import to_host
from ..errors import GpipeValueError

SAMPLES_PER_BLOCK = 256  # keys sampled from each block to place the splitters


def sort_by_ranges(sort, encode, keys, values, budget, device):
    """``keys`` (and ``values``) as lazy dask arrays of as many ranges as ``keys`` has blocks, each sorted by
    ``sort`` (the multi-merge sort of a list of chunks); ``encode`` gives the keys' uint64 codes (``keys`` checked
    by the caller)."""
    import dask
    import dask.array as da

    count = keys.numblocks[0]
    key_blocks = list(keys.to_delayed().ravel())
    value_blocks = [None] * count
    if values is not None:
        if not type(values).__module__.startswith("dask.array") or values.ndim == 0 or \
                values.shape[0] != keys.shape[0] and not np.isnan(values.shape[0] + keys.shape[0]):
            raise GpipeValueError(f"'values' must be a dask array with a row per key like 'keys', got "
                                  f"{type(values).__name__} of shape {getattr(values, 'shape', None)}")
        if np.isnan(keys.shape[0]) or np.isnan(values.shape[0]):
            raise GpipeValueError("'keys' and 'values' must have known chunk sizes to be matched row by row "
                                  "(dask's compute_chunk_sizes() finds them)")
        values = values.rechunk((keys.chunks[0],) + tuple((size,) for size in values.shape[1:]))
        value_blocks = list(values.to_delayed().reshape(count))
    samples = [dask.delayed(_sample)(encode, block) for block in key_blocks]
    splitters = dask.delayed(_splitters)(samples, count)
    parts = [dask.delayed(_split, nout=count)(encode, k, v, splitters)
             for k, v in zip(key_blocks, value_blocks, strict=True)]
    ranges = [dask.delayed(_sort_range, nout=2)(sort, [p[r] for p in parts], budget, device) for r in range(count)]
    sorted_keys = da.concatenate([da.from_delayed(k, (np.nan,), keys.dtype) for k, _ in ranges])
    if values is None:
        return sorted_keys
    return sorted_keys, da.concatenate([da.from_delayed(v, (np.nan, *values.shape[1:]), values.dtype)
                                        for _, v in ranges])


def _sample(encode, block) -> np.ndarray:
    codes = encode(np, to_host(block))
    return codes[np.linspace(0, codes.shape[0] - 1, min(codes.shape[0], SAMPLES_PER_BLOCK)).astype(np.int64)]


def _splitters(samples: list, count: int) -> np.ndarray:
    """The codes cutting the sampled keys into ``count`` ranges of equal size."""
    codes = np.sort(np.concatenate(samples))
    return codes[np.arange(1, count) * codes.shape[0] // count] if codes.shape[0] else np.zeros(0, np.uint64)


def _split(encode, keys, values, splitters) -> tuple:
    """A block's keys (and values) by range, in their order: equal keys share a range, so the sort stays stable."""
    keys = to_host(keys)
    ranges = np.searchsorted(splitters, encode(np, keys), "right")
    order = np.argsort(ranges, kind="stable")
    bounds = np.searchsorted(ranges[order], np.arange(splitters.shape[0] + 2))
    keys = keys[order]
    values = None if values is None else to_host(values)[order]
    return tuple((keys[a:b], None if values is None else values[a:b]) for a, b in pairwise(bounds))


def _sort_range(sort, parts: list, budget, device) -> tuple:
    keys = [k for k, _ in parts]
    if parts[0][1] is None:
        return np.concatenate(sort(keys, budget=budget, device=device)), None
    sorted_keys, sorted_values = sort(keys, [v for _, v in parts], budget=budget, device=device)
    return np.concatenate(sorted_keys), np.concatenate(sorted_values)
