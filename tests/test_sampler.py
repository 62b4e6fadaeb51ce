"""The bias-centric Sampler on the partitioned runtime: bounds, visited-once, bias, partition independence."""

import json
import threading
import time
from itertools import permutations

import dask
import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.cli import main
from gpipe.errors import GpipeValueError, TaskError
from gpipe.sampling import Sampler
from helpers import runs_here


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
    {"neighbor_size": 5, "neighbor_pool": "frontier", "depth": 3},  # layer sampling
    {"vertex_bias": "degree", "frontier_size": 3, "neighbor_size": 2, "update": "unvisited", "depth": 3},
    {"edge_bias": "degree", "neighbor_size": 4, "replace": True, "depth": 2},
    {"edge_bias": "weight", "update": "unvisited", "neighbor_size": 2, "depth": 3},
    {"edge_bias": "weight", "neighbor_size": 4, "depth": 2, "select": "repeated"},
])
def test_samples_are_the_same_for_any_partitioning(cpu, kwargs):
    seeds = np.arange(0, 200, 3)
    a = Sampler(**kwargs).run(_rmat(1), seeds=seeds, seed=5).compute()
    b = Sampler(**kwargs).run(_rmat(4), seeds=seeds, seed=5).compute()
    pd.testing.assert_frame_equal(a, b)
    assert len(a) > len(seeds)


@pytest.mark.parametrize("kwargs, instances", [
    ({"frontier_size": 300, "neighbor_size": None, "neighbor_pool": "frontier",
      "edge_bias": lambda t: t["in_frontier"]}, 6),  # random node: the induced subgraphs
    ({"vertex_bias": "degree", "frontier_size": 5, "neighbor_size": 2, "depth": 2}, 4),
    ({"neighbor_size": 40, "neighbor_pool": "frontier", "depth": 2}, 5),  # random edges, then layers
])
def test_samples_without_seeds_are_the_same_for_any_partitioning(cpu, kwargs, instances):
    a = Sampler(**kwargs).run(_rmat(1), instances=instances, seed=2).compute()
    b = Sampler(**kwargs).run(_rmat(4), instances=instances, seed=2).compute()
    pd.testing.assert_frame_equal(a, b)
    assert a.instance.nunique() == instances


def test_instances_repeat_the_seeds(cpu):
    frame = Sampler(neighbor_size=2, depth=1).run(_rmat(2), seeds=[3, 5], instances=50).compute()
    assert set(frame.instance) == set(range(50)) and set(frame.src) == {3, 5}
    assert frame.groupby("instance").apply(lambda f: tuple(f.dst), include_groups=False).nunique() > 1


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


def _prefer_hubs(table):
    return table["degree"].astype(float) ** 2


@pytest.mark.parametrize("options", [
    {"edge_bias": _prefer_hubs, "vertex_bias": "degree", "frontier_size": 4, "neighbor_size": 3,
     "update": "unvisited", "depth": 3},  # the stress suite's sampler-degree, small
    {"edge_bias": "weight", "neighbor_size": ("geometric", 0.6), "depth": 3},
])
def test_a_candidate_table_taken_in_chunks_of_entries_gives_the_same_sample(cpu, options):
    """Past gpipe.sampling.candidate-budget a superstep's entries are taken a range at a time: each entry picks
    from its own stream, so the sample is the one of a single table (a budget of 64 B x 5: many ranges, and
    entries with more edges than the budget, each a range of its own)."""
    g = _rmat(3)
    seeds = np.arange(0, 400, 3)
    with dask.config.set({"gpipe.sampling.candidate-budget": 64 * 5}):
        chunked = Sampler(**options).run(g, seeds=seeds, seed=4)
    whole = Sampler(**options).run(g, seeds=seeds, seed=4)
    pd.testing.assert_frame_equal(chunked.compute(), whole.compute())
    pd.testing.assert_frame_equal(chunked.nodes(), whole.nodes())
    assert chunked.stats["select_picks"] == whole.stats["select_picks"] > len(seeds)
    with dask.config.set({"gpipe.sampling.candidate-budget": "lots"}), pytest.raises(
            GpipeValueError, match="'gpipe.sampling.candidate-budget' must be a byte count such as 1000000 or '4 GB', "
                             "got 'lots'"):
        Sampler(**options).run(g, seeds=seeds, seed=4)


