"""The per-vertex sampling space of dynamic graphs (gpipe.dynamic): after random update logs its implied
probabilities are those of the resulting edge multiset, exactly and statistically, and bad batches change nothing."""

import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import gpipe
from gpipe.dynamic import DynamicGraph, SamplingSpace
from gpipe.dynamic._space import KINDS

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


def apply_in_batches(space, log, batch: int) -> None:
    for i in range(0, len(log), batch):
        op, src, dst, weight = zip(*log[i:i + batch])
        space.apply(op, src, dst, weight)


@pytest.mark.parametrize("float_biases, length", [(False, 1000), (False, 10_000), (True, 1000), (True, 10_000)])
def test_implied_probabilities_equal_those_of_the_resulting_multiset(float_biases, length):
    rng = np.random.default_rng(length + float_biases)
    log, edges = random_log(rng, 12, length, float_biases)
    space = SamplingSpace(4, scale=10.0 if float_biases else 1.0)
    apply_in_batches(space, log, batch=333)
    assert space.num_vertices == max(v for _, v, _, _ in log) + 1
    assert (space.frac > 0).any() == float_biases
    assert set(space.group_kind.tolist()) == set(KINDS.values())  # one-element, dense and listed groups
    for v in range(space.num_vertices):
        dst, weight = space.edges(v)
        expected = edges.get(v, [])
        assert dst.tolist() == [u for u, _ in expected] and weight.tolist() == [w for _, w in expected]
        if expected:
            np.testing.assert_allclose(space.probabilities(v), weight / weight.sum(), rtol=1e-12, atol=0)
        else:
            assert space.probabilities(v).size == 0 and space.group_indptr[v + 1] == space.group_indptr[v]


@pytest.mark.parametrize("float_biases", [False, True])
def test_sample_frequencies_pass_a_chi_square_test(float_biases):
    rng = np.random.default_rng(3)
    log, _ = random_log(rng, 6, 2000, float_biases)
    space = SamplingSpace(6, scale=10.0 if float_biases else 1.0)
    apply_in_batches(space, log, batch=500)
    draws = 20_000
    for v in range(space.num_vertices):
        dst, _ = space.edges(v)
        if len(dst) < 2:
            continue
        picked = space.sample(np.full(draws, v), seed=11, streams=np.arange(draws) + v * draws)
        neighbors, index = np.unique(dst, return_inverse=True)  # duplicates are one neighbor, their shares summed
        expected = np.bincount(index, weights=space.probabilities(v)) * draws
        observed = np.array([(picked == u).sum() for u in neighbors])
        assert observed.sum() == draws
        assert stats.chisquare(observed, expected).pvalue > ALPHA, (v, observed, expected)


def test_a_deleted_edge_is_never_sampled_and_an_inserted_one_is():
    space = SamplingSpace(1)
    space.apply(["insert"] * 4, [0] * 4, [1, 2, 3, 2], [7, 1, 2**40, 5])
    space.apply(["delete", "insert", "delete"], [0, 0, 0], [3, 4, 2], [None, 1, None])
    picked = space.sample(np.zeros(50_000, np.int64), seed=0)
    assert set(picked.tolist()) == {1, 2, 4}  # 3 (once 2**40 of the total) is gone, one copy of 2 remains
    assert space.edges(0)[0].tolist() == [1, 2, 4] and space.edges(0)[1].tolist() == [7, 5, 1]


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
    (["insert", "insert"], [0, 0], [2, 3], [1, -2], "update 1: the weight of an insert must be positive"),
    (["insert", "update"], [0, 0], [2, 1], [1, float("nan")], "update 1: the weight of an update"),
    (["insert", "delete", "update"], [0, 1, 1], [2, 0, 2], [1, None, "heavy"], "update 2: the weight of an update"),
    (["insert", "update"], [0, 1], [2, 2], [1, None], "update 1: the weight of an update must be positive and "
                                                        "finite, got None"),
    (["insert", "remove"], [0, 0], [2, 1], [1, 1], "update 1: 'op' must be one of"),
    (["insert"], [-1], [2], [1], "update 0: 'src' must hold non-negative integer vertex ids, got -1"),
    (["insert", "insert"], [0], [2], [1], "one entry per update, got lengths 2, 1, 1 and 1"),
])
def test_a_bad_batch_names_the_update_and_changes_nothing(op, src, dst, weight, message):
    space = SamplingSpace(2)
    space.apply(["insert", "insert", "insert"], [0, 1, 1], [1, 0, 2], [3, 4, 5])
    before = {k: v.copy() for k, v in vars(space).items() if isinstance(v, np.ndarray)}
    with pytest.raises(gpipe.GpipeValueError, match=re.escape(message)):
        space.apply(op, src, dst, weight)
    after = {k: v for k, v in vars(space).items() if isinstance(v, np.ndarray)}
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)
    assert space.num_vertices == 2


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


def test_a_dynamic_graph_refuses_a_replicated_graph(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1], "dst": [1, 2]}), mode="replicated")
    with pytest.raises(gpipe.GpipeValueError, match="'g' must be a partitioned graph.*got mode 'replicated'"):
        DynamicGraph.from_graph(g)
