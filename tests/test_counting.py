"""gpipe.counting: labeled inputs, candidate graphs, exact counts and the random-walk estimators."""

import dataclasses
import gc
import json
import pickle
import re
import threading
import time
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.cli import main
from gpipe.counting import Query

HPRD = Path(__file__).resolve().parents[2] / "shared" / "data" / "hprd"


def write(tmp_path, text: str, name: str = "g.graph") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- inputs ------------------------------------------------------------------------------------------------------
def test_read_graph_keeps_ids_labels_and_isolated_vertices(cpu, tmp_path):
    path = write(tmp_path, "t 4 2\nv 0 3 1\nv 1 3 2\nv 2 0 1\nv 3 9 0\ne 0 1\ne 1 2\n")
    g = gpipe.counting.read_graph(path)
    assert (g.num_vertices, g.num_edges, g.labels.tolist()) == (4, 2, [3, 3, 0, 9])
    assert g.degrees().tolist() == [1, 2, 1, 0]


@pytest.mark.parametrize("text, where, reason", [
    ("v 0 1 0\n", 1, "must start with 't N M'"),
    ("t 2 1\nv 0 1 1\nv 1 x 1\ne 0 1\n", 3, r"expected a label \(a non-negative integer\), got .x."),
    ("t 2 1\nv 0 1 1\nv 0 1 1\ne 0 1\n", 3, "vertex 0 is listed twice"),
    ("t 2 1\nv 0 1 1\ne 0 1\nv 1 1 1\n", 3, r"edge \(0, 1\) has an end not listed"),
    ("t 2 1\nv 0 1 1\nv 1 1 1\nq 0 1\n", 4, "expected 'v id label degree' or 'e u v', got 'q 0 1'"),
    ("t 2 2\nv 0 1 1\nv 1 1 1\ne 0 1\n", None, "holds 1 edges, its 't' line announces 2"),
    ("t 2 1\nv 0 1 1\nv 1 1 2\ne 0 1\n", None, "vertex 1 has 1 edges, its 'v' line says degree 2"),
])
def test_a_malformed_graph_file_names_the_file_and_line(tmp_path, text, where, reason):
    path = write(tmp_path, text)
    with pytest.raises(gpipe.GpipeFileError, match=reason) as info:
        Query.from_file(path)
    assert (info.value.path, info.value.line) == (str(path), where)


def test_the_three_query_constructors_agree(tmp_path):
    path = write(tmp_path, "t 3 2\nv 0 5 1\nv 1 7 2\nv 2 5 1\ne 1 0\ne 2 1\n")
    nxg = nx.Graph([(0, 1), (1, 2)])
    nx.set_node_attributes(nxg, {0: 5, 1: 7, 2: 5}, "label")
    for q in (Query.from_file(path), Query.from_networkx(nxg), Query.from_edges([(1, 2), (0, 1), (1, 0)], [5, 7, 5])):
        assert q.labels.tolist() == [5, 7, 5] and q.edges.tolist() == [[0, 1], [1, 2]]


@pytest.mark.parametrize("edges, labels, message", [
    ([], [], "'query' must have at least one vertex"),
    ([(0, 1), (2, 3)], [1, 1, 1, 1], r"'query' must be connected, got vertices \[2, 3\] unreachable"),
    ([(0, 0)], [1], r"'query' must have no self-loops, got edge \[0, 0\]"),
    ([(0, 2)], [1, 1], r"'query' edges must join vertices 0..1, got \[\[0, 2\]\]"),
    ([(0, 1)], [1, -1], "'query labels' must hold integers >= 0, got -1"),
    ([(0, 1, 2)], [1, 1, 1], r"'query' edges must be pairs of vertex ids, got an array of shape \(1, 3\)"),
    ([(i, i + 1) for i in range(32)], [0] * 33, "'query' must have at most 32 vertices, got 33"),
])
def test_a_bad_query_is_refused_naming_what_is_wrong(edges, labels, message):
    with pytest.raises(gpipe.GpipeValueError, match=message):
        Query.from_edges(edges, labels)


def test_a_networkx_query_needs_every_label():
    nxg = nx.path_graph(3)
    nxg.nodes[0]["label"] = 1
    with pytest.raises(gpipe.GpipeValueError, match=r"nodes must all have the attribute 'label'; \[1, 2\] do not"):
        Query.from_networkx(nxg)


def test_set_labels_takes_a_series_by_original_id_and_checks_it(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": ["a", "b"], "dst": ["b", "c"]}))
    g.set_labels(pd.Series([7, 8, 9], index=["c", "a", "b"]))
    assert g.labels[g.to_internal(["a", "b", "c"])].tolist() == [8, 9, 7]
    with pytest.raises(gpipe.GpipeValueError, match=r"one label per vertex \(3\), got shape \(2,\)"):
        g.set_labels([1, 2])
    with pytest.raises(gpipe.GpipeValueError, match=r"'labels' must hold integers, got dtype float64 \(e.g. 1.5\)"):
        g.set_labels([1.5, 2, 3])


# -- candidate graph and exact counts ----------------------------------------------------------------------------
def labeled_graph(seed: int, n: int = 24, p: float = 0.25, kinds: int = 2) -> nx.Graph:
    rng = np.random.default_rng(seed)
    graph = nx.gnp_random_graph(n, p, seed=seed)
    nx.set_node_attributes(graph, {v: int(rng.integers(kinds)) for v in graph}, "label")
    return graph


def on_cluster(graph: nx.Graph, **kwargs) -> gpipe.Graph:
    edges = np.array(graph.edges, np.int64).reshape(-1, 2)
    g = gpipe.from_edges(pd.DataFrame({"src": edges[:, 0], "dst": edges[:, 1]}), renumber=False,
                         num_vertices=graph.number_of_nodes(), **kwargs)
    g.set_labels([graph.nodes[v]["label"] for v in range(graph.number_of_nodes())])
    return g


def networkx_count(graph: nx.Graph, query: nx.Graph) -> int:
    """Label-preserving subgraph monomorphisms (non-induced embeddings), as the HPRD counts are."""
    matcher = nx.algorithms.isomorphism.GraphMatcher(graph, query, node_match=lambda a, b: a["label"] == b["label"])
    return sum(1 for _ in matcher.subgraph_monomorphisms_iter())


def labeled_query(edges, labels) -> nx.Graph:
    query = nx.Graph()
    query.add_nodes_from(range(len(labels)))
    query.add_edges_from(edges)
    nx.set_node_attributes(query, dict(enumerate(labels)), "label")
    return query


QUERIES = {  # shapes with labels that occur, several of them with automorphisms
    "edge": ([(0, 1)], [0, 1]),
    "triangle": ([(0, 1), (1, 2), (0, 2)], [0, 0, 1]),
    "path": ([(0, 1), (1, 2), (2, 3)], [1, 0, 0, 1]),
    "square": ([(0, 1), (1, 2), (2, 3), (3, 0)], [0, 1, 0, 1]),
    "star": ([(0, 1), (0, 2), (0, 3)], [0, 1, 1, 1]),
    "diamond": ([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)], [0, 0, 1, 1]),
    "single": ([], [1]),
}


