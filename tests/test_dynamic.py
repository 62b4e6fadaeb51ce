"""The per-vertex sampling space of dynamic graphs (gpipe.dynamic): after random update logs its implied
probabilities are those of the resulting edge multiset, exactly and statistically, and bad batches change nothing."""

import re
import time

import numpy as np
import pandas as pd
import pytest
from helpers import walk_steps
from scipy import stats

import gpipe
from gpipe.dynamic import DynamicGraph, SamplingSpace
from gpipe.dynamic import _graph as graph_module
from gpipe.dynamic import _pools
from gpipe.dynamic._kernels import CHUNK, DECIMAL, KINDS, SAMPLE, VERTEX_BYTES
from gpipe.runtime.calls import WATCH_SECONDS
from gpipe.runtime.calls import call_workers as gpipe_call_workers

ALPHA = 1e-3  # the false-alarm rate of each chi-square test


def random_log(rng, num_vertices: int, length: int, float_biases: bool, edges: dict | None = None,
               directed: bool = True):
    """A valid update log of ``length`` operations, and the edge multiset it leaves (from ``edges``, or none), as
    {src: [(dst, weight)]}; an undirected graph's updates apply to both directions."""
    edges = {} if edges is None else edges
    log = []
    for _ in range(length):
        existing = [(v, j) for v, row in edges.items() for j in range(len(row))]
        skewed = 2 ** rng.uniform(0, 30)  # log-uniform: one-element groups at the top bits, dense ones below
        weight = float(np.round(skewed / 2**24, 3)) + 0.001 if float_biases else int(skewed)
        kind = rng.choice(["insert", "delete", "update"], p=[0.5, 0.25, 0.25]) if existing else "insert"
        if kind == "insert":
            v, u = (int(x) for x in rng.integers(0, num_vertices, 2))
        else:
            v, j = existing[rng.integers(len(existing))]
            u = edges[v][j][0]
        for a, b in [(v, u)] if directed else [(v, u), (u, v)]:
            if kind == "insert":
                edges.setdefault(a, []).append((b, weight))
            elif kind == "delete":
                edges[a].pop(next(k for k, (n, _) in enumerate(edges[a]) if n == b))  # the earliest copy
            else:
                edges[a] = [(n, weight if n == b else w) for n, w in edges[a]]
        log.append((kind, v, u, None if kind == "delete" else weight))
    return log, edges


@pytest.fixture(params=["replay", "play"])
def stage(request, monkeypatch):
    """Batches staged vertex by vertex (the CPU's way), or played edge by edge (a GPU's, here on its CPU twins)."""
    if request.param == "play":
        monkeypatch.setattr(SamplingSpace, "_stage", lambda self, batch: self._play(batch))
    return request.param


def apply_in_batches(space, log, batch: int) -> None:
    for i in range(0, len(log), batch):
        op, src, dst, weight = zip(*log[i:i + batch])
        space.apply(op, src, dst, weight)


@pytest.mark.parametrize("float_biases, length", [(False, 1000), (False, 10_000), (True, 1000), (True, 10_000)])
@pytest.mark.parametrize("batch", [37, 333])  # a vertex's deletes and updates found by a scan, and by a search
def test_implied_probabilities_and_sorted_adjacency_are_those_of_the_resulting_multiset(float_biases, length, batch,
                                                                                      stage):
    rng = np.random.default_rng(length + float_biases)
    log, edges = random_log(rng, 12, length, float_biases)
    space = SamplingSpace(4, scale=10.0 if float_biases else 1.0)
    apply_in_batches(space, log, batch=batch)
    assert space.num_vertices == max(v for _, v, _, _ in log) + 1
    groups = [space.groups(v) for v in range(space.num_vertices)]
    assert any((g["group_bit"] == DECIMAL).any() for g in groups) == float_biases
    assert set().union(*(g["group_kind"].tolist() for g in groups)) == set(KINDS.values())  # one, dense, listed
    assert_space_holds(space, edges)


def assert_space_holds(space, edges: dict) -> None:
    """Every vertex of ``space`` holds the edges ``edges`` gives it ({src: [(dst, weight)]}), in log order, its
    destinations sorted, and implies their probabilities."""
    for v in range(space.num_vertices):
        dst, weight = space.edges(v)
        expected = edges.get(v, [])
        assert dst.tolist() == [u for u, _ in expected] and weight.tolist() == [w for _, w in expected]
        assert space.neighbors(v).tolist() == sorted(u for u, _ in expected)
        if expected:
            np.testing.assert_allclose(space.probabilities(v), weight / weight.sum(), rtol=1e-12, atol=0)
        else:
            assert space.probabilities(v).size == 0 and space.groups(v)["group_kind"].size == 0


@pytest.mark.parametrize("float_biases", [False, True])
def test_a_vertex_of_many_chunks_implies_the_probabilities_of_its_multiset(float_biases, stage):
    rng = np.random.default_rng(21)
    weights = np.round(rng.uniform(0.001, 64, 6000), 3) if float_biases else 2 ** rng.integers(0, 30, 6000)
    inserts = [("insert", i % 2, int(rng.integers(0, 50)), w.item()) for i, w in enumerate(weights)]
    edges = {v: [(u, w) for _, s, u, w in inserts if s == v] for v in (0, 1)}
    log, edges = random_log(rng, 2, 2000, float_biases, edges=edges)  # then deletes and updates among them
    space = SamplingSpace(2, scale=10.0 if float_biases else 1.0)
    apply_in_batches(space, inserts + log, batch=2500)
    assert min(len(row) for row in edges.values()) > 2 * CHUNK  # rebuilt a chunk a warp (three or more)
    assert_space_holds(space, edges)


