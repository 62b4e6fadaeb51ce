"""Bingo's per-vertex sampling space (Wang et al., EuroSys'23) for the vertices of one partition, in flat arrays.

Each edge's bias, times the amortization factor ``scale`` and times the power of two that brings the largest of its
vertex's into [1, 2**63) (:func:`_scaled`: no probability changes), splits into an integer part and a decimal part
(``frac`` in [0, 1)). The integer part is factorized by radix: the edge joins group ``k`` of its source for each
bit ``k`` set, where every member weighs ``2**k``, so a member is drawn uniformly. The decimal parts form one more
group (bit ``DECIMAL``), drawn by rejection: a uniform member, kept with probability ``frac``. An alias table over a
vertex's groups picks the group.

Storage is three pools of arrays in which each vertex owns a block. Vertex ``v``'s edges are the slots
``edge_start[v] .. edge_start[v] + degree[v] - 1`` of the edge pool (``dst``, ``weight``, ``units``, ``frac``,
``adjacency``), kept in log order, so the earliest copy of a duplicated edge is the first; the same slots of
``adjacency`` hold its destinations sorted (a duplicated edge once a copy), which answer "is u a neighbor of v?" by
binary search (node2vec's test). Its groups are the rows ``group_row[v] ..`` (``group_count[v]`` of them, at most
``MAX_GROUPS``) of the group pool (the group tables), its listed members a block of the member pool from
``member_start[v]``. A commit is copy-on-write: the touched vertices' new blocks are appended to each pool, one after
another (it grows by doubling into new arrays), and the per-vertex tables are written in place unless a view pinned
them (then the commit copies them first). A commit after which a pool's blocks left behind would outnumber its live
ones first gathers the blocks that stay into new arrays. No slot a version reads is ever written again: a committed
version, read by a run through a :class:`SpaceView`, never changes, and a commit costs the touched vertices' edges,
not the partition's.

A group is stored in one of the paper's adaptive representations (``group_kind``):

- ``ONE``, a one-element group: ``group_start`` is its edge's local offset;
- ``DENSE``, holding at least ``dense_fraction`` of the vertex's edges: nothing is stored; a uniform edge of the
  vertex is drawn and rejected unless it is in the group (its bit is set, its decimal part is not zero), which
  rejects fewer than ``1 - dense_fraction`` of the tries;
- ``LISTED``, the others (the paper's sparse and regular groups): its members, local edge offsets, are
  ``members[member_start[v] + group_start ...]``, ``group_size`` of them.

A batch applies where the space lives. On a GPU (:meth:`SamplingSpace._play`) the touched vertices' copies and
the batch's updates are sorted stably by (vertex, destination), each edge's run is played as a queue by one thread,
and each touched vertex's groups, members and alias table are rebuilt by a warp (a vertex of more than ``CHUNK``
edges by a warp per chunk; ``kernels/space.cu``). On the CPU, and for a small batch of a GPU space, each vertex's
updates are replayed in turn (:func:`_replay`) and the same builds run as numba twins on the host.

CUDA sampling in ``kernels/dynamic.cu``, CPU twin here; the same random stream.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _rng, config
from .._space_pick import DECIMAL, SPACE_ARGS, _DENSE, _ONE
from .._validate import check_array, check_int, check_probability
from ..backend import cpu_threads, device_of, group_max, resolve, segments, to_host, xp
from ..errors import GpipeError, GpipeValueError
from ._batches import Batch, absent, check_batch
from ._kernels import (
    BUILD,
    CHUNK,
    CHUNKS,
    COUNT,
    ELEMENTS,
    MAX_GROUPS,
    PLACE,
    PLAY,
    SAMPLE,
    _GROUP_FIELDS,
    _INSERT,
    _TABLES,
    _pair_order,
    _replay,
    _sorted_rows,
)
from ._pools import _Pool, _exclusive, _slots, _threads, _twins

SMALL_BATCH = 256  # a GPU space stages and builds a batch of at most this many updates on the host, in a few copies


_EDGE_FIELDS = {"dst": np.int64, "weight": np.float64, "units": np.int64, "frac": np.float64, "adjacency": np.int64}


_BLOCKS = (("edge_start", "degree"), ("member_start", "member_count"), ("group_row", "group_count"))  # of each pool


@dataclass(frozen=True)
class SpaceView:
    """One committed version (``version``) of a :class:`SamplingSpace`, read by runs as partition ``part`` of a
    snapshot: its vertices ``lo .. hi-1`` (the first ``space_vertices`` with a row in the space, the others no edges
    yet), ``bounds`` the snapshot's partition bounds, ``arrays`` those ``SAMPLE`` reads (``SPACE_ARGS``: the
    per-vertex tables of that version and the pools) and ``adjacency``, on the worker's device."""

    part: int
    lo: int
    hi: int
    bounds: np.ndarray
    arrays: dict
    adjacency: Any  # each vertex's destinations sorted, in its slots of the edge pool, on the worker's device
    version: int = 0

    @property
    def indices(self) -> Any:
        """The edge pool's destinations sorted per vertex (what a peer borrows, through :meth:`rows`)."""
        return self.adjacency

    @property
    def space_vertices(self) -> int:
        return int(self.arrays["degree"].shape[0])

    def rows(self, vertices) -> tuple:
        """The out-degrees and the concatenated sorted out-neighbors of ``vertices`` (global ids of this partition;
        those past ``space_vertices`` have none): a peer's borrowed lists (``runtime.neighbor_lists``)."""
        x = xp(device_of(self.adjacency))
        local = x.asarray(vertices) - self.lo
        inside = local < self.space_vertices
        local = x.where(inside, local, 0)
        length = x.where(inside, self.arrays["degree"][local], 0) if self.space_vertices else x.zeros_like(local)
        start = self.arrays["edge_start"][local] if self.space_vertices else x.zeros_like(local)
        ends = x.cumsum(length)
        edge = x.arange(int(ends[-1]) if ends.shape[0] else 0)
        row = x.searchsorted(ends, edge, side="right")
        return length, self.adjacency[start[row] + edge - (ends[row] - length[row])]


