"""Path pieces: what a walker wrote while it stayed inside one partition.

A piece set is a dict of arrays ``walk_id`` (int64), ``start`` (int32, the step
of the piece's first vertex), ``length`` (int32), ``offset`` (int64) and a
``flat`` vertex buffer. Step kernels write pieces, or a walk's vertices straight to the rows of the worker
making its block (:class:`OwnedRows`); the assemble tasks scatter the pieces into blocks of the
``(walks, length + 1)`` result. CUDA: ``kernels/pieces.cu``.
"""

from __future__ import annotations

import numpy as np

from ..backend import cpu_kernel, device_of, free_memory, minus_ones, prange, to_device, to_host, xp
from ..kernels import Arg, Kernel


def regions(x, steps, length: int, room: int | None = None):
    """Offsets of each walker's output region and the total size.

    A region has room for the walker's vertex now and every step it has left,
    or for ``room`` vertices when that is less.
    """
    room = length + 1 - steps if room is None else x.minimum(length + 1 - steps, room)
    return starts(x, room)


def starts(x, sizes) -> tuple:
    """Where each of consecutive ranges of ``sizes`` starts (int64, an array of its own: a view into the running
    total would be copied again by every step's kept outputs) and their total."""
    ends = x.cumsum(sizes, dtype=x.int64)
    return ends - sizes, int(ends[-1]) if sizes.shape[0] else 0


def compact(pieces: dict, always: bool = False) -> dict:
    """The same pieces over a flat buffer with no gaps (when the gaps are most of it, or ``always``)."""
    x = xp(device_of(pieces["flat"]))
    length = pieces["length"]
    new_offset, total = starts(x, length)
    if not always and 2 * total >= pieces["flat"].shape[0]:
        return pieces
    flat = x.empty(total, dtype=pieces["flat"].dtype)
    COPY_PIECES.launch(n=length.shape[0], offset=pieces["offset"], length=length, new_offset=new_offset,
                       src=pieces["flat"], dst=flat)
    return {**pieces, "offset": new_offset, "flat": flat}


def concat(x, piece_sets: list[dict], dtype) -> dict:
    """One piece set from many (offsets shifted onto the concatenated buffer)."""
    if not piece_sets:
        return {"walk_id": x.zeros(0, x.int64), "start": x.zeros(0, x.int32), "length": x.zeros(0, x.int32),
                "offset": x.zeros(0, x.int64), "flat": x.zeros(0, dtype)}
    if len(piece_sets) == 1:
        return piece_sets[0]
    shifts = np.cumsum([0] + [p["flat"].shape[0] for p in piece_sets[:-1]])
    out = {k: x.concatenate([p[k] for p in piece_sets]) for k in ("walk_id", "start", "length", "flat")}
    out["offset"] = x.concatenate([p["offset"] + int(s) for p, s in zip(piece_sets, shifts, strict=True)])
    return out


GROUPING_BATCHES = 8  # a worker's pieces are grouped by block in this many batches at least,
GROUPING_ROOM = 16  # each batch at most this share of the device's free memory