@pytest.mark.parametrize("seed, layout", [(0, {}), (1, {"mode": "partitioned", "partitions": 3})])
def test_count_exact_agrees_with_networkx(cpu, seed, layout):
    """On a replicated graph (the candidate graph built where a replica is) and a partitioned one (partition by
    partition)."""
    graph = labeled_graph(seed)
    g = on_cluster(graph, **layout)
    assert g.mode == layout.get("mode", "replicated")
    counts = {}
    for name, (edges, labels) in QUERIES.items():
        query = labeled_query(edges, labels)
        counts[name] = networkx_count(graph, query)
        count = gpipe.counting.count_exact(g, Query.from_networkx(query))
        assert count == counts[name], name
        assert isinstance(count, int) and count.stats["algorithm"] == "count_exact" and count.stats["seconds"] > 0
        assert count.stats["roots"] > 0 and pickle.loads(pickle.dumps(count)).stats == count.stats
    assert min(counts.values()) > 0, counts  # every shape occurs: the comparisons are not of zeros


def test_candidates_keep_every_embedding_and_follow_connected_order(cpu):
    graph = labeled_graph(3)
    g = on_cluster(graph)
    edges, labels = QUERIES["diamond"]
    cg = gpipe.counting.candidates(g, Query.from_edges(edges, labels))
    matcher = nx.algorithms.isomorphism.GraphMatcher(graph, labeled_query(edges, labels),
                                                     node_match=lambda a, b: a["label"] == b["label"])
    used = [set() for _ in labels]
    for mapping in matcher.subgraph_monomorphisms_iter():
        for v, u in mapping.items():
            used[u].add(v)
    for d, u in enumerate(cg.order):
        assert used[u] <= set(cg.cand_vertices[cg.cand_offsets[d]:cg.cand_offsets[d + 1]].tolist())
        back = cg.back_pos[cg.back_offsets[d]:cg.back_offsets[d + 1]]
        assert (d == 0) == (len(back) == 0) and all(b < d for b in back)
    assert sorted(cg.order.tolist()) == list(range(len(labels)))


def reference_candidate_graph(graph: nx.Graph, query: nx.Graph) -> tuple:
    """The candidate graph as :func:`gpipe.counting.candidates` defines it, in plain Python: the matching order,
    each position's candidates and, per backward neighbor (the parent first), the candidate edges as lists."""
    label = nx.get_node_attributes(graph, "label")
    cand = {u: {v for v in graph if label[v] == query.nodes[u]["label"] and graph.degree(v) >= query.degree(u)
                and all(sum(label[x] == want for x in graph[v]) >= sum(query.nodes[w]["label"] == want
                                                                       for w in query[u])
                        for want in {query.nodes[w]["label"] for w in query[u]})}
            for u in query}
    changed = True
    while changed:  # arc consistency: every candidate keeps a candidate neighbor for each query neighbor
        changed = False
        for u in query:
            for w in query[u]:
                keep = {v for v in cand[u] if any(x in cand[w] for x in graph[v])}
                changed |= keep != cand[u]
                cand[u] = keep
    size = {u: len(cand[u]) for u in query}
    order = [min(query, key=lambda u: (size[u] / max(query.degree(u), 1), u))]
    while len(order) < len(query):
        order.append(min((w for w in query if w not in order and any(x in order for x in query[w])),
                         key=lambda w: (-sum(x in order for x in query[w]), size[w], w)))
    cands = [sorted(cand[u]) for u in order]
    backward = []
    for d, u in enumerate(order):
        lists = [(b, [[i for i, y in enumerate(cands[d]) if graph.has_edge(x, y)] for x in cands[b]])
                 for b in sorted(order.index(w) for w in query[u] if order.index(w) < d)]
        lists.sort(key=lambda e: sum(map(len, e[1])) / max(len(e[1]), 1))  # stable: ties keep position order
        backward.append(lists)
    return order, cands, backward


def as_lists(cg) -> tuple:
    """A CandidateGraph in :func:`reference_candidate_graph`'s terms."""
    cands = [cg.cand_vertices[cg.cand_offsets[d]:cg.cand_offsets[d + 1]].tolist() for d in range(len(cg.order))]
    backward = [[(int(cg.back_pos[t]), [cg.edge_indices[cg.edge_indptr[cg.back_rows[t] + c]:
                                                          cg.edge_indptr[cg.back_rows[t] + c + 1]].tolist()
                                         for c in range(len(cands[cg.back_pos[t]]))])
                 for t in range(cg.back_offsets[d], cg.back_offsets[d + 1])] for d in range(len(cg.order))]
    return cg.order.tolist(), cands, backward


def walked_query(graph: nx.Graph, size: int, rng) -> nx.Graph:
    """A connected query with an embedding: a random tree grown in the data graph, with some of the edges among
    its vertices added."""
    while True:
        vertices = [int(rng.choice([v for v in graph if graph.degree(v) > 0]))]
        tree = []
        while len(vertices) < size:
            frontier = sorted({(u, x) for u in vertices for x in graph[u] if x not in vertices})
            if not frontier:
                break
            u, x = frontier[rng.integers(len(frontier))]
            tree.append((vertices.index(u), len(vertices)))
            vertices.append(x)
        if len(vertices) == size:
            break
    extra = [(i, j) for i in range(size) for j in range(i + 1, size)
             if graph.has_edge(vertices[i], vertices[j]) and (i, j) not in tree and rng.random() < 0.5]
    return labeled_query(tree + extra, [graph.nodes[v]["label"] for v in vertices])