def _scaled(x, weight, degrees, scale: float):
    """The biases ``weight`` of vertices of ``degrees`` edges each (arrays of ``x``), each times ``scale`` and times
    the power of two that brings the largest of its vertex's into [1, 2**63): exactly (but for products below
    float64's normal range), so no vertex's probabilities change. However large the biases, an integer part then
    fits int64 (63 radix bits); however small, a vertex has one integer part at least, not decimal parts alone (a
    draw among those keeps a try with the probability of a decimal part: 1e-300 for a bias of 1e-300)."""
    if not weight.shape[0]:
        return weight * scale
    vertex, _ = segments(x, degrees)
    largest, exponent = x.frexp(group_max(x, weight, vertex))  # in [0.5, 1) times 2**exponent
    mantissa, shift = np.frexp(scale)
    mantissa, shift = 2 * mantissa, int(shift) - 1  # scale = mantissa * 2**shift, the mantissa in [1, 2)
    top = exponent + shift + x.frexp(largest * mantissa)[1]  # the largest times scale is in [2**(top-1), 2**top)
    power = (x.clip(top, 1, 63) - top + shift).astype(np.int32)
    return x.ldexp(weight, power[vertex]) * mantissa  # (ldexp first: at most the result, below 2**63, so finite)


class _Undo:
    """A space as it was before a commit: its counts, its tables and pools (references: a commit writes past every
    slot in use or into new arrays), and the rows of its tables that the commit writes in place (:meth:`write`)."""

    def __init__(self, space: SamplingSpace):
        self.counts = (space.num_vertices, space.num_edges, space.version, space._tables_pinned)
        self.tables = dict(space._tables)
        self.pools = [(dict(pool.arrays), pool.top, pool.live) for pool in space._pools()]
        self.rows: list[tuple] = []  # (array, index, its values before)

    def write(self, array, index, values) -> None:
        """``array[index] = values``, keeping what was there if ``array`` is one of the tables as they were."""
        if any(array is table for table in self.tables.values()):
            self.rows.append((array, index, array[index].copy()))
        array[index] = values

    def restore(self, space: SamplingSpace) -> None:
        for array, index, values in reversed(self.rows):
            array[index] = values
        space.num_vertices, space.num_edges, space.version, space._tables_pinned = self.counts
        space._tables = self.tables
        for pool, (arrays, top, live) in zip(space._pools(), self.pools, strict=True):
            pool.arrays, pool.top, pool.live = arrays, top, live


