"""Skip-gram with negative sampling (word2vec's SGNS, gensim's ``sg=1, hs=0``) on blocks of walks: the CPU twins of
``kernels/word2vec.cu`` and the tables they read.

A walk is a sentence of dense vertex ids, padded with -1 after its end. For
each walk, as word2vec.c and gensim do:

- a vertex whose count is below ``min_count`` is dropped, and one kept with
  probability ``keep[v] / 2**32`` (``sample``'s subsampling, :func:`keep_table`)
  stays; the window counts the vertices that stay;
- each center ``i`` draws ``b`` uniform in ``[0, window)`` and trains its
  contexts ``j`` in ``[i - window + b, i + window - b]``, ``j != i``: the
  context's ``syn0`` row against the center's ``syn1neg`` row (label 1) and
  ``negative`` draws of :func:`negative_table` (found through
  :func:`guide_table`; label 0; a draw equal to the center is skipped),
  with ``g = (label - sigmoid(f)) * alpha`` (``f`` beyond +-6 clipped to a
  sigmoid of 1 or 0, as word2vec.c does; the sigmoid itself is computed, not
  read from its 1000-entry table) and the context's gradient added to its row
  after the last draw;
- ``alpha`` decays linearly to ``min_alpha`` over the tokens of every epoch:
  at a center, ``alpha - (alpha - min_alpha) * done / total``, ``done`` the
  valid tokens before it in this worker's order (``done`` + ``offset[row]`` +
  its position).

Every draw is ``_rng.bits(key, walk id, epoch * width + position, draw)``:
draw 0's first 32 bits decide whether the token at ``position`` stays, draw
1 is the center's ``b``, and draw ``2 + q * blocks + k // 4`` holds the
``k``-th negative of the pair (center at ``position``, context at raw
position ``q``) in its ``k % 4``-th 32-bit word. The initial ``syn0`` draws
``(vertex, INIT_STEP, d)``. So the draws do not depend on the order the
updates run in, nor on the device or the workers.

A sharded table (shard ``s`` of ``S``: the vertices ``v`` with ``v % S == s``,
row ``v // S``: a sample of the vertices whatever their ids' order) is
trained a block of shards at a time: of each row, only the pairs whose context
is in the block's context shard (``syn0``: its rows) and whose center is in
its center shard (``syn1`` and the negatives' table: its), each pair's
negatives drawn (the same draws) from its center's shard.

``warps`` threads of the twin (warps of the kernel) take the rows: one
(``mode="serialized"``) runs them in order, a row after another, which the
kernel's single warp does too; more (``"fast"``) run rows at once, updating
the tables without locks (Hogwild, as word2vec does), in chunks of rows so that
the rows running together have close ``alpha``.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _rng
from ..backend import cpu_kernel, prange
from ..kernels import Arg, Kernel

MAX_EXP = 6.0  # word2vec.c's: beyond it the sigmoid is taken as 0 or 1
INIT_STEP = 2**32 - 1  # the step of the initial vectors' draws; training's are below it
DOMAIN = 2**32  # the negative table and the keep thresholds are over 32-bit draws
CHUNK = 2048  # rows of a fast pass that run at once
GUIDE_BITS = 24  # the negatives' guide table has at most 2**24 entries
_LOW32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def negative_table(counts: np.ndarray, retained: np.ndarray) -> np.ndarray:
    """The cumulative table of the negatives (int64, one entry per vertex): vertex ``v`` is drawn for the 32-bit
    draws ``r`` with ``cum[v - 1] <= r < cum[v]``, ``cum[-1] = 2**32``, so with probability
    ``(cum[v] - cum[v - 1]) / 2**32``, its count ``** 0.75`` over their sum (rounded to 2**-32), as word2vec's
    unigram table; vertices not ``retained`` have none."""
    weights = np.where(retained, counts.astype(np.float64) ** 0.75, 0.0)
    cum = np.cumsum(weights)
    if cum.shape[0] == 0 or cum[-1] == 0:  # a shard with no vertex retained: no pair's center there, none drawn
        return np.zeros(cum.shape[0], np.int64)
    return np.rint(cum / cum[-1] * DOMAIN).astype(np.int64)


def guide_table(cum: np.ndarray) -> tuple[np.ndarray, int]:
    """The negatives' guide table (Chen and Asau's indexed search) and its ``shift``: entry ``i`` is the vertex that
    the draw ``i << shift`` picks, so a draw ``r`` starts at ``guide[r >> shift]`` and moves on while
    ``cum[v] <= r``, about one step: the vertex a binary search of ``cum`` finds (20 dependent reads at a million
    vertices), found in about two. One entry a vertex, rounded up to a power of two (at most ``2**GUIDE_BITS``)."""
    bits = min(GUIDE_BITS, int(np.ceil(np.log2(max(cum.shape[0], 1)))))
    shift = 32 - bits
    return np.searchsorted(cum, np.arange(1 << bits, dtype=np.int64) << shift, side="right").astype(np.int64), shift


def keep_table(counts: np.ndarray, retained: np.ndarray, sample: float) -> np.ndarray:
    """Each vertex's keep threshold (int64): a token of ``v`` stays when its 32-bit draw is below it, so with
    probability ``keep[v] / 2**32``: 0 for a vertex not ``retained``, ``2**32`` without subsampling, else
    word2vec's ``min(1, (sqrt(c / (sample * T)) + 1) * sample * T / c)`` (``T``: the retained tokens)."""
    if sample == 0:
        return np.where(retained, DOMAIN, 0).astype(np.int64)
    threshold = sample * float(counts[retained].sum())
    c = np.maximum(counts, 1).astype(np.float64)
    p = np.minimum(1.0, (np.sqrt(c / threshold) + 1.0) * threshold / c)
    return np.where(retained, np.rint(p * DOMAIN), 0).astype(np.int64)


