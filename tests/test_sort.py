"""gpipe.sort.external_sort against numpy.sort: inputs several times the budget, every order and dtype."""

import dask
import dask.array as da
import numpy as np
import pytest

from gpipe import GpipeValueError
from gpipe.sort import external_sort
from gpipe.sort._merge import merge_pieces

N = 20_000
BUDGET = N * 16 // 4  # the keys and int64 values take 4x the budget


def _keys(dtype, order, seed=7):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        keys = rng.normal(0, 1e6, N).round(-3)  # rounded: many equal keys
    else:
        keys = rng.integers(0, 2_000, N)
        if np.dtype(dtype).kind == "i":
            keys -= 1_000
    keys = keys.astype(dtype)
    return {"random": keys, "sorted": np.sort(keys), "reversed": np.sort(keys)[::-1].copy()}[order]


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.float64])
@pytest.mark.parametrize("order", ["random", "sorted", "reversed"])
def test_sort_of_four_budgets_equals_numpy_and_values_follow_stably(dtype, order):
    keys = _keys(dtype, order)
    out, values = external_sort(keys, np.arange(N), budget=BUDGET, device="cpu")
    np.testing.assert_array_equal(out, np.sort(keys))
    np.testing.assert_array_equal(values, np.argsort(keys, kind="stable"))
    assert out.dtype == keys.dtype


def test_runs_beyond_one_subtasks_reach_are_merged_in_passes():
    """A budget of 128 elements: 157 runs, more than one subtask takes pieces of, merged two by two in passes."""
    keys = _keys(np.int64, "random")
    out, values = external_sort(keys, np.arange(N), budget=128 * 56, device="cpu")
    np.testing.assert_array_equal(values, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(out, np.sort(keys))


def test_one_key_repeated_is_cut_into_subtasks_within_the_budget():
    keys = np.full(N, 3, dtype=np.int64)
    chunks, values = external_sort([keys[:7000], keys[7000:]], [np.arange(7000), np.arange(7000, N)],
                                   budget=BUDGET, device="cpu")
    assert max(len(c) for c in chunks) <= BUDGET // 56
    np.testing.assert_array_equal(np.concatenate(values), np.arange(N))


def test_chunked_input_gives_chunks():
    keys = _keys(np.float64, "random")
    chunks = external_sort(np.array_split(keys, 7), budget=BUDGET, device="cpu")
    assert isinstance(chunks, list) and len(chunks) > 1
    np.testing.assert_array_equal(np.concatenate(chunks), np.sort(keys))


@pytest.mark.parametrize("order", ["random", "reversed"])
def test_dask_input_is_sorted_lazily_as_key_ranges(order):
    keys = _keys(np.int64, order)
    lazy, values = external_sort(da.from_array(keys, chunks=3000), da.from_array(np.arange(N) * 2, chunks=2000),
                                 budget=BUDGET, device="cpu")
    assert isinstance(lazy, da.Array) and lazy.numblocks == (7,)
    with dask.config.set(scheduler="sync"):
        ranges = [lazy.blocks[i].compute() for i in range(7)]
    assert all(r[-1] < s[0] for r, s in zip(ranges, ranges[1:]) if len(r) and len(s))  # a key in one range only
    np.testing.assert_array_equal(np.concatenate(ranges), np.sort(keys))
    np.testing.assert_array_equal(values.compute(), 2 * np.argsort(keys, kind="stable"))


def test_dask_ranges_are_sorted_on_the_workers(cpu):
    keys = _keys(np.float64, "random")
    lazy = external_sort(da.from_array(keys, chunks=5000), budget=BUDGET, device="cpu")
    np.testing.assert_array_equal(lazy.compute(), np.sort(keys))


def test_small_types_nans_and_signed_zeros_sort_as_numpy_does():
    keys = np.array([3.5, np.nan, -0.0, -np.inf, 0.0, -np.nan, np.inf, -2.0] * 40, dtype=np.float32)
    out = external_sort(keys, budget=64 * 40, device="cpu")
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.sort(keys))
    small = np.random.default_rng(1).integers(-128, 127, 1000).astype(np.int8)
    np.testing.assert_array_equal(external_sort(small, budget=64 * 40, device="cpu"), np.sort(small))


