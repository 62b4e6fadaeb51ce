"""word2vec's skip-gram trained on a WalkResult's blocks where the workers hold them.

The client places and waits; the walks and the tables stay on the workers.
Each worker holding blocks trains its own replica of the tables on its walks
(:func:`_trained`), a round at a time: an epoch is ``sync`` rounds (one in the
serialized mode), each over a ``1/sync``-th slice of every block, after which
the replicas of ``W`` workers are merged (:func:`_merged`):
the table that started the round plus every replica's change to it, so a
round trains on all ``W`` slices as one worker running them at once would
(Hogwild over the workers). The tables travel between rounds as Dask data
(worker to worker), never to the client.

A sharded table (``table="sharded"``, :func:`_sharded`) is cut by vertex in
one shard a worker instead: each round the workers make their slice's
(center, context) pairs, bucketed by the two vertices' shards (:func:`_pairs`),
and train them a block of (context shard, center shard) at a time, each
worker its shard of ``syn0`` against every shard of ``syn1`` in turn
(GraphVite's schedule, Zhu et al., WWW 2019), the negatives of a pair drawn
from its center's shard.
"""

from __future__ import annotations

import dataclasses
import numbers
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _rng
from .._validate import check_callable, check_choice, check_int, check_probability, check_seed
from ..backend import to_host
from ..errors import GpipeValueError
from ..runtime.calls import gather_pinned, submit, wait_pinned, who_has
from ..runtime.exchange import Summing, summing
from ..runtime.workers import worker_xp
from ..walks import WalkResult
from ._kernels import (
    INITIAL,
    INIT_STEP,
    PAIRS,
    PER_LANE,
    guide_table,
    keep_table,
    negative_table,
    train_kernel,
    train_pairs_kernel,
)
from ._result import Embeddings

MODES = ("fast", "serialized")
TABLES = ("replicated", "sharded")
MAX_DIM = 32 * PER_LANE[-1]  # a lane of the kernel's warp holds dim / 32 floats of a context's row and its gradient


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
    bounds: tuple[int, ...] = ()  # a sharded table: shard s holds the vertices bounds[s] .. bounds[s + 1] - 1

    @property
    def shards(self) -> int:
        return max(len(self.bounds) - 1, 1)

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
class Trained(Table):
    """A worker's replica after a round, and the round's loss (the sum of the ``-log sigmoid`` terms), terms
    and tokens."""

    loss: float
    terms: int
    tokens: int


