"""Canonical forms of labeled patterns (``gp_canonical`` and its CPU twin) against networkx's isomorphism tests."""

import itertools

import networkx as nx
import numpy as np
import pytest

from gpipe.mining._patterns import MAX_VERTICES, canonical_forms, pack, unpack

_SAME_LABEL = nx.algorithms.isomorphism.categorical_node_match("label", None)


def _random_pattern(rng) -> tuple[tuple, frozenset]:
    """A random connected labeled pattern of 2 to MAX_VERTICES vertices, few labels so automorphisms are common."""
    n = int(rng.integers(2, MAX_VERTICES + 1))
    edges = {(int(rng.integers(0, v)), v) for v in range(1, n)}  # a random tree keeps it connected
    edges |= {pair for pair in itertools.combinations(range(n), 2) if rng.random() < 0.3}
    return tuple(int(v) for v in rng.integers(0, 3, n)), frozenset(edges)


def _graph(labels, edges) -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from((v, {"label": label}) for v, label in enumerate(labels))
    graph.add_edges_from(edges)
    return graph


def _permuted(labels, edges, order) -> int:
    """The raw code of the same pattern with position ``a`` moved to ``order[a]``."""
    return pack(tuple(labels[order.index(b)] for b in range(len(labels))),
                frozenset((order[a], order[b]) for a, b in edges))


def test_canonical_codes_are_shared_exactly_by_isomorphic_patterns_and_orbits_are_the_least_images():
    rng = np.random.default_rng(7)
    patterns = [_random_pattern(rng) for _ in range(300)]
    raws = [pack(*p) for p in patterns]
    variants = [_permuted(*p, tuple(int(v) for v in rng.permutation(len(p[0])))) for p in patterns]
    codes, orbits = canonical_forms(np, np.array(raws + variants, np.int64))
    assert codes.dtype == orbits.dtype == np.int64 and orbits.shape == (600, MAX_VERTICES)
    np.testing.assert_array_equal(codes[:300], codes[300:])  # a pattern's code does not depend on its order
    graphs = [_graph(*p) for p in patterns]
    for i, (raw, code) in enumerate(zip(raws, codes[:300].tolist())):
        canon = _graph(*unpack(code))
        assert code <= raw and nx.is_isomorphic(graphs[i], canon, node_match=_SAME_LABEL)
        maps = list(nx.algorithms.isomorphism.GraphMatcher(graphs[i], canon,
                                                           node_match=_SAME_LABEL).isomorphisms_iter())
        least = [min(m[a] for m in maps) for a in range(len(patterns[i][0]))]
        assert orbits[i].tolist() == least + [-1] * (MAX_VERTICES - len(least))
    for i, j in itertools.combinations(range(60), 2):  # distinct codes exactly for non-isomorphic patterns
        assert (codes[i] == codes[j]) == nx.is_isomorphic(graphs[i], graphs[j], node_match=_SAME_LABEL)


@pytest.mark.parametrize("n", [0, 1])
def test_no_codes_or_one_give_their_forms(n):
    raw = np.array([pack((1, 0), frozenset({(0, 1)}))] * n, np.int64)
    codes, orbits = canonical_forms(np, raw)
    assert codes.tolist() == [pack((0, 1), frozenset({(0, 1)}))] * n
    assert orbits.tolist() == [[1, 0] + [-1] * (MAX_VERTICES - 2)] * n
