"""gpipe.mining: clique counts and lists against networkx and scipy, for 1 and 2 workers, in and out of memory."""

import dask
import networkx as nx
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import gpipe
from gpipe import GpipeValueError
from helpers import runs_here


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


def test_a_count_grows_each_clique_from_its_least_degree_vertex(cpu_cluster):
    """A count runs on the graph renumbered by (degree, id), each edge kept from its lower end: its first column
    holds the vertices with k - 1 neighbors above them in that order, its second each of their edges up, once (a
    hub's whole neighborhood never); the count is the listing's."""
    graph, k = nx.barabasi_albert_graph(80, 4, seed=3), 4
    g = _replicated(cpu_cluster, graph)
    counted, listed = gpipe.mining.count_cliques(g, k), gpipe.mining.list_cliques(g, k)
    assert counted.count == listed.count == len(_cliques(graph, k)) > 0
    order = {v: (graph.degree(v), v) for v in graph}
    up = {v: sum(order[u] > order[v] for u in graph[v]) for v in graph}
    first = [v for v in graph if up[v] >= k - 1]
    assert counted.stats["embeddings"][:2] == [len(first), sum(up[v] for v in first)]
    assert listed.stats["embeddings"][1] > counted.stats["embeddings"][1]  # by id, hubs (early ids) extend widely


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


def _partitioned(client, graph: nx.Graph, partitions: int) -> gpipe.Graph:
    edges = pd.DataFrame(list(graph.edges()), columns=["src", "dst"])
    with client.as_current():
        return gpipe.from_edges(edges, mode="partitioned", partitions=partitions,
                                num_vertices=graph.number_of_nodes())


def _rows(result) -> set:
    return set(map(tuple, result.embeddings.tolist()))


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("partitions", [1, 2, 4])
def test_partitioned_graphs_find_the_cliques_and_matches_of_the_replicated_one(cpu_cluster, one_worker_cluster,
                                                                               workers, partitions):
    """Embeddings routed to the partition owning the vertex they extend, with the rows of the vertices they are
    tested against fetched from other partitions' workers, find what the replicated graph's tables find."""
    client = cpu_cluster if workers == 2 else one_worker_cluster
    graph = nx.gnp_random_graph(40, 0.3, seed=9)
    g, whole = _partitioned(client, graph, partitions), _replicated(client, graph)
    for k in (3, 4):
        found, expected = gpipe.mining.list_cliques(g, k), gpipe.mining.list_cliques(whole, k)
        np.testing.assert_array_equal(found.embeddings, expected.embeddings)  # lexicographic, both
        assert found.count == expected.count == len(_cliques(graph, k)) > 0
        assert found.stats["embeddings"] == expected.stats["embeddings"]
        assert gpipe.mining.count_cliques(g, k).count == found.count
    for name in ("diamond", "tailed triangle"):
        for induced in (False, True):
            found, expected = (gpipe.mining.match(h, PATTERNS[name], induced, embeddings=True) for h in (g, whole))
            assert found.count == expected.count > 0 and _rows(found) == _rows(expected), (name, induced)
            assert found.stats["embeddings"] == expected.stats["embeddings"]
            counted = gpipe.mining.match(g, PATTERNS[name], induced)  # one map of each copy, then times |Aut|
            assert counted.count == expected.count and counted.stats["automorphisms"] > 1, (name, induced)
    assert found.stats["partitions"] == partitions and found.stats["workers"] == min(workers, partitions)
    crossed = found.stats["exchanged_bytes"]
    assert (crossed["embeddings"] > 0 and crossed["adjacency"] > 0) == (min(workers, partitions) > 1)