def word2vec(walks, dim: int = 128, window: int = 10, negative: int = 5, epochs: int = 1, *, alpha: float = 0.025,
             min_alpha: float = 0.0001, min_count: int = 0, sample: float = 0.0, seed: int = 0, mode: str = "fast",
             table: str = "replicated", sync: int | str = "auto", progress: Callable | None = None) -> Embeddings:
    """Vertex embeddings by word2vec's skip-gram with negative sampling, trained on walks where the workers hold them.

    The walks are the corpus: each walk a sentence of its vertices, as
    word2vec.c and gensim (``sg=1, hs=0``) train on them, with their dynamic
    window, unigram^0.75 negatives over the vertices' visit counts, linear
    ``alpha`` decay over every epoch's tokens, ``sample``'s subsampling and
    initial vectors uniform in ``[-0.5 / dim, 0.5 / dim]``. Every random draw
    comes from ``seed`` and the walk, position and draw it is for (see
    ``gpipe/embeddings/_kernels.py``), never from the device or the workers.
    No corpus is written and no walk comes to the client.

    ``mode="fast"`` updates the tables from many walks at once without locks
    (Hogwild, as word2vec's threads do: the result depends on timing), on
    every worker holding walks, each with its replica of the tables. Each
    epoch is ``sync`` rounds, each over a ``1/sync``-th of every worker's
    walks, after which the replicas are merged: the tables that started the
    round plus every worker's change to them (through NCCL between GPU
    workers, as Dask data between CPU workers).
    ``mode="serialized"`` applies the updates in word2vec's sequential order,
    a walk after another in walk order, on one worker (the walks held
    elsewhere are sent there): the CUDA kernel and the CPU twin give the same
    vectors up to float rounding, with any number of workers.

    Parameters
    ----------
    walks : WalkResult
        The corpus (DeepWalk's, node2vec's, any walks).
    dim : int
        Dimensions of the vectors.
    window : int
        The largest distance between a center and a context (each center draws its own, up to it).
    negative : int
        Negative samples per (center, context) pair.
    epochs : int
        Passes over the walks.
    alpha, min_alpha : float
        The learning rate at the start and at the end of training, in (0, 1], ``min_alpha <= alpha``.
    min_count : int
        Vertices visited fewer times are left out of training (their vectors stay as they started).
    sample : float
        word2vec's subsampling threshold of frequent vertices (0: none).
    seed : int
        Seed of the random stream.
    mode : {"fast", "serialized"}
    table : {"replicated", "sharded"}
        Where the fast mode keeps the tables: a replica on every worker (merged after each round), or cut by
        vertex in one shard a worker (for tables larger than one worker's memory). A sharded table is trained a
        block of (context shard, center shard) pairs at a time: a worker keeps its shard of ``syn0`` and trains
        the pairs of its contexts, in turn against every shard of ``syn1``, which pass from worker to worker as
        Dask data (GraphVite's schedule); a pair's negatives are drawn from its center's shard (unigram^0.75
        within it), so no row is ever updated in two places and nothing is merged.
    sync : int or "auto"
        Rounds per epoch (fast mode): the workers' replicas are merged after each, and ``progress`` told;
        ``"auto"``: 4 on one worker, and on more a round to about 4 visits of each vertex on each worker (the
        longer a round, the more the replicas drift apart: fewer merges cost quality); sharded, as many as keep a
        round's pairs on a worker within the size of its shard of the tables.
    progress : callable, optional
        Called after every round with ``epoch, tokens, total, loss`` (the mean loss of the epoch's tokens so
        far).

    Returns
    -------
    Embeddings
        One float32 vector per vertex of the walks' graph; ``stats`` holds ``tokens``, ``seconds``,
        ``tokens_per_second``, ``loss`` (per epoch: the mean ``-log sigmoid`` term), ``workers``, ``mode``,
        ``table``, ``shards``, ``rounds_per_epoch`` and ``vocabulary`` (the vertices trained).

    Raises
    ------
    GpipeValueError
        A parameter is out of range, or no walk holds a vertex visited ``min_count`` times.

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(7, seed=0)
    ...     walks = gpipe.walks.deepwalk(g, length=20, walks_per_vertex=4, seed=1)
    ...     emb = gpipe.embeddings.word2vec(walks, dim=16, window=5, seed=2)
    ...     vectors = emb.compute()
    >>> vectors.shape, vectors.dtype, emb.stats["tokens"]
    ((128, 16), dtype('float32'), 9872)
    """
    if not isinstance(walks, WalkResult):
        raise GpipeValueError(f"'walks' must be a gpipe.WalkResult (walks the workers hold), got "
                              f"{type(walks).__name__}")
    dim = check_int("dim", dim, minimum=1, maximum=MAX_DIM)
    window = check_int("window", window, minimum=1)
    negative = check_int("negative", negative, minimum=1)
    epochs = check_int("epochs", epochs, minimum=1)
    if epochs * walks.width >= INIT_STEP:
        raise GpipeValueError(f"'epochs' times the walks' width must be below 2**32 - 1, got {epochs} x {walks.width}")
    alpha = check_probability("alpha", alpha, open_low=True)
    min_alpha = check_probability("min_alpha", min_alpha)
    if min_alpha > alpha:
        raise GpipeValueError(f"'min_alpha' must be at most 'alpha' ({alpha}), got {min_alpha}")
    min_count = check_int("min_count", min_count, minimum=0)
    sample = check_probability("sample", sample)
    seed = check_seed("seed", seed)
    mode = check_choice("mode", mode, MODES)
    table = check_choice("table", table, TABLES)
    if table == "sharded" and mode != "fast":
        raise GpipeValueError(f"'table' \"sharded\" trains in the fast mode only (its shards on every worker at "
                              f"once), got mode={mode!r}")
    if sync != "auto" and (isinstance(sync, bool) or not isinstance(sync, numbers.Integral) or sync < 1):
        raise GpipeValueError(f"'sync' must be a positive integer or 'auto', got {sync!r}")
    if progress is not None:
        progress = check_callable("progress", progress)

    started = time.perf_counter()
    blocks = walks.map_blocks(_itself)  # each block where it is held
    client = blocks[0].client
    holders = _holders(client, blocks, {})
    workers = sorted(set(holders)) if mode == "fast" else [holders[0]]
    mine = {w: [b for b, h in enumerate(holders) if h == w or mode == "serialized"] for w in workers}
    num_vertices = int(walks.stats["num_vertices"])
    shards = min(len(workers), num_vertices) if table == "sharded" else 0  # a shard a worker
    spec = Word2VecSpec(num_vertices, walks.width, walks.block_rows, dim, window, negative, epochs, alpha, min_alpha,
                        min_count, sample, seed, mode,
                        bounds=tuple(num_vertices * s // shards for s in range(shards + 1)) if shards else ())
    held = dict(enumerate(workers))
    counted = [submit(client, _visits, spec, *[blocks[b] for b in mine[w]], workers=[w]) for w in workers]
    vocabulary = submit(client, _vocabulary, spec, *counted)
    tokens, vocabulary_size = gather_pinned(client, [submit(client, _sizes, vocabulary)], held, "vocabulary",
                                            "worker")[0]
    del counted
    spec = dataclasses.replace(spec, rounds=_rounds_per_epoch(spec, sync, tokens), replicas=len(workers))
    placed = {w: ([blocks[b] for b in mine[w]], [b * spec.block_rows for b in mine[w]]) for w in workers}
    total = sum(tokens) * epochs
    train = _sharded if shards else _replicated
    tables, losses = train(client, spec, placed, vocabulary, progress, total)
    seconds = time.perf_counter() - started
    stats = {"tokens": total, "seconds": seconds, "tokens_per_second": total / seconds if seconds else 0.0,
             "loss": losses, "workers": len(workers), "mode": mode, "table": table, "shards": max(shards, 1),
             "rounds_per_epoch": spec.rounds, "dim": dim, "num_vertices": num_vertices,
             "vocabulary": vocabulary_size, "device": walks.stats["device"]}
    return Embeddings(client, tables, _holders(client, tables, held), list(spec.bounds or (0, num_vertices)),
                      walks.vertex_ids, num_vertices, dim, stats)


SYNC_VISITS = 4  # sync="auto": a round lasts about this many visits of each vertex on each worker


PAIR_BYTES = 28  # a pair of a sharded table's round: its two ids, walk, positions and learning rate
PAIRS_AT_LEAST = 1 << 26  # bytes of a sharded round's pairs a worker may hold, however small its shard


def _rounds_per_epoch(spec: Word2VecSpec, sync: int | str, tokens: list[int]) -> int:
    """An epoch's rounds: one in the serialized mode (walk after walk), else ``sync``; ``"auto"``: 4 on one worker
    (for progress), and on more as many as keep a round to about ``SYNC_VISITS`` visits of each vertex on each
    worker, at least 4. The longer a round, the more the replicas drift apart before they are merged: on BlogCatalog
    on 2 workers (4.2 M tokens each), Macro-F1 0.157, 0.182, 0.202, 0.207 and 0.209 at 1, 4, 16, 64 and 256 rounds,
    against 0.213 on one (benchmarks/results/embeddings_blogcatalog_cpu_2workers.json). A sharded table has no
    replicas to drift: its rounds keep the pairs a worker makes in one (about ``window + 1`` a token) within the
    size of its shard of the two tables (or 64 MiB)."""
    if spec.mode == "serialized":
        return 1
    if sync != "auto":
        return int(sync)
    if spec.bounds:
        pairs = max(tokens) * (spec.window + 1) * PAIR_BYTES
        return max(1, -(-pairs // max(2 * 4 * spec.dim * -(-spec.num_vertices // spec.shards), PAIRS_AT_LEAST)))
    if len(tokens) == 1:
        return 4
    return max(4, -(-max(tokens) // (SYNC_VISITS * max(spec.num_vertices, 1))))


def _epochs(client, spec: Word2VecSpec, workers: list[str], progress: Callable | None, total: int,
            place: Callable) -> list[float]:
    """Every round of every epoch, placed by ``place(epoch, round)`` (a future of the round's loss, terms and tokens
    over every worker), each placed before the one before it is heard of (its sums gathered, ``progress`` told):
    the workers go on while the client listens. The mean loss of each epoch."""
    held = dict(enumerate(workers))
    sums = [[0.0, 0] for _ in range(spec.epochs)]  # each epoch's loss and terms
    done, unheard = 0, None  # the round placed last, not yet heard of

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
    hear(*unheard)
    return [loss / max(terms, 1) for loss, terms in sums]


def _replicated(client, spec: Word2VecSpec, placed: dict[str, tuple[list, list[int]]], vocabulary,
                progress: Callable | None, total: int) -> tuple[list, list[float]]:
    """The tables replicated on the workers of ``placed`` (a worker -> the futures of its blocks and their first
    walks), trained from their initial values: a future of the trained tables (one block), and the mean loss of each
    epoch. Between GPU workers with NCCL the replicas are summed on its data plane as each round ends, each worker
    keeping its own; otherwise a task merges them (:func:`_merged`), the tables travelling as Dask data."""
    workers = list(placed)
    tables = dict.fromkeys(workers, submit(client, _initial, spec, 0, spec.num_vertices, workers=[workers[0]]))
    with summing(client, workers) as nccl:
        def place(epoch: int, round_: int):
            nonlocal tables
            trained = [submit(client, _trained, spec, epoch, round_, vocabulary, tables[w], nccl, firsts, *blocks,
                              workers=[w]) for w, (blocks, firsts) in placed.items()]
            tables = (dict(zip(workers, trained, strict=True)) if nccl is not None
                      else dict.fromkeys(workers, submit(client, _merged, tables[workers[0]], *trained)))
            return submit(client, _sums, *trained)

        losses = _epochs(client, spec, workers, progress, total, place)
        wait_pinned(client, [tables[workers[0]]], dict(enumerate(workers)), "training", "worker")  # before the
        # communicator goes back
    return [tables[workers[0]]], losses


def _sharded(client, spec: Word2VecSpec, placed: dict[str, tuple[list, list[int]]], vocabulary,
             progress: Callable | None, total: int) -> tuple[list, list[float]]:
    """The tables cut in a shard a worker of ``placed`` (shard s on the s-th), trained from their initial values:
    the futures of the shards' ``syn0`` (a :class:`Table` each), and the mean loss of each epoch. Each round, every
    worker makes the pairs of its walks' slice (:func:`_pairs`), bucketed by the shards of their context and center,
    and sends each context shard's to its worker (:func:`_outbox`); then ``shards`` turns: in turn ``t`` the worker
    of shard ``a`` trains the pairs of its contexts whose centers are in shard ``(a + t) % shards`` against that
    shard's ``syn1``, which the turn before left on the next worker (:func:`_turn`). ``syn0`` stays where it is and
    is trained in place, a turn after the other."""
    workers = list(placed)
    shards = spec.shards
    owners = workers[:shards]  # shard a's worker (every worker, but where there are fewer vertices)
    tables = [submit(client, _initial, spec, spec.bounds[a], spec.bounds[a + 1], workers=[w])
              for a, w in enumerate(owners)]
    syn1 = [submit(client, _syn1, spec, a, workers=[w]) for a, w in enumerate(owners)]
    after: list = [None] * shards  # each worker's last turn: the next one waits for it (syn0 trained in place)

    def place(epoch: int, round_: int):
        nonlocal syn1
        made = [submit(client, _pairs, spec, epoch, round_, vocabulary, firsts, *blocks, workers=[w])
                for w, (blocks, firsts) in placed.items()]
        boxes = [[submit(client, _outbox, pairs, a, workers=[w]) for a in range(shards)]
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

    losses = _epochs(client, spec, workers, progress, total, place)
    trained = [submit(client, _finished, table, after[a], workers=[w])
               for a, (table, w) in enumerate(zip(tables, owners, strict=True))]
    wait_pinned(client, trained, dict(enumerate(workers)), "training", "worker")
    return trained, losses


def _holders(client, futures: list, held: dict[int, str]) -> list[str]:
    """The worker holding each of ``futures`` once they are made (a wait naming a worker of ``held`` that
    leaves)."""
    wait_pinned(client, futures, held, "training", "worker")
    who = who_has(client, futures)
    return [who[f.key][0] for f in futures]


def _itself(block):
    return block


# -- on a worker


def _visits(spec: Word2VecSpec, *blocks) -> np.ndarray:
    """How many times the walks of ``blocks`` visit each vertex (counted on the worker's device; int64 on the
    host)."""
    x = worker_xp()
    counts = x.zeros(spec.num_vertices, x.int64)
    for block in blocks:
        ids = x.asarray(block)
        counts += x.bincount(ids[ids >= 0], minlength=spec.num_vertices)
    return to_host(counts)


def _vocabulary(spec: Word2VecSpec, *counted: np.ndarray) -> Vocabulary:
    counts = np.sum(counted, axis=0)
    retained = (counts >= max(spec.min_count, 1))
    if not retained.any():
        raise GpipeValueError(f"'min_count' leaves no vertex to train: none of the walks' vertices is visited "
                              f"{spec.min_count} times, got {spec.min_count}")
    keep, tokens, trained = keep_table(counts, retained, spec.sample), [int(c.sum()) for c in counted], int(retained.sum())
    if not spec.bounds:
        cum = negative_table(counts, retained)
        return Vocabulary(keep, cum, *guide_table(cum), tokens, trained, [])
    shards = []  # a pair's negatives are drawn from its center's shard
    for lo, hi in zip(spec.bounds[:-1], spec.bounds[1:], strict=True):
        cum = negative_table(counts[lo:hi], retained[lo:hi])
        shards.append((cum, *guide_table(cum)))
    return Vocabulary(keep, np.zeros(0, np.int64), np.zeros(0, np.int64), 0, tokens, trained, shards)


def _sizes(vocabulary: Vocabulary) -> tuple[list[int], int]:
    return vocabulary.tokens, vocabulary.trained


def _initial(spec: Word2VecSpec, lo: int, hi: int) -> Table:
    """The initial tables of vertices ``lo .. hi - 1`` (all of them, or a shard's: its ``syn1`` made apart, by
    :func:`_syn1`, as it passes from worker to worker)."""
    x = worker_xp()
    syn0 = x.empty((hi - lo) * spec.dim, x.float32)
    INITIAL.launch(syn0=syn0, n=syn0.shape[0], dim=spec.dim, first=lo, key=spec.key)
    return Table(syn0.reshape(hi - lo, spec.dim), None if spec.bounds else x.zeros((hi - lo, spec.dim), x.float32))


@dataclasses.dataclass
class Slice:
    """The rows of a block in a round (:func:`_slices`): contiguous, the walk id of the first, the tokens before
    each in the round's order, and before the first (of the worker's, since its first epoch)."""

    rows: Any
    first_walk: int
    offset: Any
    done: int
    tokens: int


def _slices(x, spec: Word2VecSpec, epoch: int, round_: int, firsts: list[int], blocks) -> tuple[list[Slice], int]:
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


def _trained(spec: Word2VecSpec, epoch: int, round_: int, vocabulary: Vocabulary, table: Table,
             nccl: Summing | None, firsts: list[int], *blocks) -> Trained:
    """This worker's replica of ``table`` trained on round ``round_`` of ``epoch`` of its ``blocks`` (whose first
    walks are ``firsts``; :func:`_slices`); with ``nccl``, every worker's change to ``table`` summed into it.
    ``table`` is left as it is where other replicas' changes are added to it; a lone replica is trained in place
    (no task reads the round's start again, and a copy of an R-MAT 24 model is 17 GB more on the GPU)."""
    x = worker_xp()
    syn0, syn1 = (x.array(table.syn0), x.array(table.syn1)) if spec.replicas > 1 else (table.syn0, table.syn1)
    keep, cum, guide = x.asarray(vocabulary.keep), x.asarray(vocabulary.cum), x.asarray(vocabulary.guide)
    slices, mine = _slices(x, spec, epoch, round_, firsts, blocks)
    loss: float = 0
    terms = tokens = 0
    for piece in slices:
        rows = piece.rows.shape[0]
        out_loss, out_terms = x.zeros(rows, x.float64), x.zeros(rows, x.int64)
        train_kernel(spec.dim).launch(
            walks=piece.rows, rows=rows, width=spec.width, warps=1 if spec.mode == "serialized" else rows,
            first_walk=piece.first_walk, offset=piece.offset, done=piece.done, total=max(mine * spec.epochs, 1),
            epoch=epoch, syn0=syn0, syn1=syn1, dim=spec.dim, keep=keep, cum=cum, vocab=spec.num_vertices, guide=guide,
            shift=vocabulary.shift, window=spec.window, negative=spec.negative, key=spec.key, alpha=spec.alpha,
            min_alpha=spec.min_alpha, effective=x.empty(piece.rows.shape, x.int32), loss=out_loss, terms=out_terms)
        loss += float(out_loss.sum())
        terms += int(out_terms.sum())
        tokens += piece.tokens
    if nccl is not None:
        syn0 -= table.syn0
        syn1 -= table.syn1
        nccl.all_reduce([syn0, syn1])
        syn0 += table.syn0
        syn1 += table.syn1
    return Trained(syn0, syn1, loss, terms, tokens)


PAIR_FIELDS = ("context", "center", "walk", "context_at", "center_at", "alpha")
PAIR_DTYPES = (np.int32, np.int32, np.int64, np.int32, np.int32, np.float32)  # PAIR_BYTES in all
PAIRS_PER_WARP = 64  # a sharded turn's pairs a warp (a thread of the CPU twin) trains in order


@dataclasses.dataclass
class Pairs:
    """A round's pairs of a worker's walks for a sharded table (:func:`_pairs`), bucket ``a * shards + b`` (context
    in shard ``a``, center in shard ``b``) at ``starts[a * shards + b]`` of each of ``arrays`` (``PAIR_FIELDS``:
    ids less their shard's first, walk, positions, learning rate), and the tokens they came from; or the buckets
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
    """The pairs of round ``round_`` of ``epoch`` of this worker's ``blocks`` (:func:`_slices`), as ``_trained``
    would train them, each in its bucket: counted, then written (``gp_word2vec_pairs``)."""
    x = worker_xp()
    keep, bounds = x.asarray(vocabulary.keep), x.asarray(np.asarray(spec.bounds, np.int64))
    slices, mine = _slices(x, spec, epoch, round_, firsts, blocks)
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
                         bounds=bounds, shards=spec.shards, effective=x.empty(piece.rows.shape, x.int32), fill=fill,
                         cursor=cursor, **{f"pair_{name}": a for name, a in arrays.items()})
    return Pairs(arrays, starts, sum(piece.tokens for piece in slices))


def _outbox(pairs: Pairs, a: int) -> Pairs:
    """The buckets of context shard ``a`` of ``pairs`` (a copy: the round's pairs go once every shard's are out)."""
    shards = int(round(np.sqrt(pairs.starts.shape[0] - 1)))
    lo, hi = int(pairs.starts[a * shards]), int(pairs.starts[(a + 1) * shards])
    return Pairs({name: v[lo:hi].copy() for name, v in pairs.arrays.items()},
                 pairs.starts[a * shards:(a + 1) * shards + 1] - lo, 0)


def _tokens(*made: Pairs) -> int:
    return sum(p.tokens for p in made)


def _syn1(spec: Word2VecSpec, a: int) -> Turn:
    """Shard ``a``'s initial ``syn1``: zeros, as word2vec's."""
    x = worker_xp()
    return Turn(x.zeros((spec.bounds[a + 1] - spec.bounds[a], spec.dim), x.float32), 0.0, 0)


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


def _finished(table: Table, _after) -> Table:
    """Shard ``table`` once its worker's last turn is over."""
    return table


def _merged(start: Table, *trained: Trained) -> Table:
    """The tables that started a round plus each replica's change to them (one replica: itself)."""
    if len(trained) == 1:
        return trained[0]
    syn0, syn1 = start.syn0.copy(), start.syn1.copy()
    for t in trained:
        syn0 += t.syn0 - start.syn0
        syn1 += t.syn1 - start.syn1
    return Table(syn0, syn1)


def _sums(*trained: Trained) -> tuple[float, int, int]:
    return sum(t.loss for t in trained), sum(t.terms for t in trained), sum(t.tokens for t in trained)