@pytest.mark.parametrize("make, message", [
    (lambda: Sampler(neighbor_size=0), "'neighbor_size' must be a positive integer, got 0"),
    (lambda: Sampler(depth=0), "'depth' must be a positive integer, got 0"),
    (lambda: Sampler(edge_bias="degreee"), "'edge_bias' must be one of 'uniform', 'weight', 'degree'; got 'degreee'"),
    (lambda: Sampler(vertex_bias="weight"), "'vertex_bias' must be one of 'uniform', 'degree'; got 'weight'"),
    (lambda: Sampler(frontier_size=0), "'frontier_size' must be a positive integer, got 0"),
    (lambda: Sampler(neighbor_pool="graph"), "'neighbor_pool' must be one of 'vertex', 'frontier'; got 'graph'"),
    (lambda: Sampler(neighbor_size=None, replace=True), "'replace' = True needs a 'neighbor_size'"),
    (lambda: Sampler(replace="no"), "'replace' must be true or false, got 'no'"),
    (lambda: Sampler(bitmap=1), "'bitmap' must be true or false, got 1"),
    (lambda: gpipe.sampling.random_node(_rmat(1), 3, by_degree="yes"), "'by_degree' must be true or false"),
    (lambda: Sampler().run(_rmat(1)), r"'seeds' = None \(every vertex is the pool\) needs 'frontier_size'"),
    (lambda: Sampler(neighbor_pool="frontier", edge_bias="degree").run(_rmat(1)),
     "without 'seeds' and 'frontier_size' the pool is every edge, which takes 'edge_bias' = 'uniform'"),
    (lambda: Sampler().run(_rmat(1), seeds=[[0, 1]], instances=2), "'instances' applies to 1-D 'seeds'"),
    (lambda: Sampler().run(_rmat(1), seeds=[0], instances=0), "'instances' must be a positive integer, got 0"),
    (lambda: Sampler(update="some"), "'update' must be one of 'all', 'unvisited'; got 'some'"),
    (lambda: Sampler().run(_rmat(1), seeds=[]), "'seeds' must be None or a non-empty 1-D or 2-D array"),
    (lambda: Sampler().run(_rmat(1), seeds=[10**7]), "'seeds' must hold vertices of the graph"),
    (lambda: Sampler(edge_bias="weight").run(gpipe.generators.rmat(6, 2), seeds=[0]),
     "'edge_bias' = 'weight' needs a graph with edge weights"),
    (lambda: Sampler().run(_rmat(1), seeds=[[0, 1], [2]]),
     r"'seeds' must have rows of equal length, got rows of 2 \(row 0\) and 1 \(row 1\)$"),
    (lambda: Sampler().run(_rmat(1), seeds=[[0, 1], [2, [3, 4]]]),
     "'seeds' must be a regular array of numbers, got rows nested unevenly within them"),
    (lambda: gpipe.sampling.neighbor(_rmat(1), [0], weighted="yes"), "'weighted' must be true or false, got 'yes'"),
])
def test_bad_parameters(cpu, make, message):
    with pytest.raises(GpipeValueError, match=message):
        make()


def test_the_degree_column_is_the_candidates_out_degree(cpu):
    """"Prefer high-degree neighbors" as a user function gives the built-in degree bias's samples."""
    g = _rmat(3)
    user = Sampler(edge_bias=lambda t: t["degree"] ** 1.0, neighbor_size=2, depth=2).run(g, np.arange(40)).compute()
    builtin = Sampler(edge_bias="degree", neighbor_size=2, depth=2).run(g, np.arange(40)).compute()
    pd.testing.assert_frame_equal(user, builtin)


def test_in_frontier_exists_only_for_selection_over_the_frontier(cpu):
    with pytest.raises(TaskError, match="the bias table has no column 'in_frontier'"):
        Sampler(edge_bias=lambda t: t["in_frontier"]).run(_rmat(2), seeds=[0, 1])


def _chi_square_pvalue(observed, expected):
    from scipy import stats

    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


def test_frontier_size_selects_the_frontier_by_vertex_bias(cpu):
    """From a pool {0, 1, 2} of out-degrees 1, 2, 4, frontier_size 2 picks ordered pairs as updated sampling."""
    edges = pd.DataFrame({"src": [0, 1, 1, 2, 2, 2, 2], "dst": [3, 4, 5, 6, 7, 8, 9]})
    g = gpipe.from_edges(edges, directed=True, partitions=2)
    instances = 6000
    frame = Sampler(vertex_bias="degree", frontier_size=2, neighbor_size=1, depth=1).run(
        g, seeds=[0, 1, 2], instances=instances, seed=4).compute()
    chosen = frame.groupby("instance").src.apply(lambda s: tuple(sorted(s)))
    degree = np.array([1.0, 2.0, 4.0])
    pairs = [(0, 1), (0, 2), (1, 2)]
    exact = np.array([sum(degree[i] / 7 * degree[j] / (7 - degree[i]) for i, j in permutations(pair))
                      for pair in pairs])
    observed = chosen.value_counts().reindex(pairs, fill_value=0).to_numpy()
    assert observed.sum() == instances and _chi_square_pvalue(observed, exact) > 1e-3