def _bits(a):
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _float_specials(dtype, copies: int):
    """Signed zeros, NaNs of either sign with payloads (quiet and signalling), infinities and subnormals, shuffled."""
    uint = {4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    exponent_bits = {4: 8, 8: 11}[np.dtype(dtype).itemsize]
    mantissa = np.dtype(dtype).itemsize * 8 - 1 - exponent_bits
    nan = uint(((1 << exponent_bits) - 1) << mantissa)
    sign = uint(1 << (np.dtype(dtype).itemsize * 8 - 1))
    nans = np.array([nan | uint(1 << (mantissa - 1)), nan | uint(1 << (mantissa - 1)) | uint(0xabc), nan | uint(1),
                     sign | nan | uint(1 << (mantissa - 1)), sign | nan | uint(7)], uint).view(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    base = np.concatenate([nans, np.array([-0.0, 0.0, -0.0, 3.0, -1.0, np.inf, -np.inf, tiny, -tiny], dtype)])
    return np.random.default_rng(11).permutation(np.tile(base, copies))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", ["array", "chunks", "dask"])
def test_float_keys_come_back_bit_for_bit_in_numpys_stable_order(dtype, shape):
    """-0.0 stays -0.0 and every NaN keeps its sign and payload, each where numpy's stable sort puts it: zeros of
    either sign and NaNs of any payload are equal keys, kept in their input order, across runs and key ranges."""
    keys = _float_specials(dtype, 100)
    budget = 64 * 56  # 64 keys with their int64 values a run: 22 runs
    values = np.arange(keys.size)
    if shape == "array":
        out, order = external_sort(keys, values, budget=budget, device="cpu")
    elif shape == "chunks":
        out, order = (np.concatenate(c) for c in external_sort(np.array_split(keys, 5), np.array_split(values, 5),
                                                                 budget=budget, device="cpu"))
    else:
        lazy, lazy_values = external_sort(da.from_array(keys, chunks=300), da.from_array(values, chunks=300),
                                          budget=budget, device="cpu")
        with dask.config.set(scheduler="sync"):
            out, order = lazy.compute(), lazy_values.compute()
    expected = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(order, expected)
    np.testing.assert_array_equal(_bits(out), _bits(keys[expected]))
    assert external_sort(np.array([3.0, -0.0, 1.0]), device="cpu").view(np.uint64)[0] == np.uint64(1 << 63)


def test_the_merge_places_every_element_of_the_pieces():
    pieces = [np.array([1, 4, 4, 9], np.uint64), np.array([], np.uint64), np.array([0, 4, 10], np.uint64),
              np.array([4], np.uint64)]
    keys = np.concatenate(pieces)
    starts = np.cumsum([0] + [len(p) for p in pieces])
    out, values = merge_pieces(np, keys, np.arange(len(keys)), starts)
    np.testing.assert_array_equal(out, np.sort(keys))
    np.testing.assert_array_equal(values, np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("keys, message", [
    (np.array(["b", "a"]), "'keys' must be one-dimensional integers or floats of at most 64 bits, got 1-d <U1"),
    ([np.array([1, 2]), np.array([[3]])],
     "'keys' must be one-dimensional integers or floats of at most 64 bits, got 2-d int64 (chunk 1)"),
    (np.array([True, False]), "got 1-d bool"),
    (np.array([1, 2j]), "got 1-d complex128"),
    (np.array([1, 1 + 2**-60, .5], np.longdouble),  # float64 codes would make two of the three keys one
     f"'keys' must be one-dimensional integers or floats of at most 64 bits, got 1-d {np.dtype(np.longdouble)}"),
    (da.from_array(np.array([1, 1 + 2**-60, .5], np.longdouble)), f"got 1-d {np.dtype(np.longdouble)}"),
    ([3, 1, 2], "'keys' given as a list must be a list of one-dimensional chunks, got the number 3 as chunk 0 "
                "(sort a list of numbers as one array: numpy.asarray(keys))"),
    ("abc", "'keys' must be a numpy or cupy array, a list of them or a dask array, got str"),
])
def test_keys_that_are_not_one_dimensional_numbers_of_64_bits_at_most_are_refused_by_name(keys, message):
    with pytest.raises(GpipeValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        external_sort(keys, device="cpu")


def test_bad_budgets_and_values_are_refused_by_name():
    with pytest.raises(GpipeValueError, match="'budget' must leave room for 64 elements .40 bytes each., "
                                              "got 100 bytes"):
        external_sort(np.arange(10), budget=100, device="cpu")
    with pytest.raises(GpipeValueError, match="'budget' must be a byte count such as 1000000 or '4 GB', got 'lots'"):
        external_sort(np.arange(10), budget="lots", device="cpu")
    with pytest.raises(GpipeValueError, match="'values' must have a row per key, got 3 rows for 10 keys"):
        external_sort(np.arange(10), np.arange(3), device="cpu")
    with pytest.raises(GpipeValueError, match="'values' must be a dask array with a row per key like 'keys', got "
                                              "ndarray of shape .10,."):
        external_sort(da.arange(10, chunks=5), np.arange(10), device="cpu")
    with pytest.raises(GpipeValueError, match="'keys' and 'values' must have known chunk sizes"):
        unknown = da.arange(10, chunks=5)
        external_sort(unknown[unknown >= 0], unknown[unknown >= 0], device="cpu")