def test_a_partitioned_tables_chunks_spill_to_disk_between_levels_and_find_the_same_embeddings(cpu_cluster):
    graph = nx.gnp_random_graph(50, 0.35, seed=5)
    g = _partitioned(cpu_cluster, graph, 4)
    in_memory = gpipe.mining.list_cliques(g, 4)
    matches = gpipe.mining.match(g, PATTERNS["diamond"], induced=True, embeddings=True)
    with dask.config.set({"gpipe.mining.chunk-embeddings": 16}):
        spilled = gpipe.mining.list_cliques(g, 4, device_budget=256, host_budget="1 kB")
        spilled_matches = gpipe.mining.match(g, PATTERNS["diamond"], induced=True, embeddings=True,
                                             device_budget=256, host_budget=512)
    np.testing.assert_array_equal(spilled.embeddings, in_memory.embeddings)
    np.testing.assert_array_equal(spilled_matches.embeddings, matches.embeddings)
    assert [tuple(row) for row in spilled.embeddings.tolist()] == _cliques(graph, 4)
    assert in_memory.stats["spilled_bytes"] == 0 and in_memory.stats["bytes"]["disk"] == 0
    for result in (spilled, spilled_matches):
        assert result.stats["bytes"]["disk"] > 0 and result.stats["bytes"]["host"] > 0
        assert result.stats["bytes"]["device"] <= 2 * 256  # each of the two workers within its budget
    assert spilled.stats["embeddings"] == in_memory.stats["embeddings"]


def _named(client, graph: nx.Graph, partitions: int | None) -> gpipe.Graph:
    """``graph`` with string ids (so the id map travels to the workers), replicated or in ``partitions``."""
    edges = pd.DataFrame([(f"v{u}", f"v{v}") for u, v in graph.edges()], columns=["src", "dst"])
    with client.as_current():
        if partitions is None:
            return gpipe.from_edges(edges, mode="replicated")
        return gpipe.from_edges(edges, mode="partitioned", partitions=partitions)


def _listed_here(run_id, dask_worker=None):
    """The rows this worker keeps for a listing run, per block; None once the run has left its store."""
    from gpipe.mining._result import MiningState

    run = dask_worker.plugins["gpipe"].runs.get(run_id)
    return None if run is None else {key: len(rows) for key, rows in run.state(MiningState).listed.items()}


@pytest.mark.parametrize("partitions", [None, 1, 2, 4])
def test_listed_embeddings_compute_to_dask_and_to_parquet_give_the_same_rows(cpu_cluster, partitions, tmp_path):
    """Made on the workers, a block each: the array, the dask frame and the folder are the rows in their order."""
    graph = nx.gnp_random_graph(40, 0.3, seed=9)
    g = _named(cpu_cluster, graph, partitions)
    for found in (gpipe.mining.list_cliques(g, 4), gpipe.mining.match(g, PATTERNS["tailed triangle"], embeddings=True)):
        frame, rows = found.to_frame(), found.compute()
        np.testing.assert_array_equal(rows, found.embeddings)
        assert list(frame.columns) == found.columns and len(frame) == found.count > 0
        lazy = found.to_dask()
        assert lazy.npartitions == len(found._listed.blocks) >= (1 if partitions == 1 else 2)
        with cpu_cluster.as_current():  # the client whose workers made its partitions
            pd.testing.assert_frame_equal(lazy.compute(), frame)
        folder = found.to_parquet(tmp_path / f"{found.stats.get('k', 'match')}")
        assert len(list((tmp_path / folder).glob("*.parquet"))) == lazy.npartitions
        pd.testing.assert_frame_equal(pd.read_parquet(folder), frame)
    cliques = gpipe.mining.list_cliques(g, 4).compute()
    dense = g.to_internal(cliques).reshape(cliques.shape)
    assert [tuple(row) for row in dense.tolist()] == sorted(map(tuple, dense.tolist()))  # lexicographic (dense ids)
    assert sorted(tuple(sorted(int(v[1:]) for v in row)) for row in cliques.tolist()) == _cliques(graph, 4)
    assert list(gpipe.mining.list_cliques(g, 4).columns) == ["v0", "v1", "v2", "v3"]


