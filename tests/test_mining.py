"""gpipe.mining: clique counts and lists against networkx and scipy, for 1 and 2 workers, in and out of memory."""

import dask
import networkx as nx
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import gpipe
from gpipe import GpipeValueError


def _replicated(client, graph: nx.Graph) -> gpipe.Graph:
    edges = pd.DataFrame(list(graph.edges()), columns=["src", "dst"])
    with client.as_current():
        return gpipe.from_edges(edges, mode="replicated", num_vertices=graph.number_of_nodes())


def _cliques(graph: nx.Graph, k: int) -> list:
    return sorted(tuple(sorted(c)) for c in nx.enumerate_all_cliques(graph) if len(c) == k)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clique_counts_equal_networkx(cpu_cluster, seed):
    graph = nx.gnp_random_graph(40, 0.3, seed=seed)
    g = _replicated(cpu_cluster, graph)
    for k in (3, 4, 5):
        result = gpipe.mining.count_cliques(g, k)
        assert result.count == len(_cliques(graph, k)), k
        assert result.stats["embeddings"][-1] == result.count


def test_triangles_equal_the_trace_of_a_cubed_over_six_on_rmat(cpu_cluster, tmp_path):
    with cpu_cluster.as_current():
        g = gpipe.generators.rmat(scale=11, edge_factor=8, seed=4, mode="replicated")
        triangles = gpipe.mining.count_cliques(g, 3).count
        edges = pd.read_parquet(g.to_parquet(tmp_path / "g"))
    a = sp.csr_matrix((np.ones(len(edges)), (edges.src, edges.dst)), shape=(g.num_vertices,) * 2)
    assert triangles == (a @ a @ a).diagonal().sum() / 6 > 0


def test_one_and_two_workers_find_the_same_cliques(cpu_cluster, one_worker_cluster):
    graph = nx.gnp_random_graph(60, 0.25, seed=8)
    lists = [gpipe.mining.list_cliques(_replicated(c, graph), 4) for c in (one_worker_cluster, cpu_cluster)]
    assert [r.stats["workers"] for r in lists] == [1, 2]
    np.testing.assert_array_equal(lists[0].embeddings, lists[1].embeddings)
    assert [tuple(row) for row in lists[0].embeddings.tolist()] == _cliques(graph, 4)
    assert lists[0].count == lists[1].count == len(_cliques(graph, 4))


def test_a_table_beyond_the_budgets_spills_to_disk_and_finds_the_same_cliques(cpu_cluster):
    graph = nx.gnp_random_graph(50, 0.35, seed=5)
    g = _replicated(cpu_cluster, graph)
    in_memory = gpipe.mining.list_cliques(g, 4)
    with dask.config.set({"gpipe.mining.chunk-embeddings": 16, "gpipe.mining.ranges": 4}):
        spilled = gpipe.mining.list_cliques(g, 4, device_budget=256, host_budget="1 kB")
    np.testing.assert_array_equal(spilled.embeddings, in_memory.embeddings)
    assert in_memory.stats["spilled_bytes"] == 0 and in_memory.stats["bytes"]["disk"] == 0
    assert spilled.stats["bytes"]["disk"] > 0 and spilled.stats["bytes"]["host"] > 0
    assert spilled.stats["spilled_bytes"] >= spilled.stats["bytes"]["disk"] + spilled.stats["bytes"]["host"]
    assert spilled.stats["bytes"]["device"] <= 2 * 256  # each of the two workers within its budget
    assert spilled.stats["embeddings"] == in_memory.stats["embeddings"]


def test_matches_read_their_rows_back_from_disk(cpu_cluster):
    """A match extends each chunk by its rows, read up through parent chunks spilled to host memory and disk."""
    g = _replicated(cpu_cluster, nx.gnp_random_graph(40, 0.3, seed=6))
    in_memory = gpipe.mining.match(g, PATTERNS["diamond"], induced=True, embeddings=True)
    with dask.config.set({"gpipe.mining.chunk-embeddings": 16}):
        spilled = gpipe.mining.match(g, PATTERNS["diamond"], induced=True, embeddings=True, device_budget=256,
                                     host_budget=512)
    np.testing.assert_array_equal(spilled.embeddings, in_memory.embeddings)
    assert spilled.count == in_memory.count > 0 and spilled.stats["bytes"]["disk"] > 0