def assert_sampled_by(space, v: int, law: np.ndarray, draws: int = 20_000) -> None:
    """``space.sample`` draws vertex ``v``'s edges (in log order) with the probabilities ``law``, duplicated edges
    one neighbor with their shares summed: a chi-square test at ``ALPHA``."""
    dst, _ = space.edges(v)
    picked = space.sample(np.full(draws, v), seed=11, streams=np.arange(draws) + v * draws)
    neighbors, index = np.unique(dst, return_inverse=True)
    expected = np.bincount(index, weights=law) * draws
    observed = np.array([(picked == u).sum() for u in neighbors])
    assert observed.sum() == draws
    assert stats.chisquare(observed, expected).pvalue > ALPHA, (v, observed, expected)


@pytest.mark.parametrize("float_biases", [False, True])
def test_sample_frequencies_pass_a_chi_square_test(float_biases):
    rng = np.random.default_rng(3)
    log, _ = random_log(rng, 6, 2000, float_biases)
    space = SamplingSpace(6, scale=10.0 if float_biases else 1.0)
    apply_in_batches(space, log, batch=500)
    for v in range(space.num_vertices):
        if len(space.edges(v)[0]) >= 2:
            assert_sampled_by(space, v, space.probabilities(v))


def assert_exact_law(space, v: int) -> None:
    """Vertex ``v``'s space implies the probabilities of its biases, and ``sample`` draws by them."""
    weight = space.edges(v)[1]
    law = weight / weight.max() / (weight / weight.max()).sum()  # (no sum past float64's range)
    np.testing.assert_allclose(space.probabilities(v), law, rtol=1e-12, atol=0)
    assert_sampled_by(space, v, law)


@pytest.mark.parametrize("weights, scale", [
    ([1e30, 1e20], 1.0),  # both past int64 once scaled: P = 0.5 each, not 1 - 1e-10 and 1e-10
    ([4e18, 1e19], 1.0),  # the second past int64: 0.17, not 2/7
    ([2.0**63, 2.0**64 - 2**11, 1.5, 7.25e18], 1.0),
    ([1e300, 3e300, 1e299], 1e10),  # scaled past float64's range
    ([np.finfo(np.float64).max, np.finfo(np.float64).max / 3, 1e300], 1.0),
    ([3.0, 1.0, 2.5], 2.0**62),
])
def test_huge_biases_are_sampled_by_their_exact_law(weights, scale, stage):
    space = SamplingSpace(1, scale=scale)
    space.apply(["insert"] * len(weights), [0] * len(weights), np.arange(1, len(weights) + 1), weights)
    assert_exact_law(space, 0)


@pytest.mark.parametrize("weights, scale", [
    ([1e-300, 2e-300, 3e-300], 1.0),  # each a decimal part of 1e-300 kept in 1e300 tries: a draw never ended
    ([1e-10, 1e-10, 4e-10], 1.0),
    ([5e-324, 1e-323, 1.5e-323], 1.0),  # subnormal
    ([0.25, 0.5, 0.125], 1e-300),
])
def test_tiny_biases_are_sampled_by_their_exact_law(weights, scale, stage):
    space = SamplingSpace(1, scale=scale)
    space.apply(["insert"] * len(weights), [0] * len(weights), np.arange(1, len(weights) + 1), weights)
    assert_exact_law(space, 0)


def test_a_group_whose_tries_are_mostly_rejected_is_drawn_exactly_after_256(stage):
    """Two groups, each drawn one time in two, that keep a try 1 time in 1000: 77% of their draws reject 256 tries
    and are drawn exactly over the group. The dense one of bit 0 (the edges to 1 and 2, 2 of 2002 edges, dense from
    a fraction of 1e-4 on) keeps an edge of the vertex if its bit 0 is set; the decimal one (2000 edges of decimal
    parts 0.0005, 0.001, 0.0015 to 3, 4 and 5) keeps a member with probability its decimal part."""
    space = SamplingSpace(1, dense_fraction=1e-4)
    small = np.resize([0.0005, 0.001, 0.0015], 2000)
    space.apply(["insert"] * 2002, np.zeros(2002, np.int64), np.concatenate([[1, 2], np.resize([3, 4, 5], 2000)]),
                np.concatenate([[1.0, 1.0], small]))
    groups = space.groups(0)
    assert groups["group_kind"].tolist() == [KINDS["dense"]] * 2 and sorted(groups["group_bit"]) == [DECIMAL, 0]
    assert_exact_law(space, 0)


def test_a_deleted_edge_is_never_sampled_and_an_inserted_one_is():
    space = SamplingSpace(1)
    space.apply(["insert"] * 4, [0] * 4, [1, 2, 3, 2], [7, 1, 2**40, 5])
    space.apply(["delete", "insert", "delete"], [0, 0, 0], [3, 4, 2], [None, 1, None])
    picked = space.sample(np.zeros(50_000, np.int64), seed=0)
    assert set(picked.tolist()) == {1, 2, 4}  # 3 (once 2**40 of the total) is gone, one copy of 2 remains
    assert space.edges(0)[0].tolist() == [1, 2, 4] and space.edges(0)[1].tolist() == [7, 5, 1]