def test_a_listing_call_brings_only_counts_to_the_client_and_the_rows_stay_on_the_workers(cpu_cluster):
    graph = nx.gnp_random_graph(50, 0.35, seed=5)
    for g in (_replicated(cpu_cluster, graph), _partitioned(cpu_cluster, graph, 4)):
        found = gpipe.mining.list_cliques(g, 4)
        assert "embeddings" not in vars(found)  # nothing computed on the client yet
        held = cpu_cluster.run(_listed_here, found._listed.run_id)
        assert all(held.values())  # both workers keep blocks
        sizes = {(worker, key): n for worker, blocks in held.items() for key, n in blocks.items()}
        assert [sizes[worker, key] for worker, key, _ in found._listed.blocks] == [
            n for _, _, n in found._listed.blocks]
        assert sum(sizes.values()) == found.count == len(found.embeddings) > 0


def test_counting_keeps_nothing_on_the_workers(cpu_cluster):
    g = _replicated(cpu_cluster, nx.gnp_random_graph(40, 0.3, seed=2))
    partitioned = _partitioned(cpu_cluster, nx.gnp_random_graph(40, 0.3, seed=2), 2)
    before = cpu_cluster.run(runs_here)
    counts = [gpipe.mining.count_cliques(h, 3).count for h in (g, partitioned)]
    counts += [gpipe.mining.match(h, PATTERNS["path"]).count for h in (g, partitioned)]
    assert min(counts) > 0 and cpu_cluster.run(runs_here) == before


def test_letting_a_listing_result_go_frees_its_rows_on_the_workers(cpu_cluster, eventually):
    import gc

    graph = nx.gnp_random_graph(40, 0.3, seed=3)
    for g in (_replicated(cpu_cluster, graph), _partitioned(cpu_cluster, graph, 2)):
        found = gpipe.mining.list_cliques(g, 3)
        run_id, rows = found._listed.run_id, found.compute()
        assert len(rows) == found.count > 0 and any(cpu_cluster.run(_listed_here, run_id).values())
        del found
        gc.collect()
        assert eventually(lambda: set(cpu_cluster.run(_listed_here, run_id).values()) == {None}), run_id


def test_an_interrupted_to_parquet_leaves_no_folder(cpu_cluster, tmp_path, monkeypatch):
    found = gpipe.mining.list_cliques(_replicated(cpu_cluster, nx.gnp_random_graph(40, 0.3, seed=4)), 3)
    from gpipe.runtime.results import _held_result

    def interrupted(gather):
        def then_interrupted(*args, **kwargs):
            gather(*args, **kwargs)  # every block's file is written, in the temporary folder
            raise KeyboardInterrupt
        return then_interrupted

    for name in ("gather_pinned", "call_workers"):  # by tasks, or by direct calls
        monkeypatch.setattr(_held_result, name, interrupted(getattr(_held_result, name)))
    with pytest.raises(KeyboardInterrupt):
        found.to_parquet(tmp_path / "cliques")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor the temporary one
    monkeypatch.undo()
    pd.testing.assert_frame_equal(pd.read_parquet(found.to_parquet(tmp_path / "cliques")), found.to_frame())


def test_an_interrupted_listing_leaves_no_run_or_rows_on_the_workers(cpu_cluster, monkeypatch):
    """Ctrl-C after the ranges were sent: mine() ends the listing run, and the ranges that grow on a worker after
    that make no run there to keep their rows in."""
    from gpipe.errors import GpipeError
    from gpipe.mining import _grow

    g = _replicated(cpu_cluster, nx.gnp_random_graph(40, 0.3, seed=5))
    before = cpu_cluster.run(runs_here)
    grow, sent = _grow.on_each, []

    def interrupted(g, phase, calls):
        sent.append(lambda: grow(g, phase, calls))
        raise KeyboardInterrupt

    for _ in range(3):
        monkeypatch.setattr(_grow, "on_each", interrupted)
        with pytest.raises(KeyboardInterrupt):
            gpipe.mining.list_cliques(g, 3)
        monkeypatch.undo()
        with pytest.raises(GpipeError, match="has ended on worker"):
            sent.pop()()  # the ranges grow now, on workers where the run has ended
    assert cpu_cluster.run(runs_here) == before


