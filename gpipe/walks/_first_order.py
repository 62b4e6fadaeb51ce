"""First-order step kernel: DeepWalk (uniform or weighted), walks with jump, walks with restart.

CUDA in ``kernels/walk_first_order.cu``, CPU twin here; the same random stream. The walk is written once
(:func:`_walk_one`, CUDA's ``gp_first_order_walk``) over a graph (``_graphs``): a static partition here, a dynamic
graph's snapshot in ``_dynamic``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _rng
from .._search import range_of
from ..backend import cpu_kernel, prange, to_host
from ..kernels import Arg, Kernel
from ..runtime import Grouped, Run, Span, StepSpec, step_kernel
from ..runtime.workers import worker_xp
from ._common import uniform_vertex
from ._graphs import DEFINES, NO_CDF, PICK_ALIAS, PICK_UNIFORM, Csr, degree, head, pick, start

TELEPORT = {"none": 0, "uniform": 1, "source": 2}  # the kernel's TELEPORT_NONE, _UNIFORM, _SOURCE (its defines)
_NONE, _UNIFORM = TELEPORT["none"], TELEPORT["uniform"]


@dataclass(frozen=True)
class FirstOrder:
    """A first-order walk's parameters: at each step, teleport with probability ``alpha`` (to a uniform vertex of
    ``num_vertices``, or to the walk's source, as ``teleport`` says), else move to an out-neighbor."""

    weighted: bool
    alpha: float
    teleport: str  # a key of TELEPORT
    num_vertices: int


STAGE = 16  # the most vertices a walker writes as pieces in one routed advance (kernels/walk_first_order.cu's STAGE)


@cpu_kernel()
def most_pieces(per: int) -> int:
    """The most pieces a walker makes in one routed advance, sectors of ``per`` ids: its carried cells and STAGE
    more ids span that many sectors."""
    return (per - 1 + STAGE) // per + 1


# What a walker writes outside its row in one routed advance, in 4-byte ids: its pieces' cells (STAGE and its
# sector's earlier ones) and their records (walk id, start, cells, offset: 24 bytes each). StepSpec.routed_room: a
# partition's walkers are advanced in batches whose pieces take at most a quarter of the output limit.
ROUTED_ROOM = STAGE + 32 // 4 - 1 + most_pieces.py_func(32 // 4) * 24 // 4


def sector_fields(g) -> tuple[tuple, tuple]:
    """The walker fields of a first-order walk on ``g`` (a graph cut in partitions on GPU workers) that carry a
    walker's partial sector of its row between the partitions of a worker (:data:`SECTOR`, see ``_advance_routed``),
    and their spans: none of them is carried to a peer, so each travels there in no bits (and arrives as 0: carried
    none). None on CPU workers, whose caches merge a row's partial writes: there the fields' 33 bytes a walker
    through the inboxes cost (2 partitions of R-MAT 14: 1.02-1.06 s of kernels against 0.69-0.78 s) and saved
    nothing."""
    if g.mode != "partitioned" or g.num_partitions == 1 or g.device != "gpu":
        return (), ()
    return SECTOR_FIELDS, tuple(Span(name, 0, 0) for name, _, _ in SECTOR_FIELDS)


def advance_first_order(part, walkers: dict, spec: StepSpec, run: Run):
    """Move every walker while it stays inside ``part``: teleport with probability ``alpha``, else to a neighbor.

    On a partition of a graph cut in several, the kernel also writes each walk's vertices to its row on the worker
    making its block, or lays them out as pieces, and the walkers that move on (:func:`_advance_routed`): at two
    partitions or more about every other step leaves, and that bookkeeping, not the steps, was most of an
    advance.
    """
    if part.whole:
        return _advance_whole(part, walkers, spec, run)
    return _advance_routed(part, walkers, spec, run)