LAYOUTS = [{}, {"mode": "partitioned", "partitions": 2}, {"mode": "partitioned", "partitions": 5}]


@pytest.mark.parametrize("seed", range(8))
def test_candidate_graphs_follow_their_definition_on_every_layout(cpu, seed):
    """Random graphs with isolated vertices and queries of 3-7 vertices: a replicated graph (built on a replica)
    and partitioned ones (refined partition by partition where they are) give the reference's candidate graph,
    array for array."""
    rng = np.random.default_rng(seed)
    graph = labeled_graph(seed, n=int(rng.integers(30, 60)), p=0.12, kinds=3)
    query = walked_query(graph, int(rng.integers(3, 8)), rng)
    want = reference_candidate_graph(graph, query)
    got = [gpipe.counting.candidates(on_cluster(graph, **layout), Query.from_networkx(query)) for layout in LAYOUTS]
    assert as_lists(got[0]) == want
    for other in got[1:]:
        for name in ["order", *got[0].arrays()]:
            a, b = getattr(got[0], name), getattr(other, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize("seed", range(4))
def test_a_candidate_graph_built_a_query_vertex_a_pass_is_the_same(monkeypatch, seed):
    """The candidates of every query vertex are found in one pass of LIST_PASS bits at most: with room for one
    query vertex's bits a pass (k passes), the candidate graph built is the reference's, array for array the same."""
    from gpipe.counting import _candidates

    rng = np.random.default_rng(seed)
    graph = labeled_graph(seed, n=int(rng.integers(30, 60)), p=0.12, kinds=3)
    nx_query = walked_query(graph, int(rng.integers(3, 8)), rng)
    query = Query.from_networkx(nx_query)
    arcs = np.array(sorted((u, v) for a, b in graph.edges for u, v in ((a, b), (b, a))), np.int64).reshape(-1, 2)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(arcs[:, 0], minlength=len(graph)))]).astype(np.int64)
    labels = np.array([graph.nodes[v]["label"] for v in range(len(graph))])
    at_once = _candidates.build(indptr, arcs[:, 1].copy(), labels, query)
    monkeypatch.setattr(_candidates, "LIST_PASS", 1)
    one_by_one = _candidates.build(indptr, arcs[:, 1].copy(), labels, query)
    assert as_lists(one_by_one) == reference_candidate_graph(graph, nx_query)
    for name in ["order", *at_once.arrays()]:
        a, b = getattr(at_once, name), getattr(one_by_one, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_dropped_candidate_takes_its_neighbors_along_across_partitions(cpu, layout):
    """A path labeled 0, 1, 2, 0, 1, ... and a triangle labeled 0, 1, 2: the path's inner vertices pass the filters
    but, from its ends inward, lose their support one by one, over the partitions' rounds; the triangle stays."""
    graph = nx.path_graph(30)
    graph.add_edges_from([(30, 31), (31, 32), (30, 32)])
    nx.set_node_attributes(graph, {v: v % 3 for v in graph}, "label")
    query = labeled_query([(0, 1), (1, 2), (0, 2)], [0, 1, 2])
    cg = gpipe.counting.candidates(on_cluster(graph, **layout), Query.from_networkx(query))
    assert as_lists(cg) == reference_candidate_graph(graph, query)
    assert cg.cand_vertices.tolist() == [30, 31, 32]


def test_a_query_label_is_checked_against_the_graphs_labels_as_they_are_now(cpu):
    """The graph's distinct labels are found once, and again after set_labels: a label given since is accepted."""
    graph = labeled_graph(0, n=6, p=0.9)
    g = on_cluster(graph)
    query = Query.from_edges([(0, 1)], [0, 5])
    with pytest.raises(gpipe.GpipeValueError, match=r"got labels \[5\] that no data vertex has"):
        gpipe.counting.candidates(g, query)
    g.set_labels([5, 0, 0, 0, 0, 0])
    assert gpipe.counting.candidates(g, query).counts.tolist() == [5, 1]


def test_a_query_that_cannot_fit_is_refused(cpu):
    g = on_cluster(labeled_graph(0, n=5, p=0.9))
    with pytest.raises(gpipe.GpipeValueError, match=r"'query' labels must occur in the data graph, got labels \[7\]"):
        gpipe.counting.count_exact(g, Query.from_edges([(0, 1)], [0, 7]))
    with pytest.raises(gpipe.GpipeValueError, match="'query' must have at most as many vertices as the data graph "
                                                    r"\(5\), got 6"):
        gpipe.counting.count_exact(g, Query.from_edges([(i, i + 1) for i in range(5)], [0] * 6))
    with pytest.raises(gpipe.GpipeValueError, match="'query' must be a gpipe.counting.Query"):
        gpipe.counting.count_exact(g, nx.path_graph(2))
    unlabeled = gpipe.from_edges(pd.DataFrame({"src": [0], "dst": [1]}))
    with pytest.raises(gpipe.GpipeValueError, match="'g' must have vertex labels"):
        gpipe.counting.count_exact(unlabeled, Query.from_edges([(0, 1)], [0, 0]))


@pytest.fixture(scope="module")
def hprd(cpu_cluster):
    if not HPRD.is_dir():
        pytest.skip(f"the HPRD data set is not at {HPRD}")
    with cpu_cluster.as_current():
        yield gpipe.counting.read_graph(HPRD / "HPRD.graph")


def expected_hprd() -> dict:
    return {name: int(count) for name, count in
            (line.split(":") for line in (HPRD / "expected_counts.txt").read_text().split())}


def hprd_query(name: str) -> Query:
    return Query.from_file(HPRD / "queries" / f"{name}.graph")


def test_hprd_graph_reads_as_its_readme_says(hprd):
    assert (hprd.num_vertices, hprd.num_edges, len(np.unique(hprd.labels))) == (9460, 34998, 307)


@pytest.mark.parametrize("name", ["query_dense_16_2", "query_dense_16_104", "query_dense_16_151",
                                  "query_dense_16_116"])
def test_count_exact_reproduces_hprd_counts(cpu, hprd, name):
    assert gpipe.counting.count_exact(hprd, hprd_query(name)) == expected_hprd()[name]


@pytest.mark.slow
def test_count_exact_reproduces_every_hprd_count_within_two_seconds_each(cpu, hprd):
    """All 200 dense 16-vertex queries; each takes under 0.5 s on 2 shared CPU cores, once compiled (cap: 2 s)."""
    gpipe.counting.count_exact(hprd, hprd_query("query_dense_16_2"))  # numba compiles on the workers
    for name, want in expected_hprd().items():
        started = time.perf_counter()
        assert gpipe.counting.count_exact(hprd, hprd_query(name)) == want, name
        assert time.perf_counter() - started < 2.0, name


# -- estimators --------------------------------------------------------------------------------------------------
ESTIMATORS = [("wanderjoin", None), ("alley", None), ("partial_refine", 0.3)]


@pytest.fixture(scope="module")
def dense_case(cpu_cluster):
    """A 40-vertex random graph with 2 labels, a diamond query (a 4-cycle with a chord) and its exact count."""
    graph = labeled_graph(0, n=40, p=0.2)
    edges, labels = QUERIES["diamond"]
    with cpu_cluster.as_current():
        yield on_cluster(graph), Query.from_edges(edges, labels), networkx_count(graph, labeled_query(edges, labels))


@pytest.mark.parametrize("inheritance", [False, True])
@pytest.mark.parametrize("method, alpha", ESTIMATORS)
def test_estimates_are_unbiased_and_their_standard_error_matches_their_spread(cpu, dense_case, method, alpha,
                                                                              inheritance):
    """60 independent estimates (seeds 0..59) of 1024 samples each: their mean is within 3 standard errors of the
    exact count, and the standard error each reports is, on average, their spread (within a third)."""
    g, query, exact = dense_case
    runs = [gpipe.counting.estimate(g, query, method=method, alpha=alpha, samples=1024, seed=seed,
                                    inheritance=inheritance) for seed in range(60)]
    values = np.array([r.estimate for r in runs])
    spread = values.std(ddof=1)
    assert abs(values.mean() - exact) < 3 * spread / np.sqrt(len(values)), (values.mean(), exact)
    assert 0.75 < np.mean([r.std_error for r in runs]) / spread < 1.33
    assert all(r.samples == 1024 and 0 < r.valid_fraction <= 1 for r in runs)


def test_an_estimate_depends_on_seed_and_samples_only_not_on_the_workers(cpu_cluster, one_worker_cluster):
    """Groups of samples are split over the workers by their ids: 1 and 2 workers, a replicated and a partitioned
    graph give the same bits."""
    graph = labeled_graph(0, n=40, p=0.2)
    query = Query.from_edges(*QUERIES["diamond"])
    results = []
    for client, layout in [(one_worker_cluster, {}), (cpu_cluster, {}),
                           (cpu_cluster, {"mode": "partitioned", "partitions": 3})]:
        with client.as_current():
            g = on_cluster(graph, **layout)
            results.append([gpipe.counting.estimate(g, query, method=method, alpha=alpha, samples=3000, seed=7)
                            for method, alpha in ESTIMATORS])
    for one, *others in zip(*results):
        for other in others:
            assert (one.estimate, one.std_error, one.valid_fraction) == (other.estimate, other.std_error,
                                                                         other.valid_fraction)
    with cpu_cluster.as_current():
        other = gpipe.counting.estimate(g, query, method="wanderjoin", samples=3000, seed=8)
    assert other.estimate != results[1][0].estimate


def test_an_estimate_reports_what_it_drew(cpu, dense_case):
    g, query, exact = dense_case
    r = gpipe.counting.estimate(g, query, samples=1000, seed=3)
    assert (r.method, r.alpha, r.inheritance, r.samples) == ("partial_refine", 0.1, True, 1024)
    assert r.confidence_interval[0] < r.estimate < r.confidence_interval[1]
    assert r.seconds > 0 and r.samples_per_second == pytest.approx(r.samples / r.seconds)
    assert 0 < r.candidate_seconds < r.seconds
    assert r.stats == {"algorithm": "estimate", "method": r.method, "alpha": r.alpha, "inheritance": r.inheritance,
                       "samples": r.samples, "valid_fraction": r.valid_fraction, "seconds": r.seconds,
                       "candidate_seconds": r.candidate_seconds, "samples_per_second": r.samples_per_second}
    assert isinstance(r, gpipe.counting.Estimate) and dataclasses.is_dataclass(r)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.estimate = 0.0


def test_a_query_without_candidates_estimates_zero_without_sampling(cpu):
    g = on_cluster(labeled_graph(0, n=6, p=0.5))  # labels 0 and 1, no triangle of three 1s
    query = Query.from_edges([(0, 1), (1, 2), (0, 2)], [1, 1, 1])
    assert gpipe.counting.count_exact(g, query) == networkx_count(labeled_graph(0, n=6, p=0.5),
                                                                   labeled_query(*QUERIES["triangle"][:1], [1, 1, 1]))
    r = gpipe.counting.estimate(g, query)
    assert (r.estimate, r.std_error, r.samples) == (0.0, 0.0, 0)


def runs_left(client) -> dict:
    """The runs each worker's gpipe store still holds."""
    return client.run(lambda dask_worker: sorted(dask_worker.plugins["gpipe"].runs))


def refine_that_fails(table):
    raise RuntimeError("this refine fails on purpose")


@pytest.mark.parametrize("layout", [{}, {"mode": "partitioned", "partitions": 3}])
def test_an_estimate_leaves_nothing_on_the_workers_whether_it_succeeds_or_fails(cpu, layout):
    """The candidate graph is held on the sampling workers for the estimate only: gone after it, after an empty
    one and after one whose sampling fails on the workers."""
    graph = labeled_graph(0, n=40, p=0.2)
    g = on_cluster(graph, **layout)
    query = Query.from_edges(*QUERIES["diamond"])
    before = runs_left(cpu)
    assert gpipe.counting.estimate(g, query, method="alley", samples=2000, seed=1).estimate > 0
    assert gpipe.counting.estimate(g, query, method=alley_refine, samples=2000, seed=1).estimate > 0
    assert runs_left(cpu) == before
    assert gpipe.counting.estimate(g, query, samples=32).samples == 32  # one group: a worker samples nothing
    with pytest.raises(Exception, match="this refine fails on purpose"):
        gpipe.counting.estimate(g, query, method=refine_that_fails, samples=2000)
    assert runs_left(cpu) == before
    empty = on_cluster(labeled_graph(0, n=6, p=0.5), **layout)
    assert gpipe.counting.estimate(empty, Query.from_edges([(0, 1), (1, 2), (0, 2)], [1, 1, 1])).samples == 0
    assert runs_left(cpu) == before


@pytest.mark.parametrize("layout", [{}, {"mode": "partitioned", "partitions": 3}])
def test_a_prepared_query_gives_the_estimates_of_single_calls_and_then_goes(cpu, layout):
    """The candidate graph is built once, kept on the sampling workers while the prepared query is open, and each
    estimate drawn from it is the one a single call gives for the same parameters."""
    g = on_cluster(labeled_graph(0, n=40, p=0.2), **layout)
    query = Query.from_edges(*QUERIES["diamond"])
    before = runs_left(cpu)
    asked = [dict(method="alley", samples=2000, seed=1), dict(method="wanderjoin", samples=640, seed=2),
             dict(method="partial_refine", alpha=0.3, samples=1000, seed=3, inheritance=False),
             dict(method=alley_refine, samples=500, seed=4)]
    with gpipe.counting.prepare(g, query) as prepared:
        assert prepared.candidate_seconds > 0 and runs_left(cpu) != before
        drawn = [prepared.estimate(**kwargs) for kwargs in asked]
        held = runs_left(cpu)  # on every worker that sampled (a replica's fetched it once, from the one that built it)
        assert all(len(held[w]) == len(before[w]) + 1 for w in held)
        with pytest.raises(gpipe.GpipeValueError, match="'samples' must be a positive integer, got 0"):
            prepared.estimate(samples=0)
    assert runs_left(cpu) == before
    for kwargs, estimate in zip(asked, drawn):
        once = gpipe.counting.estimate(g, query, **kwargs)
        assert (estimate.estimate, estimate.std_error, estimate.valid_fraction) == (
            once.estimate, once.std_error, once.valid_fraction) and estimate.estimate > 0
        assert estimate.candidate_seconds == 0 < once.candidate_seconds
    with pytest.raises(gpipe.GpipeValueError, match="this prepared query is closed"):
        prepared.estimate(samples=32)
    let_go = gpipe.counting.prepare(g, query)
    assert runs_left(cpu) != before
    del let_go
    gc.collect()
    assert runs_left(cpu) == before
    empty = gpipe.counting.prepare(on_cluster(labeled_graph(0, n=6, p=0.5), **layout),
                                   Query.from_edges([(0, 1), (1, 2), (0, 2)], [1, 1, 1]))
    assert empty.estimate(samples=100).samples == 0
    empty.close()
    assert runs_left(cpu) == before
    with pytest.raises(gpipe.GpipeValueError, match="'g' must be a gpipe.Graph"):
        gpipe.counting.prepare(None, query)


@pytest.mark.parametrize("kwargs, message", [
    ({"samples": 0}, "'samples' must be a positive integer, got 0"),
    ({"alpha": 0.0}, r"'alpha' must be in \(0, 1\], got 0.0"),
    ({"alpha": 1.5}, r"'alpha' must be in \(0, 1\], got 1.5"),
    ({"method": "alley", "alpha": 0.5}, "'alpha' applies to method='partial_refine' only, got alpha=0.5"),
    ({"method": "rejection"}, "'method' must be one of 'wanderjoin', 'alley', 'partial_refine'; got 'rejection'"),
    ({"seed": -1}, "'seed' must be an integer >= 0, got -1"),
    ({"inheritance": 1}, "'inheritance' must be true or false, got 1"),
])
def test_bad_estimate_parameters_are_refused_naming_them(cpu, dense_case, kwargs, message):
    g, query, _ = dense_case
    with pytest.raises(gpipe.GpipeValueError, match=message):
        gpipe.counting.estimate(g, query, **kwargs)


@pytest.mark.parametrize("method, alpha", ESTIMATORS)
def test_hprd_estimates_cover_the_exact_count(cpu, hprd, method, alpha):
    name = "query_dense_16_2"
    r = gpipe.counting.estimate(hprd, hprd_query(name), method=method, alpha=alpha, samples=20_000, seed=1)
    assert abs(r.estimate - expected_hprd()[name]) <= 4 * r.std_error  # Alley: every sample finds the 80


# -- Refine / Sample / Validate in Python ------------------------------------------------------------------------
def alley_refine(table):
    return table["extends"]


def partial_refine_03(table):
    return (table["coin"] >= 0.3) | table["extends"]


def keep_all(table):
    """No refinement, as WanderJoin, but picking by reservoir keys: every unextending pick dies at validation."""
    return table["coin"] >= 0


@pytest.mark.parametrize("inheritance", [False, True])
@pytest.mark.parametrize("refine, method, alpha", [(alley_refine, "alley", None),
                                                   (partial_refine_03, "partial_refine", 0.3)])
def test_a_refine_written_in_python_reproduces_the_kernel(cpu, dense_case, refine, method, alpha, inheritance):
    g, query, _ = dense_case
    python = gpipe.counting.estimate(g, query, method=refine, samples=5000, seed=4, inheritance=inheritance)
    kernel = gpipe.counting.estimate(g, query, method=method, alpha=alpha, samples=5000, seed=4,
                                     inheritance=inheritance)
    assert (python.estimate, python.std_error, python.valid_fraction) == (kernel.estimate, kernel.std_error,
                                                                          kernel.valid_fraction)
    assert (python.method, python.alpha) == (refine.__name__, None)


def test_a_python_refine_that_keeps_every_extension_is_unbiased(cpu, dense_case):
    g, query, exact = dense_case
    values = np.array([gpipe.counting.estimate(g, query, method=keep_all, samples=1024, seed=seed).estimate
                       for seed in range(40)])
    assert abs(values.mean() - exact) < 3 * values.std(ddof=1) / np.sqrt(len(values))


def test_a_python_refine_is_checked_at_the_boundary(cpu, dense_case):
    g, query, _ = dense_case
    with pytest.raises(gpipe.GpipeValueError, match="'alpha' applies to method='partial_refine' only"):
        gpipe.counting.estimate(g, query, method=keep_all, alpha=0.5)
    lock = threading.Lock()
    with pytest.raises(gpipe.GpipeValueError, match="'method' must be picklable"):
        gpipe.counting.estimate(g, query, method=lambda table: lock is not None)


# -- the command line --------------------------------------------------------------------------------------------
def test_gpipe_count_exact_and_estimate_write_their_summaries(capsys, cpu_cluster, tmp_path):
    graph, query = HPRD / "HPRD.graph", HPRD / "queries" / "query_dense_16_2.graph"
    if not HPRD.is_dir():
        pytest.skip(f"the HPRD data set is not at {HPRD}")
    cluster = ["--address", cpu_cluster.scheduler.address, "--device", "cpu"]
    assert main(["count", "exact", "--graph", str(graph), "--query", str(query), "--out", str(tmp_path / "exact"),
                 *cluster]) == 0
    assert capsys.readouterr().out.startswith("exact count: 80 embeddings in ")
    assert json.loads((tmp_path / "exact" / "summary.json").read_text())["count"]["count"] == 80
    assert main(["count", "estimate", "--graph", str(graph), "--query", str(query), "--method", "wanderjoin",
                 "--samples", "5000", "--seed", "3", "--out", str(tmp_path / "estimate"), *cluster]) == 0
    summary = json.loads((tmp_path / "estimate" / "summary.json").read_text())
    with cpu_cluster.as_current():
        g = gpipe.counting.read_graph(graph)
        want = gpipe.counting.estimate(g, hprd_query("query_dense_16_2"), method="wanderjoin", samples=5000, seed=3)
    assert (summary["count"]["estimate"], summary["count"]["samples"]) == (want.estimate, 5024)
    assert 0 < summary["count"]["candidate_seconds"] < summary["count"]["seconds"]
    assert "s of it building the candidate graph" in capsys.readouterr().out
    assert summary["parameters"]["query"] == str(query) and summary["graph"]["num_vertices"] == 9460


@pytest.mark.parametrize("args, message", [
    (["--samples", "0"], "'--samples' must be a positive integer, got 0"),
    (["--alpha", "2"], r"'--alpha' must be in \(0, 1\], got 2.0"),
])
def test_gpipe_count_estimate_rejects_bad_values_before_any_work(capsys, tmp_path, args, message):
    query = write(tmp_path, "t 1 0\nv 0 1 0\n", "q.graph")
    assert main(["count", "estimate", "--graph", str(query), "--query", str(query), "--out", str(tmp_path / "o"),
                 *args]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_gpipe_count_names_a_malformed_query_file(capsys, tmp_path):
    query = write(tmp_path, "t 2 1\nv 0 1 1\nv 1 1 1\ne 0 5\n", "q.graph")
    assert main(["count", "exact", "--graph", str(query), "--query", str(query), "--out", str(tmp_path / "o")]) == 2
    assert f"{query}:4: edge (0, 5) has an end not listed" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# -- boundaries: what a careless or hostile caller gets (issue 36) -----------------------------------------------
def directed_triangle() -> gpipe.Graph:
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 0]}), directed=True)
    g.set_labels([0, 0, 0])
    return g


