"""The counter-based random stream: Philox-4x32-10 against its published answers, the written definition of a
draw, ``below`` as the exact high word of the 128-bit product, and uniformity."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from gpipe import _rng

ALPHA = 1e-4  # false-alarm rate of each chi-square test at its fixed seed
MASK32 = (1 << 32) - 1
MASK64 = (1 << 64) - 1

# Random123's known-answer vectors for philox4x32_10 (kat_vectors): counter, key, output.
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK32,) * 4, (MASK32,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def _philox(counter, key):
    """Philox-4x32-10 in Python ints, from Salmon et al. (SC'11)."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return c0, c1, c2, c3


def _block(key, stream_id, step, draw):
    """The module docstring's definition of a draw's block."""
    w = _philox((draw, step, stream_id & MASK32, stream_id >> 32), (key & MASK32, key >> 32))
    return w[0] | w[1] << 32, w[2] | w[3] << 32


def _below(block, n):
    """Lemire's multiply-shift with the second word in place of a rejected first, in Python ints."""
    first, second = block
    rejected = (first * n) & MASK64 < (1 << 64) % n
    return ((second if rejected else first) * n) >> 64


def _random_blocks(count, seed):
    words = np.random.default_rng(seed).integers(0, 2**64, (count, 2), dtype=np.uint64, endpoint=False)
    return [(np.uint64(a), np.uint64(b)) for a, b in words]


@pytest.mark.parametrize("counter, key, expected", KNOWN_ANSWERS)
def test_philox_gives_the_published_known_answers(counter, key, expected):
    assert _philox(counter, key) == expected
    assert tuple(int(w) for w in _rng.philox(*counter, *key)) == expected


def test_cpu_twin_matches_the_written_definition():
    ids = np.array([0, 1, 2, 12345, 2**32, 2**40 + 7, 2**62, 2**63 - 1], dtype=np.int64)
    for seed, step, draw in [(0, 0, 0), (7, 3, 1), (2**63 - 1, 79, 2**32 - 1), (5, 2**32 - 1, 17)]:
        key = int(_rng.key(seed))
        expected = [_block(key, int(i), step, draw) for i in ids]
        assert [(int(a), int(b)) for a, b in _rng.draws(np, key, ids, step, draw)] == expected
        assert [tuple(int(w) for w in _rng.bits(key, i, step, draw)) for i in ids] == expected


def test_unit_is_the_first_word_top_53_bits():
    for block in _random_blocks(100, 1) + [(np.uint64(0), np.uint64(0)), (np.uint64(MASK64), np.uint64(0))]:
        assert _rng.unit(block) == (int(block[0]) >> 11) * 2.0**-53
    assert _rng.unit((np.uint64(MASK64), np.uint64(0))) < 1.0


@pytest.mark.parametrize("n", [1, 2, 7, 10**7, 2**32 - 1, 2**32 + 1, 3 * 2**31, 2**40 - 3, 2**62 + 1, 3 * 2**61,
                               2**63 - 1])
def test_below_is_the_high_word_of_the_full_product(n):
    """For n near 2**32..2**40 it is exactly (r * n) >> 64 (the old 32-bit multiply-shift was not); for n near
    2**63 the first word is rejected often and the second takes its place."""
    blocks = _random_blocks(2000, n % 1000)
    got = [int(_rng.below(b, n)) for b in blocks]
    assert got == [_below((int(a), int(b)), n) for a, b in blocks]
    assert all(0 <= v < n for v in got)
    if n < 2**41:
        assert got == [(int(a) * n) >> 64 for a, _ in blocks]


def test_below_rejects_exactly_the_first_words_that_would_bias_it():
    n = 3 * 2**61  # 2**64 mod n = 2**62: a first word whose product's low word is below that is rejected
    second = 2**64 - 5
    for first in range(8):
        low = (first * n) & MASK64  # (3 * first mod 8) * 2**61
        expected = (second * n) >> 64 if low < 2**62 else (first * n) >> 64
        assert int(_rng.below((np.uint64(first), np.uint64(second)), n)) == expected
    assert sum(((first * n) & MASK64) < 2**62 for first in range(8)) == 2


def test_below_is_uniform():
    ids = np.arange(60_000, dtype=np.int64)
    blocks = _rng.draws(np, _rng.key(3), ids, 0, 0)
    picks = np.array([_rng.below((a, b), 7) for a, b in blocks])
    assert picks.min() >= 0 and picks.max() < 7
    assert stats.chisquare(np.bincount(picks, minlength=7)).pvalue > ALPHA


def test_below_is_uniform_past_32_bits():
    """n = 3 * 2**31: uniform draws are uniform mod 3 (the old ((r >> 32) * n) >> 32, which also overflowed past
    2**32, gave residues 0, 1, 2 about 49%, 34% and 17% of the time)."""
    ids = np.arange(30_000, dtype=np.int64)
    blocks = _rng.draws(np, _rng.key(4), ids, 0, 0)
    residues = np.array([_rng.below((a, b), 3 * 2**31) % 3 for a, b in blocks])
    assert stats.chisquare(np.bincount(residues, minlength=3)).pvalue > ALPHA


def test_streams_differ_by_seed_step_draw_and_every_id_word():
    ids = np.arange(1000, dtype=np.int64)
    first = _rng.draws(np, _rng.key(1), ids, 0, 0)
    assert not np.array_equal(first, _rng.draws(np, _rng.key(2), ids, 0, 0))
    assert not np.array_equal(first, _rng.draws(np, _rng.key(1), ids, 1, 0))
    assert not np.array_equal(first, _rng.draws(np, _rng.key(1), ids, 0, 1))
    assert not np.array_equal(first, _rng.draws(np, _rng.key(1), ids + 2**32, 0, 0))
    assert len(set(first[:, 0].tolist())) == 1000


def test_draws_take_one_draw_index_per_id():
    ids = np.arange(50, dtype=np.int64)
    draw = np.arange(50) % 4
    many = _rng.draws(np, _rng.key(6), ids, 9, draw)
    for d in range(4):
        np.testing.assert_array_equal(many[draw == d], _rng.draws(np, _rng.key(6), ids[draw == d], 9, d))


def test_the_scripts_beside_the_package_take_the_splitmix64_constants_from_it():
    """benchmarks/ and workflows/ hash with ``_rng``'s constants instead of writing them again (its CUDA twin,
    ``kernels/rng.cuh``, is their one other home)."""
    constants = [f"{int(c):X}" for c in (_rng.GOLDEN, _rng._M1, _rng._M2)]
    repo = Path(__file__).resolve().parents[1]
    for path in sorted([*repo.glob("benchmarks/*.py"), *repo.glob("workflows/*/*.py")]):
        text = path.read_text().upper()
        assert not [c for c in constants if c in text], f"{path.relative_to(repo)} writes them again"


def test_below_array_is_below_of_each_block():
    """The vectorized draw (Python-written estimators use it) against the compiled one, bounds up to 2**63."""
    blocks = _rng.draws(np, _rng.key(3), np.arange(2000, dtype=np.int64) * 7919, 5, 0)
    bounds = np.concatenate([[1, 2, 3, 2**62 + 5, 2**63 - 1, 2**40], np.arange(1994) % 97 + 1]).astype(np.uint64)
    want = [_rng.below((blocks[i, 0], blocks[i, 1]), bounds[i]) for i in range(len(bounds))]
    np.testing.assert_array_equal(_rng.below_array(blocks, bounds), want)