def _graph_args(x, part, spec: StepSpec) -> dict:
    """The arguments both kernels take from the partition and the walk."""
    walk: FirstOrder = spec.params
    weighted = walk.weighted  # through the vertices' alias tables: one word a step (the CDF's search took ~log d)
    return dict(indptr=part.indptr, indices=part.indices, table=part.alias() if weighted else x.empty(0, x.uint64),
                weighted=PICK_ALIAS if weighted else PICK_UNIFORM, lo=part.lo, hi=part.hi,
                num_vertices=walk.num_vertices, key=spec.key, length=spec.length, alpha=walk.alpha,
                teleport=TELEPORT[walk.teleport])


@step_kernel(writes=("vertex", "step"), ends=True)
def _advance_whole(x, part, walkers: dict, spec: StepSpec, out: dict, run: Run) -> None:
    """The walk on a graph whole in ``part`` (replicated, or one partition): every walker to its end."""
    ADVANCE.launch(**_graph_args(x, part, spec), n=walkers["walk_id"].shape[0],
                   walk_id=walkers["walk_id"], source=walkers.get("source", walkers["vertex"]),
                   vertex=walkers["vertex"], step=walkers["step"], offset=out["offset"], flat=out["flat"],
                   piece_len=out["length"], out_vertex=out["vertex"], out_step=out["step"], moved=out["moved"])


def _advance_routed(part, walkers: dict, spec: StepSpec, run: Run):
    """The walk on one partition of several, as a runtime step (pieces, movers, steps): one kernel writes the
    vertices of the walks whose blocks this worker makes straight to their rows (``run.rows``, where the run
    keeps them), the others' as pieces over a flat buffer with no gaps (none where every walk's row is here), and
    the walkers that move on, packed; one copy of four counts comes to the host. (A walker writing pieces stops
    at :data:`STAGE` vertices, and goes on in its partition's next advance; one writing its row goes on while it
    stays, so every walker moving on leaves the partition.) A row is written a whole sector at a time: the ids of
    the sector not yet full go on with a walker moving to a partition of this worker (``run.here``), in its
    :data:`SECTOR` fields (:func:`sector_fields`), and are stored where it ends or leaves the worker (see
    ``kernels/rows.cuh``'s ``GpCarriedRow``); walkers without those fields carry none."""
    x = worker_xp()
    n = walkers["walk_id"].shape[0]
    keep_source = "source" in walkers
    parts = len(part.bounds) - 1
    movers = {k: x.empty(parts * n, v.dtype) for k, v in walkers.items()}  # a region of n for each partition
    carrying = SECTOR[0] in walkers
    sectors = ({k: walkers[k] for k in SECTOR} if carrying else  # none carried in, none out (local all 0): the
               {"carried": x.zeros(n, x.int8), **{k: x.empty(0, x.uint64) for k in SECTOR[1:]}})  # words unread
    mover_sectors = ({f"mover_{k}": movers[k] for k in SECTOR} if carrying else
                     {"mover_carried": x.empty(parts * n, x.int8),
                      **{f"mover_{k}": x.empty(0, x.uint64) for k in SECTOR[1:]}})
    local = run.here if carrying else x.zeros(parts, x.int8)
    rows = run.rows
    room = 1 if rows is not None and rows.ranks == 1 else n  # every walk's row here: no piece to make
    per = 32 // part.indices.dtype.itemsize  # ids a sector
    most = room * most_pieces.py_func(per)  # (the jitted one compiled at a GPU worker's first advance: ~0.4 s)
    pieces = {"walk_id": x.empty(most, x.int64), "start": x.empty(most, x.int32), "length": x.empty(most, x.int32),
              "offset": x.empty(most, x.int64)}
    flat = x.empty(room * (STAGE + per - 1), part.indices.dtype)
    counts = x.zeros(4 + parts, x.uint64)
    home = (dict(rows=x.empty(1, flat.dtype), block_rows=0, ranks=0, rank=0) if rows is None else
            dict(rows=rows.array.reshape(-1), block_rows=rows.blocks.rows, ranks=rows.ranks, rank=rows.rank))
    ROUTED.launch(**_graph_args(x, part, spec), **home, n=n, walk_id=walkers["walk_id"],
                  source=walkers.get("source", walkers["vertex"]), vertex=walkers["vertex"], step=walkers["step"],
                  keep_source=int(keep_source), **sectors, width=spec.length + 1,
                  piece_walk_id=pieces["walk_id"], piece_start=pieces["start"], piece_len=pieces["length"],
                  piece_offset=pieces["offset"], flat=flat, bounds=part.device_bounds(),
                  parts=parts, local=local, mover_walk_id=movers["walk_id"],
                  mover_source=movers.get("source", movers["walk_id"]), mover_vertex=movers["vertex"],
                  mover_step=movers["step"], **mover_sectors, counts=counts)
    run.while_kernel()  # the runtime's work meanwhile: a chunked superstep's exchange of the chunk before
    counted = to_host(counts)
    used, _, steps, kept = (int(c) for c in counted[:4])
    if kept:
        pieces = {k: v[:kept] for k, v in pieces.items()}
        pieces["flat"] = flat[:used].copy()  # the scratch goes; the pieces stay until the run's outputs are assembled
    else:  # every vertex written in place
        pieces = None
    ends = np.cumsum(counted[4:].astype(np.int64))
    starts = ends - counted[4:].astype(np.int64)
    going = np.flatnonzero(counted[4:])
    if len(going) > 1 and parts * n > 2 * int(ends[-1]):  # regions mostly empty (three partitions or more): the
        # groups side by side in one array of their size, in one copy, not kept in regions a partition's count each
        movers = {k: x.concatenate([v[q * n:q * n + int(counted[4 + q])] for q in going]) for k, v in movers.items()}
        base = starts
    else:
        base = np.arange(parts, dtype=np.int64) * n
    return pieces, Grouped({int(q): {k: v[base[q]:base[q] + int(counted[4 + q])] for k, v in movers.items()}
                            for q in going}), steps