def test_counted_embeddings_cannot_be_read_and_say_how_to_list_them(cpu_cluster):
    found = gpipe.mining.count_cliques(_replicated(cpu_cluster, nx.complete_graph(4)), 3)
    assert found.embeddings is None
    for read in (found.compute, found.to_frame, found.to_dask, lambda: found.to_parquet("never")):
        with pytest.raises(GpipeValueError, match=r"the embeddings were not listed: ask for them \(list_cliques"):
            read()


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
        partitioned = gpipe.from_edges(edges, mode="partitioned", partitions=2)
        directed = gpipe.from_edges(edges, directed=True, mode="replicated")
    with pytest.raises(GpipeValueError, match=r"'g' must be replicated on the workers \(mode='replicated'\) for "
                                              r"frequent_patterns, got a partitioned graph \(2 partitions\)"):
        gpipe.mining.frequent_patterns(partitioned, 2, 1, labels=np.zeros(5, np.int64))
    with pytest.raises(GpipeValueError, match="'g' must be an undirected graph"):
        gpipe.mining.list_cliques(directed, 3)


@pytest.mark.parametrize("k", [6, 2**70])
def test_a_clique_larger_than_the_graph_is_refused_naming_k_and_the_rule(cpu_cluster, k):
    g = _replicated(cpu_cluster, nx.complete_graph(5))
    with pytest.raises(GpipeValueError, match=rf"'k' must be at most the number of vertices of 'g' \(5\), got {k}"):
        gpipe.mining.count_cliques(g, k)
    assert gpipe.mining.list_cliques(g, 5).embeddings.tolist() == [[0, 1, 2, 3, 4]]


@pytest.mark.parametrize("rows", [[[], [1, 1, 2], [], [0, 0]], [[3, 3, 3]], [[], []], [[0, 1], [0, 2]]])
def test_repeated_neighbors_are_dropped_from_sorted_rows_empty_ones_included(rows):
    from gpipe._csr import simple_rows

    indptr = np.cumsum([0] + [len(r) for r in rows])
    found = simple_rows(np, indptr, np.array(sum(rows, []), np.int32))
    assert [found.indices[a:b].tolist() for a, b in zip(found.indptr[:-1], found.indptr[1:])] == [
        sorted(set(r)) for r in rows]


@pytest.mark.parametrize("first", [0, 5])
def test_given_its_first_vertex_rows_also_drop_their_self_loops(first):
    from gpipe._csr import simple_rows

    # loops in rows 0, 2 and 3
    rows = [[first, first, first + 1], [], [first, first + 2, first + 2, first + 3], [first + 3]]
    indptr = np.cumsum([0] + [len(r) for r in rows])
    found = simple_rows(np, indptr, np.array(sum(rows, []), np.int64), first=first)
    assert [found.indices[a:b].tolist() for a, b in zip(found.indptr[:-1], found.indptr[1:])] == [
        sorted(set(r) - {first + v}) for v, r in enumerate(rows)]


def _multigraph(client, graph: nx.Graph, partitions: int | None) -> gpipe.Graph:
    """``graph`` with every edge repeated the other way round, every third once more, and a self-loop, built
    keeping them (replicated, or in ``partitions``)."""
    edges = list(graph.edges())
    edges += [(v, u) for u, v in edges] + edges[::3] + [(0, 0)]
    frame = pd.DataFrame(edges, columns=["src", "dst"])
    layout = {"mode": "replicated"} if partitions is None else {"mode": "partitioned", "partitions": partitions}
    with client.as_current():
        g = gpipe.from_edges(frame, keep_duplicates=True, keep_self_loops=True, num_vertices=len(graph), **layout)
    assert g.num_edges > graph.number_of_edges()  # the repeats are kept
    return g