def group_by_block(x, piece_sets: list[dict], block_rows: int, n_blocks: int, dtype) -> dict[int, dict]:
    """Pieces grouped by output block (walk_id // block_rows), each group over its own flat buffer.

    In batches of piece sets taken out of ``piece_sets`` (emptied as it goes), each set freed once its batch is
    split: grouping holds a batch about three times (joined, sorted, split), never all of a worker's pieces
    twice (each block's share of a batch is copied out of it, so the batch goes once it is split: with views into
    it, every batch stayed until the last block was joined, twice the pieces at the end).
    A batch is at most a :data:`GROUPING_BATCHES`-th of them and a :data:`GROUPING_ROOM`-th of the device's free
    memory: R-MAT 24's 10 walks per vertex over 2 H200s leave 35-40 GB of pieces in each of a GPU's two partitions
    (1.2-1.4 G pieces of 1.3 vertices), and sorting a quarter of them at once failed for want of device memory
    (thrust's ``std::bad_alloc``) with 13-27 GB free; in batches of 2-3 GB the same runs assembled. Since a run
    gathers the pieces of a worker's blocks together (``_gather``), an eighth: a quarter of them all held 1.5
    times them at once on a CPU worker. Each block is joined alone at the end. Sets in host memory whose pieces
    are in walk order, each at a larger offset than the one before (a replicated run's, spilled), are cut into
    their blocks' ranges instead, and each block joined from them: one copy of their bytes, not three.
    """
    if x is np:
        blocks = [p["walk_id"] // block_rows for p in piece_sets]
        if all(_in_order(p, block) for p, block in zip(piece_sets, blocks, strict=True)):
            return _cut_in_order(piece_sets, blocks, n_blocks, dtype)
        del blocks
    size = [sum(int(p[k].nbytes) for k in ("walk_id", "start", "length", "offset", "flat")) for p in piece_sets]
    cap = max(1, min(sum(size) // GROUPING_BATCHES, free_memory(x) // GROUPING_ROOM))
    split: dict[int, list[dict]] = {b: [] for b in range(n_blocks)}
    while piece_sets:
        batch, held = [piece_sets.pop()], size.pop()
        while piece_sets and held + size[-1] <= cap:
            batch.append(piece_sets.pop())
            held += size.pop()
        pieces = concat(x, batch[::-1], dtype)  # in the order they came
        del batch
        block = pieces["walk_id"] // block_rows
        ordered = {k: pieces[k] for k in ("walk_id", "start", "length", "offset")}
        if block.shape[0] and bool((block[1:] < block[:-1]).any()):  # (a replicated run's are in order already)
            order = x.argsort(block)
            ordered = {k: v[order] for k, v in ordered.items()}
            del order
        for b, c, e in _block_ranges(x, block, n_blocks):  # each block's copy: a view would hold the whole batch
            split[b].append(compact(dict({k: v[c:e] if k == "offset" else v[c:e].copy() for k, v in ordered.items()},
                                         flat=pieces["flat"]), always=True))
        del pieces, block, ordered
    return {b: concat(x, split.pop(b), dtype) for b in range(n_blocks)}


def _block_ranges(x, block, n_blocks: int) -> list[tuple[int, int, int]]:
    """``(b, first, end)``: the range of pieces in block ``b``, for each block present in ``block`` (non-decreasing
    once ordered)."""
    counts = to_host(x.bincount(block, minlength=n_blocks))
    ends = np.cumsum(counts)
    return [(int(b), int(ends[b] - counts[b]), int(ends[b])) for b in np.flatnonzero(counts)]


def _in_order(pieces: dict, block) -> bool:
    """Whether a host piece set's blocks (``block``) and offsets never decrease: each block's pieces are one range of
    it."""
    offset = pieces["offset"]
    return bool((block[1:] >= block[:-1]).all() and (offset[1:] >= offset[:-1] + pieces["length"][:-1]).all())


def _cut_in_order(piece_sets: list[dict], blocks: list, n_blocks: int, dtype) -> dict[int, dict]:
    """:func:`group_by_block` of host piece sets in order (:func:`_in_order`; each set's blocks in ``blocks``): each
    set cut into its blocks' ranges (views), then each block's ranges joined (and compacted where gaps are most of
    them)."""
    cut: dict[int, list[dict]] = {b: [] for b in range(n_blocks)}
    for pieces, block in zip(piece_sets, blocks, strict=True):
        for b, c, e in _block_ranges(np, block, n_blocks):
            lo, hi = int(pieces["offset"][c]), int(pieces["offset"][e - 1] + pieces["length"][e - 1])
            cut[b].append(dict({k: pieces[k][c:e] for k in ("walk_id", "start", "length")},
                               offset=pieces["offset"][c:e] - lo, flat=pieces["flat"][lo:hi]))
    piece_sets.clear()
    blocks.clear()
    return {b: compact(concat(np, cut.pop(b), dtype)) for b in range(n_blocks)}


class OwnedRows:
    """The rows of the output blocks one worker makes (blocks ``b`` with ``b % ranks == rank``; see ``_gather``) in
    one buffer, -1 where nothing was written: its ``j``-th block at rows ``j * blocks.rows`` onwards.

    A partitioned walk run's step kernels may write a walk's vertices straight to its row while its walker is on
    the worker making its block (``row``), and pieces for the others; what arrives in pieces is scattered in
    (:meth:`scatter`), each piece straight to its row (no sort by block, no per-block copies: making a
    2-partition R-MAT 23 walk's blocks so on one H200 took 0.34 s where grouping them took 1.15-1.34 s).
    """

    def __init__(self, array, blocks, ranks: int, rank: int, block_ids: range | None = None):
        self.array, self.blocks, self.ranks, self.rank = array, blocks, ranks, rank
        self.block_ids = self.owned(blocks, ranks, rank) if block_ids is None else block_ids  # those made of them

    @classmethod
    def made(cls, where, blocks, ranks: int, rank: int) -> OwnedRows | None:
        """Rows of -1 for the blocks of ``rank`` of ``ranks``, on the device of array module ``where(their
        bytes)``; None where it says None."""
        count = sum(min(blocks.rows, blocks.walks - b * blocks.rows) for b in cls.owned(blocks, ranks, rank))
        x = where(count * blocks.width * np.dtype(blocks.dtype).itemsize)
        return None if x is None else cls(minus_ones(x, (count, blocks.width), blocks.dtype), blocks, ranks, rank)

    @staticmethod
    def owned(blocks, ranks: int, rank: int) -> range:
        """The blocks of ``rank`` of ``ranks``, in the order of their rows."""
        return range(rank, blocks.count, ranks)

    def row(self, walk_id):
        """The row of each walk of ``walk_id`` (of this worker's blocks): the walk's id itself where one worker makes
        every block."""
        if self.ranks == 1:
            return walk_id
        rows = self.blocks.rows
        return walk_id // rows // self.ranks * rows + walk_id % rows

    def scatter(self, piece_sets: list[dict]) -> None:
        """Every piece of ``piece_sets`` (emptied as it goes; all of this worker's blocks) written to its row."""
        device = device_of(self.array)
        while piece_sets:
            pieces = {k: to_device(v, device) for k, v in piece_sets.pop().items()}
            SCATTER_PIECES.launch(n=pieces["walk_id"].shape[0], walk_id=self.row(pieces["walk_id"]),
                                  start=pieces["start"], length=pieces["length"], offset=pieces["offset"],
                                  flat=pieces["flat"].astype(self.blocks.dtype, copy=False), base=0,
                                  width=self.blocks.width, out=self.array.reshape(-1))
            del pieces

    def by_block(self) -> dict:
        """``b -> (rows, width)`` view of each block made of these rows (:attr:`block_ids`: those of this worker,
        unless every walk's rows here make only some)."""
        rows = self.blocks.rows
        return {b: self.array[b // self.ranks * rows:(b // self.ranks + 1) * rows] for b in self.block_ids}


def owned_blocks(rows: OwnedRows, piece_sets: list[dict]) -> dict:
    """The blocks of ``rows`` (``b -> view``) once every piece of ``piece_sets`` is written there (the sets
    emptied): a gathered run's assembly."""
    rows.scatter(piece_sets)
    return rows.by_block()


def scatter(x, pieces: dict, base: int, rows: int, width: int, dtype):
    """A ``(rows, width)`` block of walks ``base..base+rows-1``, -1 where nothing was written."""
    out = minus_ones(x, (rows, width), dtype)
    n = pieces["walk_id"].shape[0]
    SCATTER_PIECES.launch(n=n, walk_id=pieces["walk_id"], start=pieces["start"], length=pieces["length"],
                          offset=pieces["offset"], flat=pieces["flat"].astype(dtype, copy=False), base=base,
                          width=width, out=out.reshape(-1))
    return out


@cpu_kernel(parallel=True)
def _copy_pieces_cpu(n, offset, length, new_offset, src, dst):
    for i in prange(n):
        for j in range(length[i]):
            dst[new_offset[i] + j] = src[offset[i] + j]


@cpu_kernel(parallel=True)
def _scatter_pieces_cpu(n, walk_id, start, length, offset, flat, base, width, out):
    for i in prange(n):
        row = (walk_id[i] - base) * width + start[i]
        for j in range(length[i]):
            out[row + j] = flat[offset[i] + j]


COPY_PIECES = Kernel("pieces.cu", "gp_copy_pieces", twin=_copy_pieces_cpu, items="n", args=(
    Arg("n", "i64"), Arg("offset", "i64[n]"), Arg("length", "i32[n]"), Arg("new_offset", "i64[n]"), Arg("src", "IdT[]"),
    Arg("dst", "IdT[]", out=True)))
SCATTER_PIECES = Kernel("pieces.cu", "gp_scatter_pieces", twin=_scatter_pieces_cpu, items="n", args=(
    Arg("n", "i64"), Arg("walk_id", "i64[n]"), Arg("start", "i32[n]"), Arg("length", "i32[n]"), Arg("offset", "i64[n]"),
    Arg("flat", "IdT[]"), Arg("base", "i64"), Arg("width", "i32"), Arg("out", "IdT[rows*width]", out=True)))
