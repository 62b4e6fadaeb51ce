"""Partitioned and replicated graphs: the same results in every mode, and how 'auto' chooses."""

import dask
import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.runtime._session import workers_info
from gpipe.errors import GpipeValueError
from gpipe.sampling import Sampler


def _rmat(**kwargs):
    return gpipe.generators.rmat(scale=10, edge_factor=4, seed=1, weighted=True, **kwargs)


RUNS = {
    "deepwalk": lambda g: gpipe.walks.deepwalk(g, length=20, seed=3, weighted=True).compute(),
    "node2vec": lambda g: gpipe.walks.node2vec(g, p=0.5, q=2.0, length=20, seed=3).compute(),
    "ppr": lambda g: gpipe.walks.ppr(g, start=[0, 5], walks_per_source=50, seed=3).scores(),
    "frontier": lambda g: gpipe.walks.multidimensional(g, frontier_size=20, budget=30, instances=7, seed=3).compute(),
    "neighbor": lambda g: gpipe.sampling.neighbor(g, np.arange(60), fanouts=3, depth=2, weighted=True).compute(),
    "forest_fire": lambda g: gpipe.sampling.forest_fire(g, np.arange(40), depth=3, seed=2).compute(),
    "layer": lambda g: Sampler(neighbor_size=5, neighbor_pool="frontier", depth=3).run(g, np.arange(50)).compute(),
    "random_node": lambda g: gpipe.sampling.random_node(g, 300, instances=5, seed=4).compute(),
}


@pytest.fixture(scope="module")
def graphs(cpu_cluster):
    with cpu_cluster.as_current():
        yield _rmat(partitions=3, mode="partitioned"), _rmat(mode="replicated")


@pytest.mark.parametrize("name", RUNS)
def test_replicated_and_partitioned_modes_agree(cpu, graphs, name):
    partitioned, replicated = graphs
    a, b = RUNS[name](partitioned), RUNS[name](replicated)
    if isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        pd.testing.assert_frame_equal(a, b)
    assert len(a) > 0


def test_a_replicated_graph_is_whole_on_every_worker_and_runs_on_all(cpu, graphs):
    partitioned, replicated = graphs
    assert replicated.mode == "replicated" and partitioned.mode == "partitioned"
    assert sorted(replicated.replicas) == sorted(workers_info(cpu)) and replicated.num_partitions == 1
    assert replicated.num_edges == partitioned.num_edges
    pd.testing.assert_series_equal(replicated.degrees(), partitioned.degrees())
    w = gpipe.walks.deepwalk(replicated, length=10, seed=1)
    assert w.stats["mode"] == "replicated" and w.stats["workers"] == 2 and w.stats["supersteps"] >= 1
    assert w.compute().shape == (replicated.num_vertices, 11)


def test_auto_replicates_small_graphs_unless_partitions_are_asked_for(cpu):
    assert _rmat().mode == "replicated"
    assert _rmat(partitions=2).mode == "partitioned"
    with dask.config.set({"gpipe.graph.replicate-fraction": 1e-9}):
        assert _rmat().mode == "partitioned"
    with dask.config.set({"gpipe.graph.mode": "partitioned"}):
        assert _rmat().mode == "partitioned"


def test_bad_mode(cpu):
    with pytest.raises(GpipeValueError, match="'mode' must be one of 'auto', 'partitioned', 'replicated'; got 'copy'"):
        _rmat(mode="copy")
    with dask.config.set({"gpipe.graph.replicate-fraction": "half"}), pytest.raises(
            GpipeValueError, match="'gpipe.graph.replicate-fraction' must be a finite number, got 'half'"):
        _rmat()
