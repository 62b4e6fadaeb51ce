"""What the two ways of keeping word2vec's tables share: the training's spec, the vocabulary, the tables, the
initial vectors, a round's slice of a worker's walks and the loop over the rounds of every epoch."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _rng
from ..runtime.calls import gather_pinned
from ..runtime.workers import worker_xp
from ._kernels import INITIAL


@dataclasses.dataclass(frozen=True)
class Word2VecSpec:
    """The parameters of a training, as every worker takes them."""

    num_vertices: int
    width: int
    block_rows: int
    dim: int
    window: int
    negative: int
    epochs: int
    alpha: float
    min_alpha: float
    min_count: int
    sample: float
    seed: int
    mode: str
    rounds: int = 1  # per epoch (:func:`_rounds_per_epoch`)
    replicas: int = 1  # the workers training, each on its replica
    shards: int = 0  # a sharded table's shards (shard s: the vertices v with v % shards == s, row v // shards); 0:
    # replicated

    def rows(self, a: int) -> int:
        """The rows of shard ``a`` (of the whole table where it is replicated)."""
        return -(-(self.num_vertices - a) // self.shards) if self.shards else self.num_vertices

    @property
    def key(self) -> int:
        return int(_rng.key(self.seed))


@dataclasses.dataclass
class Vocabulary:
    """What the walks' counts give every worker: the keep thresholds and the negatives' tables (:mod:`._kernels`);
    and the tokens of each worker and the vertices trained (visited ``min_count`` times, at least once)."""

    keep: np.ndarray
    cum: np.ndarray
    guide: np.ndarray
    shift: int
    tokens: list[int]
    trained: int
    shards: list[tuple[np.ndarray, np.ndarray, int]]  # a sharded table: each shard's negatives (cum, guide, shift)


@dataclasses.dataclass
class Table:
    """The two tables of a model (word2vec's ``syn0`` and ``syn1neg``), on a worker's device."""

    syn0: Any
    syn1: Any


@dataclasses.dataclass
class Training:
    """What a training gives the client: the futures of the trained ``syn0`` (a :class:`Table` each, rows
    ``bounds[s] .. bounds[s + 1] - 1`` in the ``s``-th), the bounds, each epoch's mean loss, and how the workers'
    tables met (``"nccl"``: summed on its data plane; ``"comms"``: as Dask data; ``"none"``: one worker)."""

    tables: list
    bounds: list[int]
    losses: list[float]
    exchange: str


def train_epochs(client, spec: Word2VecSpec, workers: list[str], progress: Callable | None, total: int,
            place: Callable) -> list[float]:
    """Every round of every epoch, placed by ``place(epoch, round)`` (a future of the round's loss, terms and tokens
    over every worker), each placed before the one before it is heard of (its sums gathered, ``progress`` told):
    the workers go on while the client listens. The mean loss of each epoch."""
    held = dict(enumerate(workers))
    sums = [[0.0, 0] for _ in range(spec.epochs)]  # each epoch's loss and terms
    done = 0
    unheard: tuple[int, Any] | None = None  # the round placed last, not yet heard of

    def hear(epoch: int, future) -> None:
        nonlocal done
        loss, terms, tokens = gather_pinned(client, [future], held, "training", "worker")[0]
        sums[epoch][0] += loss
        sums[epoch][1] += terms
        done += tokens
        if progress is not None:
            progress(epoch=epoch, tokens=done, total=total, loss=sums[epoch][0] / max(sums[epoch][1], 1))

    for epoch in range(spec.epochs):
        for round_ in range(spec.rounds):
            this_round = (epoch, place(epoch, round_))
            if unheard is not None:
                hear(*unheard)
            unheard = this_round
    if unheard is not None:
        hear(*unheard)
    return [loss / max(terms, 1) for loss, terms in sums]


def initial(spec: Word2VecSpec, a: int) -> Table:
    """The initial tables of shard ``a`` (its vertices ``a``, ``a + shards``, ...; its ``syn1`` made apart, by
    :func:`~._sharded._syn1`, as it passes from worker to worker), or of every vertex (replicated: ``a`` 0)."""
    x = worker_xp()
    rows = spec.rows(a)
    syn0 = x.empty(rows * spec.dim, x.float32)
    INITIAL.launch(syn0=syn0, n=syn0.shape[0], dim=spec.dim, first=a, stride=max(spec.shards, 1), key=spec.key)
    return Table(syn0.reshape(rows, spec.dim), None if spec.shards else x.zeros((rows, spec.dim), x.float32))


@dataclasses.dataclass
class Slice:
    """The rows of a block in a round (:func:`round_slices`): contiguous, the walk id of the first, the tokens before
    each in the round's order, and before the first (of the worker's, since its first epoch)."""

    rows: Any
    first_walk: int
    offset: Any
    done: int
    tokens: int


def round_slices(x, spec: Word2VecSpec, epoch: int, round_: int, firsts: list[int], blocks) -> tuple[list[Slice], int]:
    """Round ``round_`` of ``epoch`` of a worker's ``blocks`` (whose first walks are ``firsts``): of each block, the
    rows of the round's ``1/rounds``-th, blocks in order; and the worker's tokens an epoch."""
    lengths = [(x.asarray(block) >= 0).sum(axis=1).astype(x.int64) for block in blocks]
    mine = sum(int(n.sum()) for n in lengths)
    cuts = [[n.shape[0] * r // spec.rounds for r in range(spec.rounds + 1)] for n in lengths]
    done = epoch * mine + sum(int(n[:c[round_]].sum()) for n, c in zip(lengths, cuts, strict=True))
    slices = []
    for block, n, c, first in zip(blocks, lengths, cuts, firsts, strict=True):
        lo, hi = c[round_], c[round_ + 1]
        if hi > lo:
            tokens = int(n[lo:hi].sum())
            slices.append(Slice(x.ascontiguousarray(x.asarray(block)[lo:hi]), first + lo, x.cumsum(n[lo:hi]) - n[lo:hi],
                                done, tokens))
            done += tokens
    return slices, mine