@cpu_kernel()
def _walk_one(graph, lo, hi, num_vertices, key, length, alpha, teleport, walk_id, source, v, s, out, at, most):
    """One walker from vertex ``v`` at step ``s`` while it stays inside ``lo..hi-1`` of ``graph`` (``_graphs``), its
    vertices written to ``out[at:at + most]`` (the kernels' ``gp_first_order_walk``): how many it wrote, where it
    is and whether it left (stepped out, or filled ``most``; else its walk ended)."""
    k = 0
    left = False
    while True:
        if k == most:
            left = True
            break
        out[at + k] = v
        k += 1
        if s >= length:
            break
        if teleport != _NONE and _rng.unit(_rng.bits(key, walk_id, s, 0)) < alpha:
            if teleport == _UNIFORM:
                u = uniform_vertex(_rng.bits(key, walk_id, s, 1), num_vertices)
            else:
                u = source
        else:
            a = start(graph, v - lo)
            d = degree(graph, v - lo)
            if d == 0:
                break
            e = pick(graph, (key, walk_id, s), 1, v - lo, a, d)
            if e < 0:
                break
            u = head(graph, e)
        s += 1
        v = u
        if u < lo or u >= hi:
            left = True
            break
    return k, v, s, left


@cpu_kernel(parallel=True)
def walkers_cpu(graph, lo, hi, num_vertices, key, length, alpha, teleport, n, walk_id, source, vertex, step, offset,
                flat, piece_len, out_vertex, out_step, moved):
    """Every walker on ``graph`` to its end or until it leaves ``lo..hi-1`` (the kernels' ``gp_first_order_walkers``)."""
    for i in prange(n):
        k, v, s, left = _walk_one(graph, lo, hi, num_vertices, key, length, alpha, teleport, walk_id[i], source[i],
                                  vertex[i], step[i], flat, offset[i], 2**31 - 1)
        piece_len[i] = k
        out_vertex[i] = v
        out_step[i] = s
        moved[i] = left


