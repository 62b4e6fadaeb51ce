"""The bias-centric Sampler on the partitioned runtime: bounds, visited-once, bias, partition independence."""

from itertools import permutations

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.errors import GpipeValueError, TaskError
from gpipe.sampling import Sampler


@pytest.fixture(scope="module")
def graph_edges(cpu_cluster, tmp_path_factory):
    with cpu_cluster.as_current():
        g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=1, weighted=True, partitions=1)
        stored = pd.read_parquet(g.to_parquet(tmp_path_factory.mktemp("g") / "g"))
        g.release()
    return stored


def _rmat(parts):
    return gpipe.generators.rmat(scale=10, edge_factor=4, seed=1, weighted=True, partitions=parts)


def test_fanout_and_depth_bounds(cpu, graph_edges):
    frame = Sampler(neighbor_size=3, depth=3).run(_rmat(3), seeds=np.arange(40)).compute()
    degree = graph_edges.groupby("src").size()
    assert set(zip(frame.src, frame.dst)) <= set(zip(graph_edges.src, graph_edges.dst))
    assert frame.depth.between(0, 2).all()
    per_source = frame.groupby(["instance", "depth", "src"]).dst
    assert per_source.nunique().eq(per_source.size()).all()  # without replacement
    expected = np.minimum(3, degree.reindex(per_source.size().index.get_level_values("src")).to_numpy())
    assert np.array_equal(per_source.size().to_numpy(), expected)
    for (instance, depth), group in frame.groupby(["instance", "depth"]):
        if depth == 0:
            assert set(group.src) == {instance}
        else:  # the frontier at a depth is what the depth before picked
            before = frame[(frame.instance == instance) & (frame.depth == depth - 1)]
            assert set(group.src) == set(before.dst) & set(degree.index)


def test_unvisited_update_expands_each_vertex_once(cpu):
    frame = Sampler(update="unvisited", neighbor_size=2, depth=4).run(_rmat(4), seeds=np.arange(30)).compute()
    assert frame.groupby(["instance", "src"]).depth.nunique().eq(1).all()  # expanded at one depth only
    assert (frame.groupby(["instance", "src"]).dst.size() <= 2).all()


@pytest.mark.parametrize("kwargs", [
    {"neighbor_size": 2, "depth": 3},
    {"edge_bias": "weight", "update": "unvisited", "neighbor_size": 2, "depth": 3},
    {"edge_bias": "weight", "neighbor_size": 4, "depth": 2, "select": "repeated"},
])
def test_samples_are_the_same_for_any_partitioning(cpu, kwargs):
    seeds = np.arange(0, 200, 3)
    a = Sampler(**kwargs).run(_rmat(1), seeds=seeds, seed=5).compute()
    b = Sampler(**kwargs).run(_rmat(4), seeds=seeds, seed=5).compute()
    pd.testing.assert_frame_equal(a, b)
    assert len(a) > len(seeds)


def test_weighted_picks_follow_updated_sampling(cpu):
    weights = np.array([8.0, 4.0, 2.0, 1.0, 1.0])
    g = gpipe.from_edges(pd.DataFrame({"src": 0, "dst": np.arange(1, 6), "w": weights}), weight="w", directed=True)
    instances = 20_000
    frame = Sampler(edge_bias="weight", neighbor_size=2, depth=1).run(g, seeds=np.zeros(instances, int)).compute()
    got = np.bincount(frame.dst - 1, minlength=5) / instances
    inclusion = np.zeros(5)
    for i, j in permutations(range(5), 2):
        inclusion[[i, j]] += weights[i] / weights.sum() * weights[j] / (weights.sum() - weights[i])
    z = (got - inclusion) / np.sqrt(inclusion * (1 - inclusion) / instances)
    assert np.abs(z).max() < 4.5


def _even_only(table):
    return (table["candidate"] % 2 == 0).astype(float) * table["weight"]


def test_user_defined_edge_bias(cpu):
    frame = Sampler(edge_bias=_even_only, neighbor_size=3, depth=2).run(_rmat(3), seeds=np.arange(50)).compute()
    assert len(frame) > 0 and (frame.dst % 2 == 0).all()