def test_a_pinned_view_keeps_its_version_while_commits_append_and_compact(stage, monkeypatch):
    monkeypatch.setattr(_pools, "COMPACT_SLACK", 0)  # compact as soon as the blocks left behind outnumber
    rng = np.random.default_rng(4)
    log, _ = random_log(rng, 8, 3000, True)
    space = SamplingSpace(8, scale=10.0)
    apply_in_batches(space, log[:1000], batch=100)
    view = space.view(0, 0, 8, np.array([0, 8]))
    vertices = np.repeat(np.arange(8), 500)

    def drawn(arrays):
        out = np.empty(vertices.shape[0], np.int64)
        SAMPLE.launch(**arrays, key=7, n=vertices.shape[0], vertex=vertices, stream=np.arange(vertices.shape[0]),
                      out=out)
        return out

    before = drawn(view.arrays)
    tops = []
    for i in range(1000, 2000):  # a commit per update: each appends its vertex's blocks
        apply_in_batches(space, log[i:i + 1], batch=1)
        tops.append(space._edges.top)
        assert space._edges.top <= 2 * space._edges.live
    assert np.array_equal(drawn(view.arrays), before)
    assert min(np.diff(tops)) < 0  # compacted into new arrays, the view's left as they were
    assert space._edges.arrays["dst"] is not view.arrays["dst"]
    for i in range(2000, 3000, 50):  # batches touching most vertices: the blocks that stay compacted first
        apply_in_batches(space, log[i:i + 50], batch=50)
        assert space._edges.top <= 2 * space._edges.live
    assert np.array_equal(drawn(view.arrays), before)
    fresh = SamplingSpace(8, scale=10.0)  # the same edges, never compacted
    apply_in_batches(fresh, log, batch=100)
    assert np.array_equal(drawn(space._arrays()), drawn(fresh._arrays()))
    assert space.version == 10 + 1000 + 20


def test_sample_is_a_function_of_seed_and_stream():
    space = SamplingSpace(1, scale=4.0)
    space.apply(["insert"] * 5, [0] * 5, [1, 2, 3, 4, 5], [0.1, 0.3, 1.7, 2.0, 9.9])
    a = space.sample(np.zeros(1000, np.int64), seed=5)
    assert np.array_equal(a, space.sample(np.zeros(1000, np.int64), seed=5))
    assert np.array_equal(a[500:], space.sample(np.zeros(500, np.int64), seed=5, streams=np.arange(500, 1000)))
    assert not np.array_equal(a, space.sample(np.zeros(1000, np.int64), seed=6))


@pytest.mark.parametrize("op, src, dst, weight, message", [
    (["insert", "delete", "delete"], [0, 1, 1], [2, 0, 0], [1, None, None], "update 2: cannot delete edge (1, 0)"),
    (["insert", "update"], [0, 0], [2, 3], [1, 2], "update 1: cannot update edge (0, 3)"),
    (["insert", "insert"], [0, 0], [2, 3], [1, -2], "update 1: the weight of an insert must be a positive finite "
                                                    "number, got -2"),
    (["insert", "insert"], [0, 0], [2, 3], [1, True], "update 1: the weight of an insert must be a positive finite "
                                                      "number, got True"),
    (["insert", "insert"], [0, 0], [2, 3], np.array([True, True]), "update 0: the weight of an insert must be a "
                                                                   "positive finite number, got True"),
    (["delete", "insert"], [0, 0], [1, 3], [None, np.True_], "update 1: the weight of an insert must be a positive "
                                                             "finite number, got True"),
    (["insert", "update"], [0, 0], [2, 1], [1, float("nan")], "update 1: the weight of an update"),
    (["insert", "delete", "update"], [0, 1, 1], [2, 0, 2], [1, None, "heavy"], "update 2: the weight of an update"),
    (["insert", "update"], [0, 1], [2, 2], [1, None], "update 1: the weight of an update must be a positive finite "
                                                        "number, got None"),
    (["insert", "remove"], [0, 0], [2, 1], [1, 1],
     "update 1: 'op' must be one of ['delete', 'insert', 'update'], got 'remove'"),
    (["insert"], [-1], [2], [1], "update 0: 'src' must hold non-negative integer vertex ids, got -1"),
    (["insert", "insert"], np.array([0, 2**64 - 1], np.uint64), [2, 1], [1, 1],
     "update 1: 'src' must hold integer vertex ids below 2**63, got 18446744073709551615"),
    (["insert", "insert"], [0, 1], [2**63, 1], [1, 1],
     "update 0: 'dst' must hold integer vertex ids below 2**63, got 9223372036854775808"),
    (["insert", "insert"], [0, 1], [1, 2**70], [1, 1],
     "update 1: 'dst' must hold integer vertex ids below 2**63, got 1180591620717411303424"),
    (["insert", "insert"], [0, 1.5], [1, 1], [1, 1],
     "update 1: 'src' must hold non-negative integer vertex ids, got 1.5"),
    (["insert", "insert"], [0, 1], np.array([1.0, 0.0]), [1, 1],  # whole floats: no one value to blame
     "'dst' must hold integer vertex ids, got dtype float64"),
    (["insert", "insert"], [0], [2], [1], "one entry per update, got lengths 2, 1, 1 and 1"),
])
def test_a_bad_batch_names_the_update_and_changes_nothing(op, src, dst, weight, message, stage):
    space = SamplingSpace(2)
    space.apply(["insert", "insert", "insert"], [0, 1, 1], [1, 0, 2], [3, 4, 5])
    before = space.all_edges(), [space.groups(v) for v in range(2)], space.version
    with pytest.raises(gpipe.GpipeValueError, match=re.escape(message)):
        space.apply(op, src, dst, weight)
    after = space.all_edges(), [space.groups(v) for v in range(2)], space.version
    assert all(np.array_equal(a, b) for a, b in zip(before[0], after[0]))
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(before[1], after[1]) for k in a)
    assert before[2] == after[2] and space.num_vertices == 2 and space._staged is None


