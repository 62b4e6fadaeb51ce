"""The sampling space of dynamic graphs and the walks on them: CUDA against the CPU twins (run with -m gpu on a GPU
host)."""

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.backend import gpu_problem
from gpipe.dynamic import DynamicGraph, SamplingSpace

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


@pytest.mark.parametrize("walk, kwargs", [
    (gpipe.walks.deepwalk, {}),
    (gpipe.walks.deepwalk, {"weighted": True}),
    (gpipe.walks.with_jump, {"jump": 0.2, "weighted": True}),
    (gpipe.walks.ppr, {"sources": list(range(0, 200, 3)), "restart": 0.2, "walks_per_source": 3, "weighted": True}),
    (gpipe.walks.node2vec, {"p": 0.5, "q": 2.0}),
    (gpipe.walks.node2vec, {"p": 2.0, "q": 0.5, "weighted": True}),
    (gpipe.walks.node2vec, {"p": 0.01, "q": 50.0, "weighted": True}),  # the exact draw after 256 rejections
])
@pytest.mark.parametrize("partitions, scale", [(1, 1.0), (4, 10.0)])
def test_dynamic_walks_cuda_equal_cpu_twin(gpu_cluster, cpu_cluster, walk, kwargs, partitions, scale):
    rng = np.random.default_rng(partitions)
    n, m = 200, 3000
    weight = rng.integers(1, 2**20, m) if scale == 1.0 else np.round(rng.uniform(0.01, 50, m), 4)
    frame = pd.DataFrame({"src": rng.integers(0, n, m), "dst": rng.integers(0, n, m), "weight": weight})
    src, dst = rng.integers(0, n + 10, 2000), rng.integers(0, n + 10, 2000)  # new vertices too
    inserted = np.round(rng.uniform(0.5, 2**12, 2000), 3)

    def run():
        g = gpipe.from_edges(frame, weight="weight", directed=True, partitions=partitions, mode="partitioned")
        dg = DynamicGraph.from_graph(g, scale=scale)
        dg.insert_edges(src, dst, inserted)
        gone = dg.edges().iloc[::7]
        dg.delete_edges(gone.src, gone.dst)
        changed = dg.edges().iloc[3::11]
        dg.update_weights(changed.src, changed.dst, np.full(len(changed), 7.25))
        return walk(dg, length=30, seed=13, **kwargs).compute()

    with gpu_cluster.as_current():
        gpu = run()
    with cpu_cluster.as_current():
        cpu = run()
    assert (cpu[:, 1:] >= 0).any()
    np.testing.assert_array_equal(gpu, cpu)