@cpu_kernel()
def _advance_cpu(indptr, indices, table, weighted, lo, hi, num_vertices, key, length, alpha, teleport, n, walk_id,
                 source, vertex, step, offset, flat, piece_len, out_vertex, out_step, moved):
    walkers_cpu(Csr(indices, NO_CDF, weighted, indptr, table), lo, hi, num_vertices, key, length, alpha, teleport, n,
                walk_id, source, vertex, step, offset, flat, piece_len, out_vertex, out_step, moved)


@cpu_kernel()
def _word(sector0, sector1, sector2, sector3, i, k):
    """Word ``k`` of walker ``i``'s carried sector (``sector0..3``)."""
    return sector0[i] if k == 0 else sector1[i] if k == 1 else sector2[i] if k == 2 else sector3[i]


@cpu_kernel()
def _store_cells(home, rows, at, lo, hi, stage, base, row_lo, piece_start, piece_len, first_piece, piece_cells,
                 cells_at, pieces):
    """Cells ``lo..hi-1`` of the sector at row position ``at`` (staged at ``stage[base:]``): to the rows where the
    walk's block is here (``home``), else as the walker's next piece (at ``first_piece + pieces`` of ``piece_start``
    and ``piece_len``, its cells after its earlier pieces' in ``piece_cells[cells_at:]``); the kernels'
    ``GpRowSink`` / ``GpPieceSink``. Returns the walker's pieces. (Indices, not slices: a slice in a parallel loop
    counts references to its array, atomically, from every thread.)"""
    if home:
        for j in range(lo, hi):
            rows[at + j] = stage[base + j]
        return pieces
    used = 0
    for m in range(pieces):
        used += piece_len[first_piece + m]
    piece_start[first_piece + pieces] = at + lo - row_lo
    piece_len[first_piece + pieces] = hi - lo
    for j in range(lo, hi):
        piece_cells[cells_at + used + j - lo] = stage[base + j]
    return pieces + 1