def test_counting_refuses_a_directed_graph_rather_than_count_nothing(cpu):
    """Embeddings are undirected: on a directed graph the candidate graph would answer 0, so every entry point
    refuses it, saying what to build instead."""
    g, triangle = directed_triangle(), Query.from_edges([(0, 1), (1, 2), (0, 2)], [0, 0, 0])
    before = runs_left(cpu)
    for call in (gpipe.counting.count_exact, gpipe.counting.estimate, gpipe.counting.prepare,
                 gpipe.counting.candidates):
        with pytest.raises(gpipe.GpipeValueError, match="'g' must be an undirected graph to count subgraphs, got "
                                                        "a directed one.*directed=False"):
            call(g, triangle)
    assert runs_left(cpu) == before


@pytest.mark.parametrize("refine, got", [
    (lambda table: np.ones(3, bool), r"got a bool array of shape \(3,\)"),
    (lambda table: None, "got None"),
    (lambda table: table["coin"], r"got a float64 array of shape \(\d+,\)"),
    (lambda table: table["extends"].tolist(), "got a list"),
])
def test_a_refine_that_returns_the_wrong_shape_or_type_is_refused_naming_method(cpu, dense_case, refine, got):
    g, query, _ = dense_case
    with pytest.raises(gpipe.GpipeValueError, match=r"'method' \(a refine\) must return a bool array with one entry "
                                                    rf"per row of its table, shape \(\d+,\); {got}"):
        gpipe.counting.estimate(g, query, method=refine, samples=64)