@pytest.mark.parametrize("partitions", [None, 3])
def test_a_multigraph_is_mined_as_the_simple_graph_underneath(cpu_cluster, partitions):
    """Repeated edges count once in cliques, their lists, matches and frequent patterns, as in the simple graph
    (the same embeddings per column too), on a replicated graph and a partitioned one."""
    graph = nx.gnp_random_graph(24, 0.3, seed=13)
    nx.add_path(graph, range(23, 28))  # vertices of degree 1 and 2, which the repeats would lift above 2
    multi = _multigraph(cpu_cluster, graph, partitions)
    simple = _replicated(cpu_cluster, graph)
    for k in (3, 4):
        found, expected = gpipe.mining.list_cliques(multi, k), gpipe.mining.list_cliques(simple, k)
        np.testing.assert_array_equal(found.embeddings, expected.embeddings)
        assert found.count == gpipe.mining.count_cliques(multi, k).count == len(_cliques(graph, k)) > 0
        assert found.stats["embeddings"] == expected.stats["embeddings"]
    for induced in (False, True):
        found, expected = (gpipe.mining.match(h, PATTERNS["diamond"], induced, embeddings=True)
                           for h in (multi, simple))
        assert found.count == expected.count > 0 and _rows(found) == _rows(expected), induced
        assert found.stats["embeddings"] == expected.stats["embeddings"]
    if partitions is None:  # frequent_patterns mines replicated graphs only
        labels = np.random.default_rng(13).integers(0, 2, len(graph))
        found, expected = (gpipe.mining.frequent_patterns(h, 3, 2, labels=labels) for h in (multi, simple))
        pd.testing.assert_frame_equal(found.patterns, expected.patterns)
        assert found.patterns.code.is_unique and found.stats["checks"] == expected.stats["checks"]


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
    counted = gpipe.mining.match(g, PATTERNS[name])
    assert counted.count == sum(1 for _ in matcher.subgraph_monomorphisms_iter())
    leaf = name in ("path", "tailed triangle")  # its last matched vertex is a leaf: the column before is not made
    assert (counted.stats["embeddings"][-2] == 0) == leaf and counted.stats["embeddings"][-1] > 0
    assert gpipe.mining.match(g, PATTERNS[name], induced=True).count == sum(
        1 for _ in matcher.subgraph_isomorphisms_iter())


SYMMETRIC = {**PATTERNS, "star": [(0, 1), (0, 2), (0, 3), (0, 4)], "5-cycle": [(i, (i + 1) % 5) for i in range(5)],
             "K4": [(i, j) for i in range(4) for j in range(i + 1, 4)], "edge": [(0, 1)],
             "house": [(0, 1), (1, 2), (2, 3), (3, 0), (2, 4), (3, 4)]}


@pytest.mark.parametrize("name", sorted(SYMMETRIC))
def test_a_counts_symmetry_conditions_keep_one_map_of_each_copy(name):
    """Onto the m vertices 0..m-1 of a complete graph every permutation is a map of an m-vertex pattern, each copy
    found once per automorphism: the conditions, checked where the plan checks them, keep m! / |Aut| of them."""
    import itertools
    import math

    from gpipe.mining._match import _pattern, matching_plan

    nodes, edges = _pattern(SYMMETRIC[name])
    m, pairs = len(nodes), {frozenset(e) for e in edges}
    automorphisms = sum(all(frozenset((p[u], p[v])) in pairs for u, v in edges)
                        for p in itertools.permutations(range(m)))
    plan = matching_plan(m, edges, False, broken=True)
    assert plan.automorphisms == automorphisms and (plan.above != ()) == (automorphisms > 1)
    assert all(j < i for i, earlier in enumerate(plan.above) for j in earlier)  # checked as position i is matched
    kept = 0
    for image in itertools.permutations(range(m)):  # pattern vertex u -> image[u]
        row = [image[u] for u in plan.order]
        kept += all(row[i] > row[j] for i in range(m) for j in (plan.above[i] if plan.above else ()))
    assert kept == math.factorial(m) // automorphisms