def test_layer_sampling_picks_layer_size_edges_from_the_whole_frontier(cpu, graph_edges):
    frame = gpipe.sampling.layer(_rmat(3), seeds=np.arange(60).reshape(20, 3), layer_size=6, depth=3).compute()
    assert set(zip(frame.src, frame.dst)) <= set(zip(graph_edges.src, graph_edges.dst))
    per_layer = frame.groupby(["instance", "depth"])
    assert per_layer.size().max() == 6 and (per_layer.size() <= 6).all()
    assert not frame.duplicated(["instance", "depth", "src", "dst"]).any()
    degree = graph_edges.groupby("src").size()
    for (instance, depth), group in per_layer:
        frontier = set(range(3 * instance, 3 * instance + 3)) if depth == 0 else \
            set(frame[(frame.instance == instance) & (frame.depth == depth - 1)].dst)
        assert set(group.src) <= frontier
        assert len(group) == min(6, degree.reindex(list(frontier), fill_value=0).sum())


def test_layer_picks_are_uniform_over_the_frontiers_edges(cpu):
    """A frontier {0, 1} with 2 + 3 out-edges: each of the 5 edges is in a layer of 2 with probability 2/5."""
    edges = pd.DataFrame({"src": [0, 0, 1, 1, 1], "dst": [2, 3, 4, 5, 6]})
    g = gpipe.from_edges(edges, directed=True, partitions=2)
    instances = 5000
    frame = gpipe.sampling.layer(g, seeds=np.tile([0, 1], (instances, 1)), layer_size=2, depth=1, seed=1).compute()
    assert frame.groupby("instance").size().eq(2).all()
    observed = frame.dst.value_counts().reindex(range(2, 7)).to_numpy()
    assert _chi_square_pvalue(observed, np.ones(5)) > 1e-3


def test_random_node_keeps_the_induced_subgraph_of_uniform_vertices(cpu):
    m, n, instances = 12, 4, 3000
    complete = pd.DataFrame([(u, v) for u in range(m) for v in range(m) if u != v], columns=["src", "dst"])
    g = gpipe.from_edges(complete, directed=True, partitions=3)
    frame = gpipe.sampling.random_node(g, n, instances=instances, seed=5).compute()
    per_instance = frame.groupby("instance")
    assert per_instance.size().eq(n * (n - 1)).all()  # all edges among n distinct vertices
    assert per_instance.src.nunique().eq(n).all()
    assert _chi_square_pvalue(np.bincount(frame.src, minlength=m) // (n - 1), np.ones(m)) > 1e-3


def test_random_node_returns_every_instances_vertices_with_or_without_edges(cpu):
    """On a sparse graph most pairs induce no edge; every instance still has its n uniform vertices."""
    edges = pd.DataFrame({"src": [10, 20, 30], "dst": [20, 30, 40]})  # renumbered ids; 50 and 60 are isolated
    g = gpipe.from_edges(pd.concat([edges, pd.DataFrame({"src": [50], "dst": [60]})]), directed=True, partitions=2)
    n, instances = 2, 6000
    sample = gpipe.sampling.random_node(g, n, instances=instances, seed=3)
    nodes = sample.nodes()
    assert list(nodes.columns) == ["instance", "vertex"]
    assert nodes.groupby("instance").vertex.nunique().reindex(range(instances), fill_value=0).eq(n).all()
    assert len(nodes) == n * instances
    frame = sample.compute()
    picked = set(zip(nodes.instance, nodes.vertex))
    assert set(zip(frame.instance, frame.src)) <= picked and set(zip(frame.instance, frame.dst)) <= picked
    vertices = [10, 20, 30, 40, 50, 60]
    observed = nodes.vertex.value_counts().reindex(vertices, fill_value=0).to_numpy()
    assert _chi_square_pvalue(observed, np.ones(len(vertices))) > 1e-3  # a false alarm 1 run in 1000


def test_the_command_writes_random_nodes_vertices_beside_their_edges(cpu_cluster, tmp_path, capsys):
    code = main(["sample", "random-node", "--graph", "rmat:7:4", "--n", "5", "--instances", "4", "--quiet",
                 "--out", str(tmp_path), "--address", cpu_cluster.scheduler.address, "--device", "cpu"])
    assert code == 0, capsys.readouterr().err
    nodes, edges = pd.read_parquet(tmp_path / "nodes.parquet"), pd.read_parquet(tmp_path / "edges.parquet")
    assert list(nodes.columns) == ["instance", "vertex"] and not nodes.duplicated().any()
    assert nodes.groupby("instance").size().reindex(range(4), fill_value=0).eq(5).all()
    assert set(zip(edges.instance, edges.src)) <= set(zip(nodes.instance, nodes.vertex))
    with open(tmp_path / "summary.json") as f:
        assert set(json.load(f)["outputs"]) == {"edges", "nodes", "summary"}


def _ends(frame) -> set:
    return set(zip(frame.instance, frame.src)) | set(zip(frame.instance, frame.dst))


def test_nodes_are_the_seeds_and_the_endpoints_of_each_instances_edges(cpu):
    """A seed with no out-edge is in its instance's nodes; random edges' nodes are their endpoints."""
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 0, 1], "dst": [1, 2, 3]}), directed=True, partitions=2)
    for sample, seeds in [(gpipe.sampling.neighbor(g, seeds=[0, 3], fanouts=1, depth=2, seed=1), {(0, 0), (1, 3)}),
                          (gpipe.sampling.random_edge(g, 2, instances=50, seed=2), set())]:
        frame, nodes = sample.compute(), sample.nodes()
        assert list(nodes.columns) == ["instance", "vertex"] and not nodes.duplicated().any()
        assert nodes.instance.is_monotonic_increasing and len(frame) > 0
        assert set(zip(nodes.instance, nodes.vertex)) == seeds | _ends(frame)