def test_a_refine_that_raises_is_reported_as_a_task_error_naming_method(cpu, dense_case):
    g, query, _ = dense_case
    with pytest.raises(gpipe.TaskError, match=r"counting: the refine given as 'method' failed in position 1: "
                                              r"ZeroDivisionError\('division by zero'\)"):
        gpipe.counting.estimate(g, query, method=lambda table: 1 / 0, samples=64)


@pytest.mark.parametrize("samples, method", [(10**14, "alley"), (10**11, alley_refine)])
def test_an_estimate_too_large_for_the_workers_is_refused_before_any_work(cpu, dense_case, samples, method,
                                                                          monkeypatch):
    """As walks refuse an oversize run: with the memory it would take, before the candidate graph is built (or, for
    a prepared query, before any sample is drawn): the workers are not called."""
    g, query, _ = dense_case
    before = runs_left(cpu)
    import importlib

    reach = importlib.import_module("gpipe.runtime.calls._reach")  # the runtime's one road for counting's work
    calls = []  # what counting asked the workers to do: build the candidate graph, sample, let a run go
    call_workers = reach.call_workers

    def counted(client, work, *args):
        calls.append(work)
        return call_workers(client, work, *args)

    monkeypatch.setattr(reach, "call_workers", counted)
    with pytest.raises(gpipe.GpipeValueError, match=rf"'samples' \({samples}\): the estimate's per-sample arrays "
                                                    r"would take [\d.]+ [TP]iB, more than the workers'"):
        gpipe.counting.estimate(g, query, method=method, samples=samples)
    assert calls == []
    with gpipe.counting.prepare(g, query) as prepared:
        built = len(calls)
        assert built > 0  # the candidate graph, through the counted road
        with pytest.raises(gpipe.GpipeValueError, match="would take"):
            prepared.estimate(method=method, samples=samples)
        assert len(calls) == built
    assert runs_left(cpu) == before