@pytest.mark.parametrize("induced", [False, True])
def test_a_count_grows_one_map_of_each_copy_and_counts_them_all(cpu_cluster, induced):
    graph = nx.gnp_random_graph(26, 0.3, seed=13)
    g = _replicated(cpu_cluster, graph)
    for name in ("4-cycle", "diamond", "house", "star"):
        count, listed = (gpipe.mining.match(g, SYMMETRIC[name], induced, embeddings=e) for e in (False, True))
        assert count.count == listed.count == len(listed.embeddings) > 0, name
        assert count.stats["automorphisms"] > 1 and listed.stats["automorphisms"] == 1, name
        assert sum(count.stats["embeddings"]) < sum(listed.stats["embeddings"]), name  # fewer grown


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
    (nx.MultiGraph([(0, 1), (0, 1)]), "'pattern' must be an undirected simple graph, got a MultiGraph"),
    ([(0, "a"), ("a", 1)], r"'pattern' vertices must be of one kind that sorts \(all integers or all strings\), got "
                           r"0 and 'a'"),
    ([(0.5, 1), (1, 2)], r"'pattern' vertices must be integers or strings \(or other values that sort together\), "
                         r"got 0.5"),
    ([(True, 2), (2, 3)], r"'pattern' vertices must be integers or strings .*, got True"),
    ([(float("nan"), 1)], r"'pattern' vertices must be integers or strings .*, got nan"),
    (7, "'pattern' must be a networkx graph or a list of .u, v. edges, got int"),
    ([((0,), ("a",)), (("a",), (1,))], r"of one kind that sorts .*, got \(0,\) and \('a',\)"),  # tuples alike
])
def test_bad_patterns_are_refused_by_name_with_or_without_a_graph(cpu_cluster, pattern, message):
    g = _replicated(cpu_cluster, nx.complete_graph(4))
    with pytest.raises(GpipeValueError, match=message):
        gpipe.mining.match(g, pattern)
    with pytest.raises(GpipeValueError, match=message):  # as a command line checks its flags, before any work
        gpipe.mining.check_pattern(pattern)


@pytest.mark.parametrize("pattern", [PATTERNS["tailed triangle"], nx.grid_2d_graph(2, 3), [(0, np.int64(1))]])
def test_a_good_pattern_passes_its_check_as_it_is(pattern):
    assert gpipe.mining.check_pattern(pattern) is pattern


def _labeled(pattern_edges, labels) -> nx.Graph:
    graph = nx.Graph(list(pattern_edges))
    nx.set_node_attributes(graph, dict(enumerate(labels)), "label")
    return graph


def _brute_force_fpm(graph: nx.Graph, labels, max_edges: int) -> list:
    """Every connected edge set of up to ``max_edges`` edges, grouped by labeled isomorphism: per class a
    representative and its MNI support (over every isomorphism of each instance onto it)."""
    same_label = nx.algorithms.isomorphism.categorical_node_match("label", None)
    level = {frozenset([tuple(sorted(e))]) for e in graph.edges()}
    classes = {}  # (edges, WL hash) -> [[representative, images per vertex, instances], ...]
    for size in range(1, max_edges + 1):
        for edge_set in level:
            instance = nx.Graph(list(edge_set))
            nx.set_node_attributes(instance, {v: int(labels[v]) for v in instance}, "label")
            bucket = classes.setdefault((size, nx.weisfeiler_lehman_graph_hash(instance, node_attr="label")), [])
            found = next((c for c in bucket if nx.is_isomorphic(c[0], instance, node_match=same_label)), None)
            if found is None:
                found = [instance, {v: set() for v in instance}]
                bucket.append(found)
            for mapping in nx.algorithms.isomorphism.GraphMatcher(instance, found[0],
                                                                   node_match=same_label).isomorphisms_iter():
                for v, u in mapping.items():
                    found[1][u].add(v)
        level = {edge_set | {tuple(sorted((v, w)))} for edge_set in level for v in {v for e in edge_set for v in e}
                 for w in graph[v] if tuple(sorted((v, w))) not in edge_set}
    return [(r, min(len(s) for s in images.values())) for bucket in classes.values() for r, images in bucket]


