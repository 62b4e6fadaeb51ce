"""Bingo's per-vertex sampling space (Wang et al., EuroSys'23) for the vertices of one partition, in flat arrays.

Each edge's bias, times the amortization factor ``scale``, splits into an integer part and a decimal part
(``frac`` in [0, 1)). The integer part is factorized by radix: the edge joins group ``k`` of its source for each
bit ``k`` set, where every member weighs ``2**k``, so a member is drawn uniformly. The decimal parts form one more
group (bit ``DECIMAL``), drawn by rejection: a uniform member, kept with probability ``frac``. An alias table over a
vertex's groups picks the group. The groups of vertex ``v`` are the rows ``group_indptr[v] .. group_indptr[v+1]``
of the group tables (at most ``MAX_GROUPS``); its edges are ``indptr[v] .. indptr[v+1]``, kept in log order, so the
earliest copy of a duplicated edge is the first. The same rows of ``adjacency`` hold the vertex's destinations
sorted (a duplicated edge once a copy), which answer "is u a neighbor of v?" by binary search (node2vec's test).

A group is stored in one of the paper's adaptive representations (``group_kind``):

- ``ONE``, a one-element group: ``group_start`` is its edge's local offset;
- ``DENSE``, holding at least ``dense_fraction`` of the vertex's edges: nothing is stored; a uniform edge of the
  vertex is drawn and rejected unless it is in the group (its bit is set, its decimal part is not zero), which
  rejects fewer than ``1 - dense_fraction`` of the tries;
- ``LISTED``, the others (the paper's sparse and regular groups): its members, local edge offsets, are
  ``members[member_indptr[v] + group_start ...]``, ``group_size`` of them.

CUDA sampling in ``kernels/dynamic.cu``, CPU twin here; the same random stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _rng, config
from .._validate import check_array, check_int, check_probability
from ..backend import cpu_kernel, prange, resolve, segments, xp
from ..errors import GpipeValueError
from ..kernels import Arg, Kernel

MAX_GROUPS = 64  # 63 radix bits of an int64 integer part, and the decimal group
DECIMAL = -1  # the decimal group's bit
KINDS = {"one": 0, "dense": 1, "listed": 2}  # group_kind (the kernel's GROUP_ONE, GROUP_DENSE, GROUP_LISTED)
_ONE, _DENSE, _LISTED = KINDS["one"], KINDS["dense"], KINDS["listed"]
OPS = {"insert": 0, "delete": 1, "update": 2}
_INSERT, _DELETE = OPS["insert"], OPS["delete"]


@cpu_kernel()
def _alias(weights, count, prob, other, base):
    """Vose's alias table of ``weights[:count]`` into ``prob[base:base+count]`` and ``other`` (local indices)."""
    total = 0.0
    for g in range(count):
        total += weights[g]
    scaled = np.empty(count, np.float64)
    small = np.empty(count, np.int64)
    large = np.empty(count, np.int64)
    ns = 0
    nl = 0
    for g in range(count):
        scaled[g] = weights[g] * count / total
        if scaled[g] < 1.0:
            small[ns] = g
            ns += 1
        else:
            large[nl] = g
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        g = large[nl - 1]
        prob[base + s] = scaled[s]
        other[base + s] = g
        scaled[g] = (scaled[g] + scaled[s]) - 1.0
        if scaled[g] < 1.0:
            nl -= 1
            small[ns] = g
            ns += 1
    for j in range(nl):  # what rounding leaves: full columns
        prob[base + large[j]] = 1.0
        other[base + large[j]] = large[j]
    for j in range(ns):
        prob[base + small[j]] = 1.0
        other[base + small[j]] = small[j]


@cpu_kernel()
def _in_group(units, frac, e, bit):
    return frac[e] > 0.0 if bit == DECIMAL else (units[e] >> bit) & 1 == 1