def test_vertices_without_seeds_by_degree(cpu, graph_edges):
    instances = 4000
    frame = Sampler(vertex_bias="degree", frontier_size=1, neighbor_size=1, depth=1).run(
        _rmat(2), instances=instances, seed=6).compute()
    degree = graph_edges.groupby("src").size()
    top = degree.nlargest(8)
    observed = frame.src.value_counts().reindex(top.index, fill_value=0).to_numpy()
    rest = instances - observed.sum()
    expected = np.append(top.to_numpy(), degree.sum() - top.sum())
    assert _chi_square_pvalue(np.append(observed, rest), expected) > 1e-3


def test_random_edge_picks_distinct_uniform_edges(cpu):
    edges = pd.DataFrame({"src": [0, 0, 1, 2, 3, 3, 3, 4], "dst": [1, 2, 2, 3, 0, 1, 4, 0]})
    g = gpipe.from_edges(edges, directed=True, partitions=2)
    instances = 4000
    frame = gpipe.sampling.random_edge(g, 3, instances=instances, seed=7).compute()
    assert frame.groupby("instance").size().eq(3).all()
    assert not frame.duplicated(["instance", "src", "dst"]).any()
    assert set(zip(frame.src, frame.dst)) <= set(zip(edges.src, edges.dst))
    observed = frame.groupby(["src", "dst"]).size().reindex(list(zip(edges.src, edges.dst))).to_numpy()
    assert _chi_square_pvalue(observed, np.ones(len(edges))) > 1e-3


def test_random_edge_on_an_undirected_graph_picks_each_edge_once_uniformly(cpu):
    """Both stored directions of an undirected edge are one edge: m distinct ones, each with probability m / E,
    in either direction with probability 1/2 (a self-loop counts once too)."""
    edges = pd.DataFrame({"src": [0, 0, 0, 1, 1, 2, 3, 4, 5, 6], "dst": [1, 2, 3, 2, 4, 5, 6, 6, 6, 6]})
    g = gpipe.from_edges(edges, directed=False, partitions=3, keep_self_loops=True)
    m, instances = 4, 4000
    frame = gpipe.sampling.random_edge(g, m, instances=instances, seed=9).compute()
    low, high = np.minimum(frame.src, frame.dst), np.maximum(frame.src, frame.dst)
    undirected = pd.DataFrame({"instance": frame.instance, "low": low, "high": high})
    assert frame.groupby("instance").size().reindex(range(instances), fill_value=0).eq(m).all()
    assert not undirected.duplicated().any()
    every = list(zip(edges.src, edges.dst))
    observed = undirected.groupby(["low", "high"]).size().reindex(every, fill_value=0).to_numpy()
    assert observed.sum() == m * instances
    # fixed seeds: each chi-square test below alarms falsely in 1 run of 1000
    assert _chi_square_pvalue(observed, np.ones(len(every))) > 1e-3
    forward = int((frame.src < frame.dst).sum())
    assert _chi_square_pvalue(np.array([forward, int((frame.src > frame.dst).sum())]), np.ones(2)) > 1e-3
    everything = gpipe.sampling.random_edge(g, 20, instances=3, seed=9).compute()
    assert everything.groupby("instance").size().eq(len(edges)).all()
    replicated = gpipe.from_edges(edges, directed=False, mode="replicated", keep_self_loops=True)
    pd.testing.assert_frame_equal(gpipe.sampling.random_edge(replicated, m, instances=instances, seed=9).compute(),
                                  frame)


