"""A walk-shaped run's outputs sent, as its supersteps end, to the workers that make their output blocks: the
rows of every walk, where each worker held them (:func:`merge_rows`), and pieces (:func:`gather`).

Block ``b`` of the output (walks ``b * rows`` onwards) is made by the ``b % W``-th
of the run's ``W`` workers in sorted order, as :func:`assemble_blocks` places it.
A walk's pieces lie on every worker its walker passed through; before this,
each block's task fetched the others' pieces through Dask's comms, a message
per block and partition (R-MAT 24, 10 walks per vertex, 4 partitions on 2 H200s:
58 s to assemble 54 GB of walks). Gathering sends them on the run's own exchange
transport (NCCL between GPU workers) in rounds. In each, every rank takes a
batch of its piece sets (a bounded share of its free memory and of its pieces), orders the pieces
by the rank making their block, lays their vertices out in that order, and
sends each rank its share as one payload, keeping its own. A round's header
(int64 words) says how many pieces and vertices each rank sends each rank, and
whether it has more to send; the rounds go on until no rank has. A payload
holds ``walk_id``, ``start``, ``length`` and the vertices, each array starting
on an ``ALIGN``-byte offset. Afterwards every piece of a block is on its block's
worker, kept with its first partition.
"""

from __future__ import annotations

import time

import numpy as np

from ..backend import device_of, free_memory, to_device, to_host, xp
from ..errors import GpipeError
from . import _pieces
from ._packing import aligned, packed, viewed
from ._run import nbytes
from ._spec import OutputBlocks

ROOM = 16  # a round's batch is at most this share of the free memory (a round holds it about five times)
WIDE = {"walk_id": np.dtype(np.int64), "start": np.dtype(np.int32), "length": np.dtype(np.int32)}  # in a worker