@pytest.mark.parametrize("directed, partitions", [(True, 1), (False, 4)])
def test_a_dynamic_graph_applies_a_log_across_its_partitions_completely_or_not_at_all(cpu, directed, partitions):
    rng = np.random.default_rng(partitions)
    frame = pd.DataFrame({"src": rng.integers(0, 40, 150), "dst": rng.integers(0, 40, 150),
                          "weight": rng.integers(1, 100, 150)})
    g = gpipe.from_edges(frame, weight="weight", directed=directed, partitions=partitions, mode="partitioned")
    dg = DynamicGraph.from_graph(g)
    start = {}
    for v, u, w in dg.edges().itertuples(index=False):
        start.setdefault(v, []).append((u, w))
    log, edges = random_log(rng, 45, 1500, False, start, directed)  # ids past 40: new vertices
    apply_in_batches(dg, log, batch=400)
    expected = pd.DataFrame([(v, u, float(w)) for v in sorted(edges) for u, w in edges[v]],
                            columns=["src", "dst", "weight"])
    pd.testing.assert_frame_equal(dg.edges(), expected)
    with pytest.raises(gpipe.GpipeValueError, match=re.escape("update 3: cannot delete edge (99, 98)")):
        dg.apply(["insert", "insert", "delete", "delete"], [0, 44, 0, 99], [1, 2, 1, 98], [5, 1, None, None])
    pd.testing.assert_frame_equal(dg.edges(), expected)


def test_apply_batch_takes_a_checked_batch_only():
    space = SamplingSpace(2)
    with pytest.raises(gpipe.GpipeValueError, match="'batch' must be a gpipe.dynamic Batch .*got tuple"):
        space.apply_batch((["insert"], [0], [1], [1.0]))
    assert space.version == 0 and space.num_edges == 0


def test_a_dynamic_graph_refuses_a_replicated_graph(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1], "dst": [1, 2]}), mode="replicated")
    with pytest.raises(gpipe.GpipeValueError, match="'g' must be a partitioned graph.*got mode 'replicated'"):
        DynamicGraph.from_graph(g)


def test_a_dynamic_graph_refuses_weights_that_are_not_biases(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1], "dst": [1, 0], "weight": [1.0, 0.0]}), weight="weight",
                         directed=True, mode="partitioned")
    with pytest.raises(gpipe.GpipeValueError, match="edge weights, which must be positive and finite; partition "
                                                    r"\d+ holds a weight of 0.0"):
        DynamicGraph.from_graph(g)


# -- walks on dynamic graphs ------------------------------------------------------------------------------------------

def updated_graph(seed: int, partitions: int, float_biases: bool, length: int = 3000, directed: bool = True):
    """A dynamic graph of 30 vertices (ids up to 34 once updated) after a random log, and its edge multiset."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"src": rng.integers(0, 30, 120), "dst": rng.integers(0, 30, 120),
                          "weight": rng.integers(1, 100, 120)})
    g = gpipe.from_edges(frame, weight="weight", directed=directed, partitions=partitions, mode="partitioned")
    dg = DynamicGraph.from_graph(g, scale=10.0 if float_biases else 1.0)
    start = {}
    for v, u, w in dg.edges().itertuples(index=False):
        start.setdefault(v, []).append((u, w))
    log, edges = random_log(rng, 35, length, float_biases, start, directed)
    apply_in_batches(dg, log, batch=700)
    return dg, edges


def first_order_exact(edges: dict, weighted: bool) -> dict:
    """``{(u,): {v: probability}}``: a first-order step of the edge multiset ``edges`` ({src: [(dst, weight)]}), a
    duplicated edge's copies summed."""
    exact = {}
    for u, row in edges.items():
        shares = {}
        for v, w in row:
            shares[v] = shares.get(v, 0.0) + (w if weighted else 1.0)
        exact[(u,)] = {v: b / sum(shares.values()) for v, b in shares.items()}
    return exact


def node2vec_exact(edges: dict, p: float, q: float, weighted: bool) -> dict:
    """``{(t, v): {x: probability}}``: node2vec's second-order step of the edge multiset ``edges`` (as the static
    graph of it with ``keep_duplicates=True`` walks it): each copy of (v, x) weighs w (or 1) times 1/p if x is t, 1
    if x is a neighbor of t, 1/q otherwise."""
    exact = {}
    for t, row in edges.items():
        near = {x for x, _ in row}
        for v in near:
            shares = {}
            for x, w in edges.get(v, []):
                bias = 1 / p if x == t else 1.0 if x in near else 1 / q
                shares[x] = shares.get(x, 0.0) + (w if weighted else 1.0) * bias
            if shares:
                exact[(t, v)] = {x: b / sum(shares.values()) for x, b in shares.items()}
    return exact


def transition_p_value(walks: np.ndarray, exact: dict) -> float:
    """The p-value of a chi-square test of the walks' steps against ``exact[context] = {next: probability}``, a
    context the vertices before a step (as many as exact's keys hold; a walk's first steps have fewer and are left
    out), pooled over the contexts, bins expecting fewer than 5 steps merged."""
    order = len(next(iter(exact)))
    window = [walks[:, i:walks.shape[1] - order + i] for i in range(order + 1)]  # each step and its context
    keep = window[-1] >= 0  # padding: only at a walk's end
    contexts, v = np.stack([w[keep] for w in window[:-1]], 1), window[-1][keep]
    chi2, dof = 0.0, 0
    for context in np.unique(contexts, axis=0):
        probabilities = exact[tuple(context.tolist())]
        neighbors = np.array(sorted(probabilities))
        taken = v[(contexts == context).all(1)]
        expected = np.array([probabilities[n] for n in neighbors]) * len(taken)
        observed = (taken[:, None] == neighbors[None, :]).sum(0)
        assert observed.sum() == len(taken)  # every step along a live edge
        rank = np.argsort(expected)
        small = np.cumsum(expected[rank]) < 5  # the smallest bins, merged into one
        bins = [(observed[rank][small].sum(), expected[rank][small].sum())] if small.any() else []
        bins += list(zip(observed[rank][~small], expected[rank][~small]))
        observed_bins, expected_bins = np.array(bins, float).T
        chi2 += ((observed_bins - expected_bins) ** 2 / expected_bins).sum()
        dof += len(bins) - 1
    assert dof > 50
    return stats.chi2.sf(chi2, dof)