@pytest.mark.parametrize("edges, labels, message", [
    ([(0, 1)], np.array([2**64 - 1, 3], np.uint64), "'query labels' must hold integers below 2\\*\\*63, got "
                                                     "18446744073709551615"),
    ([(0, 1)], pd.Series(["a", "b"]), "'query labels' must hold integers, got dtype object \\(e.g. 'a'\\)"),
    ([(0, 1)], pd.Series([1, np.nan]), "'query labels' must hold integers, got dtype float64"),
    (((0, 1) for _ in range(1)), [0, 0], "'query edges' must be a sequence of vertex pairs .*, got a generator"),
    ("01", [0, 0], "'query edges' must hold integers, got dtype <U2 \\(e.g. '01'\\)"),
    ([(0.0, 1.0)], [0, 0], "'query edges' must hold integers, got dtype float64 \\(e.g. 0.0\\)"),
    (np.array([(0, 2**64 - 1)], np.uint64), [0, 0], "'query edges' must hold integers below 2\\*\\*63"),
])
def test_query_labels_and_edges_are_kept_exactly_or_refused_naming_them(edges, labels, message):
    with pytest.raises(gpipe.GpipeValueError, match=message):
        Query.from_edges(edges, labels)


@pytest.mark.parametrize("kind", [nx.MultiGraph, nx.DiGraph, nx.MultiDiGraph])
def test_a_networkx_query_must_be_an_undirected_simple_graph(kind):
    graph = kind([(0, 1), (1, 2)])
    nx.set_node_attributes(graph, 0, "label")
    with pytest.raises(gpipe.GpipeValueError, match=rf"'query' must be an undirected simple networkx graph "
                                                    rf"\(networkx.Graph\), got a {kind.__name__}: convert it"):
        Query.from_networkx(graph)