class SamplingSpace:
    """The edges of vertices ``0 .. num_vertices - 1`` and their radix-factorized sampling spaces, updated in
    batches.

    Parameters
    ----------
    num_vertices : int
        Vertices to start with; an update naming a larger source id adds the vertices up to it.
    device : {"cpu", "gpu"}, default "cpu"
        Where the space lives and runs: numpy arrays and the CPU twins, or cupy arrays on the current GPU and the
        CUDA kernels, which apply a batch on the device too (a batch of at most ``SMALL_BATCH`` updates, a
        streaming update's, is staged and built on the host and its blocks copied over).
    scale : float, default 1.0
        The amortization factor: a bias ``w`` is sampled as ``w * scale``, whose integer part is factorized by
        radix and whose decimal part joins the decimal group. Integer biases need no more than 1; for floating-point
        biases, a scale that makes the decimal parts small beside the integer parts keeps sampling in O(1). A
        vertex whose largest ``w * scale`` is below 1 or from 2**63 on has its biases scaled by a power of two
        more, which brings that one into [1, 2**63): every positive finite bias is drawn with its exact
        probability.
    dense_fraction : float, optional
        A group holding at least this fraction of its vertex's edges is sampled by rejection over them and stores
        nothing; default ``gpipe.dynamic.dense-fraction`` of the config.

    Examples
    --------
    >>> space = gpipe.dynamic.SamplingSpace(3)
    >>> space.apply(["insert", "insert", "insert", "delete"], [0, 0, 0, 0], [1, 2, 2, 1], [3, 5, 1, None])
    >>> space.edges(0)
    (array([2, 2]), array([5., 1.]))
    >>> space.sample([0, 0, 1], seed=7)
    array([ 2,  2, -1])
    """

    def __init__(self, num_vertices: int, device: str = "cpu", scale: float = 1.0,
                 dense_fraction: float | None = None):
        if not (np.isfinite(scale) and scale > 0):
            raise GpipeValueError(f"'scale' must be a positive finite number, got {scale!r}")
        self.scale = float(scale)
        self.device = resolve(device)
        self.dense_fraction = check_probability(
            "dense_fraction", config.get("dynamic.dense-fraction") if dense_fraction is None else dense_fraction,
            open_low=True)
        num_vertices = check_int("num_vertices", num_vertices, minimum=0)
        self.num_vertices = 0
        self.num_edges = 0
        self.version = 0  # commits
        self._edges = _Pool(self.device, _EDGE_FIELDS)
        self._members = _Pool(self.device, {"members": np.int64})
        self._groups = _Pool(self.device, _GROUP_FIELDS)
        self._tables = {name: xp(self.device).zeros(0, np.int64) for name in _TABLES}  # per vertex, room to grow
        self._tables_pinned = False  # a view holds the tables: the next commit writes a copy
        self._staged: tuple | None = None  # a batch replayed, not yet applied (_stage, _commit)
        self._lock = threading.Lock()  # a DynamicGraph batch's stage, commit or take-back at a time
        self._token = -1  # the DynamicGraph batch staged last (or taken back)
        self._undo = None  # what takes that batch back, committed
        self._grow(num_vertices)

    def _grow(self, num_vertices: int) -> None:
        if num_vertices <= self.num_vertices:
            return
        size = self._tables["degree"].shape[0]
        if num_vertices > size:  # new tables: a view may hold the old ones
            size = max(num_vertices, 2 * size)
            for name, old in self._tables.items():
                self._tables[name] = xp(self.device).zeros(size, np.int64)
                self._tables[name][:self.num_vertices] = old[:self.num_vertices]
            self._tables_pinned = False
        self.num_vertices = num_vertices

    def _writable_tables(self) -> dict:
        """The per-vertex tables, copied first if a view holds them."""
        if self._tables_pinned:
            self._tables = {name: a.copy() for name, a in self._tables.items()}
            self._tables_pinned = False
        return self._tables

    def _row(self, v: int, pool: _Pool, name: str, start: str, count: str) -> np.ndarray:
        """Vertex ``v``'s block of ``pool``'s array ``name`` (from table ``start``, ``count`` long), on the host."""
        first = int(self._tables[start][v])
        return to_host(pool.arrays[name][first:first + int(self._tables[count][v])])

    def edges(self, v: int) -> tuple[np.ndarray, ...]:
        """Vertex ``v``'s out-neighbors and biases, in log order (duplicates kept)."""
        return tuple(self._row(v, self._edges, name, "edge_start", "degree") for name in ("dst", "weight"))

    def all_edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every edge as (source, destination, bias), by source, each source's in log order."""
        x = xp(self.device)
        degree = self._tables["degree"][:self.num_vertices]
        slots = _slots(x, self._tables["edge_start"][:self.num_vertices], degree)
        return (np.repeat(np.arange(self.num_vertices), to_host(degree)), to_host(self._edges.arrays["dst"][slots]),
                to_host(self._edges.arrays["weight"][slots]))

    def neighbors(self, v: int) -> np.ndarray:
        """Vertex ``v``'s destinations, sorted (the rows node2vec searches)."""
        return self._row(v, self._edges, "adjacency", "edge_start", "degree")

    def groups(self, v: int) -> dict:
        """Vertex ``v``'s group tables (kind, bit, start, size, alias), a row per group."""
        return {name: self._row(v, self._groups, name, "group_row", "group_count") for name in _GROUP_FIELDS}

    def apply(self, op, src, dst, weight) -> None:
        """Apply a batch of updates in log order per source vertex, then rebuild each touched vertex's space.

        Parameters
        ----------
        op : sequence of str
            ``"insert"`` (a new copy of the edge), ``"delete"`` (its earliest copy) or ``"update"`` (every copy
            takes the new weight).
        src, dst : sequence of int
            The edges, by non-negative vertex id.
        weight : sequence of float or None
            The bias of an insert or an update: positive and finite; ignored for a delete.

        Raises
        ------
        GpipeValueError
            On a malformed batch, a bad weight, or a delete or update of an edge that is not there, naming the
            operation's position in the batch; the space is then left as it was.
        """
        self.apply_batch(check_batch(op, src, dst, weight))

    def apply_batch(self, batch: Batch) -> None:
        """:meth:`apply` of a checked :class:`Batch` (``check_batch``): as it reaches a worker."""
        if not isinstance(batch, Batch):
            raise GpipeValueError(f"'batch' must be a gpipe.dynamic Batch (check_batch makes one), got "
                                  f"{type(batch).__name__}")
        failed = self._stage(batch)
        if failed >= 0:
            self._staged = None
            raise absent(batch, failed)
        self._commit()

    def _stage(self, batch: Batch, play: bool | None = None) -> int:
        """Replay ``batch`` on copies of the touched vertices' edges, kept until :meth:`_commit` (the touched vertices,
        their degrees, edges and weights, and their destinations sorted, or None); the position of its first delete
        or update of an edge that is not there (nothing kept then), else -1. On the CPU, and for a batch of at most
        ``SMALL_BATCH`` updates (a streaming update's), each vertex's updates are replayed in turn on the host
        (:func:`_replay`); a larger batch of a GPU space (or any with ``play``) is played edge by edge on its device
        (:meth:`_play`): the same result."""
        if (self.device != "cpu" and len(batch.src) > SMALL_BATCH) if play is None else play:
            return self._play(batch)
        x = xp(self.device)
        codes, src, dst, weight = (to_host(a) for a in (batch.codes, batch.src, batch.dst, batch.weight))
        batch = Batch(batch.op, codes, src, dst, weight, batch.given)
        order = np.argsort(batch.src, kind="stable")  # each source's updates together, in log order
        vertices, op_start = np.unique(batch.src[order], return_index=True)
        op_start = np.append(op_start, len(order)).astype(np.int64)
        known = vertices[vertices < self.num_vertices]
        old_start, old_degree = np.zeros(len(vertices), np.int64), np.zeros(len(vertices), np.int64)
        if known.shape[0]:
            rows = to_host(x.stack([self._tables[name][x.asarray(known)] for name in ("edge_start", "degree")]))
            old_start[:len(known)], old_degree[:len(known)] = rows  # (known ids sort first)
        held_dst, held_weight = self._edges.arrays["dst"], self._edges.arrays["weight"]
        if x is not np:  # a small batch of a GPU space: its vertices' edges copied here, replayed on the host
            slots = x.asarray(_slots(np, old_start, old_degree))
            held_dst, held_weight = to_host(held_dst[slots]), to_host(held_weight[slots])
            old_start = _exclusive(old_degree)
        inserts = np.bincount(np.searchsorted(vertices, batch.src[batch.codes == _INSERT]), minlength=len(vertices))
        slot_start = np.concatenate([[0], np.cumsum(old_degree + inserts)]).astype(np.int64)
        new_dst = np.empty(slot_start[-1], np.int64)
        new_weight = np.empty(slot_start[-1], np.float64)
        alive = np.zeros(slot_start[-1], np.bool_)
        failed = np.full(len(vertices), -1, np.int64)
        with cpu_threads(_threads(len(vertices))):
            _replay(op_start, order, batch.codes, batch.dst, batch.weight, old_start, old_degree, held_dst,
                    held_weight, slot_start, new_dst, new_weight, alive, failed)
        if (failed >= 0).any():
            return int(failed[failed >= 0].min())
        running = np.concatenate([[0], np.cumsum(alive)])
        self._staged = (vertices, running[slot_start[1:]] - running[slot_start[:-1]], new_dst[alive],
                        new_weight[alive], None)
        return -1

    def _play(self, batch: Batch) -> int:
        """:meth:`_stage` by edges, in arrays of the space's device: each touched vertex's elements (the copies it
        holds, then its updates in log order) sorted stably by (vertex, destination), so each edge's copies and
        updates form a run in time order, which ``PLAY`` plays as a queue; the survivors are read back in the
        vertices' log order."""
        x = xp(self.device)
        if not len(batch.src):
            self._staged = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), None)
            return -1
        src = x.asarray(batch.src)
        order = x.argsort(src, kind="stable")  # each vertex's updates together, in log order
        grouped = src[order]
        first = x.flatnonzero(x.concatenate([x.ones(1, bool), grouped[1:] != grouped[:-1]]))
        vertices = grouped[first]
        ops = x.diff(x.concatenate([first, x.full(1, grouped.shape[0], np.int64)]))
        known = vertices < self.num_vertices
        at = x.where(known, vertices, 0)
        old_start = x.where(known, self._tables["edge_start"][at], 0) if self.num_vertices else x.zeros_like(at)
        old_degree = x.where(known, self._tables["degree"][at], 0) if self.num_vertices else x.zeros_like(at)
        sizes = old_degree + ops  # a vertex's elements: the copies it holds, then its updates in log order
        start = _exclusive(sizes, x)
        total = int(start[-1] + sizes[-1])
        vertex, kind = x.empty(total, np.int64), x.empty(total, np.int8)
        dst, weight, position = x.empty(total, np.int64), x.empty(total, np.float64), x.empty(total, np.int64)
        with _twins(x, int(vertices.shape[0])):
            ELEMENTS.launch(n=vertices.shape[0], start=start, old_start=old_start, old_degree=old_degree, first=first,
                            order=order, codes=x.asarray(batch.codes), batch_dst=x.asarray(batch.dst),
                            batch_weight=x.asarray(batch.weight), pool_dst=self._edges.arrays["dst"],
                            pool_weight=self._edges.arrays["weight"], total=total, vertex=vertex, kind=kind, dst=dst,
                            weight=weight, position=position)
        by = _pair_order(x, vertex, dst)  # stable: each edge's elements a run, in time order
        kept, alive = x.empty(total, np.uint8), x.empty(total, np.uint8)
        failed = x.full(1, np.iinfo(np.int64).max, np.int64)
        with _twins(x, int(vertices.shape[0])):
            PLAY.launch(total=total, by=by, vertex=vertex, dst=dst, kind=kind, position=position, weight=weight,
                        kept=kept, alive=alive, failed=failed)
        failed = int(failed[0])
        if failed != np.iinfo(np.int64).max:
            return failed
        survivors = x.flatnonzero(kept)
        running = x.cumsum(kept, dtype=np.int64)
        self._staged = (vertices, running[start + sizes - 1] - running[start] + kept[start], dst[survivors],
                        weight[survivors], dst[by[x.flatnonzero(alive)]])  # the survivors sorted: the adjacency
        return -1

    def _commit(self) -> _Undo:
        """Apply the batch :meth:`_stage` kept: new blocks for the touched vertices (copy-on-write), their groups and
        alias tables rebuilt where the batch was staged (the device, or the host for a small batch), then appended
        to the pools (a pool whose blocks left behind would outnumber its live ones compacted first).

        Completely or not at all: one that fails (an allocation) leaves the space as it was and raises. Returns what
        takes it back (:meth:`_Undo.restore`), as long as no later batch is staged."""
        undo = _Undo(self)
        try:
            self._write_staged(undo)
        except BaseException:
            undo.restore(self)
            raise
        return undo

    def _write_staged(self, undo: _Undo) -> None:
        """:meth:`_commit`'s work, its writes into the tables in place through ``undo``."""
        vertices, degrees, dst, weight, adjacency = self._staged
        self._staged = None
        x = xp(self.device)
        xc = np if isinstance(degrees, np.ndarray) else x  # where the blocks are built
        touched = int(vertices.shape[0])
        self._grow(int(vertices[-1]) + 1 if touched else 0)
        indptr = xc.concatenate([xc.zeros(1, np.int64), xc.cumsum(degrees)])
        scaled = _scaled(xc, weight, degrees, self.scale)
        units = xc.floor(scaled).astype(np.int64)
        frac = scaled - units
        edges = {"indptr": indptr, "units": units, "frac": frac}
        chunk_count = xc.where(degrees > CHUNK, (degrees + CHUNK - 1) // CHUNK, 0)  # a big vertex's, a warp each
        chunk_start = _exclusive(chunk_count, xc)
        chunk_vertex, chunk_index = segments(xc, chunk_count)
        chunks = {"chunk_vertex": chunk_vertex, "chunk_index": chunk_index, "n": chunk_vertex.shape[0]}
        sizes = {"chunk_start": chunk_start, "chunk_count": chunk_count,
                 "chunk_sizes": xc.empty(chunk_vertex.shape[0] * MAX_GROUPS, np.int64),
                 "chunk_decimal": xc.empty(chunk_vertex.shape[0], np.float64)}
        rebuilt = {**edges, **sizes, "dense_fraction": self.dense_fraction, "n": touched}
        groups, listed = xc.empty(touched, np.int64), xc.empty(touched, np.int64)
        with _twins(xc, touched):
            CHUNKS.launch(**edges, **chunks, chunk_sizes=sizes["chunk_sizes"], chunk_decimal=sizes["chunk_decimal"])
            COUNT.launch(**rebuilt, groups=groups, listed=listed)
        # the blocks, built in arrays of their own, a vertex's after the other's
        member_start, group_row = _exclusive(listed, xc), _exclusive(groups, xc)
        members = xc.empty(int(listed.sum()), np.int64)
        built = {name: xc.empty(int(groups.sum()), dtype) for name, dtype in _GROUP_FIELDS.items()}
        offset = xc.empty(chunk_vertex.shape[0] * MAX_GROUPS, np.int64)
        with _twins(xc, touched):
            adjacency = _sorted_rows(xc, indptr, dst) if adjacency is None else adjacency
            BUILD.launch(**rebuilt, chunk_offset=offset, member_start=member_start, members=members,
                         group_row=group_row, **built)
            PLACE.launch(**edges, **chunks, chunk_offset=offset, member_start=member_start, members=members,
                         group_row=group_row, group_count=groups,
                         **{name: built[name] for name in ("group_kind", "group_bit", "group_start")})
        tables = self._writable_tables()
        at = x.asarray(vertices)
        left = to_host(x.stack([tables[count][at] for _, count in _BLOCKS]).sum(axis=1)) if touched else [0, 0, 0]
        new = {"degree": degrees, "member_count": listed, "group_count": groups}
        moved = {}
        for pool, (start, count), columns, old in zip(
                self._pools(), _BLOCKS, ({"dst": dst, "weight": weight, "units": units, "frac": frac,
                                          "adjacency": adjacency}, {"members": members}, built), left, strict=True):
            def staying(count=count):  # every vertex's block but the touched ones'
                counts = tables[count][:self.num_vertices].copy()
                counts[at] = 0
                return counts
            new[start], moved[start] = pool.put(columns, new[count], int(old), tables[start][:self.num_vertices],
                                                staying)
        for start, where in moved.items():
            if where is not None:
                undo.write(tables[start], slice(0, self.num_vertices), where)
        for name in _TABLES:
            undo.write(tables[name], at, x.asarray(new[name]))
        self.num_edges = self._edges.live
        self.version += 1

    # A DynamicGraph's batch across partitions, in two phases (stage everywhere, then commit everywhere), each
    # batch by its token; a phase's calls may arrive late (their client interrupted) or in any order on a worker.

    def _stage_batch(self, token: int, batch: Batch) -> int:
        """:meth:`_stage` of batch ``token``; the batch before it is settled then (what takes it back dropped). A
        token taken back already (a stage arriving after it) stages nothing: -1."""
        with self._lock:
            if token <= self._token:
                return -1
            self._token, self._staged, self._undo = token, None, None
            return self._stage(batch)

    def _commit_batch(self, token: int) -> None:
        """:meth:`_commit` of batch ``token``, which :meth:`_take_back` can undo until the next batch is staged."""
        with self._lock:
            if token != self._token or self._staged is None:
                raise GpipeError(f"batch {token} is not staged here (taken back, or its stage failed)")
            self._undo = self._commit()  # type: ignore[assignment]

    def _take_back(self, token: int) -> None:
        """Take batch ``token`` back: drop it staged, or undo it committed; its stage, arriving later, stages
        nothing. A later batch staged already: nothing to do."""
        with self._lock:
            if token < self._token:
                return
            if token == self._token and self._undo is not None:
                self._undo.restore(self)
            self._token, self._staged, self._undo = token, None, None

    def _pools(self) -> tuple[_Pool, _Pool, _Pool]:
        return self._edges, self._members, self._groups

    def _arrays(self) -> dict:
        """The arrays ``SAMPLE`` reads, as now, on ``device``."""
        pools = {**self._edges.arrays, **self._members.arrays, **self._groups.arrays}
        return {a.name: self._tables[a.name][:self.num_vertices] if a.name in self._tables else pools[a.name]
                for a in SPACE_ARGS}

    @property
    def nbytes(self) -> int:
        """Bytes of the space on its device: the pools' blocks handed out (edges: destination, weight, integer and
        decimal parts, the sorted adjacency; listed members; group and alias tables), those left behind since the
        last compaction included, and the per-vertex tables."""
        return self._edges.nbytes + self._members.nbytes + self._groups.nbytes + 8 * len(_TABLES) * self.num_vertices

    def view(self, part: int, lo: int, hi: int, bounds: np.ndarray) -> SpaceView:
        """The space as last committed, for a run to read as partition ``part`` (vertices ``lo .. hi-1`` of
        ``bounds``) while later batches apply, without a copy: a commit writes past every block a version reads (a
        compaction into new arrays), and copies the per-vertex tables before it writes those a view holds."""
        self._tables_pinned = True
        return SpaceView(part, lo, hi, bounds, self._arrays(), self._edges.arrays["adjacency"], self.version)

    def sample(self, vertices, seed: int, streams=None) -> Any:
        """One neighbor of each of ``vertices`` (-1 for a vertex without edges), drawn from stream ``streams[i]``
        (default ``i``) of ``seed``'s counter-based random stream: a numpy array, or cupy on the GPU."""
        vertices = np.ascontiguousarray(check_array("vertices", vertices), np.int64).ravel()
        if vertices.size and (vertices.min() < 0 or vertices.max() >= self.num_vertices):
            raise GpipeValueError(f"'vertices' must be ids in [0, {self.num_vertices}), got {vertices.min()} .. "
                                  f"{vertices.max()}")
        n = vertices.shape[0]
        streams = np.arange(n, dtype=np.int64) if streams is None else check_array("streams", streams)
        if streams.shape != (n,):
            raise GpipeValueError(f"'streams' must hold one stream id per vertex ({n}), got shape {streams.shape}")
        x = xp(self.device)
        out = x.empty(n, x.int64)
        SAMPLE.launch(**self._arrays(), key=_rng.key(seed), n=n, vertex=x.asarray(vertices),
                      stream=x.ascontiguousarray(x.asarray(streams), dtype=x.int64), out=out)
        return out

    def probabilities(self, v: int) -> np.ndarray:
        """The probability that ``sample`` draws each of ``v``'s edges (in log order), as implied by its groups,
        alias table and within-group weights."""
        d, count = int(self._tables["degree"][v]), int(self._tables["group_count"][v])
        units, frac = (self._row(v, self._edges, name, "edge_start", "degree") for name in ("units", "frac"))
        g = self.groups(v)
        members = self._row(v, self._members, "members", "member_start", "member_count")
        group = np.zeros(count)
        for slot in range(count):
            p = g["alias_prob"][slot]
            group[slot] += p / count
            group[g["alias_other"][slot]] += (1 - p) / count
        out = np.zeros(d)
        for k in range(count):
            kind, bit, start = g["group_kind"][k], g["group_bit"][k], g["group_start"][k]
            if kind == _ONE:
                local = np.array([start])
            elif kind == _DENSE:  # the edges a try keeps
                local = np.flatnonzero(frac > 0 if bit == DECIMAL else (units >> bit) & 1 == 1)
            else:
                local = members[start:start + g["group_size"][k]]
            within = frac[local] if bit == DECIMAL else np.ones(len(local))
            np.add.at(out, local, group[k] * within / within.sum())
        return out