@cpu_kernel()
def _group_sizes(units, frac, a, d):
    """The size of each group of the edges ``a .. a+d-1`` (bit k at k, the decimal group at ``MAX_GROUPS - 1``)
    and the sum of their decimal parts."""
    sizes = np.zeros(MAX_GROUPS, np.int64)
    decimal = 0.0
    for j in range(d):
        u = units[a + j]
        for k in range(MAX_GROUPS - 1):
            if (u >> k) & 1:
                sizes[k] += 1
        if frac[a + j] > 0.0:
            sizes[MAX_GROUPS - 1] += 1
            decimal += frac[a + j]
    return sizes, decimal


@cpu_kernel()
def _kind(size, d, dense_fraction):
    if size == 1:
        return _ONE
    return _DENSE if size >= dense_fraction * d else _LISTED


@cpu_kernel(parallel=True)
def _count_groups(vertices, indptr, units, frac, dense_fraction, groups, listed):
    """How many groups each vertex of ``vertices`` has, and how many members it lists (those of its ``LISTED``
    groups), into ``groups[i]`` and ``listed[i]``."""
    for i in prange(vertices.shape[0]):
        a = indptr[vertices[i]]
        d = indptr[vertices[i] + 1] - a
        sizes, _ = _group_sizes(units, frac, a, d)
        groups[i] = 0
        listed[i] = 0
        for k in range(MAX_GROUPS):
            if sizes[k] > 0:
                groups[i] += 1
                listed[i] += sizes[k] if _kind(sizes[k], d, dense_fraction) == _LISTED else 0


@cpu_kernel(parallel=True)
def _build(vertices, indptr, units, frac, dense_fraction, member_indptr, members, group_indptr, group_kind,
           group_bit, group_start, group_size, alias_prob, alias_other):
    """The groups, members and alias table of each vertex of ``vertices``, from its edges' ``units`` and ``frac``."""
    for i in prange(vertices.shape[0]):
        v = vertices[i]
        a = indptr[v]
        d = indptr[v + 1] - a
        sizes, decimal = _group_sizes(units, frac, a, d)
        row = group_indptr[v]
        weights = np.zeros(MAX_GROUPS, np.float64)
        slot_of = np.full(MAX_GROUPS, -1, np.int64)
        count = 0
        start = 0
        for k in range(MAX_GROUPS):
            if sizes[k] == 0:
                continue
            bit = DECIMAL if k == MAX_GROUPS - 1 else k
            kind = _kind(sizes[k], d, dense_fraction)
            slot_of[k] = count if kind == _LISTED else -1
            group_kind[row + count] = kind
            group_bit[row + count] = bit
            group_start[row + count] = start if kind == _LISTED else 0
            group_size[row + count] = sizes[k]
            if kind == _ONE:
                for j in range(d):
                    if _in_group(units, frac, a + j, bit):
                        group_start[row + count] = j
            weights[count] = decimal if bit == DECIMAL else np.float64(sizes[k]) * 2.0 ** k
            start += sizes[k] if kind == _LISTED else 0
            count += 1
        filled = np.zeros(MAX_GROUPS, np.int64)
        m = member_indptr[v]
        for j in range(d):
            for k in range(MAX_GROUPS):
                g = slot_of[k]
                if g >= 0 and _in_group(units, frac, a + j, DECIMAL if k == MAX_GROUPS - 1 else k):
                    members[m + group_start[row + g] + filled[g]] = j
                    filled[g] += 1
        if count > 0:
            _alias(weights, count, alias_prob, alias_other, row)