def test_picks_with_replacement_are_independent_draws(cpu):
    weights = np.array([8.0, 4.0, 2.0, 1.0])
    g = gpipe.from_edges(pd.DataFrame({"src": 0, "dst": np.arange(1, 5), "w": weights}), weight="w", directed=True)
    frame = gpipe.sampling.neighbor(g, seeds=np.zeros(3000, int), fanouts=6, depth=1, weighted=True,
                                    replace=True, seed=8).compute()
    assert frame.groupby("instance").size().eq(6).all()  # more picks than neighbors
    assert frame.duplicated(["instance", "dst"]).any()
    assert _chi_square_pvalue(np.bincount(frame.dst - 1, minlength=4), weights) > 1e-3


def test_a_bias_function_returning_negative_values_fails_naming_the_phase(cpu):
    with pytest.raises(TaskError, match="advance failed in superstep 0, partition .*'edge_bias' must return finite"):
        Sampler(edge_bias=lambda t: -t["weight"]).run(_rmat(2), seeds=[0, 1, 2])


def test_a_sampler_run_leaves_nothing_on_the_workers_whether_it_ends_or_fails(cpu, eventually):
    """Its visited sets and frontiers go with its loop, its edges with its result (dropped in the background once
    unreferenced); a failed run is dropped."""
    def held() -> set:
        return set().union(*cpu.run(runs_here).values())

    before = held()
    Sampler(update="unvisited", neighbor_pool="frontier", frontier_size=5, neighbor_size=3, depth=3).run(
        _rmat(3), seeds=np.arange(40).reshape(4, 10))
    with pytest.raises(TaskError):
        Sampler(edge_bias=lambda t: -t["weight"]).run(_rmat(2), seeds=[0, 1, 2])
    assert eventually(lambda: held() <= before)


def test_neighbor_is_the_sampler_it_documents(cpu):
    g = _rmat(3)
    a = gpipe.sampling.neighbor(g, np.arange(30), fanouts=2, depth=2, weighted=True, seed=1).compute()
    b = Sampler(edge_bias="weight", update="all", neighbor_size=2, depth=2, select="alias").run(
        g, np.arange(30), seed=1).compute()
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


def _raises_its_own_error(table):
    table["degree"]
    raise ValueError("this bias is broken")


def _graph_arrays_of(graph_id, dask_worker=None):
    return sorted(name for held, name in dask_worker.plugins["gpipe"].partitions._arrays if held == graph_id)


def test_a_graph_samples_again_after_the_memory_manager_ran(cpu):
    """What runs read on the workers (the degrees) is held with the graph: Dask's memory manager drops the extra
    replicas of data it broadcast every few seconds, and runs on the same graph after that must still find it."""
    assert dask.config.get("distributed.scheduler.active-memory-manager.start") and cpu.amm.running()
    g = _rmat(2)
    runs = [
        lambda: gpipe.sampling.random_edge(g, 5, instances=4, seed=1),
        lambda: gpipe.sampling.random_node(g, 5, instances=4, by_degree=True, seed=1),
        lambda: Sampler(edge_bias="degree", neighbor_size=2, depth=2).run(g, seeds=np.arange(10), seed=1),
        lambda: Sampler(vertex_bias="degree", frontier_size=4, edge_bias=lambda t: t["degree"] ** 2,
                        neighbor_size=3, update="unvisited", depth=3).run(g, seeds=np.arange(6), instances=20),
    ]
    first = [run().compute() for run in runs]
    time.sleep(2 * dask.utils.parse_timedelta(dask.config.get("distributed.scheduler.active-memory-manager.interval"))
               + 1)
    for run, before in zip(runs, first):
        pd.testing.assert_frame_equal(run().compute(), before)
    with pytest.raises(TaskError, match="this bias is broken"):
        Sampler(edge_bias=_raises_its_own_error).run(g, seeds=[0, 1])
    assert list(cpu.run(_graph_arrays_of, g.graph_id).values()) == [["degrees", "upper_degrees"]] * 2
    g.release()  # they go with the graph
    assert list(cpu.run(_graph_arrays_of, g.graph_id).values()) == [[], []]