def _labeled_graph(seed: int, n: int, p: float, kinds: int):
    graph = nx.gnp_random_graph(n, p, seed=seed)
    return graph, np.random.default_rng(seed).integers(0, kinds, n)


@pytest.mark.parametrize("seed, n, p, kinds, max_edges, min_support", [
    (1, 14, 0.3, 2, 3, 1), (2, 14, 0.3, 3, 3, 3), (3, 16, 0.25, 2, 3, 5), (4, 10, 0.35, 2, 4, 2)])
def test_frequent_patterns_equal_a_brute_force_mni_counter(cpu_cluster, seed, n, p, kinds, max_edges, min_support):
    graph, labels = _labeled_graph(seed, n, p, kinds)
    found = gpipe.mining.frequent_patterns(_replicated(cpu_cluster, graph), max_edges, min_support, labels=labels)
    same_label = nx.algorithms.isomorphism.categorical_node_match("label", None)
    expected = [c for c in _brute_force_fpm(graph, labels, max_edges) if c[1] >= min_support]
    assert len(found) == len(expected) > 0
    assert found.patterns.code.is_unique
    for row in found.patterns.itertuples():
        pattern = _labeled(row.edges, row.labels)
        [support] = [s for r, s in expected if nx.is_isomorphic(r, pattern, node_match=same_label)]
        assert (row.support, row.size) == (support, len(row.edges)), row
    assert found.stats["frequent"][-1] == (found.patterns["size"] == max_edges).sum()


def test_one_and_two_workers_find_the_same_frequent_patterns(cpu_cluster, one_worker_cluster):
    graph, labels = _labeled_graph(5, 24, 0.25, 3)
    found = [gpipe.mining.frequent_patterns(_replicated(c, graph), 3, 2, labels=labels)
             for c in (one_worker_cluster, cpu_cluster)]
    assert [f.stats["workers"] for f in found] == [1, 2]
    pd.testing.assert_frame_equal(found[0].patterns, found[1].patterns)
    assert found[0].stats["checks"] == found[1].stats["checks"]


def test_labels_of_the_graph_or_by_original_id_give_the_same_patterns(cpu_cluster):
    graph, labels = _labeled_graph(6, 18, 0.3, 2)
    g = _replicated(cpu_cluster, graph)
    given = gpipe.mining.frequent_patterns(g, 2, 2, labels=labels)
    g.set_labels(pd.Series(labels, index=np.arange(len(labels))))
    pd.testing.assert_frame_equal(gpipe.mining.frequent_patterns(g, 2, 2).patterns, given.patterns)


def test_frequent_patterns_around_a_hub_check_vertices_not_embeddings(cpu_cluster):
    """A star of 3,000 leaves holds C(3000, 4) = 3.4e12 four-edge stars: MNI is decided by a check per (orbit,
    vertex) of each candidate, never by listing them; the hub is the only image of a star's center."""
    leaves = 3000
    g = _replicated(cpu_cluster, nx.star_graph(leaves))
    found = gpipe.mining.frequent_patterns(g, 4, 1, labels=np.zeros(leaves + 1, np.int64))
    assert found.patterns[["size", "support"]].values.tolist() == [[1, leaves + 1], [2, 1], [3, 1], [4, 1]]
    assert found.patterns.edges.tolist() == [tuple((0, b) for b in range(1, k + 1)) for k in range(1, 5)]
    # level 3: the star, the path and the triangle; level 4 only the star: every other extension of the 3-star holds
    # a path or a triangle, which are not frequent
    assert found.stats["candidates"] == [1, 1, 3, 1]
    assert sum(found.stats["checks"]) <= 2 * (leaves + 1) * sum(found.stats["candidates"])


