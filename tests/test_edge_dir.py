"""edge_dir='in' on every sampler, walk and loader: a directed graph's in-neighbors, read from its reverse."""

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.errors import GpipeValueError


@pytest.fixture(scope="module")
def directed(cpu_cluster, one_worker_cluster, tmp_path_factory):
    """A directed weighted graph (3 partitions on 2 workers), its transpose built from its edges reversed, the graph
    again as one partition on one worker, and its edges."""
    with cpu_cluster.as_current():
        g = gpipe.generators.rmat(8, edge_factor=6, seed=5, directed=True, weighted=True, partitions=3)
        edges = pd.read_parquet(g.to_parquet(tmp_path_factory.mktemp("g") / "g"))
        common = dict(weight="weight", directed=True, renumber=False, num_vertices=g.num_vertices)
        transpose = gpipe.from_edges(edges, src="dst", dst="src", partitions=3, **common)
    with one_worker_cluster.as_current():
        whole = gpipe.from_edges(edges, partitions=1, **common)
    yield {"g": g, "transpose": transpose, "whole": whole, "edges": edges}
    with cpu_cluster.as_current():
        g.release(), transpose.release()
    with one_worker_cluster.as_current():
        whole.release()


SEEDS = np.arange(0, 256, 5)


def _blocks(blocks) -> list:
    """A sampled mini-batch as plain arrays, to compare."""
    return [blocks.input_nodes, blocks.output_nodes,
            *(np.asarray(getattr(b, k)) for b in blocks.blocks for k in ("src", "dst"))]


CALLS = {  # a run reading the edges in direction edge_dir, as something equal results compare by
    "neighbor": lambda g, d: gpipe.sampling.neighbor(g, SEEDS, fanouts=[3, 2], seed=1, edge_dir=d).compute(),
    "neighbor-weighted": lambda g, d: gpipe.sampling.neighbor(g, SEEDS, fanouts=[2, 2], weighted=True, seed=2,
                                                              edge_dir=d).compute(),
    "snowball": lambda g, d: gpipe.sampling.snowball(g, SEEDS, max_per_vertex=3, seed=3, edge_dir=d).compute(),
    "forest-fire": lambda g, d: gpipe.sampling.forest_fire(g, SEEDS, seed=4, edge_dir=d).compute(),
    "layer": lambda g, d: gpipe.sampling.layer(g, SEEDS, layer_size=4, seed=5, edge_dir=d).compute(),
    "sampler-degree": lambda g, d: gpipe.sampling.Sampler(edge_bias="degree", neighbor_size=2, edge_dir=d).run(
        g, SEEDS, seed=6).compute(),
    "deepwalk": lambda g, d: gpipe.walks.deepwalk(g, SEEDS, length=6, weighted=True, seed=7, edge_dir=d).compute(),
    "with-jump": lambda g, d: gpipe.walks.with_jump(g, SEEDS, jump=0.2, length=6, seed=8, edge_dir=d).compute(),
    "ppr": lambda g, d: gpipe.walks.ppr(g, [0, 9], walks_per_source=20, length=6, seed=9, edge_dir=d).scores(),
    "node2vec": lambda g, d: gpipe.walks.node2vec(g, SEEDS, p=0.5, q=2.0, length=6, seed=10,
                                                  edge_dir=d).compute(),
    "metropolis-hastings": lambda g, d: gpipe.walks.metropolis_hastings(g, SEEDS, length=6, seed=11,
                                                                        edge_dir=d).compute(),
    "multidimensional": lambda g, d: gpipe.walks.multidimensional(g, frontier_size=10, budget=20, instances=2,
                                                                  seed=12, edge_dir=d).compute(),
    "sample-blocks": lambda g, d: _blocks(gpipe.gnn.sample_blocks(g, SEEDS, [3, 2], seed=13, edge_dir=d)),
    "loader": lambda g, d: [_blocks(b) for b in gpipe.gnn.NeighborLoader(g, SEEDS, [3, 2], 16, seed=14,
                                                                          edge_dir=d)],
}