def test_builtin_samplers_reject_bad_parameters(cpu):
    g = _rmat(1)
    with pytest.raises(GpipeValueError, match=r"'fanouts' must be a non-empty list of positive ints or -1 \(every "
                                              r"neighbor\), got \[2, 0\]"):
        gpipe.sampling.neighbor(g, [0], fanouts=[2, 0])
    with pytest.raises(GpipeValueError, match=r"'fanouts' must be .* -1 \(every neighbor\), or one such int, got 0"):
        gpipe.sampling.neighbor(g, [0], fanouts=0)
    with pytest.raises(GpipeValueError, match=r"'depth' must be None or the length of 'fanouts' \(2\), got 3"):
        gpipe.sampling.neighbor(g, [0], fanouts=[2, 2], depth=3)
    with pytest.raises(GpipeValueError, match=r"'replace' = True needs a number of picks at every depth, not -1"):
        gpipe.sampling.neighbor(g, [0], fanouts=[2, -1], replace=True)
    with pytest.raises(GpipeValueError, match=r"'depth' must be None or the length of 'neighbor_size' \(2\), got 1"):
        Sampler(neighbor_size=[2, None], depth=1)
    with pytest.raises(GpipeValueError, match=r"'neighbor_size' must be an int, None or \('geometric', p\) \(or a "
                                              r"list of them, one a depth\), got \('geo', 0.5\)"):
        Sampler(neighbor_size=[2, ("geo", 0.5)])
    with pytest.raises(GpipeValueError, match=r"'p_forward' must be in \[0, 1\), got 1.0"):
        gpipe.sampling.forest_fire(g, [0], p_forward=1.0)
    with pytest.raises(GpipeValueError, match="'max_per_vertex' must be a positive integer, got 0"):
        gpipe.sampling.snowball(g, [0], max_per_vertex=0)


def test_a_samples_exports_refuse_flags_that_are_not_booleans(cpu, tmp_path):
    sample = gpipe.sampling.neighbor(_rmat(1), [0, 1], fanouts=2)
    with pytest.raises(GpipeValueError, match="'nodes' must be true or false, got 'yes'"):
        sample.to_dask(nodes="yes")
    with pytest.raises(GpipeValueError, match="'overwrite' must be true or false, got 1"):
        sample.to_parquet(tmp_path / "s", overwrite=1)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("run", [
    lambda g: Sampler().run(g, seeds=[0]),
    lambda g: gpipe.sampling.neighbor(g, [0]),
    lambda g: gpipe.sampling.snowball(g, [0]),
    lambda g: gpipe.sampling.forest_fire(g, [0]),
    lambda g: gpipe.sampling.layer(g, [0]),
    lambda g: gpipe.sampling.random_node(g, 3),
    lambda g: gpipe.sampling.random_edge(g, 3),
], ids=["Sampler.run", "neighbor", "snowball", "forest_fire", "layer", "random_node", "random_edge"])
@pytest.mark.parametrize("g, kind", [(None, "NoneType"), (pd.DataFrame({"src": [0], "dst": [1]}), "DataFrame")])
def test_every_sampler_refuses_what_is_not_a_graph_by_name(cpu, run, g, kind):
    with pytest.raises(GpipeValueError, match=f"'g' must be a gpipe.Graph .*, got {kind}$"):
        run(g)


@pytest.mark.parametrize("name", ["edge_bias", "vertex_bias"])
def test_a_bias_that_cannot_reach_the_workers_is_refused_in_a_line(cpu, tmp_path, name):
    """A closure over a lock or an open file cannot be pickled: the error names the bias and what failed, short."""
    lock = threading.Lock()
    with open(tmp_path / "log.txt", "w") as log:
        for bias, cause in ((lambda t: t["degree"] + (lock is None), "cannot pickle '_thread.lock' object"),
                            (lambda t: t["degree"] + log.closed, "Cannot pickle files that are not opened for reading")):
            with pytest.raises(GpipeValueError) as info:
                Sampler(frontier_size=2, **{name: bias}).run(_rmat(1), seeds=[[0, 1, 2]])
            message = str(info.value)
            assert message.startswith(f"'{name}' must be picklable (by cloudpickle) to reach the workers; ")
            assert cause in message and "<lambda>" not in message and len(message) < 200


