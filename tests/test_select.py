"""SELECT without replacement has exactly the distribution of updated sampling (CPU twin; the GPU test
compares the CUDA kernel with it)."""

from collections import Counter
from itertools import permutations

import numpy as np
import pytest
from scipy import stats

from gpipe import _rng
from gpipe._select import METHODS, select

ALPHA = 1e-3
KEY = _rng.key(11)


def _exact_sequences(bias: np.ndarray, k: int) -> dict:
    """P(ordered picks) under updated sampling: each pick proportional to bias among the unpicked."""
    out = {}
    for seq in permutations(np.flatnonzero(bias > 0).tolist(), k):
        p, rest = 1.0, bias.sum()
        for j in seq:
            p *= bias[j] / rest
            rest -= bias[j]
        out[seq] = p
    return out


def _run(bias: np.ndarray, k: int, segments: int, method: str, bitmap: bool = True):
    d = bias.size
    offsets = np.arange(0, d * segments + 1, d, dtype=np.int64)
    want = np.full(segments, k, dtype=np.int64)
    return select(np.tile(bias, segments), offsets, want, np.arange(segments, dtype=np.int64), KEY, 3,
                  method=method, bitmap=bitmap)


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("k", [2, 3])
def test_ordered_picks_match_updated_sampling_exactly(method, k):
    bias = np.array([3.0, 6.0, 2.0, 2.0, 2.0])  # C-SAW's Fig. 1 example
    segments = 40_000
    po, picks, _ = _run(bias, k, segments, method)
    assert np.array_equal(po, np.arange(0, k * segments + 1, k))
    local = (picks.reshape(segments, k) - (np.arange(segments) * bias.size)[:, None])
    observed = Counter(map(tuple, local.tolist()))
    exact = _exact_sequences(bias, k)
    assert set(observed) <= set(exact)
    keys = sorted(exact)
    counts = np.array([observed.get(s, 0) for s in keys])
    assert stats.chisquare(counts, segments * np.array([exact[s] for s in keys])).pvalue > ALPHA


@pytest.mark.parametrize("method", ["bipartite", "repeated", "alias"])
def test_inclusion_probabilities_on_a_skewed_segment(method):
    bias = np.array([40.0, 0.0, 1.0, 3.0, 0.5, 9.0, 0.0, 2.0, 25.0, 1.0, 6.0, 0.25])
    k, segments = 4, 30_000
    _, picks, _ = _run(bias, k, segments, method)
    local = picks.reshape(segments, k) - (np.arange(segments) * bias.size)[:, None]
    inclusion = np.zeros(bias.size)
    for seq, p in _exact_sequences(bias, k).items():
        inclusion[list(seq)] += p
    got = np.bincount(local.ravel(), minlength=bias.size) / segments
    positive = bias > 0
    z = (got[positive] - inclusion[positive]) / np.sqrt(inclusion[positive] * (1 - inclusion[positive]) / segments + 1e-12)
    assert np.all(got[~positive] == 0)
    assert np.abs(z).max() < 4.5  # per-candidate normal bounds, about 1e-4 false alarms for 10 candidates


def test_no_duplicates_zero_biases_and_short_segments():
    rng = np.random.default_rng(2)
    sizes = rng.integers(0, 40, 3000)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bias = rng.exponential(1.0, offsets[-1]) ** 3 * (rng.random(offsets[-1]) < 0.8)
    want = rng.integers(0, 12, sizes.size)
    results = []
    for method in METHODS:
        po, picks, _ = select(bias, offsets, want, np.arange(sizes.size, dtype=np.int64), KEY, 0, method=method)
        for s in range(sizes.size):
            mine = picks[po[s]:po[s + 1]]
            positive = int((bias[offsets[s]:offsets[s + 1]] > 0).sum())
            assert len(mine) == min(want[s], positive)
            assert len(set(mine.tolist())) == len(mine)
            assert np.all((mine >= offsets[s]) & (mine < offsets[s + 1])) and np.all(bias[mine] > 0)
        results.append((po, picks))
    assert np.array_equal(results[0][0], results[1][0])