def owner(walk_id, blocks: OutputBlocks, ranks: int):
    """The rank making the block of each walk of ``walk_id``."""
    return (walk_id // blocks.rows) % ranks


def wire(blocks: OutputBlocks) -> dict[str, np.dtype]:
    """The dtypes a piece's fields travel as in a run of ``blocks``, as narrow as its walks and their width allow
    (:data:`WIDE` in a worker): ``walk_id`` int32 up to 2**31 walks, ``start`` and ``length`` int16 for rows
    narrower than 2**15; a piece of R-MAT 24 (1.3 vertices) in 13 bytes, not 21."""
    steps = np.dtype(np.int16 if blocks.width < 2**15 else np.int32)
    return {"walk_id": np.dtype(np.int32 if blocks.walks <= 2**31 else np.int64), "start": steps, "length": steps,
            "flat": np.dtype(blocks.dtype)}


def places(pieces: int, vertices: int, blocks: OutputBlocks) -> tuple[list[tuple[str, np.dtype, int, int]], int]:
    """Where each array of a payload of ``pieces`` pieces holding ``vertices`` vertices lies (``_packing.aligned``):
    ``[(name, dtype, offset, count)]``, and the payload's bytes."""
    return aligned((name, kind, vertices if name == "flat" else pieces) for name, kind in wire(blocks).items())


def gather(run, exchange, blocks: OutputBlocks, part: int, superstep: int, limit) -> dict:
    """Send every piece set of ``run`` here to the ranks making its blocks and keep those sent here with partition
    ``part``, in rounds numbered from ``superstep`` on ``exchange``'s transport; ``limit`` as ``Run.add_pieces``
    takes it. Returns the bytes sent, the bytes spilled and the seconds taken."""
    t0 = time.perf_counter()
    x = xp(exchange.device)
    ranks, me = len(exchange.workers), exchange.rank
    sets = run.take_pieces()
    sizes = [nbytes(s) for s in sets]
    # batches a GROUPING_BATCHES-th of the pieces at most: the sets they make are those the assembly groups by
    # block one at a time (two, each half the pieces, held 2.1 times them at once on a CPU worker)
    cap = max(1, min(sum(sizes) // _pieces.GROUPING_BATCHES, free_memory(x) // ROOM))
    sent = spilled = 0
    while True:
        batch: list = []
        held = 0
        while sets and (not batch or held + sizes[0] <= cap):
            batch.append({k: to_device(v, exchange.device) for k, v in sets.pop(0).items()})
            held += sizes.pop(0)
        shares = _split(x, batch, blocks, ranks) if batch else [None] * ranks
        del batch
        words = np.zeros(2 * ranks + 1, np.int64)
        for r, share in enumerate(shares):
            if share is not None:
                words[r], words[ranks + r] = share["walk_id"].shape[0], share["flat"].shape[0]
        words[-1] = bool(sets)
        payloads = {r: _pack(x, share, blocks) for r, share in enumerate(shares) if r != me and share is not None}
        local = shares[me]
        del shares

        def expected(matrix: np.ndarray) -> dict[int, int]:
            return {r: places(int(row[me]), int(row[ranks + me]), blocks)[1]
                    for r, row in enumerate(matrix) if r != me and row[me]}

        exchange.watch.start()
        matrix, received = exchange.swap(superstep, words, payloads, expected)
        sent += sum(int(p.nbytes) for p in payloads.values())
        del payloads
        if local is not None:
            spilled += run.add_pieces(part, local, limit)
        del local
        for r in sorted(received):
            pieces = _unpack(received.pop(r), int(matrix[r, me]), int(matrix[r, ranks + me]), blocks,
                             exchange.workers[r])
            spilled += run.add_pieces(part, pieces, limit)
        superstep += 1
        if not matrix[:, -1].any():
            return {"sent": sent, "spilled": spilled, "seconds": time.perf_counter() - t0}


def merge_rows(run, exchange, blocks: OutputBlocks, superstep: int) -> dict:
    """Make this rank's blocks from the rows of every walk its steps wrote (``run.rows``, over every block: see
    ``_advance._keep_rows``) and the peers': in rounds numbered from ``superstep``, each rank sends each peer the
    rows of the peer's blocks as it wrote them, whole blocks in order, at most a ``ROOM``-th of its free memory a
    round; the receiver keeps the larger of each cell (a cell is written on one rank, -1 on the others). The
    run's rows become this rank's blocks alone (``OwnedRows``; where there is no room to copy them out now, those
    of every walk's rows), the others' let go. Returns the bytes sent, the bytes spilled (none), the seconds taken
    and the rounds.

    A round's header: the blocks sent to each rank, and whether more are to come. Every vertex stays where its step
    wrote it until this, with no piece made, grouped or scattered: each rank sends ``ranks - 1`` cells for each
    vertex it wrote (4 bytes each, int32 ids), where R-MAT 24's pieces of 1.3 vertices take about 10 bytes a
    vertex (:func:`wire`) and four passes over them."""
    t0 = time.perf_counter()
    x = xp(exchange.device)
    ranks, me = len(exchange.workers), exchange.rank
    every = run.rows.by_block()
    owned = _pieces.OwnedRows.owned(blocks, ranks, me)
    try:  # this rank's blocks in rows of their own, so that the others' go once sent
        own = _pieces.OwnedRows.made(lambda nbytes: x, blocks, ranks, me)
        for b, block in own.by_block().items():
            block[...] = every[b]
    except MemoryError:  # (CuPy's out of memory is one) no room now: its blocks stay in every walk's rows
        own = _pieces.OwnedRows(run.rows.array, blocks, 1, 0, block_ids=owned)
    mine = own.by_block()
    run.keep_rows(own if mine else None)  # a rank making no block keeps nothing, and its run leaves
    going = {r: [every.pop(b) for b in _pieces.OwnedRows.owned(blocks, ranks, r)] for r in range(ranks) if r != me}
    del every
    coming = {r: list(mine) for r in going}  # each peer sends this rank's blocks, in order
    cap = max(1, free_memory(x) // ROOM // max(1, ranks - 1))
    sent = rounds = 0
    while True:
        payloads, words = {}, np.zeros(ranks + 1, np.int64)
        for r, queue in going.items():
            k, held = 0, 0
            while k < len(queue) and (k == 0 or held + queue[k].nbytes <= cap):
                held += queue[k].nbytes
                k += 1
            if k:
                taken, going[r] = queue[:k], queue[k:]
                payloads[r] = (taken[0] if k == 1 else x.concatenate([a.reshape(-1) for a in taken])).reshape(-1) \
                    .view(x.uint8)
                words[r] = k
        words[-1] = any(going.values())

        def expected(matrix: np.ndarray) -> dict[int, int]:
            return {r: sum(mine[b].nbytes for b in coming[r][:int(row[me])])
                    for r, row in enumerate(matrix) if r != me and row[me]}

        exchange.watch.start()
        matrix, received = exchange.swap(superstep, words, payloads, expected)
        sent += sum(int(p.nbytes) for p in payloads.values())
        del payloads
        for r in sorted(received):
            cells = received.pop(r).view(blocks.dtype)
            k = int(matrix[r, me])
            for b in coming[r][:k]:
                block = mine[b]
                x.maximum(block, cells[:block.size].reshape(block.shape), out=block)
                cells = cells[block.size:]
            coming[r] = coming[r][k:]
        superstep += 1
        rounds += 1
        if not matrix[:, -1].any():
            return {"sent": sent, "spilled": 0, "seconds": time.perf_counter() - t0, "rounds": rounds}


def _split(x, batch: list[dict], blocks: OutputBlocks, ranks: int) -> list[dict | None]:
    """A batch of piece sets as one piece set per rank (None where it has none for it): its pieces, in the order
    of the rank making their block, over one flat buffer laid out in that order (views into it)."""
    pieces = _pieces.concat(x, batch, blocks.dtype)
    batch.clear()
    rank = owner(pieces["walk_id"], blocks, ranks)
    picked = [x.flatnonzero(rank == r) for r in range(ranks)]  # a pass per rank, not a sort of the pieces
    del rank
    counts = np.array([p.shape[0] for p in picked], np.int64)
    order = x.concatenate(picked)
    del picked
    ordered = {k: pieces[k][order] for k in ("walk_id", "start", "length", "offset")}
    del order
    ordered = _pieces.compact({**ordered, "flat": pieces["flat"].astype(blocks.dtype, copy=False)}, always=True)
    del pieces
    ends = np.cumsum(counts)
    present = np.flatnonzero(counts)
    firsts, lasts = x.asarray(ends[present] - counts[present]), x.asarray(ends[present] - 1)
    bounds = to_host(x.stack([ordered["offset"][firsts], ordered["offset"][lasts] + ordered["length"][lasts]]))
    shares: list[dict | None] = [None] * ranks
    for r, lo, hi in zip(present, *bounds, strict=True):
        c, e, lo, hi = int(ends[r] - counts[r]), int(ends[r]), int(lo), int(hi)
        shares[r] = ({k: ordered[k][c:e] for k in ("walk_id", "start", "length")}
                     | {"offset": ordered["offset"][c:e] - lo, "flat": ordered["flat"][lo:hi]})
    return shares


def _pack(x, share: dict, blocks: OutputBlocks):
    """A rank's share as one payload (see :func:`places`), each field cast to its wire type as it is copied in."""
    return packed(x, *places(share["walk_id"].shape[0], share["flat"].shape[0], blocks), share)


def _unpack(payload, pieces: int, vertices: int, blocks: OutputBlocks, sender: str) -> dict:
    """The piece set in a payload from ``sender`` said to hold ``pieces`` pieces of ``vertices`` vertices (its
    fields widened back to :data:`WIDE`, each an array of its own)."""
    spots, size = places(pieces, vertices, blocks)
    if payload.shape[0] != size:
        raise GpipeError(f"pieces from worker {sender} arrived as {payload.shape[0]} bytes where their header said "
                         f"{size} ({pieces} pieces of {vertices} vertices)")
    out = {name: a.astype(WIDE.get(name, a.dtype)) for name, a in viewed(payload, spots).items()}  # copies: the
    # payload goes
    out["offset"], total = _pieces.starts(xp(device_of(payload)), out["length"])
    if total != vertices:
        raise GpipeError(f"pieces from worker {sender} arrived damaged: their lengths add up to {total} vertices, "
                         f"their header said {vertices}")
    return out