@cpu_kernel()
def pick_in_space(indptr, units, frac, member_indptr, members, group_indptr, group_kind, group_bit, group_start,
                  group_size, alias_prob, alias_other, key, stream, step, first, v):
    """The edge drawn from vertex ``v`` of a space's arrays (-1 if it has none), with the draws ``first ..`` of
    ``(key, stream, step)``: draws ``first`` and ``first + 1`` pick the group through the alias table; draws
    ``first + 2t + 2`` and ``first + 2t + 3`` are the t-th try within it (the edge: a member, or in a dense group any
    edge, kept if in the group; then, in the decimal group, its acceptance with probability ``frac``). CUDA:
    ``gp_space_pick`` in ``kernels/dynamic.cuh``, defined with ``PICK_DEFINES``."""
    row = group_indptr[v]
    count = group_indptr[v + 1] - row
    if count == 0:
        return np.int64(-1)
    slot = _rng.below(_rng.bits(key, stream, step, first), count)
    g = slot if _rng.unit(_rng.bits(key, stream, step, first + 1)) < alias_prob[row + slot] \
        else np.int64(alias_other[row + slot])
    kind = group_kind[row + g]
    bit = group_bit[row + g]
    if kind == _ONE:
        return indptr[v] + group_start[row + g]
    t = np.int64(-1)
    while True:
        t += 1
        r = _rng.bits(key, stream, step, first + 2 * t + 2)
        if kind == _LISTED:
            e = indptr[v] + members[member_indptr[v] + group_start[row + g] + _rng.below(r, group_size[row + g])]
        else:
            e = indptr[v] + _rng.below(r, indptr[v + 1] - indptr[v])
            if bit != DECIMAL and not (units[e] >> bit) & 1:
                continue
        if bit != DECIMAL or _rng.unit(_rng.bits(key, stream, step, first + 2 * t + 3)) < frac[e]:
            return e


@cpu_kernel(parallel=True)
def _sample_cpu(indptr, dst, units, frac, member_indptr, members, group_indptr, group_kind, group_bit, group_start,
                group_size, alias_prob, alias_other, key, n, vertex, stream, out):
    for i in prange(n):
        e = pick_in_space(indptr, units, frac, member_indptr, members, group_indptr, group_kind, group_bit,
                          group_start, group_size, alias_prob, alias_other, key, stream[i], 0, 0, vertex[i])
        out[i] = -1 if e < 0 else dst[e]


PICK_DEFINES = {"DECIMAL_GROUP": DECIMAL, **{f"GROUP_{k.upper()}": v for k, v in KINDS.items()}}  # of gp_space_pick
SAMPLE = Kernel("dynamic.cu", "gp_dynamic_sample", twin=_sample_cpu, items="n", defines=PICK_DEFINES, args=(
    Arg("indptr", "i64[]"), Arg("dst", "i64[]"), Arg("units", "i64[]", note="integer parts of the scaled biases"),
    Arg("frac", "f64[]"), Arg("member_indptr", "i64[]"), Arg("members", "i64[]", note="local edge offsets"),
    Arg("group_indptr", "i64[]"), Arg("group_kind", "i8[]"), Arg("group_bit", "i32[]"),
    Arg("group_start", "i64[]"), Arg("group_size", "i64[]"), Arg("alias_prob", "f64[]"), Arg("alias_other", "i32[]"),
    Arg("key", "u64"), Arg("n", "i64"), Arg("vertex", "i64[n]"), Arg("stream", "i64[n]"),
    Arg("out", "i64[n]", out=True, note="neighbor, -1 for a vertex without edges")))


@cpu_kernel(parallel=True)
def _replay(vertices, op_start, order, codes, dst, weight, indptr, old_dst, old_weight, old_vertices, slot_start,
            out_dst, out_weight, alive, failed):
    """Each vertex's updates in log order, on a copy of its edges in ``slot_start[i] ..`` (room for its inserts):
    an insert appends, a delete clears the earliest live copy, an update re-weights every live copy. ``failed[i]``
    is the position of the vertex's first delete or update of an edge it lacks (-1: none)."""
    for i in prange(vertices.shape[0]):
        v = vertices[i]
        base = slot_start[i]
        end = base
        if v < old_vertices:
            for e in range(indptr[v], indptr[v + 1]):
                out_dst[end] = old_dst[e]
                out_weight[end] = old_weight[e]
                alive[end] = True
                end += 1
        for q in range(op_start[i], op_start[i + 1]):
            p = order[q]
            u = dst[p]
            if codes[p] == _INSERT:
                out_dst[end] = u
                out_weight[end] = weight[p]
                alive[end] = True
                end += 1
                continue
            found = False
            for s in range(base, end):
                if alive[s] and out_dst[s] == u:
                    found = True
                    if codes[p] == _DELETE:
                        alive[s] = False
                        break
                    out_weight[s] = weight[p]
            if not found:
                failed[i] = p
                break