@pytest.mark.parametrize("make, message", [
    (lambda: Sampler(neighbor_size=0), "'neighbor_size' must be a positive integer, got 0"),
    (lambda: Sampler(depth=0), "'depth' must be a positive integer, got 0"),
    (lambda: Sampler(edge_bias="degreee"), "'edge_bias' must be one of 'uniform', 'weight'; got 'degreee'"),
    (lambda: Sampler(update="some"), "'update' must be one of 'all', 'unvisited'; got 'some'"),
    (lambda: Sampler().run(_rmat(1), seeds=[]), "'seeds' must be a non-empty 1-D or 2-D array"),
    (lambda: Sampler().run(_rmat(1), seeds=[10**7]), "'seeds' must hold vertices of the graph"),
    (lambda: Sampler(edge_bias="weight").run(gpipe.generators.rmat(6, 2), seeds=[0]),
     "'edge_bias' = 'weight' needs a graph with edge weights"),
])
def test_bad_parameters(cpu, make, message):
    with pytest.raises(GpipeValueError, match=message):
        make()


def test_a_bias_function_returning_negative_values_fails_naming_the_phase(cpu):
    with pytest.raises(TaskError, match="advance failed in superstep 0, partition .*'edge_bias' must return finite"):
        Sampler(edge_bias=lambda t: -t["weight"]).run(_rmat(2), seeds=[0, 1, 2])


def test_neighbor_is_the_sampler_it_documents(cpu):
    g = _rmat(3)
    a = gpipe.sampling.neighbor(g, np.arange(30), fanout=2, depth=2, weighted=True, seed=1).compute()
    b = Sampler(edge_bias="weight", update="all", neighbor_size=2, depth=2).run(g, np.arange(30), seed=1).compute()
    pd.testing.assert_frame_equal(a, b)


def test_snowball_takes_every_neighbor_and_expands_each_vertex_once(cpu, graph_edges):
    frame = gpipe.sampling.snowball(_rmat(4), seeds=np.arange(10), depth=3).compute()
    degree = graph_edges.groupby("src").size()
    assert frame.groupby(["instance", "src"]).depth.nunique().eq(1).all()
    per_source = frame.groupby(["instance", "src"]).size()
    assert np.array_equal(per_source.to_numpy(), degree.reindex(per_source.index.get_level_values("src")).to_numpy())
    capped = gpipe.sampling.snowball(_rmat(4), seeds=np.arange(10), depth=2, max_per_vertex=2).compute()
    assert capped.groupby(["instance", "src"]).size().max() <= 2


def test_forest_fire_burns_a_geometric_number_of_neighbors(cpu):
    """From a vertex with 60 out-neighbors, the number burned is geometric with mean p / (1 - p)."""
    from scipy import stats

    p = 0.7
    g = gpipe.from_edges(pd.DataFrame({"src": 0, "dst": np.arange(1, 61)}), directed=True)
    instances = 20_000
    frame = gpipe.sampling.forest_fire(g, seeds=np.zeros(instances, int), p_forward=p, depth=1, seed=3).compute()
    counts = np.bincount(frame.groupby("instance").size().reindex(range(instances), fill_value=0), minlength=12)
    k = np.arange(12)
    pmf = np.append(p ** k[:-1] * (1 - p), p ** 11)  # the last bin: 11 or more
    observed = np.append(counts[:11], counts[11:].sum())
    assert stats.chisquare(observed, instances * pmf).pvalue > 1e-3


def test_builtin_samplers_reject_bad_parameters(cpu):
    g = _rmat(1)
    with pytest.raises(GpipeValueError, match="'fanout' must be a positive integer, got 0"):
        gpipe.sampling.neighbor(g, [0], fanout=0)
    with pytest.raises(GpipeValueError, match=r"'p_forward' must be in \[0, 1\), got 1.0"):
        gpipe.sampling.forest_fire(g, [0], p_forward=1.0)
    with pytest.raises(GpipeValueError, match="'max_per_vertex' must be a positive integer, got 0"):
        gpipe.sampling.snowball(g, [0], max_per_vertex=0)
