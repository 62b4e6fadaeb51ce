"""gpipe.sort on the GPU against the CPU twin (run with -m gpu on a GPU host)."""

import numpy as np
import pytest

from gpipe.backend import gpu_problem
from gpipe.sort import external_sort
from gpipe.sort._merge import merge_pieces

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)

import cupy  # noqa: E402


def test_merge_kernel_equals_cpu_twin():
    rng = np.random.default_rng(3)
    pieces = [np.sort(rng.integers(0, 50, n).astype(np.uint64)) for n in (300, 0, 1000, 7, 513)]
    keys, starts = np.concatenate(pieces), np.cumsum([0] + [len(p) for p in pieces])
    values = np.arange(len(keys))
    cpu = merge_pieces(np, keys, values, starts)
    gpu = merge_pieces(cupy, cupy.asarray(keys), cupy.asarray(values), starts)
    for c, g in zip(cpu, gpu):
        np.testing.assert_array_equal(g.get(), c)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.float64])
def test_external_sort_on_gpu_equals_cpu(dtype):
    keys = np.random.default_rng(5).integers(0, 5_000, 200_000).astype(dtype)
    budget = keys.nbytes * 2 // 4
    cpu_keys, cpu_values = external_sort(keys, np.arange(keys.size), budget=budget, device="cpu")
    gpu_keys, gpu_values = external_sort(cupy.asarray(keys), cupy.asarray(np.arange(keys.size)), budget=budget)
    np.testing.assert_array_equal(gpu_keys.get(), cpu_keys)
    np.testing.assert_array_equal(gpu_values.get(), cpu_values)


def test_float_keys_come_back_from_the_gpu_bit_for_bit():
    nans = np.array([0x7FF8000000000001, 0xFFF8000000000ABC, 0x7FF0000000000001], np.uint64).view(np.float64)
    keys = np.random.default_rng(11).permutation(np.tile(np.concatenate([nans, [-0.0, 0.0, 3.0, -np.inf]]), 500))
    out, order = external_sort(cupy.asarray(keys), cupy.asarray(np.arange(keys.size)), budget=64 * 56)
    expected = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(order.get(), expected)
    np.testing.assert_array_equal(out.get().view(np.uint64), keys[expected].view(np.uint64))