@pytest.mark.parametrize("labels, message", [
    (pd.Series(["a", "b", "c"]), r"'labels' must hold integers, got dtype object \(e.g. 'a'\)"),
    (pd.Series([1, np.nan, 2]), r"'labels' must hold integers, got dtype float64"),
    (np.array([1, 2, 2**64 - 1], np.uint64), r"'labels' must hold integers below 2\*\*63, got 18446744073709551615"),
])
def test_data_graph_labels_of_the_wrong_kind_are_refused_naming_the_bad_value(cpu, labels, message):
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1], "dst": [1, 2]}))
    with pytest.raises(gpipe.GpipeValueError, match=message):
        g.set_labels(labels)


@pytest.mark.parametrize("content, where, reason", [
    (b"t 900000000 0\nv 0 1 0\n", 1, "announces 900000000 vertices, but the file has 1 'v' lines"),
    ("t 2 1\nv 0 \u0663 1\nv 1 1 1\ne 0 1\n".encode(), 2,
     "expected a label \\(a non-negative integer\\), got '\u0663'"),
    (b"t 2 1\nv 0 100000000000000000000000000 1\nv 1 1 1\ne 0 1\n", 2,
     "expected a label below 2\\*\\*63, got 100000000000000000000000000"),
    (b"t 2 1\nv 0 1 1\nv 1 1 1\xff\ne 0 1\n", 3, "is not UTF-8 text \\(byte 0xff\\)"),
])
def test_a_graph_file_with_foreign_digits_huge_numbers_or_bad_bytes_names_the_file_and_line(tmp_path, content,
                                                                                           where, reason):
    path = tmp_path / "g.graph"
    path.write_bytes(content)
    with pytest.raises(gpipe.GpipeFileError, match=reason) as info:
        Query.from_file(path)
    assert (info.value.path, info.value.line) == (str(path), where)


# -- multigraphs and self-loops: counted in the simple graph underneath -------------------------------------------
def test_a_triangle_with_a_repeated_edge_is_counted_as_one_triangle(cpu):
    """Issue 36's case: the repeated edge was a second candidate edge, so the exact count was 10, not the
    triangle's 6 automorphisms (and the estimate about 10.6)."""
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2, 0], "dst": [1, 2, 0, 1]}), mode="replicated",
                         keep_duplicates=True)
    g.set_labels([0, 0, 0])
    triangle = Query.from_edges([(0, 1), (1, 2), (0, 2)], [0, 0, 0])
    assert g.num_edges == 4 and gpipe.counting.count_exact(g, triangle) == 6
    alley = gpipe.counting.estimate(g, triangle, method="alley", samples=320)  # every sample finds a triangle
    assert (alley.estimate, alley.valid_fraction) == (6.0, 1.0)


def test_a_self_loop_is_no_part_of_any_embedding_nor_of_the_candidate_filters(cpu):
    """A path 0 - 1 labeled 0 with a loop at 0 and a third vertex apart has no 3-vertex path: the loop let vertex 0
    pass as the middle's candidate (degree 2, two neighbors labeled 0, itself one of them), so samples were drawn
    that all died; as on the path without the loop, no vertex is a candidate and nothing is drawn."""
    path = Query.from_edges([(0, 1), (0, 2)], [0, 0, 0])
    with_loop, without = (gpipe.from_edges(pd.DataFrame({"src": src, "dst": dst}), num_vertices=3, renumber=False,
                                           keep_self_loops=True, mode="replicated")
                          for src, dst in (([0, 0], [1, 0]), ([0], [1])))
    for g in (with_loop, without):
        g.set_labels([0, 0, 0])
    assert with_loop.num_edges == 2
    found, expected = (gpipe.counting.candidates(g, path) for g in (with_loop, without))
    assert found.counts.tolist() == expected.counts.tolist() == [0, 0, 0]
    assert gpipe.counting.count_exact(with_loop, path) == 0
    assert gpipe.counting.estimate(with_loop, path, samples=320).samples == 0


