"""GNN sampling's persistent CUDA kernel against its CPU twin: the same blocks for the same seed (run with -m gpu on
a GPU host)."""

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.backend import gpu_problem

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)

import cupy  # noqa: E402

CONFIGS = [dict(fanouts=[10, 10, 10]), dict(fanouts=[25, 10]), dict(fanouts=[3, -1, 2]),
           dict(fanouts=[5, 5], replace=True), dict(fanouts=[6, 4], weighted=True),
           dict(fanouts=[4, 3, 2], weighted=True, replace=True)]


def _edges() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    n, m = 5000, 60000
    return pd.DataFrame({"src": rng.integers(0, n, m), "dst": np.minimum(rng.zipf(1.5, m) - 1, n - 1),
                         "w": rng.uniform(0.1, 4.0, m).astype(np.float32)})


@pytest.fixture(scope="module")
def gpu_graph():
    with gpipe.connect(n_workers=1, device="gpu", dashboard_address=":0") as client, client.as_current():
        yield gpipe.from_edges(_edges(), weight="w", partitions=3, num_vertices=5000)


@pytest.fixture(scope="module")
def cpu_graph(cpu_cluster):
    with cpu_cluster.as_current():
        yield gpipe.from_edges(_edges(), weight="w", partitions=2, num_vertices=5000)


SEEDS = np.random.default_rng(3).choice(5000, 600, replace=False)


def _host(blocks) -> list:
    arrays = [blocks.input_nodes, blocks.output_nodes]
    for b in blocks.blocks:
        arrays += [b.src, b.dst, b.edge_ids, b.num_src_nodes, b.num_dst_nodes]
    return [a.get() if isinstance(a, cupy.ndarray) else a for a in arrays]


def _assert_same(gpu_blocks, cpu_blocks):
    assert gpu_blocks.device == "gpu" and cpu_blocks.device == "cpu"
    assert (gpu_blocks.num_sampled_nodes, gpu_blocks.num_sampled_edges) == (cpu_blocks.num_sampled_nodes,
                                                                            cpu_blocks.num_sampled_edges)
    for g, c in zip(_host(gpu_blocks), _host(cpu_blocks)):
        np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_cuda_blocks_equal_the_cpu_twins(gpu_graph, cpu_graph, config, fused):
    _assert_same(gpipe.gnn.sample_blocks(gpu_graph, SEEDS, seed=4, fused=fused, **config),
                 gpipe.gnn.sample_blocks(cpu_graph, SEEDS, seed=4, **config))


def test_the_queue_gives_the_same_blocks_on_every_run(gpu_graph):
    """Thousands of threads take tasks in a different order every run; the blocks do not change."""
    first = _host(gpipe.gnn.sample_blocks(gpu_graph, SEEDS, [15, 15, 15], seed=9))
    for _ in range(10):
        for a, b in zip(first, _host(gpipe.gnn.sample_blocks(gpu_graph, SEEDS, [15, 15, 15], seed=9))):
            np.testing.assert_array_equal(a, b)


def test_loader_on_the_gpu_equals_the_cpu_loader(gpu_graph, cpu_graph):
    features = np.random.default_rng(2).random((5000, 3)).astype(np.float32)
    loaders = [gpipe.gnn.NeighborLoader(g, SEEDS, [5, 5], batch_size=128, seed=1, features=features)
               for g in (gpu_graph, cpu_graph)]
    for _ in range(2):  # two epochs
        for gpu_batch, cpu_batch in zip(*loaders, strict=True):
            _assert_same(gpu_batch, cpu_batch)
            np.testing.assert_array_equal(gpu_batch.features.get(), cpu_batch.features)


def test_to_pyg_shares_the_gpu_memory(gpu_graph):
    pytest.importorskip("torch_geometric")
    blocks = gpipe.gnn.sample_blocks(gpu_graph, SEEDS, [5, 5])
    data = blocks.to_pyg()
    assert data.n_id.is_cuda and data.n_id.data_ptr() == blocks.input_nodes.data.ptr
    from torch_geometric.nn import SAGEConv
    import torch

    x = torch.randn(data.num_nodes, 8, device="cuda")
    assert SAGEConv(8, 4).cuda()(x, data.edge_index).shape == (data.num_nodes, 4)