def _sample_outputs(client, parts: int, folder) -> dict:
    """A neighbor sample's every output on ``client`` with ``parts`` partitions, cut into several blocks."""
    with client.as_current(), dask.config.set({"gpipe.sampling.block-size": 100}):
        g = _rmat(parts)
        s = gpipe.sampling.neighbor(g, seeds=np.arange(0, 600, 7), fanouts=3, depth=2, seed=4)
        outputs = {"compute": s.compute(), "nodes": s.nodes(), "dask": s.to_dask(), "dask nodes": s.to_dask(nodes=True)}
        outputs.update({k: outputs[k].compute() for k in ("dask", "dask nodes")},
                       npartitions=outputs["dask"].npartitions, divisions=outputs["dask"].divisions)
        for kind, nodes in (("map", False), ("map nodes", True)):  # fn where each block is, on its dense ids
            blocks = client.gather(s.map_blocks(lambda c, k, times=1: {n: (v + k) * times for n, v in c.items()},
                                                1, nodes=nodes, times=2))
            outputs[kind] = pd.concat([pd.DataFrame(b) for b in blocks], ignore_index=True) // 2 - 1
        s.to_parquet(folder / "edges")
        s.to_parquet(folder / "nodes", nodes=True)
        outputs.update({f"{kind} files": {p.name: pd.read_parquet(p) for p in sorted((folder / kind).glob("*.parquet"))}
                        for kind in ("edges", "nodes")})
        g.release()
    return outputs


def test_a_sample_and_its_exports_are_the_same_for_one_or_two_workers_and_any_partitioning(
        cpu_cluster, one_worker_cluster, tmp_path):
    runs = {(workers, parts): _sample_outputs(client, parts, tmp_path / f"{workers}-{parts}")
            for workers, client in ((1, one_worker_cluster), (2, cpu_cluster)) for parts in (1, 4)}
    first = runs[(1, 1)]
    assert first["npartitions"] > 2 and len(first["edges files"]) == first["npartitions"]
    pd.testing.assert_frame_equal(first["dask"], first["compute"])
    pd.testing.assert_frame_equal(first["dask nodes"], first["nodes"])
    pd.testing.assert_frame_equal(first["map"], first["compute"], check_dtype=False)  # the graph's ids are dense
    pd.testing.assert_frame_equal(first["map nodes"], first["nodes"], check_dtype=False)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "1-1" / "edges"), first["compute"])
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "1-1" / "nodes"), first["nodes"])
    assert first["compute"].equals(first["compute"].sort_values(["instance", "depth", "src", "dst"]))
    for run in runs.values():
        assert run.keys() == first.keys()
        for key, value in run.items():
            if isinstance(value, pd.DataFrame):
                pd.testing.assert_frame_equal(value, first[key])
            elif key.endswith("files"):
                assert value.keys() == first[key].keys()
                for name, frame in value.items():
                    pd.testing.assert_frame_equal(frame, first[key][name])
            elif key in ("npartitions", "divisions"):
                assert value == first[key]


def test_a_sample_left_unused_leaves_nothing_on_the_workers(cpu):
    def held() -> set:
        return set().union(*cpu.run(runs_here).values())

    before = held()
    s = gpipe.sampling.neighbor(_rmat(3), seeds=np.arange(20), fanouts=2, depth=2)
    assert held() - before  # the sampled edges wait in the run's stores
    del s
    deadline = time.monotonic() + 10
    while held() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert held() <= before