def multigraph_on_cluster(graph: nx.Graph, **kwargs) -> gpipe.Graph:
    """``graph`` with every edge also the other way round, every third once more and a loop at every fifth
    vertex, built keeping them all."""
    edges = list(graph.edges)
    edges += [(v, u) for u, v in edges] + edges[::3] + [(v, v) for v in range(0, len(graph), 5)]
    frame = pd.DataFrame(edges, columns=["src", "dst"])
    g = gpipe.from_edges(frame, renumber=False, num_vertices=len(graph), keep_duplicates=True, keep_self_loops=True,
                         **kwargs)
    g.set_labels([graph.nodes[v]["label"] for v in range(len(graph))])
    return g


@pytest.mark.parametrize("layout", [{}, {"mode": "partitioned", "partitions": 3}])
def test_a_multigraph_is_counted_and_estimated_as_the_simple_graph_underneath(cpu, layout):
    """Repeated edges and loops change no candidate graph, so no exact count, and no estimate of any method for
    the same seed: the samples walk the same arrays."""
    graph = labeled_graph(4, n=30, p=0.2)
    multi, simple = multigraph_on_cluster(graph, **layout), on_cluster(graph, **layout)
    assert multi.num_edges > simple.num_edges  # the repeats and loops are kept
    for name in ("triangle", "path", "diamond"):
        edges, labels = QUERIES[name]
        query = Query.from_edges(edges, labels)
        found, expected = (gpipe.counting.candidates(g, query) for g in (multi, simple))
        for array in ["order", *expected.arrays()]:
            np.testing.assert_array_equal(getattr(found, array), getattr(expected, array), err_msg=array)
        exact = networkx_count(graph, labeled_query(edges, labels))
        assert gpipe.counting.count_exact(multi, query) == gpipe.counting.count_exact(simple, query) == exact > 0
        with gpipe.counting.prepare(multi, query) as on_multi, gpipe.counting.prepare(simple, query) as on_simple:
            for method, alpha in [*ESTIMATORS, (alley_refine, None)]:
                a, b = (p.estimate(method=method, alpha=alpha, samples=640, seed=3) for p in (on_multi, on_simple))
                assert (a.estimate, a.std_error, a.valid_fraction) == (b.estimate, b.std_error, b.valid_fraction)
        once = gpipe.counting.estimate(multi, query, samples=640, seed=3)
        assert once.estimate == gpipe.counting.estimate(simple, query, samples=640, seed=3).estimate


# -- how far an estimate can be trusted (issue 36 item 7) ---------------------------------------------------------
@pytest.fixture(scope="module")
def powerlaw_diamond(cpu_cluster):
    """Issue 36's heavy-tailed case: a power-law clustered graph (networkx's, 1,500 vertices) with 3 random labels,
    a diamond query labeled 0, 1, 2, 0 and its exact count."""
    graph = nx.powerlaw_cluster_graph(1500, 4, 0.6, seed=13)
    nx.set_node_attributes(graph, dict(enumerate(np.random.default_rng(13).integers(3, size=1500).tolist())), "label")
    with cpu_cluster.as_current():
        g, query = on_cluster(graph), Query.from_edges(QUERIES["diamond"][0], [0, 1, 2, 0])
        yield g, query, gpipe.counting.count_exact(g, query)


def covers(r, exact: int) -> bool:
    return r.confidence_interval[0] <= exact <= r.confidence_interval[1]


def test_a_heavy_tailed_estimate_is_flagged_unreliable_and_its_interval_leans_to_the_tail(cpu, powerlaw_diamond):
    """WanderJoin's sample values there are mostly 0 with rare huge ones, so 8,192 samples often miss the largest:
    the normal interval around their mean covered the count in 14 of 20 seeds (at a true 95%, 14 or fewer happens
    with probability 0.03%). Each of these estimates says it is unreliable (a few groups carry it, or its group
    means are skewed past Cochran's rule), and its interval reaches further above the estimate than below it,
    covering more often than the normal one."""
    g, query, exact = powerlaw_diamond
    with gpipe.counting.prepare(g, query) as prepared:
        runs = [prepared.estimate(method="wanderjoin", samples=8192, seed=seed) for seed in range(20)]
    normal = [abs(r.estimate - exact) <= 1.959963984540054 * r.std_error for r in runs]
    assert sum(normal) <= 14, sum(normal)
    assert not any(r.reliable for r in runs)
    assert all(r.effective_groups < 30 or 256 < 25 * r.skewness ** 2 for r in runs)
    assert all(r.confidence_interval[1] - r.estimate > r.estimate - r.confidence_interval[0] > 0 for r in runs)
    assert sum(covers(r, exact) for r in runs) > sum(normal)


@pytest.mark.parametrize("method, alpha", ESTIMATORS)
def test_reliable_intervals_cover_the_count_at_their_level(cpu, dense_case, method, alpha):
    """On the 40-vertex graph (light tails) estimates of 8,192 samples are reliable and their 95% intervals cover
    the exact count in at least 88 of 100 seeds (at a true 95%, fewer happens with probability 0.15%)."""
    g, query, exact = dense_case
    with gpipe.counting.prepare(g, query) as prepared:
        runs = [prepared.estimate(method=method, alpha=alpha, samples=8192, seed=seed) for seed in range(100)]
    assert all(r.reliable and r.effective_groups >= 30 and 256 >= 25 * r.skewness ** 2 for r in runs)
    assert sum(covers(r, exact) for r in runs) >= 88


def test_an_estimate_whose_samples_all_died_is_unreliable(cpu):
    """A 6-cycle has candidates for each vertex of a 4-cycle but no 4-cycle: every sample dies and the estimate is
    0 with a standard error of 0, which says nothing of the count: no effective group, unreliable. A query without
    candidates is exactly 0, and reliable."""
    cycle = nx.cycle_graph(6)
    nx.set_node_attributes(cycle, 0, "label")
    g = on_cluster(cycle)
    died = gpipe.counting.estimate(g, Query.from_edges(QUERIES["square"][0], [0, 0, 0, 0]), method="wanderjoin",
                                   samples=320, seed=1)
    assert (died.estimate, died.std_error, died.samples, died.confidence_interval) == (0.0, 0.0, 320, (0.0, 0.0))
    assert (died.reliable, died.effective_groups) == (False, 0.0)
    none = gpipe.counting.estimate(g, Query.from_edges(QUERIES["star"][0], [0, 0, 0, 0]))  # no vertex of degree 3
    assert (none.samples, none.estimate, none.reliable) == (0, 0.0, True)
