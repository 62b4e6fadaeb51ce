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

A sharded table (``table="sharded"``) is cut by vertex in one shard a worker
instead, and trained a block of (context shard, center shard) pairs at a time
(``_sharded.py``).
"""

from __future__ import annotations

import dataclasses
import numbers
import time
from collections.abc import Callable

import numpy as np

from .._validate import check_callable, check_choice, check_int, check_probability, check_seed
from ..backend import to_host
from ..errors import GpipeValueError
from ..runtime.calls import gather_pinned, submit, wait_pinned, who_has
from ..runtime.exchange import Summing, summing
from ..runtime.workers import worker_xp
from ..walks import WalkResult
from ._kernels import (
    INIT_STEP,
    PER_LANE,
    guide_table,
    keep_table,
    negative_table,
    train_kernel,
)
from ._result import Embeddings
from ._sharded import ROUND_AT_LEAST, WALK_BYTES, sharded
from ._training import Table, Training, Vocabulary, Word2VecSpec, initial, round_slices, train_epochs

MODES = ("fast", "serialized")
TABLES = ("replicated", "sharded")
MAX_DIM = 32 * PER_LANE[-1]  # a lane of the kernel's warp holds dim / 32 floats of a context's row and its gradient


@dataclasses.dataclass
class Trained(Table):
    """A worker's replica after a round, and the round's loss (the sum of the ``-log sigmoid`` terms), terms
    and tokens."""

    loss: float
    terms: int
    tokens: int


def word2vec(walks, dim: int = 128, window: int = 10, negative: int = 5, epochs: int = 1, *, alpha: float = 0.025,
             min_alpha: float = 0.0001, min_count: int = 0, sample: float = 0.0, seed: int = 0, mode: str = "fast",
             table: str = "replicated", shards: int | None = None, sync: int | str = "auto",
             progress: Callable | None = None) -> Embeddings:
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
        vertex in ``shards`` shards over the workers (for tables larger than one worker's memory). A sharded
        table is trained a block of (context shard, center shard) pairs at a time: a worker keeps its shards of
        ``syn0`` and trains the pairs of their contexts, in turn against every shard of ``syn1``, which pass from
        worker to worker as Dask data (GraphVite's schedule); a pair's negatives are drawn from its center's shard
        (unigram^0.75 within it), so no row is ever updated in two places and nothing is merged.
    shards : int, optional
        A sharded table's shards, shard ``s`` every ``shards``-th vertex from ``s`` (a sample of the vertices
        whatever the order of their ids: a pair's negatives come from its center's shard) on the ``s % W``-th of
        the ``W`` workers holding walks; default one a worker. The shards shape the training, so a given count
        trains the same way on any number of workers. The vectors come back in vertex ranges, one a shard.
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
        ``table``, ``shards``, ``exchange`` (how the workers' tables met: ``"nccl"``, ``"comms"`` (Dask data) or
        ``"none"``), ``rounds_per_epoch`` and ``vocabulary`` (the vertices trained).

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
    if shards is not None:
        shards = check_int("shards", shards, minimum=1)
        if table != "sharded":
            raise GpipeValueError(f"'shards' cuts a sharded table (table=\"sharded\"), got shards={shards} with "
                                  f"table={table!r}")
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
    if table == "sharded":
        shards = shards or min(len(workers), num_vertices)  # by default a shard a worker
    else:
        shards = 0
    spec = Word2VecSpec(num_vertices, walks.width, walks.block_rows, dim, window, negative, epochs, alpha, min_alpha,
                        min_count, sample, seed, mode, shards=shards)
    held = dict(enumerate(workers))
    counted = [submit(client, _visits, spec, *[blocks[b] for b in mine[w]], workers=[w]) for w in workers]
    vocabulary = submit(client, _vocabulary, spec, *counted)
    tokens, vocabulary_size = gather_pinned(client, [submit(client, _sizes, vocabulary)], held, "vocabulary",
                                            "worker")[0]
    del counted
    spec = dataclasses.replace(spec, rounds=_rounds_per_epoch(spec, sync, tokens), replicas=len(workers))
    placed = {w: ([blocks[b] for b in mine[w]], [b * spec.block_rows for b in mine[w]]) for w in workers}
    total = sum(tokens) * epochs
    train = sharded if shards else _replicated
    done = train(client, spec, placed, vocabulary, progress, total)
    seconds = time.perf_counter() - started
    stats = {"tokens": total, "seconds": seconds, "tokens_per_second": total / seconds if seconds else 0.0,
             "loss": done.losses, "workers": len(workers), "mode": mode, "table": table, "shards": max(shards, 1),
             "exchange": done.exchange, "rounds_per_epoch": spec.rounds, "dim": dim, "num_vertices": num_vertices,
             "vocabulary": vocabulary_size, "device": walks.stats["device"]}
    return Embeddings(client, done.tables, _holders(client, done.tables, held), done.bounds, walks.vertex_ids, dim,
                      stats)


SYNC_VISITS = 4  # sync="auto": a round lasts about this many visits of each vertex on each worker


def _rounds_per_epoch(spec: Word2VecSpec, sync: int | str, tokens: list[int]) -> int:
    """An epoch's rounds: one in the serialized mode (walk after walk), else ``sync``; ``"auto"``: 4 on one worker
    (for progress), and on more as many as keep a round to about ``SYNC_VISITS`` visits of each vertex on each
    worker, at least 4. The longer a round, the more the replicas drift apart before they are merged: on BlogCatalog
    on 2 workers (4.2 M tokens each), Macro-F1 0.157, 0.182, 0.202, 0.207 and 0.209 at 1, 4, 16, 64 and 256 rounds,
    against 0.213 on one (benchmarks/results/embeddings_blogcatalog_cpu_2workers.json). A sharded table has no
    replicas to drift, but its blocks are trained a turn after the other, so a round that is long trains a block's
    pairs long before or after the others' (one round an epoch: BlogCatalog's Macro-F1 0.202 on 2 shards, against
    0.216 at 102): it takes as many rounds as the replicas, and more where a round's walks, which every shard's
    worker holds, would pass the size of its shard of the two tables (or 64 MiB)."""
    if spec.mode == "serialized":
        return 1
    if sync != "auto":
        return int(sync)
    visits = max(4, -(-max(tokens) // (SYNC_VISITS * max(spec.num_vertices, 1))))
    if spec.shards:
        walks = sum(tokens) * WALK_BYTES  # every worker's, on each shard's worker
        return max(visits, -(-walks // max(2 * 4 * spec.dim * spec.rows(0), ROUND_AT_LEAST)))
    return 4 if len(tokens) == 1 else visits


def _replicated(client, spec: Word2VecSpec, placed: dict[str, tuple[list, list[int]]], vocabulary,
                progress: Callable | None, total: int) -> Training:
    """The tables replicated on the workers of ``placed`` (a worker -> the futures of its blocks and their first
    walks), trained from their initial values (a :class:`Training` of one table, all the vertices). Between GPU
    workers with NCCL the replicas are summed on its data plane as each round ends, each worker keeping its own;
    otherwise a task merges them (:func:`_merged`), the tables travelling as Dask data."""
    workers = list(placed)
    tables = dict.fromkeys(workers, submit(client, initial, spec, 0, workers=[workers[0]]))
    with summing(client, workers) as nccl:
        def place(epoch: int, round_: int):
            nonlocal tables
            trained = [submit(client, _trained, spec, epoch, round_, vocabulary, tables[w], nccl, firsts, *blocks,
                              workers=[w]) for w, (blocks, firsts) in placed.items()]
            tables = (dict(zip(workers, trained, strict=True)) if nccl is not None
                      else dict.fromkeys(workers, submit(client, _merged, tables[workers[0]], *trained)))
            return submit(client, _sums, *trained)

        losses = train_epochs(client, spec, workers, progress, total, place)
        wait_pinned(client, [tables[workers[0]]], dict(enumerate(workers)), "training", "worker")  # before the
        # communicator goes back
        exchange = "none" if len(workers) == 1 else "nccl" if nccl is not None else "comms"
    return Training([tables[workers[0]]], [0, spec.num_vertices], losses, exchange)


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
    keep, tokens = keep_table(counts, retained, spec.sample), [int(c.sum()) for c in counted]
    trained = int(retained.sum())
    if not spec.shards:
        cum = negative_table(counts, retained)
        return Vocabulary(keep, cum, *guide_table(cum), tokens, trained, [])
    shards = []  # a pair's negatives are drawn from its center's shard
    for a in range(spec.shards):
        cum = negative_table(counts[a::spec.shards], retained[a::spec.shards])
        shards.append((cum, *guide_table(cum)))
    return Vocabulary(keep, np.zeros(0, np.int64), np.zeros(0, np.int64), 0, tokens, trained, shards)


def _sizes(vocabulary: Vocabulary) -> tuple[list[int], int]:
    return vocabulary.tokens, vocabulary.trained


def _trained(spec: Word2VecSpec, epoch: int, round_: int, vocabulary: Vocabulary, table: Table,
             nccl: Summing | None, firsts: list[int], *blocks) -> Trained:
    """This worker's replica of ``table`` trained on round ``round_`` of ``epoch`` of its ``blocks`` (whose first
    walks are ``firsts``; :func:`~._training.round_slices`); with ``nccl``, every worker's change to ``table``
    summed into it. ``table`` is left as it is where other replicas' changes are added to it; a lone replica is
    trained in place (no task reads the round's start again, and a copy of an R-MAT 24 model is 17 GB more on the
    GPU)."""
    x = worker_xp()
    syn0, syn1 = (x.array(table.syn0), x.array(table.syn1)) if spec.replicas > 1 else (table.syn0, table.syn1)
    keep, cum, guide = x.asarray(vocabulary.keep), x.asarray(vocabulary.cum), x.asarray(vocabulary.guide)
    slices, mine = round_slices(x, spec, epoch, round_, firsts, blocks)
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
            min_alpha=spec.min_alpha, shards=1, context_shard=0, center_shard=0,
            effective=x.empty(piece.rows.shape, x.int32), loss=out_loss, terms=out_terms)
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