@pytest.mark.parametrize("method", list(METHODS))
def test_bitmap_and_scan_find_the_same_collisions(method):
    bias = np.array([5.0, 1.0, 1.0, 0.0, 8.0, 2.0, 3.0, 1.0, 1.0, 4.0, 2.0])
    a = _run(bias, 6, 500, method, bitmap=True)
    b = _run(bias, 6, 500, method, bitmap=False)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_bipartite_region_search_needs_fewer_draws_than_repeated_sampling_on_skewed_biases():
    bias = np.array([1000.0, 500.0, 200.0] + [1.0] * 20)
    draws = {m: _run(bias, 8, 2000, m)[2].sum() for m in ("bipartite", "repeated")}
    assert draws["bipartite"] * 2 < draws["repeated"]


def test_races_keep_the_k_shortest_in_order():
    """The race kernel's winners are the k shortest of -log(1 - u) / bias, u drawn per (segment, candidate)."""
    from gpipe import _rng
    from gpipe.sampling._race import race

    rng = np.random.default_rng(4)
    sizes = rng.integers(0, 40, 300)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bias = rng.exponential(1.0, offsets[-1]) * (rng.random(offsets[-1]) < 0.8)
    want = rng.integers(0, 12, sizes.size)
    streams = np.arange(sizes.size, dtype=np.int64) * 3 + 1
    key = _rng.key(9)
    win_offsets, winners, races = race(bias, offsets, want, streams, key, 5)
    for s in range(sizes.size):
        a, b = offsets[s], offsets[s + 1]
        u = _rng.unit_array(_rng.draws(np, key, np.full(b - a, streams[s]), 5, np.arange(b - a)))
        with np.errstate(divide="ignore"):
            expected = np.where(bias[a:b] > 0, -np.log1p(-u) / bias[a:b], np.inf)
        k = min(want[s], int((bias[a:b] > 0).sum()))
        np.testing.assert_array_equal(winners[win_offsets[s]:win_offsets[s + 1]], a + np.argsort(expected)[:k])
        np.testing.assert_allclose(races[win_offsets[s]:win_offsets[s + 1]], np.sort(expected)[:k])


def test_alias_tables_imply_each_candidates_share_of_its_segment():
    """The packed tables' implied probabilities (a column's threshold, the rest to its alias) are the biases' shares,
    to the tables' 2**-32 resolution; a zero bias is never implied, and a segment of none is all full columns. Built
    a run of segments at a time, they are the same."""
    from gpipe._alias import tables

    rng = np.random.default_rng(5)
    sizes = np.concatenate([rng.integers(1, 60, 400), [1, 2, 700, 3]])
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bias = rng.pareto(1.2, offsets[-1]) * (rng.random(offsets[-1]) < 0.7)
    bias[offsets[-2]:] = 0.0  # the last segment has no positive bias
    table = tables(offsets, bias)
    for chunk in (1, 500, 701):  # built a run of segments at a time, the same tables
        np.testing.assert_array_equal(tables(offsets, bias, chunk), table)
    threshold, other = (table >> np.uint64(32)).astype(np.float64) / 2.0**32, (table & np.uint64(0xFFFFFFFF))
    for s in range(sizes.size):
        a, d = offsets[s], sizes[s]
        implied = threshold[a:a + d].copy()
        np.add.at(implied, other[a:a + d].astype(np.int64), 1.0 - threshold[a:a + d])
        total = bias[a:a + d].sum()
        if total == 0:
            np.testing.assert_array_equal(other[a:a + d], np.arange(d))
            continue
        np.testing.assert_allclose(implied / d, bias[a:a + d] / total, rtol=0, atol=d * 2.0**-32 + 1e-12)
        assert np.all(implied[bias[a:a + d] == 0] <= d * 2.0**-32)