def test_a_graph_without_cliques_counts_zero(cpu_cluster):
    g = _replicated(cpu_cluster, nx.cycle_graph(12))
    assert gpipe.mining.count_cliques(g, 3).count == 0
    assert gpipe.mining.list_cliques(g, 4).embeddings.shape == (0, 4)


def test_bad_k_and_graphs_are_refused_by_name(cpu_cluster):
    graph = nx.complete_graph(5)
    g = _replicated(cpu_cluster, graph)
    with pytest.raises(GpipeValueError, match="'k' must be an integer >= 3, got 2"):
        gpipe.mining.count_cliques(g, 2)
    with pytest.raises(GpipeValueError, match="'device_budget' must be a byte count such as 1000000 or '4 GB', "
                                              "got 'big'"):
        gpipe.mining.count_cliques(g, 3, device_budget="big")
    edges = pd.DataFrame(list(graph.edges()), columns=["src", "dst"])
    with cpu_cluster.as_current():
        partitioned = gpipe.from_edges(edges, mode="partitioned")
        directed = gpipe.from_edges(edges, directed=True, mode="replicated")
    with pytest.raises(GpipeValueError, match=r"'g' must be replicated on the workers \(mode='replicated'\)"):
        gpipe.mining.count_cliques(partitioned, 3)
    with pytest.raises(GpipeValueError, match="'g' must be an undirected graph"):
        gpipe.mining.list_cliques(directed, 3)


PATTERNS = {
    "triangle": [(0, 1), (1, 2), (2, 0)],
    "path": [(0, 1), (1, 2), (2, 3)],
    "4-cycle": [(0, 1), (1, 2), (2, 3), (3, 0)],
    "diamond": [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)],
    "tailed triangle": [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")],
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_match_counts_equal_networkx_monomorphisms_and_induced_isomorphisms(cpu_cluster, name):
    graph = nx.gnp_random_graph(22, 0.3, seed=11)
    g = _replicated(cpu_cluster, graph)
    matcher = nx.algorithms.isomorphism.GraphMatcher(graph, nx.Graph(PATTERNS[name]))
    assert gpipe.mining.match(g, PATTERNS[name]).count == sum(1 for _ in matcher.subgraph_monomorphisms_iter())
    assert gpipe.mining.match(g, PATTERNS[name], induced=True).count == sum(
        1 for _ in matcher.subgraph_isomorphisms_iter())


def test_matches_are_listed_in_the_patterns_vertex_order_for_any_worker_count(cpu_cluster, one_worker_cluster):
    graph, pattern = nx.gnp_random_graph(30, 0.3, seed=12), nx.Graph(PATTERNS["tailed triangle"])
    found = [gpipe.mining.match(_replicated(c, graph), pattern, embeddings=True)
             for c in (one_worker_cluster, cpu_cluster)]
    np.testing.assert_array_equal(found[0].embeddings, found[1].embeddings)
    expected = {tuple(m[u] for u in "abcde") for m in (
        {p: v for v, p in mapping.items()} for mapping in
        nx.algorithms.isomorphism.GraphMatcher(graph, pattern).subgraph_monomorphisms_iter())}
    assert {tuple(row) for row in found[0].embeddings.tolist()} == expected == set(map(tuple, found[1].embeddings))
    assert found[0].stats["pattern_vertices"] == list("abcde") and found[0].stats["matching_order"][0] == "c"


@pytest.mark.parametrize("pattern, message", [
    ([(0, 1), (2, 3)], r"'pattern' must be connected, got vertices \[0, 1\] \(by position\) apart from the rest"),
    ([(0, 0), (0, 1)], r"'pattern' must have no self-loops, got \[\(0, 0\)\]"),
    ([(i, i + 1) for i in range(16)], "'pattern' must have 2 to 16 vertices, got 17"),
    (nx.DiGraph([(0, 1)]), "'pattern' must be an undirected simple graph, got a DiGraph"),
    (7, "'pattern' must be a networkx graph or a list of .u, v. edges, got int"),
])
def test_bad_patterns_are_refused_by_name(cpu_cluster, pattern, message):
    g = _replicated(cpu_cluster, nx.complete_graph(4))
    with pytest.raises(GpipeValueError, match=message):
        gpipe.mining.match(g, pattern)