def _equal(a, b) -> bool:
    if isinstance(a, pd.DataFrame):
        return a.equals(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return np.array_equal(a, b)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_in_on_a_graph_is_out_on_its_transpose_and_the_same_on_one_worker(cpu_cluster, one_worker_cluster, directed,
                                                                          name):
    with cpu_cluster.as_current():
        inward = CALLS[name](directed["g"], "in")
        assert _equal(inward, CALLS[name](directed["transpose"], "out"))
        assert not _equal(inward, CALLS[name](directed["g"], "out"))  # it did read other edges
    with one_worker_cluster.as_current():  # another partitioning, other workers: the same result
        assert _equal(inward, CALLS[name](directed["whole"], "in"))


def test_every_edge_sampled_inwards_is_an_arc_into_its_frontier_vertex_as_many_as_asked(cpu, directed):
    edges = directed["edges"]
    arcs = set(zip(edges.src, edges.dst))
    frame = gpipe.sampling.neighbor(directed["g"], SEEDS, fanouts=[3, 2], seed=21, edge_dir="in").compute()
    assert len(frame) > len(SEEDS) and all((v, u) in arcs for u, v in zip(frame.src, frame.dst))
    in_degree = edges.groupby("dst").size()
    picked = frame.groupby(["instance", "depth", "src"]).size()
    asked = np.where(picked.index.get_level_values("depth") == 0, 3, 2)
    assert np.array_equal(picked.to_numpy(),
                          np.minimum(asked, in_degree.reindex(picked.index.get_level_values("src")).to_numpy()))
    walks = gpipe.walks.deepwalk(directed["g"], SEEDS, length=5, seed=22, edge_dir="in").compute()
    steps = [(u, v) for row in walks for u, v in zip(row[:-1], row[1:]) if v >= 0]
    assert steps and all((v, u) in arcs for u, v in steps)


def test_the_reverse_holds_each_edge_reversed_with_its_weight_and_is_built_once(cpu, directed, tmp_path):
    g = directed["g"]
    reverse = g.reverse()
    assert reverse is g.reverse() and reverse.directed and reverse.num_partitions == g.num_partitions
    stored = pd.read_parquet(reverse.to_parquet(tmp_path / "r"))
    edges = directed["edges"]
    assert sorted(zip(stored.dst, stored.src, stored.weight)) == sorted(zip(edges.src, edges.dst, edges.weight))
    assert reverse.degrees().equals(edges.groupby("dst").size().reindex(range(g.num_vertices), fill_value=0)
                                    .rename_axis("vertex").rename("degree"))


def test_an_undirected_graph_is_its_own_reverse_and_samples_the_same_either_way(cpu):
    g = gpipe.generators.rmat(8, seed=2, partitions=2)
    assert g.reverse() is g
    for run in (CALLS["neighbor"], CALLS["layer"], CALLS["node2vec"]):
        assert _equal(run(g, "in"), run(g, "out"))
    g.release()


def test_released_with_the_graph_the_reverse_is_released_too(cpu):
    g = gpipe.generators.rmat(6, seed=2, directed=True, partitions=2)
    reverse = g.reverse()
    g.release()
    assert not reverse._finalizer.alive


@pytest.mark.parametrize("call", [
    lambda g: gpipe.sampling.neighbor(g, [0], edge_dir="both"),
    lambda g: gpipe.sampling.Sampler(edge_dir="IN"),
    lambda g: gpipe.walks.deepwalk(g, edge_dir=None),
    lambda g: gpipe.gnn.sample_blocks(g, [0], [2], edge_dir="inward"),
])
def test_an_edge_dir_other_than_out_or_in_is_refused_by_name(cpu, directed, call):
    with pytest.raises(GpipeValueError, match=r"'edge_dir' must be one of 'out', 'in'; got "):
        call(directed["g"])


def test_a_dynamic_graph_is_not_walked_inwards(cpu):
    dynamic = gpipe.dynamic.DynamicGraph.from_graph(gpipe.generators.rmat(6, seed=1, directed=True, partitions=2))
    with pytest.raises(GpipeValueError, match="'edge_dir' = 'in' needs a gpipe.Graph .*, got a DynamicGraph"):
        gpipe.walks.deepwalk(dynamic, length=3, edge_dir="in")
