"""A sharded table's training (``word2vec(table="sharded")``): the tables cut by vertex (shard ``a`` every
``shards``-th vertex from ``a``) over the workers; each round
the workers make their slice's pairs, bucketed by the shards of context and center (:func:`_pairs`), and train them
a block of (context shard, center shard) at a time, each worker its shard of ``syn0`` against every shard of
``syn1`` in turn (GraphVite's schedule, Zhu et al., WWW 2019); a pair's negatives are drawn from its center's shard."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from ..backend import to_host
from ..runtime.calls import submit, wait_pinned
from ..runtime.workers import worker_xp
from ._kernels import PAIRS, train_pairs_kernel
from ._training import Table, Vocabulary, Word2VecSpec, initial, round_slices, train_epochs

PAIR_BYTES = 28  # a pair of a sharded table's round: its two ids, walk, positions and learning rate
PAIRS_AT_LEAST = 1 << 26  # bytes of a sharded round's pairs a worker may hold, however small its shard


def sharded(client, spec: Word2VecSpec, placed: dict[str, tuple[list, list[int]]], vocabulary,
             progress: Callable | None, total: int) -> tuple[list, list[int], list[float]]:
    """The tables cut in ``spec.shards`` shards over the workers of ``placed`` (shard ``a``, the vertices ``v`` with
    ``v % shards == a``, on the ``a % W``-th of ``W``: each shard a sample of the vertices, whatever their ids'
    order, as a pair's negatives come from its center's shard), trained from their initial values: the trained
    ``syn0`` as shards of vertex ranges (``bounds``; :func:`_joined`, a :class:`Table` each, shard ``s`` on shard
    ``s``'s worker), the bounds, and the mean loss of each epoch. Each round, every worker makes the pairs of its
    walks' slice (:func:`_pairs`), bucketed by the shards of their context and center, and sends each context
    shard's to its worker (:func:`_outbox`); then ``shards`` turns: in turn ``t`` the worker
    of shard ``a`` trains the pairs of its contexts whose centers are in shard ``(a + t) % shards`` against that
    shard's ``syn1``, which the turn before left on shard ``a + 1``'s worker (:func:`_turn`): a turn's blocks share
    no row, so they run at once. ``syn0`` stays where it is and is trained in place, a turn after the other."""
    workers = list(placed)
    shards = spec.shards
    owners = [workers[a % len(workers)] for a in range(shards)]  # shard a's worker
    tables = [submit(client, initial, spec, a, workers=[w]) for a, w in enumerate(owners)]
    syn1 = [submit(client, _syn1, spec, a, workers=[w]) for a, w in enumerate(owners)]
    after: list = [None] * shards  # each shard's last turn: the next one waits for it (syn0 trained in place)

    def place(epoch: int, round_: int):
        nonlocal syn1
        made = [submit(client, _pairs, spec, epoch, round_, vocabulary, firsts, *blocks, workers=[w])
                for w, (blocks, firsts) in placed.items()]
        boxes = [[submit(client, _outbox, pairs, a, shards, workers=[w]) for a in range(shards)]
                 for pairs, w in zip(made, workers, strict=True)]  # box[a]: what goes to shard a's worker
        tokens = submit(client, _tokens, *made)
        del made
        turns = []
        for turn in range(shards):
            moved = list(syn1)
            for a, w in enumerate(owners):
                b = (a + turn) % shards
                moved[b] = submit(client, _turn, spec, epoch, b, vocabulary, tables[a], syn1[b], after[a],
                                  *[box[a] for box in boxes], workers=[w])
                after[a] = submit(client, _receipt, moved[b], workers=[w])
                turns.append(after[a])
            syn1 = moved
        return submit(client, _turn_sums, tokens, *turns)

    losses = train_epochs(client, spec, workers, progress, total, place)
    bounds = [spec.num_vertices * s // shards for s in range(shards + 1)]
    joined = [submit(client, _joined, spec, bounds[s], bounds[s + 1],
                     *[submit(client, _piece, spec, table, after[a], a, bounds[s], bounds[s + 1], workers=[w])
                       for a, (table, w) in enumerate(zip(tables, owners, strict=True))], workers=[owners[s]])
              for s in range(shards)]
    wait_pinned(client, joined, dict(enumerate(workers)), "training", "worker")
    return joined, bounds, losses


PAIR_FIELDS = ("context", "center", "walk", "context_at", "center_at", "alpha")
PAIR_DTYPES = (np.int32, np.int32, np.int64, np.int32, np.int32, np.float32)  # PAIR_BYTES in all
PAIRS_PER_WARP = 64  # a sharded turn's pairs a warp (a thread of the CPU twin) trains in order


@dataclasses.dataclass
class Pairs:
    """A round's pairs of a worker's walks for a sharded table (:func:`_pairs`), bucket ``a * shards + b`` (context
    in shard ``a``, center in shard ``b``) at ``starts[a * shards + b]`` of each of ``arrays`` (``PAIR_FIELDS``:
    the two vertices' rows in their shards, walk, positions, learning rate), and the tokens they came from; or the buckets
    of one context shard (:func:`_outbox`: ``starts`` over its ``shards`` buckets)."""

    arrays: dict[str, Any]
    starts: np.ndarray
    tokens: int


@dataclasses.dataclass
class Turn:
    """A shard of ``syn1`` as a turn of a sharded table's round left it, and the turn's loss and terms."""

    syn1: Any
    loss: float
    terms: int


def _pairs(spec: Word2VecSpec, epoch: int, round_: int, vocabulary: Vocabulary, firsts: list[int], *blocks) -> Pairs:
    """The pairs of round ``round_`` of ``epoch`` of this worker's ``blocks`` (:func:`~._training.round_slices`), as
    the rows' training would train them, each in its bucket: counted, then written (``gp_word2vec_pairs``)."""
    x = worker_xp()
    keep = x.asarray(vocabulary.keep)
    slices, mine = round_slices(x, spec, epoch, round_, firsts, blocks)
    cursor = x.zeros(spec.shards * spec.shards, x.uint64)
    arrays = {name: x.empty(0, dtype) for name, dtype in zip(PAIR_FIELDS, PAIR_DTYPES, strict=True)}
    starts = np.zeros(1, np.int64)
    for fill in (0, 1):
        if fill:
            counts = to_host(cursor).astype(np.int64)
            starts = np.concatenate([[0], np.cumsum(counts)])
            arrays = {name: x.empty(int(starts[-1]), dtype) for name, dtype in zip(PAIR_FIELDS, PAIR_DTYPES,
                                                                                   strict=True)}
            cursor = x.asarray(starts[:-1].astype(np.uint64))
        for piece in slices:
            PAIRS.launch(walks=piece.rows, rows=piece.rows.shape[0], width=spec.width, first_walk=piece.first_walk,
                         offset=piece.offset, done=piece.done, total=max(mine * spec.epochs, 1), epoch=epoch,
                         keep=keep, key=spec.key, window=spec.window, alpha=spec.alpha, min_alpha=spec.min_alpha,
                         shards=spec.shards, effective=x.empty(piece.rows.shape, x.int32), fill=fill,
                         cursor=cursor, **{f"pair_{name}": a for name, a in arrays.items()})
    return Pairs(arrays, starts, sum(piece.tokens for piece in slices))


def _outbox(pairs: Pairs, a: int, shards: int) -> Pairs:
    """The buckets of context shard ``a`` of ``pairs`` (a copy: the round's pairs go once every shard's are out)."""
    lo, hi = int(pairs.starts[a * shards]), int(pairs.starts[(a + 1) * shards])
    return Pairs({name: v[lo:hi].copy() for name, v in pairs.arrays.items()},
                 pairs.starts[a * shards:(a + 1) * shards + 1] - lo, 0)


def _tokens(*made: Pairs) -> int:
    return sum(p.tokens for p in made)


def _syn1(spec: Word2VecSpec, a: int) -> Turn:
    """Shard ``a``'s initial ``syn1``: zeros, as word2vec's."""
    x = worker_xp()
    return Turn(x.zeros((spec.rows(a), spec.dim), x.float32), 0.0, 0)


def _turn(spec: Word2VecSpec, epoch: int, b: int, vocabulary: Vocabulary, table: Table, held: Turn, _after,
          *boxes: Pairs) -> Turn:
    """A turn of a sharded table's round on the worker of context shard ``a``: the pairs of its ``boxes`` (one a
    worker that made pairs) whose centers are in shard ``b``, trained on ``table`` (shard ``a``'s ``syn0``, in
    place, after the worker's turn before: ``_after``) and on ``held`` (shard ``b``'s ``syn1``, which goes on to the
    next turn's worker)."""
    x = worker_xp()
    cum, guide, shift = vocabulary.shards[b]
    cum, guide = x.asarray(cum), x.asarray(guide)
    loss: float = 0
    terms = 0
    for box in boxes:
        lo, hi = int(box.starts[b]), int(box.starts[b + 1])
        if hi == lo:
            continue
        warps = -(-(hi - lo) // PAIRS_PER_WARP)
        out_loss, out_terms = x.zeros(warps, x.float64), x.zeros(warps, x.int64)
        train_pairs_kernel(spec.dim).launch(
            **{f"pair_{name}": v[lo:hi] for name, v in box.arrays.items()}, pairs=hi - lo, per_warp=PAIRS_PER_WARP,
            warps=warps, step0=epoch * spec.width, syn0=table.syn0, syn1=held.syn1, dim=spec.dim, cum=cum,
            guide=guide, shift=shift, negative=spec.negative, key=spec.key, loss=out_loss, terms=out_terms)
        loss += float(out_loss.sum())
        terms += int(out_terms.sum())
    return Turn(held.syn1, loss, terms)



def _receipt(turn: Turn) -> tuple[float, int]:
    return turn.loss, turn.terms


def _turn_sums(tokens: int, *receipts: tuple[float, int]) -> tuple[float, int, int]:
    return sum(r[0] for r in receipts), sum(r[1] for r in receipts), tokens


def _piece(spec: Word2VecSpec, table: Table, _after, a: int, lo: int, hi: int):
    """The rows of shard ``a``'s ``syn0`` whose vertices are in ``lo .. hi - 1`` (consecutive rows), once its last
    turn is over (``_after``)."""
    return table.syn0[-(-(lo - a) // spec.shards):-(-(hi - a) // spec.shards)]


def _joined(spec: Word2VecSpec, lo: int, hi: int, *pieces) -> Table:
    """The ``syn0`` rows of vertices ``lo .. hi - 1`` in order, from every shard's :func:`_piece` (shard ``a``'s
    vertices are every ``shards``-th from the first at or past ``lo`` with ``v % shards == a``)."""
    x = worker_xp()
    rows = x.empty((hi - lo, spec.dim), x.float32)
    for a, piece in enumerate(pieces):
        rows[(a - lo) % spec.shards::spec.shards] = x.asarray(piece)
    return Table(rows, None)