@pytest.mark.parametrize("weighted, float_biases", [(True, False), (True, True), (False, False)])
def test_dynamic_walk_steps_follow_the_resulting_multiset(cpu, weighted, float_biases):
    dg, edges = updated_graph(7, 3, float_biases)
    walks = gpipe.walks.deepwalk(dg, length=40, walks_per_vertex=60, weighted=weighted, seed=4).compute()
    assert walks.shape == (60 * dg.num_vertices, 41)
    for row in walks:  # ended early only at a vertex without out-edges
        valid = row[row >= 0]
        assert len(valid) == 41 or not edges.get(valid[-1])
    assert transition_p_value(walks, first_order_exact(edges, weighted)) > ALPHA


@pytest.mark.parametrize("weighted, float_biases, directed, p, q", [
    (True, False, True, 0.5, 2.0),
    (True, True, False, 2.0, 0.25),
    (False, False, False, 0.01, 50.0),  # not tame: many steps drawn exactly after 256 rejections
])
def test_dynamic_node2vec_follows_the_exact_second_order_probabilities_of_the_resulting_multiset(
        cpu, weighted, float_biases, directed, p, q):
    dg, edges = updated_graph(8, 3, float_biases, length=1000, directed=directed)
    assert any(len(row) > len({x for x, _ in row}) for row in edges.values())  # duplicated edges
    walks = gpipe.walks.node2vec(dg, p=p, q=q, length=30, walks_per_vertex=50, weighted=weighted, seed=4).compute()
    bounds = dg.snapshot().bounds
    owner = np.searchsorted(bounds, walks, side="right")
    assert (owner[:, :-2] != owner[:, 1:-1])[walks[:, 2:] >= 0].mean() > 0.3  # t mostly in another partition
    assert transition_p_value(walks, node2vec_exact(edges, p, q, weighted)) > ALPHA
    assert transition_p_value(walks, first_order_exact(edges, weighted)) < ALPHA  # the test tells them apart


def test_weighted_walks_step_by_the_exact_law_of_tiny_and_huge_biases(cpu):
    """Vertex 0's out-edges weigh 1e-300, 2e-300 and 3e-300 (a weighted step from it never ended), vertex 1's 1e30
    and 1e20 (a step went to 2 one time in two, not one in 1e10)."""
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 0, 0, 1, 1, 2, 3], "dst": [1, 2, 3, 0, 2, 0, 0]}), directed=True,
                         partitions=2, mode="partitioned")
    dg = DynamicGraph.from_graph(g)
    dg.update_weights([0, 0, 0, 1, 1], [1, 2, 3, 0, 2], [1e-300, 2e-300, 3e-300, 1e30, 1e20])
    for walk, kwargs in [(gpipe.walks.deepwalk, {}), (gpipe.walks.node2vec, {"p": 0.5, "q": 2.0})]:
        walks = walk(dg, length=20, walks_per_vertex=300, weighted=True, seed=5, **kwargs).compute()
        assert (walks >= 0).all()
        src, dst = walk_steps(walks)
        assert (dst[src == 1] == 0).all()
        if walk is gpipe.walks.deepwalk:  # (node2vec's steps from 0 depend on where the walker came from)
            observed = np.bincount(dst[src == 0], minlength=4)[1:]
            assert stats.chisquare(observed, observed.sum() * np.array([1, 2, 3]) / 6).pvalue > ALPHA


def test_a_deleted_edge_is_never_walked_and_an_inserted_one_is(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 0, 0, 1, 2, 3], "dst": [1, 2, 3, 0, 0, 0],
                                       "weight": [1, 1, 2**40, 1, 1, 1]}), weight="weight", directed=True,
                         partitions=2, mode="partitioned")
    dg = DynamicGraph.from_graph(g)
    before = dg.snapshot()
    dg.apply(["delete", "insert", "update"], [0, 0, 0], [3, 5, 2], [None, 3.5, 2])
    for weighted in (False, True):
        walks = gpipe.walks.deepwalk(dg, length=6, walks_per_vertex=2000, weighted=weighted, seed=1).compute()
        steps = set(zip(*(s.tolist() for s in walk_steps(walks))))
        assert (0, 3) not in steps and (0, 5) in steps and (0, 1) in steps
        old = gpipe.walks.deepwalk(before, length=6, walks_per_vertex=2000, weighted=weighted, seed=1).compute()
        assert (0, 3) in set(zip(*(s.tolist() for s in walk_steps(old)))) and (old != -1).all()  # 5: no edges yet


def test_a_walk_reads_the_snapshot_it_started_from(cpu):
    dg, _ = updated_graph(3, 4, False, length=500)
    snapshot = dg.snapshot()
    expected = gpipe.walks.deepwalk(dg, length=20, weighted=True, seed=2).compute()
    rng = np.random.default_rng(9)
    dg.insert_edges(rng.integers(0, 35, 200), rng.integers(0, 35, 200), rng.integers(1, 1000, 200))
    assert snapshot.version == dg.version - 1
    np.testing.assert_array_equal(gpipe.walks.deepwalk(snapshot, length=20, weighted=True, seed=2).compute(),
                                  expected)
    assert not np.array_equal(gpipe.walks.deepwalk(dg, length=20, weighted=True, seed=2).compute(), expected)


