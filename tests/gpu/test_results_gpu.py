"""Device results: ``compute(device=True)`` puts walks and samples on the client's GPU, equal to ``compute()``."""

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.backend import gpu_problem

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)

import cupy  # noqa: E402
import dask  # noqa: E402


def _graph(dense: bool):
    """A graph of dense ids (R-MAT), or of ids 7, 10_007, ... that the device result maps on the GPU; its seeds."""
    if dense:
        return gpipe.generators.rmat(scale=10, edge_factor=4, seed=5, partitions=2), np.arange(0, 1024, 5)
    rng = np.random.default_rng(4)
    ids = np.arange(1024) * 10_000 + 7
    edges = pd.DataFrame({"src": ids[rng.integers(0, 1024, 4096)], "dst": ids[rng.integers(0, 1024, 4096)]})
    return gpipe.from_edges(edges, directed=True, partitions=2), ids[::5]


@pytest.mark.parametrize("limit", ["auto", 1])  # the blocks on the workers' GPU, or in their host memory
@pytest.mark.parametrize("dense", [True, False])
def test_device_results_are_cupy_on_this_gpu_and_equal_compute(gpu_cluster, limit, dense):
    config = {"gpipe.memory.output-limit": limit, "gpipe.sampling.block-size": 300, "gpipe.walks.block-size": 200}
    with gpu_cluster.as_current(), dask.config.set(config):
        g, seeds = _graph(dense)
        w = gpipe.walks.deepwalk(g, length=6, seed=3)
        s = gpipe.sampling.neighbor(g, seeds, fanouts=3, depth=2, seed=2)
        walks, edges, nodes = w.compute(device=True), s.compute(device=True), s.nodes(device=True)
        expected = w.compute(), s.compute(), s.nodes()
    assert w._layout.count > 1 and len(s._blocks()) > 1  # several blocks, each written at its rows
    here = cupy.cuda.Device().id
    for got in (walks, *edges.values(), *nodes.values()):
        assert isinstance(got, cupy.ndarray) and got.device.id == here
    np.testing.assert_array_equal(walks.get(), expected[0])
    for columns, frame in zip((edges, nodes), expected[1:]):
        assert list(columns) == list(frame.columns)
        pd.testing.assert_frame_equal(pd.DataFrame({k: v.get() for k, v in columns.items()}), frame,
                                      check_dtype=False)


def test_a_device_result_of_string_ids_is_refused_before_work(gpu_cluster):
    with gpu_cluster.as_current():
        g = gpipe.from_edges(pd.DataFrame({"src": ["a", "b"], "dst": ["b", "c"]}))
        w = gpipe.walks.deepwalk(g, length=3, seed=1)
        with pytest.raises(gpipe.GpipeValueError, match="device=True needs vertex ids that are non-negative"):
            w.compute(device=True)
        s = gpipe.sampling.neighbor(g, ["a"], fanouts=1, depth=1, seed=1)
        with pytest.raises(gpipe.GpipeValueError, match="device=True needs integer vertex ids"):
            s.compute(device=True)