@pytest.mark.parametrize("arguments, message", [
    ((0, 2), "'max_edges' must be a positive integer, got 0"),
    ((5, 2), "'max_edges' must be an integer <= 4, got 5"),
    ((2, 0), "'min_support' must be a positive integer, got 0"),
    ((2, -3), "'min_support' must be a positive integer, got -3"),
    ((2, 1, [0, 1, 2]), r"'labels' must hold one label per vertex \(5\), got shape \(3,\)"),
    ((2, 1, ["a"] * 5), r"'labels' must hold integers, got dtype <U1 \(e.g. 'a'\)"),
    ((2, 1, [0, 1, 2, 3, -1]), "'labels' must hold integers >= 0, got -1"),
    ((2, 1, np.array([0, 1, 2, 3, 2**63], np.uint64)), "'labels' must hold integers below 2\\*\\*63, got "
                                                        "9223372036854775808"),
    ((2, 1, pd.Series([0.0, 1.0, 2.5, 3.0, 4.0])), r"'labels' must hold integers, got dtype float64 \(e.g. 2.5\)"),
    ((2, 1, pd.Series([0, 1, None, 3, 4])), r"'labels' must hold integers, got dtype float64 \(e.g. nan\)"),
    ((2, 1, pd.Series(list("abcde"))), r"'labels' must hold integers, got dtype object \(e.g. 'a'\)"),
    ((2, 1, pd.Series(np.array([0, 1, 2, 3, 2**64 - 1], np.uint64))), "'labels' must hold integers below 2"),
    ((2, 1, pd.Series([0, 1], index=[0, 9])), r"'labels' index' must hold vertices of the graph; 1 do not, e.g. \[9\]"),
    ((2, 1, np.arange(5) * 1000), None),
    ((2, 1), r"'labels' must be given when 'g' has none \(Graph.set_labels\), got None"),
])
def test_bad_fpm_input_is_refused_by_name(cpu_cluster, arguments, message):
    g = _replicated(cpu_cluster, nx.complete_graph(5))
    if message is None:  # labels of any size are fine, only their count is bounded
        assert len(gpipe.mining.frequent_patterns(g, *arguments)) == 10 + 30
        return
    with pytest.raises(GpipeValueError, match=message):
        gpipe.mining.frequent_patterns(g, *arguments)


@pytest.mark.parametrize("chunk, message", [("big", "must be 'auto' or a positive integer, got 'big'"),
                                            (0, "must be a positive integer, got 0")])
def test_a_bad_chunk_size_is_refused_by_name(cpu_cluster, chunk, message):
    g = _replicated(cpu_cluster, nx.complete_graph(5))
    with dask.config.set({"gpipe.mining.chunk-embeddings": chunk}), pytest.raises(GpipeValueError, match=message):
        gpipe.mining.count_cliques(g, 3)


def test_more_distinct_labels_than_a_code_holds_are_refused(cpu_cluster):
    g = _replicated(cpu_cluster, nx.path_graph(1100))
    with pytest.raises(GpipeValueError, match="'labels' must take at most 1024 distinct values, got 1100"):
        gpipe.mining.frequent_patterns(g, 1, 1, labels=np.arange(1100))


@pytest.mark.parametrize("listing", [False, True])
def test_a_counts_last_column_is_counted_not_stored(listing, tmp_path):
    """A count never holds its last column (the largest, for cliques past the graph's triangles): the table of
    K_6's 4-cliques holds three columns; a listing, four."""
    from gpipe._csr import simple_rows
    from gpipe.mining._cliques import CliquePlan
    from gpipe.mining._grow import Spec, _grow
    from gpipe.mining._table import EmbeddingTable, Stats

    complete = nx.complete_graph(6)
    csr = nx.to_scipy_sparse_array(complete, format="csr")
    graph = simple_rows(np, csr.indptr.astype(np.int64), csr.indices.astype(np.int32))
    spec = Spec("g", "run", CliquePlan(4), listing, 1 << 10, None, None, None)
    stats = Stats()
    table = EmbeddingTable("cpu", None, None, str(tmp_path), stats)
    try:
        count, rows = _grow(np, graph, spec, table, 0, 6, stats)
        assert count == 15 and stats.embeddings == [6, 15, 20, 15]
        assert len(table.columns) == (4 if listing else 3)
        assert (rows.shape == (15, 4)) if listing else rows is None
    finally:
        table.close()