def test_a_walk_on_a_graph_one_worker_holds_pins_its_snapshot_in_the_run_message(one_worker_cluster, monkeypatch):
    with one_worker_cluster.as_current():
        dg, _ = updated_graph(4, 3, True, length=300)
        phases = []
        call = DynamicGraph._call
        monkeypatch.setattr(DynamicGraph, "_call", lambda self, function, phase, *args, **kwargs: (
            phases.append(phase), call(self, function, phase, *args, **kwargs))[1])
        walked = gpipe.walks.node2vec(dg, p=0.5, q=2.0, length=20, weighted=True, seed=3).compute()
        assert phases == []  # no message to the worker but the run's
        np.testing.assert_array_equal(walked, gpipe.walks.node2vec(dg.snapshot(), p=0.5, q=2.0, length=20,
                                                                   weighted=True, seed=3).compute())
        assert phases == ["dynamic snapshot"]


def test_a_run_snapshot_that_a_batch_pins_first_holds_the_graph_as_taken(one_worker_cluster):
    with one_worker_cluster.as_current():
        dg, _ = updated_graph(3, 2, False, length=500)
        taken = dg.run_snapshot()  # not pinned yet: its run would pin it
        expected = gpipe.walks.deepwalk(dg.snapshot(), length=20, weighted=True, seed=2).compute()
        rng = np.random.default_rng(9)
        dg.insert_edges(rng.integers(0, 35, 200), rng.integers(0, 35, 200), rng.integers(1, 1000, 200))
        np.testing.assert_array_equal(gpipe.walks.deepwalk(taken, length=20, weighted=True, seed=2).compute(),
                                      expected)
        assert not np.array_equal(gpipe.walks.deepwalk(dg, length=20, weighted=True, seed=2).compute(), expected)


@pytest.mark.parametrize("walk, kwargs", [
    (gpipe.walks.deepwalk, {}),
    (gpipe.walks.deepwalk, {"weighted": True}),
    (gpipe.walks.with_jump, {"jump": 0.2, "weighted": True}),
    (gpipe.walks.ppr, {"start": [0, 3, 31], "restart": 0.2, "walks_per_source": 5, "weighted": True}),
    (gpipe.walks.node2vec, {"p": 0.5, "q": 2.0}),
    (gpipe.walks.node2vec, {"p": 0.01, "q": 50.0, "weighted": True}),
])
def test_dynamic_walks_do_not_depend_on_partitions_or_workers(cpu_cluster, one_worker_cluster, walk, kwargs):
    out = []
    for client, partitions in [(one_worker_cluster, 1), (one_worker_cluster, 4), (cpu_cluster, 4)]:
        with client.as_current():
            dg, _ = updated_graph(11, partitions, True, length=1000, directed=False)
            w = walk(dg, length=25, seed=6, **kwargs)
            assert isinstance(w, gpipe.walks.WalkResult)
            assert (w.stats["partitions"], w.stats["workers"]) == (partitions, 1 if client is one_worker_cluster
                                                                    else 2)
            out.append(w.compute())
    assert (out[0][:, 1:] >= 0).any()
    for other in out[1:]:
        np.testing.assert_array_equal(out[0], other)


def test_a_released_snapshot_is_unpinned_and_the_graph_walks_on(cpu):
    dg, _ = updated_graph(5, 2, False, length=200)
    snapshot = dg.snapshot()
    assert sum(cpu.run(partitions_held, snapshot.graph_id).values()) == 2
    snapshot.release()
    assert sum(cpu.run(partitions_held, snapshot.graph_id).values()) == 0
    with pytest.raises(gpipe.TaskError, match="not on worker"):
        gpipe.walks.deepwalk(snapshot, length=3, seed=0)
    assert gpipe.walks.deepwalk(dg, length=3, seed=0).compute().shape == (dg.num_vertices, 4)


def partitions_held(graph_id: str, dask_worker=None) -> int:
    """How many partitions of ``graph_id`` this worker holds."""
    return sum(1 for g, _ in dask_worker.plugins["gpipe"].partitions._held if g == graph_id)


def test_walks_that_do_not_take_dynamic_graphs_yet_say_so(cpu):
    dg, _ = updated_graph(5, 2, False, length=10)
    for g in (dg, dg.snapshot()):
        with pytest.raises(gpipe.GpipeValueError, match="'g' must be a gpipe.Graph for this walk .*node2vec also "
                                                        f"take dynamic graphs.*got {type(g).__name__}"):
            gpipe.walks.metropolis_hastings(g, length=3)


def test_a_categorical_op_column_is_checked_as_its_strings_are():
    """A log's op column as a pandas categorical (a Parquet log's dictionary column, update_log's) is read through
    its codes: the same batch as from the strings, and the same error, at the same position, for a bad op."""
    from gpipe.dynamic._batches import check_batch

    ops = ["insert", "delete", "update", "insert", "delete"]
    src, dst = np.array([0, 1, 2, 3, 4]), np.array([1, 2, 3, 4, 0])
    weight = pd.Series([1.5, np.nan, 2.0, 3.0, np.nan])
    as_text = check_batch(np.array(ops, dtype=object), src, dst, weight.to_numpy())
    as_category = check_batch(pd.Series(ops, dtype="category"), pd.Series(src), pd.Series(dst), weight)
    for name in ("codes", "src", "dst", "weight"):
        np.testing.assert_array_equal(getattr(as_category, name), getattr(as_text, name))
    bad = pd.Categorical(["insert", "remove", "insert"])
    with pytest.raises(gpipe.GpipeValueError, match=r"update 8: 'op' must be one of .*, got 'remove'"):
        check_batch(bad, src[:3], dst[:3], np.ones(3), first=7)
    with pytest.raises(gpipe.GpipeValueError, match=r"update 2: 'op' must be one of .*, got 'nan'"):
        check_batch(pd.Categorical(["insert", "insert", None]), src[:3], dst[:3], np.ones(3))