@cpu_kernel()
def _word(block, k):
    """The ``k``-th 32-bit word (0..3) of a draw's block."""
    w = block[0] if k < 2 else block[1]
    return (w >> _S32) if k % 2 else (w & _LOW32)


@cpu_kernel()
def pick_negative(cum, guide, shift, r):
    """The vertex a 32-bit draw ``r`` picks: the first ``v`` with ``cum[v] > r``, from the guide's."""
    v = guide[r >> shift]
    while cum[v] <= r:
        v += 1
    return v


@cpu_kernel()
def _kept(walks, r, width, walk_id, step0, keep, key, effective) -> int:
    """The positions of row ``r`` whose tokens stay (``min_count``, ``sample``'s draws), in order, into
    ``effective[r]``: how many."""
    n = 0
    for p in range(width):
        v = walks[r, p]
        if v < 0:
            break
        if keep[v] == 0:
            continue
        if keep[v] < DOMAIN:
            if np.int64(_word(_rng.bits(key, walk_id, step0 + np.uint64(p), 0), 0)) >= keep[v]:
                continue
        effective[r, n] = p
        n += 1
    return n


@cpu_kernel(fastmath=True)
def _train_pair(syn0, context, syn1, center, dim, negative, key, walk_id, step, pq, cum, guide, shift, a, work):
    """One (center, context) pair's updates in word2vec's order: ``syn0[context]`` against ``syn1[center]`` (label 1)
    and ``negative`` draws of the negatives' table (label 0; ``cum`` and ``guide`` over ``syn1``'s rows; a draw equal
    to the center skipped), the context's gradient added after the last; its loss (the ``-log sigmoid`` terms'
    sum) and terms."""
    blocks = (negative + 3) // 4
    one = np.float32(1.0)
    for d in range(dim):
        work[d] = 0
    total_loss = 0.0
    count = 0
    for k in range(negative + 1):
        if k == 0:
            target = center
            label = one
        else:
            block = _rng.bits(key, walk_id, step, 2 + pq * blocks + (k - 1) // 4)
            target = pick_negative(cum, guide, shift, np.int64(_word(block, (k - 1) % 4)))
            if target == center:
                continue
            label = np.float32(0.0)
        f = np.float32(0.0)
        for d in range(dim):
            f += syn0[context, d] * syn1[target, d]
        x = np.float64(f) if k == 0 else -np.float64(f)  # -log sigmoid(x) is this term's loss
        total_loss += max(-x, 0.0) + math.log1p(math.exp(-abs(x)))
        count += 1
        if f > MAX_EXP:
            g = (label - one) * a
        elif f < -MAX_EXP:
            g = label * a
        else:
            g = (label - one / (one + np.float32(math.exp(-np.float64(f))))) * a
        for d in range(dim):
            work[d] += g * syn1[target, d]
        for d in range(dim):
            syn1[target, d] += g * syn0[context, d]
    for d in range(dim):
        syn0[context, d] += work[d]
    return total_loss, count


@cpu_kernel(fastmath=True)
def _train_row(walks, r, width, walk_id, progress, total, epoch, syn0, syn1, dim, keep, cum, guide, shift, window,
               negative, key, alpha, min_alpha, shards, context_shard, center_shard, effective, loss, terms):
    """One walk (row ``r``), its updates in word2vec's order (of a sharded table's block, only the pairs of its
    shards); its loss and terms into ``loss[r]``, ``terms[r]``."""
    step0 = np.uint64(epoch * width)
    n = _kept(walks, r, width, walk_id, step0, keep, key, effective)
    work = np.empty(dim, np.float32)
    total_loss = 0.0
    count = 0
    for i in range(n):
        pc = effective[r, i]
        center = walks[r, pc]
        if center % shards != center_shard:
            continue
        step = step0 + np.uint64(pc)
        a = _alpha(alpha, min_alpha, progress + pc, total)
        b = _rng.below(_rng.bits(key, walk_id, step, 1), window)
        for j in range(max(0, i - window + b), min(n, i + window + 1 - b)):
            context = walks[r, effective[r, j]]
            if j != i and context % shards == context_shard:
                pair_loss, pair_terms = _train_pair(syn0, context // shards, syn1, center // shards, dim, negative,
                                                    key, walk_id, step, effective[r, j], cum, guide, shift, a, work)
                total_loss += pair_loss
                count += pair_terms
    loss[r] = total_loss
    terms[r] = count


@cpu_kernel()
def _alpha(alpha, min_alpha, done, total):
    """The learning rate at a center with ``done`` tokens of ``total`` before it: linear from ``alpha`` to
    ``min_alpha``."""
    return np.float32(alpha - (alpha - min_alpha) * (np.float64(done) / np.float64(total)))


@cpu_kernel(parallel=True)
def _train_cpu(walks, rows, width, warps, first_walk, offset, done, total, epoch, syn0, syn1, dim, keep, cum, vocab,
               guide, shift, window, negative, key, alpha, min_alpha, shards, context_shard, center_shard, effective,
               loss, terms):
    """The twin of ``gp_word2vec``: rows in order with one warp, else chunks of rows in parallel (Hogwild)."""
    if warps == 1:
        for r in range(rows):
            _train_row(walks, r, width, first_walk + r, done + offset[r], total, epoch, syn0, syn1, dim, keep, cum,
                       guide, shift, window, negative, key, alpha, min_alpha, shards, context_shard, center_shard,
                       effective, loss, terms)
        return
    for c in range(0, rows, CHUNK):
        for r in prange(c, min(rows, c + CHUNK)):
            _train_row(walks, r, width, first_walk + r, done + offset[r], total, epoch, syn0, syn1, dim, keep, cum,
                       guide, shift, window, negative, key, alpha, min_alpha, shards, context_shard, center_shard,
                       effective, loss, terms)


@cpu_kernel(parallel=True)
def _initial_cpu(syn0, n, dim, first, stride, key):
    """The twin of ``gp_word2vec_init``: ``syn0`` (row ``r`` vertex ``first + r * stride``) uniform in
    [-0.5 / dim, 0.5 / dim), a draw per element."""
    for i in prange(n):
        u = _rng.unit(_rng.bits(key, first + i // dim * stride, INIT_STEP, i % dim))
        syn0[i] = np.float32((u - 0.5) / dim)


DEFINES = {"W2V_MAX_EXP": MAX_EXP, "W2V_INIT_STEP": f"{INIT_STEP}ULL", "W2V_DOMAIN": f"{DOMAIN}LL"}
_TRAIN_ARGS = (Arg("walks", "IdT[rows,width]", note="dense ids, -1 after a walk's end"), Arg("rows", "i64"),
               Arg("width", "i64"), Arg("warps", "i64", note="1: the rows in order"),
               Arg("first_walk", "i64", note="walk id of row 0"),
               Arg("offset", "i64[rows]", note="tokens before each row"), Arg("done", "i64"), Arg("total", "i64"),
               Arg("epoch", "i64"), Arg("syn0", "f32[vocab,dim]", out=True), Arg("syn1", "f32[vocab,dim]", out=True),
               Arg("dim", "i64"), Arg("keep", "i64[vocab]"), Arg("cum", "i64[vocab]"), Arg("vocab", "i64"),
               Arg("guide", "i64[guides]", note="guide_table's"), Arg("shift", "i64"),
               Arg("window", "i64"), Arg("negative", "i64"), Arg("key", "u64"), Arg("alpha", "f32"),
               Arg("min_alpha", "f32"),
               Arg("shards", "i64", note="a sharded table's (shard s: the vertices v with v % shards == s, row "
                                         "v // shards); 1: the whole table"),
               Arg("context_shard", "i64", note="the block's: syn0's"), Arg("center_shard", "i64",
                                                                             note="the block's: syn1's, cum's"),
               Arg("effective", "i32[rows,width]", out=True, note="scratch"),
               Arg("loss", "f64[rows]", out=True), Arg("terms", "i64[rows]", out=True))
# one instantiation per dims a lane holds in registers (dim up to 32 times it): a lane's context row, its gradient
# and the target's row take 3 of them each, so d 128 runs at 4, not at the 32 that d 1024 needs (fewer warps), and
# d 64 at 2 (every lane holding dims)
PER_LANE = (1, 2, 4, 8, 16, 32)
TRAIN = {lanes: Kernel("word2vec.cu", "gp_word2vec", template=(str(lanes),), twin=_train_cpu, items="warps",
                       lanes=32, defines=DEFINES, args=_TRAIN_ARGS) for lanes in PER_LANE}


def train_kernel(dim: int) -> Kernel:
    """The instantiation of ``gp_word2vec`` for vectors of ``dim`` (at most ``32 * PER_LANE[-1]``)."""
    return TRAIN[next(lanes for lanes in PER_LANE if 32 * lanes >= dim)]


INITIAL = Kernel("word2vec.cu", "gp_word2vec_init", twin=_initial_cpu, items="n",
                 defines=DEFINES, args=(Arg("syn0", "f32[n]", out=True), Arg("n", "i64"), Arg("dim", "i64"),
                                        Arg("first", "i64", note="the vertex of row 0 (a shard's first)"),
                                        Arg("stride", "i64", note="between the vertices of two rows"),
                                        Arg("key", "u64")))
