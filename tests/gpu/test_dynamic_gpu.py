"""The sampling space of dynamic graphs: the CUDA sample against its CPU twin (run with -m gpu on a GPU host)."""

import numpy as np
import pytest

from gpipe.backend import gpu_problem
from gpipe.dynamic import SamplingSpace

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)


@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_dynamic_sample_cuda_equals_cpu_twin(scale):
    rng = np.random.default_rng(5)
    n, m = 50, 4000
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    weight = rng.integers(1, 2**30, m) if scale == 1.0 else np.round(rng.uniform(0.01, 50, m), 4)
    spaces = [SamplingSpace(n, device=device, scale=scale) for device in ("gpu", "cpu")]
    for space in spaces:
        space.apply(["insert"] * m, src, dst, weight)
        space.apply(["delete"] * 500 + ["update"] * 500, src[:1000], dst[:1000], [None] * 500 + [7.5] * 500)
    vertices = rng.integers(0, n + 5, 100_000) % n
    gpu, cpu = (space.sample(vertices, seed=9, streams=np.arange(100_000) * 3) for space in spaces)
    assert (cpu >= 0).any()
    np.testing.assert_array_equal(gpu.get(), cpu)