# -- batches that fail ------------------------------------------------------------------------------------------------

def rmat_dynamic() -> DynamicGraph:
    """An undirected R-MAT graph of 256 vertices in 4 partitions as a dynamic graph."""
    return DynamicGraph.from_graph(gpipe.generators.rmat(scale=8, edge_factor=4, seed=3, mode="partitioned",
                                                         partitions=4))


def as_it_is(dg: DynamicGraph) -> tuple:
    """What a batch that fails must leave as it was: the edges, their count, the version and a walk."""
    return (dg.edges(), dg.num_edges, dg.version, dg.num_vertices,
            gpipe.walks.deepwalk(dg, length=8, weighted=True, seed=4).compute())


def assert_as_it_was(dg: DynamicGraph, before: tuple) -> None:
    edges, num_edges, version, num_vertices, walks = as_it_is(dg)
    pd.testing.assert_frame_equal(edges, before[0])
    assert (num_edges, version, num_vertices) == before[1:4] and len(edges) == num_edges
    np.testing.assert_array_equal(walks, before[4])


@pytest.mark.parametrize("src, dst, named", [
    ([2], [10**12], "update 0: vertex id 1000000000000"),
    ([2, 10**12 // 3, 5], [3, 4, 6], "update 1: vertex id 333333333333"),
])
def test_an_id_past_what_the_workers_can_hold_is_refused_naming_it_and_changes_nothing(cpu, src, dst, named):
    dg = rmat_dynamic()
    before = as_it_is(dg)
    with pytest.raises(gpipe.GpipeValueError, match=re.escape(named) + ".* more than the .* of memory of worker "):
        dg.insert_edges(src, dst)
    assert_as_it_was(dg, before)
    dg.insert_edges([2, 300], [300, 5])  # a few new vertices: the graph grows to hold them
    assert dg.num_vertices == 301 and dg.num_edges == before[1] + 4


def test_a_stream_of_batches_on_one_worker_asks_the_scheduler_for_the_others_at_most_once_a_second(cpu,
                                                                                                  monkeypatch):
    """A streaming update is one round trip, to the worker of its partition; whether the graph's other workers are
    still there (else it refuses) is asked of the scheduler at most once a watch interval, not before each batch."""
    dg = rmat_dynamic()
    assert dg._graph.bounds[1] > 30 and len(set(dg._graph.placement)) == 2
    edges = dg.num_edges
    asked = []
    monkeypatch.setattr(graph_module, "check_held", lambda *args: asked.append(time.monotonic()))
    for v in range(1, 31):  # both ends in partition 0
        dg.insert_edges([0], [v])
    assert asked and (np.diff(asked) >= WATCH_SECONDS).all(), np.diff(asked)
    assert dg.num_edges == edges + 60


def report_memory(nbytes: int | None, dask_worker=None) -> None:
    """Make this worker's gpipe store report ``nbytes`` of memory (None: its own again)."""
    store = dask_worker.plugins["gpipe"]
    if nbytes is None:
        store.__dict__.pop("memory", None)
    else:
        store.memory = lambda: (nbytes, None, None)


def test_growth_is_bounded_by_the_memory_of_the_worker_holding_the_last_partition_not_of_all_workers(cpu):
    """New vertices' tables all go to the last partition's worker: two workers' memory together is no bound."""
    dg = rmat_dynamic()
    before = as_it_is(dg)
    room = 8 * 2**20  # each worker's: the tables up to this id would fit in both together, not in one
    top = int(dg._graph.bounds[-2]) + 3 * room // 2 // VERTEX_BYTES
    cpu.run(report_memory, room)
    try:
        with pytest.raises(gpipe.GpipeValueError, match=re.escape(
                f"update 1: vertex id {top}: the vertex tables up to it would take 12.00 MiB, more than the 8.00 MiB "
                f"of memory of worker {dg._graph.placement[-1]}, which holds the last partition")):
            dg.insert_edges([0, 2], [1, top])
    finally:
        cpu.run(report_memory, None)
    assert_as_it_was(dg, before)


def fail_here(graph_id: str, part: int, phase: str, dask_worker=None) -> None:
    """Make this worker's partition ``part`` of dynamic graph ``graph_id`` run out of memory in its next stage of a
    batch, or half way through its next commit (its edges written, its members not)."""
    space = dask_worker.plugins["gpipe"].partitions.get(graph_id, part)
    target, name = (space, "_stage") if phase == "stage" else (space._members, "put")

    def out_of_memory(*args, **kwargs):
        raise MemoryError(f"injected into the {phase} of partition {part}")

    setattr(target, name, out_of_memory)


def heal_here(graph_id: str, part: int, dask_worker=None) -> None:
    """Undo :func:`fail_here`."""
    space = dask_worker.plugins["gpipe"].partitions.get(graph_id, part)
    space.__dict__.pop("_stage", None)
    space._members.__dict__.pop("put", None)


def batch_across(dg: DynamicGraph, inserts: int = 2, one_partition: bool = False) -> tuple[list, list, list, list,
                                                                                          int]:
    """A batch of ``inserts`` inserts, three deletes and an update touching the last partition and one on another
    worker (the first, on a cluster of one), or with ``one_partition`` the last partition alone (both ends of each
    edge in it: applied in one call), and what it adds to an undirected graph's edge count."""
    bounds, placement = dg._graph.bounds, dg._graph.placement
    last = len(placement) - 1
    first = last if one_partition else next((p for p, w in enumerate(placement) if w != placement[-1]), 0)
    lo, hi = int(bounds[first]), int(bounds[-2])
    edges = dg.edges()
    ends = (edges.src >= lo) & (edges.src < bounds[first + 1]) & (edges.src != edges.dst)
    gone = edges[ends & (edges.dst >= hi if one_partition else True)].iloc[:3]
    ops = ["insert"] * inserts + ["delete"] * 3 + ["update"]
    src = [lo, hi] * (inserts // 2) + [*gone.src, lo]
    dst = [hi + 1, lo + 1] * (inserts // 2) + [*gone.dst, hi + 1]
    return ops, src, dst, [2.5, 3] * (inserts // 2) + [None] * 3 + [7], 2 * (inserts - 3)


@pytest.mark.parametrize("one_partition", [False, True], ids=["across partitions", "one partition"])
@pytest.mark.parametrize("phase", ["stage", "commit"])
def test_a_batch_that_fails_on_a_worker_half_way_leaves_the_graph_as_it_was(cpu, phase, one_partition):
    dg = rmat_dynamic()
    last = dg._graph.num_partitions - 1
    ops, src, dst, weight, added = batch_across(dg, one_partition=one_partition)
    before = as_it_is(dg)
    worker = [dg._graph.placement[last]]
    cpu.run(fail_here, dg.graph_id, last, phase, workers=worker)
    named = "apply" if one_partition else phase  # one partition's batch is staged and committed in one call
    try:
        with pytest.raises(gpipe.TaskError, match=f"dynamic {named} failed in partition {last}: MemoryError"):
            dg.apply(ops, src, dst, weight)
        assert_as_it_was(dg, before)
    finally:
        cpu.run(heal_here, dg.graph_id, last, workers=worker)
    applied = dg.apply(ops, src, dst, weight)  # the same batch, once the worker has memory again
    assert dg.version == before[2] + 1 and dg.num_edges == before[1] + added
    assert applied == gpipe.dynamic.Applied(dg.version, len(src), dg.num_edges, dg.num_vertices, applied.seconds)
    assert applied.stats == {"algorithm": "dynamic_apply", "version": dg.version, "updates": len(src),
                             "num_edges": dg.num_edges, "num_vertices": dg.num_vertices, "seconds": applied.seconds}
    assert applied.seconds > 0


@pytest.mark.parametrize("phase, one_partition", [("dynamic stage", False), ("dynamic commit", False),
                                                  ("dynamic apply", True)])  # one partition's: a call applies it
def test_an_interrupt_once_the_workers_applied_a_batch_takes_it_back_everywhere(cpu, monkeypatch, phase,
                                                                               one_partition):
    """A Ctrl-C in the client as the workers' calls of a phase return (a batch staged, committed, or applied on
    its one partition) takes the batch back on every partition: the graph is exactly as before."""
    dg = rmat_dynamic()
    ops, src, dst, weight, added = batch_across(dg, one_partition=one_partition)
    before = as_it_is(dg)
    phases = []

    def interrupted(client, calls, held, called, *args):
        results = gpipe_call_workers(client, calls, held, called, *args)
        phases.append(called)
        if called == phase:
            raise KeyboardInterrupt
        return results

    monkeypatch.setattr(graph_module, "call_workers", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dg.apply(ops, src, dst, weight)
    assert phases[-1] == "dynamic take-back", phases
    monkeypatch.undo()
    assert_as_it_was(dg, before)
    dg.apply(ops, src, dst, weight)
    assert dg.version == before[2] + 1 and dg.num_edges == before[1] + added


@pytest.mark.parametrize("src, dst, named", [
    (np.array([2**64 - 1], np.uint64), np.array([3], np.uint64), "'src' must hold .* got 18446744073709551615"),
    ([2**63], [2], "'src' must hold .* got 9223372036854775808"),
])
def test_a_dynamic_graph_refuses_ids_from_2_63_on_naming_them_and_changes_nothing(cpu, src, dst, named):
    dg = DynamicGraph.from_graph(gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 3]}),
                                                  partitions=2, mode="partitioned"))
    before = as_it_is(dg)
    with pytest.raises(gpipe.GpipeValueError, match="update 0: " + named):
        dg.insert_edges(src, dst)
    assert_as_it_was(dg, before)


@pytest.mark.parametrize("rows, message", [
    ("insert,0,1,1\ninsert,1,2,1\ninsert,x,3,1\n", "update 2: 'src' must hold non-negative integer vertex ids, "
                                                   "got 'x'"),
    ("insert,0,1,1\ninsert,1,99999999999999999999,1\n", "update 1: 'dst' must hold integer vertex ids below 2**63, got "
                                                        "99999999999999999999"),
    ("insert,0,1,2.5\ndelete,0,1,\ninsert,1,2,heavy\n", "update 2: the weight of an insert must be a positive "
                                                        "finite number, got 'heavy'"),
])
def test_an_update_log_file_with_a_bad_cell_is_refused_naming_its_update_and_value(tmp_path, rows, message):
    path = tmp_path / "log.csv"
    path.write_text("op,src,dst,weight\n" + rows)
    with pytest.raises(gpipe.GpipeValueError, match=re.escape(f"{path}: {message}")):
        gpipe.dynamic.read_updates(path)