@pytest.fixture(scope="module")
def sampler_graphs(cpu_cluster, one_worker_cluster):
    """Per worker count, the same graph replicated, in one partition and in three."""
    graphs = {}
    for workers, client in ((1, one_worker_cluster), (2, cpu_cluster)):
        with client.as_current():
            graphs[workers] = {
                "replicated": gpipe.generators.rmat(scale=10, edge_factor=4, seed=1, weighted=True,
                                                    mode="replicated"),
                "one partition": _rmat(1), "three partitions": _rmat(3)}
    yield graphs
    for client, by_mode in zip((one_worker_cluster, cpu_cluster), graphs.values()):
        with client.as_current():
            for g in by_mode.values():
                g.release()


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("replace", [False, True])
def test_fused_neighbor_sampling_is_the_superstep_sample(cpu_cluster, one_worker_cluster, sampler_graphs, weighted,
                                                         replace):
    seeds = [np.arange(0, 600, 7), np.array([[3, 3, 9], [9, 40, 3], [5, 5, 5]])]  # a seed twice in an instance
    # a fanout a depth, or one for every depth; 40: by a bitmap
    for (fanout, depth), first in zip([(1, 4), ([3, 1, 2], None), (8, 2), (40, 2)], seeds * 2):
        expected = None
        for workers, client in ((1, one_worker_cluster), (2, cpu_cluster)):
            for mode, g in sampler_graphs[workers].items():
                for fused in (False, True):
                    with client.as_current(), dask.config.set({"gpipe.sampling.fused": fused}):
                        s = gpipe.sampling.neighbor(g, first, fanouts=fanout, depth=depth, weighted=weighted,
                                                    replace=replace, seed=6)
                        got = (s.compute(), s.nodes(), s.stats["select_picks"], s.stats["iterations_per_pick"])
                    # counted by the workers as their runs ended (no round trip of its own), in every mode
                    assert s.stats["edges"] == len(got[0]) and "output_totals" not in s.stats
                    one_launch = fused and mode != "three partitions"
                    assert (s.stats["supersteps"] == 1) == one_launch, (mode, fused)
                    if expected is None:
                        expected = got
                        assert len(got[0]) > len(first)
                    pd.testing.assert_frame_equal(got[0], expected[0])
                    pd.testing.assert_frame_equal(got[1], expected[1])
                    assert got[2:] == expected[2:]
                if mode == "three partitions":  # the same bias as a function: SELECT over candidate tables
                    bias = _edge_weights if weighted else _edge_ones
                    with client.as_current():
                        s = Sampler(edge_bias=bias, neighbor_size=fanout, depth=depth, replace=replace,
                                    select="alias" if weighted else "bipartite").run(g, first, seed=6)
                        got = (s.compute(), s.nodes(), s.stats["select_picks"], s.stats["iterations_per_pick"])
                    pd.testing.assert_frame_equal(got[0], expected[0])
                    pd.testing.assert_frame_equal(got[1], expected[1])
                    assert got[2:] == expected[2:]


def _edge_weights(table):
    return table["weight"]


def _edge_ones(table):
    return np.ones(table.size)


def test_neighbor_picks_each_depths_own_fanout_and_minus_one_takes_every_neighbor(cpu, graph_edges):
    frame = gpipe.sampling.neighbor(_rmat(3), seeds=np.arange(40), fanouts=[4, 1, -1], seed=2).compute()
    degree = graph_edges.groupby("src").size()
    per_source = frame.groupby(["instance", "depth", "src"]).dst.size()
    depth, degrees = per_source.index.get_level_values("depth"), degree.reindex(per_source.index.get_level_values(
        "src")).to_numpy()
    want = np.select([depth == 0, depth == 1], [np.minimum(4, degrees), 1], degrees)
    assert np.array_equal(per_source.to_numpy(), want) and set(frame.depth) == {0, 1, 2}


def test_neighbor_with_one_fanout_for_every_depth_is_the_list_of_it(cpu):
    g = _rmat(3)
    as_list = gpipe.sampling.neighbor(g, np.arange(30), fanouts=[3, 3, 3], seed=5).compute()
    pd.testing.assert_frame_equal(gpipe.sampling.neighbor(g, np.arange(30), fanouts=3, depth=3, seed=5).compute(),
                                  as_list)
    two = gpipe.sampling.neighbor(g, np.arange(30), fanouts=3, seed=5).compute()  # depth 2 by default
    pd.testing.assert_frame_equal(two, as_list[as_list.depth < 2].reset_index(drop=True))


def test_neighbor_by_the_old_name_fanout_warns_naming_fanouts_and_samples_the_same(cpu):
    g = _rmat(1)
    with pytest.warns(DeprecationWarning, match=r"neighbor\(\): 'fanout' is deprecated, it is now 'fanouts'"):
        old = gpipe.sampling.neighbor(g, [0, 1], fanout=2, depth=2, seed=3).compute()
    pd.testing.assert_frame_equal(old, gpipe.sampling.neighbor(g, [0, 1], fanouts=[2, 2], seed=3).compute())
    with pytest.raises(GpipeValueError, match="'fanouts' and 'fanout' \\(its old name\\) must not both be given"):
        gpipe.sampling.neighbor(g, [0], fanouts=2, fanout=2)