@dataclass(frozen=True)
class SpaceView:
    """One committed version of a :class:`SamplingSpace`, read by runs as partition ``part`` of a snapshot: its
    vertices ``lo .. hi-1`` (the first ``space_vertices`` with edges in the space, the others none yet), ``bounds``
    the snapshot's partition bounds, ``arrays`` those ``SAMPLE`` reads and ``adjacency``, on the worker's device."""

    part: int
    lo: int
    hi: int
    bounds: np.ndarray
    arrays: dict
    adjacency: object  # each vertex's destinations sorted, rows by ``arrays["indptr"]``, on the worker's device

    @property
    def indptr(self):
        """A partition's CSR offsets: of the vertices ``lo ..`` with a row in the space (``space_vertices``)."""
        return self.arrays["indptr"]

    @property
    def indices(self):
        """The edges' destinations (global ids) as a partition's CSR indices, each vertex's sorted: what a peer
        borrows as its neighbor list (``runtime.neighbor_lists``)."""
        return self.adjacency

    @property
    def space_vertices(self) -> int:
        return int(self.arrays["indptr"].shape[0]) - 1


def _segments(indptr: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """The flat positions of the segments ``indptr[v]..indptr[v+1]`` of ``vertices``, in order."""
    segment, position = segments(np, indptr[vertices + 1] - indptr[vertices])
    return indptr[vertices][segment] + position


@dataclass(frozen=True)
class Batch:
    """A checked batch of updates: ``codes`` (of ``OPS``), ``src``, ``dst`` (int64) and ``weight`` (float64; 1 for
    a delete), and the ``op`` names and ``given`` weights, for messages."""

    op: np.ndarray
    codes: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    given: np.ndarray

    def take(self, positions: np.ndarray, src: np.ndarray | None = None, dst: np.ndarray | None = None) -> Batch:
        """The updates at ``positions``, in that order (with ``src`` and ``dst`` in place of theirs)."""
        return Batch(self.op[positions], self.codes[positions], self.src[positions] if src is None else src,
                     self.dst[positions] if dst is None else dst, self.weight[positions], self.given[positions])


def check_batch(op, src, dst, weight, first: int = 0) -> Batch:
    """``op``, ``src``, ``dst``, ``weight`` as a :class:`Batch`, or a GpipeValueError naming the first bad update
    by its position in the log (``first`` + its position in the batch)."""
    op = check_array("op", op).astype(str).ravel()
    src = check_array("src", src).ravel()
    dst = check_array("dst", dst).ravel()
    given = np.asarray(weight, dtype=object).ravel()
    if not len(op) == len(src) == len(dst) == len(given):
        raise GpipeValueError(f"'op', 'src', 'dst' and 'weight' must have one entry per update, got lengths "
                              f"{len(op)}, {len(src)}, {len(dst)} and {len(given)}")
    codes = np.array([OPS.get(o, -1) for o in op], np.int64)
    if (codes < 0).any():
        bad = int(np.argmax(codes < 0))
        raise GpipeValueError(f"update {first + bad}: 'op' must be one of {sorted(OPS)}, got {op[bad]!r}")
    src, dst = _whole(src), _whole(dst)
    for name, ids in (("src", src), ("dst", dst)):
        if ids.size and (ids.dtype.kind not in "iu" or ids.min() < 0):
            bad = _first_not_id(ids)
            raise GpipeValueError(f"update {first + bad}: '{name}' must hold non-negative integer vertex ids, got "
                                  f"{ids[bad].item() if hasattr(ids[bad], 'item') else ids[bad]!r}")
    weighed = np.where(codes != _DELETE, given, 1.0)
    try:
        values = weighed.astype(np.float64)
    except (TypeError, ValueError):  # not numbers: find which
        values = np.array([w if isinstance(w, (int, float, np.integer, np.floating)) else np.nan for w in weighed],
                          np.float64)
    if not (np.isfinite(values) & (values > 0)).all():
        i = int(np.argmax(~(np.isfinite(values) & (values > 0))))
        raise GpipeValueError(f"update {first + i}: the weight of an {op[i]} must be positive and finite, got "
                              f"{given[i]!r}")
    return Batch(op, codes, src.astype(np.int64), dst.astype(np.int64), values, given)


def _whole(ids: np.ndarray) -> np.ndarray:
    """Floats that are all whole numbers as int64 (a CSV column with an empty cell elsewhere reads as floats)."""
    if ids.dtype.kind == "f" and ids.size and (np.isfinite(ids) & (ids == np.round(ids))).all():
        return ids.astype(np.int64)
    return ids


def _first_not_id(ids: np.ndarray) -> int:
    """The position of the first entry of ``ids`` that is not a non-negative integer."""
    if ids.dtype.kind in "iu":
        return int(np.argmax(ids < 0))
    if ids.dtype.kind == "f":
        return int(np.argmax(~(np.isfinite(ids) & (ids == np.round(ids)) & (ids >= 0))))
    return next((i for i, v in enumerate(ids) if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0),
                0)


def absent(batch: Batch, i: int, first: int = 0) -> GpipeValueError:
    """The error of update ``i`` of ``batch`` (``first + i`` of the log), a delete or update of an edge that is not
    there."""
    return GpipeValueError(f"update {first + i}: cannot {batch.op[i]} edge ({batch.src[i]}, {batch.dst[i]}): it is "
                           f"not in the graph")


def _kept_rows(old_indptr: np.ndarray, new_indptr: np.ndarray, kept: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``rows`` (laid out by ``old_indptr``) laid out by ``new_indptr``: the segments of ``kept`` copied, the
    others left to fill."""
    out = np.empty(new_indptr[-1], rows.dtype)
    out[_segments(new_indptr, kept)] = rows[_segments(old_indptr, kept)]
    return out


class SamplingSpace:
    """The edges of vertices ``0 .. num_vertices - 1`` and their radix-factorized sampling spaces, updated in
    batches.

    Parameters
    ----------
    num_vertices : int
        Vertices to start with; an update naming a larger source id adds the vertices up to it.
    device : {"cpu", "gpu"}, default "cpu"
        Where ``sample`` runs: the CPU twin on numpy arrays, or the CUDA kernel on a cupy copy of the arrays, made
        after each batch (batches are applied on the host).
    scale : float, default 1.0
        The amortization factor: a bias ``w`` is sampled as ``w * scale``, whose integer part is factorized by
        radix and whose decimal part joins the decimal group. Integer biases need no more than 1; for floating-point
        biases, a scale that makes the decimal parts small beside the integer parts keeps sampling in O(1).
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
        self.indptr = np.zeros(1, np.int64)
        self.dst = np.zeros(0, np.int64)
        self.adjacency = np.zeros(0, np.int64)
        self.weight = np.zeros(0, np.float64)
        self.units = np.zeros(0, np.int64)
        self.frac = np.zeros(0, np.float64)
        self.member_indptr = np.zeros(1, np.int64)
        self.members = np.zeros(0, np.int64)
        self.group_indptr = np.zeros(1, np.int64)
        self.group_kind = np.zeros(0, np.int8)
        self.group_bit = np.zeros(0, np.int32)
        self.group_start = np.zeros(0, np.int64)
        self.group_size = np.zeros(0, np.int64)
        self.alias_prob = np.zeros(0, np.float64)
        self.alias_other = np.zeros(0, np.int32)
        self._staged = None  # a batch replayed, not yet applied (_stage, _commit)
        self._grow(num_vertices)
        self._mirror()

    def _grow(self, num_vertices: int) -> None:
        extra = num_vertices - self.num_vertices
        if extra <= 0:
            return
        for name in ("indptr", "member_indptr", "group_indptr"):
            old = getattr(self, name)
            setattr(self, name, np.concatenate([old, np.full(extra, old[-1])]))
        self.num_vertices = num_vertices

    def edges(self, v: int) -> tuple[np.ndarray, np.ndarray]:
        """Vertex ``v``'s out-neighbors and biases, in log order (duplicates kept)."""
        a, b = self.indptr[v], self.indptr[v + 1]
        return self.dst[a:b].copy(), self.weight[a:b].copy()

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
        batch = check_batch(op, src, dst, weight)
        failed = self._stage(batch)
        if failed >= 0:
            self._staged = None
            raise absent(batch, failed)
        self._commit()

    def _stage(self, batch: Batch) -> int:
        """Replay ``batch`` on copies of the touched vertices' edges, kept until :meth:`_commit`; the position of
        its first delete or update of an edge that is not there (nothing kept then), else -1."""
        order = np.argsort(batch.src, kind="stable")  # each source's updates together, in log order
        vertices, op_start = np.unique(batch.src[order], return_index=True)
        op_start = np.append(op_start, len(order)).astype(np.int64)
        degree = np.append(np.diff(self.indptr), 0)[np.minimum(vertices, self.num_vertices)]  # 0: a new vertex
        inserts = np.bincount(np.searchsorted(vertices, batch.src[batch.codes == _INSERT]), minlength=len(vertices))
        slot_start = np.concatenate([[0], np.cumsum(degree + inserts)]).astype(np.int64)
        new_dst = np.empty(slot_start[-1], np.int64)
        new_weight = np.empty(slot_start[-1], np.float64)
        alive = np.zeros(slot_start[-1], np.bool_)
        failed = np.full(len(vertices), -1, np.int64)
        _replay(vertices, op_start, order, batch.codes, batch.dst, batch.weight, self.indptr, self.dst, self.weight,
                self.num_vertices, slot_start, new_dst, new_weight, alive, failed)
        if (failed >= 0).any():
            return int(failed[failed >= 0].min())
        running = np.concatenate([[0], np.cumsum(alive)])
        self._staged = (vertices, running[slot_start[1:]] - running[slot_start[:-1]], new_dst[alive],
                        new_weight[alive])
        return -1

    def _commit(self) -> None:
        """Apply the batch :meth:`_stage` kept."""
        vertices, degrees, dst, weight = self._staged
        self._staged = None
        self._grow(int(vertices[-1]) + 1 if len(vertices) else 0)
        self._replace(vertices, degrees, dst, weight)

    def _replace(self, vertices: np.ndarray, degrees: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> None:
        """Give ``vertices`` (sorted) ``degrees`` edges, ``dst`` and ``weight`` one vertex after the other; keep
        every other vertex's edges and members as they are (their offsets are local), and rebuild the touched
        vertices' groups and alias tables."""
        kept = np.setdiff1d(np.arange(self.num_vertices), vertices)
        degree = np.diff(self.indptr)
        degree[vertices] = degrees
        indptr = np.concatenate([[0], np.cumsum(degree)])
        new_dst, new_weight, adjacency = (_kept_rows(self.indptr, indptr, kept, old)
                                          for old in (self.dst, self.weight, self.adjacency))
        at = _segments(indptr, vertices)
        new_dst[at], new_weight[at] = dst, weight
        adjacency[at] = dst[np.lexsort((dst, np.repeat(np.arange(len(vertices)), degrees)))]
        scaled = new_weight * self.scale
        units = np.floor(scaled).astype(np.int64)
        frac = scaled - units
        groups, listed = np.empty(len(vertices), np.int64), np.empty(len(vertices), np.int64)
        _count_groups(vertices, indptr, units, frac, self.dense_fraction, groups, listed)
        member_count, group_count = np.diff(self.member_indptr), np.diff(self.group_indptr)
        member_count[vertices], group_count[vertices] = listed, groups
        member_indptr = np.concatenate([[0], np.cumsum(member_count)])
        members = _kept_rows(self.member_indptr, member_indptr, kept, self.members)
        group_indptr = np.concatenate([[0], np.cumsum(group_count)])
        for name in _GROUP_TABLES:
            setattr(self, name, _kept_rows(self.group_indptr, group_indptr, kept, getattr(self, name)))
        self.indptr, self.dst, self.weight, self.units, self.frac = indptr, new_dst, new_weight, units, frac
        self.adjacency = adjacency
        self.member_indptr, self.members, self.group_indptr = member_indptr, members, group_indptr
        _build(vertices, indptr, units, frac, self.dense_fraction, member_indptr, members, group_indptr,
               self.group_kind, self.group_bit, self.group_start, self.group_size, self.alias_prob, self.alias_other)
        self._mirror()

    def _mirror(self) -> None:
        """The arrays ``sample`` reads, on ``device``: a new dict of new arrays each commit (see :meth:`view`)."""
        x = xp(self.device)
        self._arrays = {name: x.asarray(getattr(self, name)) for name in _SAMPLED}
        self._adjacency = x.asarray(self.adjacency)

    @property
    def nbytes(self) -> int:
        """Bytes of the space's arrays: the edges (destination, weight, integer and decimal parts, the sorted
        adjacency), the listed members and the group and alias tables, as held on the host (on a GPU, the arrays
        ``sample`` and the walks read are a copy of most of them on the device)."""
        return sum(getattr(self, name).nbytes for name in ("weight", "adjacency", *_SAMPLED))

    def view(self, part: int, lo: int, hi: int, bounds: np.ndarray) -> SpaceView:
        """The space as last committed, for a run to read as partition ``part`` (vertices ``lo .. hi-1`` of
        ``bounds``) while later batches apply: a commit builds new arrays and never writes those of an earlier
        commit, so the view holds them as they were, without a copy."""
        return SpaceView(part, lo, hi, bounds, self._arrays, self._adjacency)

    def sample(self, vertices, seed: int, streams=None):
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
        SAMPLE.launch(**self._arrays, key=_rng.key(seed), n=n, vertex=x.asarray(vertices),
                      stream=x.ascontiguousarray(x.asarray(streams), dtype=x.int64), out=out)
        return out

    def probabilities(self, v: int) -> np.ndarray:
        """The probability that ``sample`` draws each of ``v``'s edges (in log order), as implied by its groups,
        alias table and within-group weights."""
        a, d, row = self.indptr[v], self.indptr[v + 1] - self.indptr[v], self.group_indptr[v]
        count = int(self.group_indptr[v + 1] - row)
        group = np.zeros(count)
        for slot in range(count):
            p = self.alias_prob[row + slot]
            group[slot] += p / count
            group[self.alias_other[row + slot]] += (1 - p) / count
        out = np.zeros(d)
        for g in range(count):
            kind, bit, start = self.group_kind[row + g], self.group_bit[row + g], self.group_start[row + g]
            if kind == _ONE:
                local = np.array([start])
            elif kind == _DENSE:  # the edges a try keeps
                edges = np.arange(a, a + d)
                local = edges[self.frac[edges] > 0 if bit == DECIMAL else (self.units[edges] >> bit) & 1 == 1] - a
            else:
                start += self.member_indptr[v]
                local = self.members[start:start + self.group_size[row + g]]
            within = self.frac[a + local] if bit == DECIMAL else np.ones(len(local))
            np.add.at(out, local, group[g] * within / within.sum())
        return out


_GROUP_TABLES = ("group_kind", "group_bit", "group_start", "group_size", "alias_prob", "alias_other")  # a row a group
_SAMPLED = ("indptr", "dst", "units", "frac", "member_indptr", "members", "group_indptr") + _GROUP_TABLES  # SAMPLE's