@cpu_kernel(parallel=True)
def _advance_routed_cpu(indptr, indices, table, weighted, lo, hi, num_vertices, key, length, alpha, teleport, n,
                        walk_id, source, vertex, step, keep_source, carried, sector0, sector1, sector2, sector3, rows,
                        block_rows, ranks, rank, width, piece_walk_id, piece_start, piece_len, piece_offset, flat,
                        bounds, parts, local, mover_walk_id, mover_source, mover_vertex, mover_step, mover_carried,
                        mover_sector0, mover_sector1, mover_sector2, mover_sector3, counts):
    graph = Csr(indices, NO_CDF, weighted, indptr, table)
    size = flat.itemsize
    per = 32 // size  # ids a sector
    mask = np.uint64(0xFFFFFFFF) if size == 4 else np.uint64(0xFFFFFFFFFFFFFFFF)  # an id's bits in a word
    pieces_most, most_cells = most_pieces(per), per - 1 + STAGE  # a walker's in one advance, away
    stage = np.empty(n * per, flat.dtype)
    away = n if ranks != 1 else 0  # walkers that may write pieces (none where every row is here)
    cells = np.empty(away * most_cells, flat.dtype)
    starts = np.empty(away * pieces_most, np.int32)
    lengths = np.empty(away * pieces_most, np.int32)
    made = np.zeros(n, np.int32)
    at_vertex = np.empty(n, np.int64)
    at_step = np.empty(n, np.int32)
    moves = np.zeros(n, np.bool_)
    carries = np.zeros(n, np.bool_)
    held = np.zeros(n, np.int64)  # cells carried
    carrying = local[:parts].any()  # whether a mover may carry its cells on
    words = np.zeros(n * 4 if carrying else 0, np.uint64)  # theirs, little end first
    goes = np.zeros(n, np.int64)  # the partition a mover goes to
    home = np.zeros(n, np.bool_)
    for i in prange(n):
        w = walk_id[i]
        block = w // block_rows if ranks > 0 else 0
        row = (block // ranks) * block_rows + w % block_rows if ranks > 0 else w
        row_lo = row * width
        home[i] = ranks > 0 and block % ranks == rank
        pos = row_lo + step[i]  # of the next id
        c = pos & (per - 1)
        base = i * per
        if carried[i]:  # its cells 0..c-1, little end first
            for j in range(c):
                word = _word(sector0, sector1, sector2, sector3, i, j * size // 8)
                stage[base + j] = word >> np.uint64(j * size % 8 * 8)  # cast: its low bits
        first = 0 if carried[i] else c
        v, s = vertex[i], step[i]
        written, budget, pieces = 0, 2**31 - 1 if home[i] else STAGE, 0
        moved = False
        if home[i] and not carrying:  # no walker carries cells on: the row written as it goes (the cells a sector
            # at a time stores; a fifth of the twin's time on CPU workers, which carry none), those it came with first
            _store_cells(True, rows, pos - c, first, c, stage, base, row_lo, starts, lengths, 0, cells, 0, 0)
            _, v, s, moved = _walk_one(graph, lo, hi, num_vertices, key, length, alpha, teleport, w, source[i], v, s,
                                       rows, pos, budget)
            c = first
        else:
            while True:  # a sector at a time: the kernel stores one as its last cell is put
                k, v, s, left = _walk_one(graph, lo, hi, num_vertices, key, length, alpha, teleport, w, source[i], v,
                                          s, stage, base + c, min(per - c, budget - written))
                written += k
                c += k
                pos += k
                if c == per:
                    pieces = _store_cells(home[i], rows, pos - per, first, per, stage, base, row_lo, starts,
                                          lengths, i * pieces_most, cells, i * most_cells, pieces)
                    first, c = 0, 0
                if not left:  # its walk ended
                    break
                if v < lo or v >= hi or written == budget:  # stepped out, or stopped at STAGE to go on next time
                    moved = True
                    break
        q = range_of(bounds, parts, v) if moved else 0
        carries[i] = moved and local[q] != 0 and first == 0
        held[i] = c if carries[i] else 0
        goes[i] = q
        for j in range(held[i]):
            words[i * 4 + j * size // 8] |= (np.uint64(stage[base + j]) & mask) << np.uint64(j * size % 8 * 8)
        if not carries[i] and c > first:  # its partial sector stored where it ends or leaves the worker
            pieces = _store_cells(home[i], rows, pos - c, first, c, stage, base, row_lo, starts, lengths,
                                  i * pieces_most, cells, i * most_cells, pieces)
        made[i] = pieces
        at_vertex[i] = v
        at_step[i] = s
        moves[i] = moved
    used, moved_count, steps, kept = np.int64(counts[0]), np.int64(counts[1]), np.int64(counts[2]), np.int64(counts[3])
    flat_at = np.empty(n, np.int64)
    for i in range(n):  # in walker order (the kernel's in the order its reservations land)
        steps += at_step[i] - step[i]
        flat_at[i] = used
        for m in range(made[i]):
            piece_walk_id[kept] = walk_id[i]
            piece_start[kept] = starts[i * pieces_most + m]
            piece_len[kept] = lengths[i * pieces_most + m]
            piece_offset[kept] = used
            used += lengths[i * pieces_most + m]
            kept += 1
        if moves[i]:  # to the region of the partition owning its vertex
            q = goes[i]
            slot = q * n + np.int64(counts[4 + q])
            counts[4 + q] += 1
            mover_walk_id[slot] = walk_id[i]
            mover_vertex[slot] = at_vertex[i]
            mover_step[slot] = at_step[i]
            mover_carried[slot] = carries[i]
            carried_words = -(-held[i] * size // 8)  # the words of the cells it carries
            if carried_words > 0:
                mover_sector0[slot] = words[i * 4]
            if carried_words > 1:
                mover_sector1[slot] = words[i * 4 + 1]
            if carried_words > 2:
                mover_sector2[slot] = words[i * 4 + 2]
            if carried_words > 3:
                mover_sector3[slot] = words[i * 4 + 3]
            if keep_source:
                mover_source[slot] = source[i]
            moved_count += 1
    for i in prange(n):
        total = 0
        for m in range(made[i]):
            total += lengths[i * pieces_most + m]
        for j in range(total):
            flat[flat_at[i] + j] = cells[i * most_cells + j]
    counts[0], counts[1], counts[2], counts[3] = used, moved_count, steps, kept


# walk_first_order.cu is compiled whole with a kernel's defines: each of its kernels takes all of them
DEFINES_FIRST_ORDER = {**DEFINES, **{f"TELEPORT_{k.upper()}": v for k, v in TELEPORT.items()}, "STAGE": STAGE}
_GRAPH_ARGS = (Arg("indptr", "i64[]"), Arg("indices", "IdT[]"),
               Arg("table", "u64[]", note="weighted: the vertices' alias tables (Partition.alias)"),
               Arg("weighted", "i32", note="_graphs.PICK_UNIFORM or PICK_ALIAS"),
               Arg("lo", "i64"), Arg("hi", "i64"), Arg("num_vertices", "i64"), Arg("key", "u64"), Arg("length", "i32"),
               Arg("alpha", "f64"), Arg("teleport", "i32"), Arg("n", "i64"), Arg("walk_id", "i64[n]"),
               Arg("source", "i64[n]"), Arg("vertex", "i64[n]"), Arg("step", "i32[n]"))
# A routed walker's carried sector (kernels/rows.cuh's GpCarriedRow): whether it carries its cells, and their words
SECTOR_FIELDS = (("carried", "int8", 0), *((f"sector{k}", "uint64", 0) for k in range(4)))
SECTOR = tuple(name for name, _, _ in SECTOR_FIELDS)
_SECTOR_ARGS = (Arg("carried", "i8[n]"), *(Arg(f"sector{k}", "u64[n]") for k in range(4)))
ADVANCE = Kernel("walk_first_order.cu", "gp_walk_first_order", twin=_advance_cpu, items="n", queued=True,
                 defines=DEFINES_FIRST_ORDER, args=_GRAPH_ARGS + (
    Arg("offset", "i64[n]"), Arg("flat", "IdT[]", out=True), Arg("piece_len", "i32[n]", out=True),
    Arg("out_vertex", "i64[n]", out=True), Arg("out_step", "i32[n]", out=True), Arg("moved", "i8[n]", out=True)))
ROUTED = Kernel("walk_first_order.cu", "gp_walk_first_order_routed", twin=_advance_routed_cpu, items="n",
                queued=True, defines=DEFINES_FIRST_ORDER, args=_GRAPH_ARGS + (
    Arg("keep_source", "i32"), *_SECTOR_ARGS, Arg("rows", "IdT[]", out=True, note="written when ranks > 0"),
    Arg("block_rows", "i64"), Arg("ranks", "i32"), Arg("rank", "i32"), Arg("width", "i32"),
    Arg("piece_walk_id", "i64[]", out=True, note="room for most_pieces(ids a sector) a walker"),
    Arg("piece_start", "i32[]", out=True), Arg("piece_len", "i32[]", out=True), Arg("piece_offset", "i64[]", out=True),
    Arg("flat", "IdT[]", out=True, note="room for STAGE + a sector's ids less one a walker"),
    Arg("bounds", "i64[parts+1]"), Arg("parts", "i32"),
    Arg("local", "i8[parts]", note="1 where the partition is on this worker: a walker carries its cells there"),
    Arg("mover_walk_id", "i64[parts*n]", out=True, note="partition q's movers at q*n.."),
    Arg("mover_source", "i64[parts*n]", out=True, note="written when keep_source"),
    Arg("mover_vertex", "i64[parts*n]", out=True), Arg("mover_step", "i32[parts*n]", out=True),
    *(Arg(f"mover_{a.name}", f"{a.base}[parts*n]", out=True) for a in _SECTOR_ARGS),
    Arg("counts", "u64[4+parts]", out=True,
        note="added to: vertices in flat, movers, steps, pieces, then each partition's movers")))
