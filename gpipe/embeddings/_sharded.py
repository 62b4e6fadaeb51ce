"""A sharded table's training (``word2vec(table="sharded")``): the tables cut by vertex (shard ``a`` every
``shards``-th vertex from ``a``) over the workers, trained a block of (context shard, center shard) at a time, each
worker its shards of ``syn0`` against every shard of ``syn1`` in turn (GraphVite's schedule, Zhu et al., WWW 2019);
a pair's negatives are drawn from its center's shard. The walks go to the tables, not the pairs: a round's slice of
every worker's walks is sent to every shard's worker (4 bytes a token each), and each block trains the pairs of the
slices whose context and center are in its shards (a pair made and sent would be ~28 bytes, about ``window + 1`` of
them a token)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..runtime.calls import submit, wait_pinned
from ..runtime.workers import worker_xp
from ._kernels import train_kernel
from ._training import Slice, Table, Training, Vocabulary, Word2VecSpec, initial, round_slices, train_epochs

WALK_BYTES = 8  # a token of a round's walks, at most (int64 ids), as every shard's worker holds them
ROUND_AT_LEAST = 1 << 26  # bytes of a sharded round's walks a worker may hold, however small its shard


def sharded(client, spec: Word2VecSpec, placed: dict[str, tuple[list, list[int]]], vocabulary,
            progress: Callable | None, total: int) -> Training:
    """The tables cut in ``spec.shards`` shards over the workers of ``placed`` (shard ``a``, the vertices ``v`` with
    ``v % shards == a``, on the ``a % W``-th of ``W``: each shard a sample of the vertices, whatever their ids'
    order, as a pair's negatives come from its center's shard), trained from their initial values: a
    :class:`Training` whose ``syn0`` is in shards of vertex ranges (:func:`_joined`, shard ``s`` on shard ``s``'s
    worker). Each round, every worker cuts its walks' slice
    (:func:`_round`), which goes to every shard's worker; then ``shards`` turns: in turn ``t`` the worker of shard
    ``a`` trains the pairs whose contexts are in shard ``a`` and centers in shard ``(a + t) % shards`` against that
    shard's ``syn1``, which the turn before left on shard ``a + 1``'s worker (:func:`_turn`): a turn's blocks share no
    row, so they run at once. ``syn0`` stays where it is and is trained in place, a turn after the other."""
    workers = list(placed)
    shards = spec.shards
    owners = [workers[a % len(workers)] for a in range(shards)]  # shard a's worker
    tables = [submit(client, initial, spec, a, workers=[w]) for a, w in enumerate(owners)]
    syn1 = [submit(client, _syn1, spec, a, workers=[w]) for a, w in enumerate(owners)]
    after: list = [None] * shards  # each shard's last turn: the next one waits for it (syn0 trained in place)

    def place(epoch: int, round_: int):
        nonlocal syn1
        rounds = [submit(client, _round, spec, epoch, round_, firsts, *blocks, workers=[w])
                  for w, (blocks, firsts) in placed.items()]
        tokens = [submit(client, _tokens, r, workers=[w]) for r, w in zip(rounds, workers, strict=True)]
        turns = []
        for turn in range(shards):
            moved = list(syn1)
            for a, w in enumerate(owners):
                b = (a + turn) % shards
                moved[b] = submit(client, _turn, spec, epoch, (a, b), vocabulary, tables[a], syn1[b], after[a],
                                  *rounds, workers=[w])
                after[a] = submit(client, _receipt, moved[b], workers=[w])
                turns.append(after[a])
            syn1 = moved
        return submit(client, _turn_sums, len(tokens), *tokens, *turns)

    losses = train_epochs(client, spec, workers, progress, total, place)
    bounds = [spec.num_vertices * s // shards for s in range(shards + 1)]
    joined = [submit(client, _joined, spec, bounds[s], bounds[s + 1],
                     *[submit(client, _piece, spec, table, after[a], a, bounds[s], bounds[s + 1], workers=[w])
                       for a, (table, w) in enumerate(zip(tables, owners, strict=True))], workers=[owners[s]])
              for s in range(shards)]
    wait_pinned(client, joined, dict(enumerate(workers)), "training", "worker")
    return Training(joined, bounds, losses, "comms" if len(workers) > 1 else "none")  # no NCCL path yet


@dataclasses.dataclass
class Round:
    """A worker's slice of a round of a sharded table (:func:`~._training.round_slices`), the tokens of its epoch
    (its learning rate's decay runs over them) and of the slice."""

    slices: list[Slice]
    total: int
    tokens: int


@dataclasses.dataclass
class Turn:
    """A shard of ``syn1`` as a turn of a sharded table's round left it, and the turn's loss and terms."""

    syn1: Any
    loss: float
    terms: int


def _round(spec: Word2VecSpec, epoch: int, round_: int, firsts: list[int], *blocks) -> Round:
    x = worker_xp()
    slices, mine = round_slices(x, spec, epoch, round_, firsts, blocks)
    return Round(slices, max(mine * spec.epochs, 1), sum(piece.tokens for piece in slices))


def _tokens(round_: Round) -> int:
    return round_.tokens


def _syn1(spec: Word2VecSpec, a: int) -> Turn:
    """Shard ``a``'s initial ``syn1``: zeros, as word2vec's."""
    x = worker_xp()
    return Turn(x.zeros((spec.rows(a), spec.dim), x.float32), 0.0, 0)


def _turn(spec: Word2VecSpec, epoch: int, block: tuple[int, int], vocabulary: Vocabulary, table: Table, held: Turn,
          _after, *rounds: Round) -> Turn:
    """A turn of a sharded table's round on the worker of shard ``a``: the pairs of every worker's slice (``rounds``)
    whose contexts are in shard ``a`` and centers in shard ``b`` (``block``), trained on ``table`` (shard ``a``'s
    ``syn0``, in place, after the shard's turn before: ``_after``) and on ``held`` (shard ``b``'s ``syn1``, which
    goes on to the next turn's worker), each pair's negatives from shard ``b``."""
    x = worker_xp()
    a, b = block
    cum, guide, shift = vocabulary.shards[b]
    keep, cum, guide = x.asarray(vocabulary.keep), x.asarray(cum), x.asarray(guide)
    loss: float = 0
    terms = 0
    for round_ in rounds:
        for piece in round_.slices:
            rows = piece.rows.shape[0]
            out_loss, out_terms = x.zeros(rows, x.float64), x.zeros(rows, x.int64)
            train_kernel(spec.dim).launch(
                walks=x.asarray(piece.rows), rows=rows, width=spec.width, warps=rows, first_walk=piece.first_walk,
                offset=x.asarray(piece.offset), done=piece.done, total=round_.total, epoch=epoch, syn0=table.syn0,
                syn1=held.syn1, dim=spec.dim, keep=keep, cum=cum, vocab=spec.rows(b), guide=guide, shift=shift,
                window=spec.window, negative=spec.negative, key=spec.key, alpha=spec.alpha, min_alpha=spec.min_alpha,
                shards=spec.shards, context_shard=a, center_shard=b, effective=x.empty(piece.rows.shape, x.int32),
                loss=out_loss, terms=out_terms)
            loss += float(out_loss.sum())
            terms += int(out_terms.sum())
    return Turn(held.syn1, loss, terms)


def _receipt(turn: Turn) -> tuple[float, int]:
    return turn.loss, turn.terms


def _turn_sums(workers: int, *values) -> tuple[float, int, int]:
    """A round's loss, terms and tokens: ``values`` the tokens of each of ``workers``, then every turn's receipt."""
    tokens, receipts = values[:workers], values[workers:]
    return sum(r[0] for r in receipts), sum(r[1] for r in receipts), sum(tokens)


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
