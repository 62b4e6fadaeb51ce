"""Bingo's per-vertex sampling space (Wang et al., EuroSys'23) for the vertices of one partition, in flat arrays.

Each edge's bias, times the amortization factor ``scale``, splits into an integer part and a decimal part
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

import contextlib
import numbers
import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import _rng, config
from .._alias import vose
from .._search import lower_bound
from .._validate import check_array, check_int, check_integers, check_probability
from ..backend import (
    cpu_kernel,
    cpu_threads,
    device_of,
    prange,
    resolve,
    segments,
    to_host,
    xp,
)
from ..errors import GpipeError, GpipeValueError
from ..kernels import TYPES, Arg, Kernel

MAX_GROUPS = 64  # 63 radix bits of an int64 integer part, and the decimal group
DECIMAL = -1  # the decimal group's bit
KINDS = {"one": 0, "dense": 1, "listed": 2}  # group_kind (the kernel's GROUP_ONE, GROUP_DENSE, GROUP_LISTED)
_ONE, _DENSE, _LISTED = KINDS["one"], KINDS["dense"], KINDS["listed"]
OPS = {"insert": 0, "delete": 1, "update": 2}
_INSERT, _DELETE = OPS["insert"], OPS["delete"]
_HELD = 3  # in a batch's play on the device: a copy of an edge the vertex held before the batch
COMPACT_SLACK = 1 << 12  # a pool is compacted once its slots left behind would outnumber its live ones by this many
SMALL_BATCH = 256  # a GPU space stages and builds a batch of at most this many updates on the host, in a few copies
CHUNK = 1024  # a touched vertex of more edges is rebuilt by a warp per chunk of this many (its decimal parts summed
# chunk by chunk, in order, each chunk's in a warp's order)
LINEAR_MATCHES = 8  # a vertex with at most this many deletes and updates in a batch scans its edges for each
_EDGE_FIELDS = {"dst": np.int64, "weight": np.float64, "units": np.int64, "frac": np.float64, "adjacency": np.int64}
_GROUP_FIELDS = {"group_kind": np.int8, "group_bit": np.int32, "group_start": np.int64, "group_size": np.int64,
                 "alias_prob": np.float64, "alias_other": np.int32}  # a row a group
_TABLES = ("edge_start", "degree", "member_start", "member_count", "group_row", "group_count")  # a row a vertex
_BLOCKS = (("edge_start", "degree"), ("member_start", "member_count"), ("group_row", "group_count"))  # of each pool
VERTEX_BYTES = 8 * len(_TABLES)  # a vertex's rows of the per-vertex tables, edges or not


@cpu_kernel()
def _in_group(units, frac, e, bit):
    return frac[e] > 0.0 if bit == DECIMAL else (units[e] >> bit) & 1 == 1


@cpu_kernel()
def _chunk_sizes(units, frac, a, lo, hi, sizes):
    """Add the size of each group of the edges ``a+lo .. a+hi-1`` (at most ``CHUNK``) to ``sizes`` (bit k at k, the
    decimal group at ``MAX_GROUPS - 1``); return the sum of their decimal parts in the order of a warp's sum
    (``gp_chunk_sizes`` in ``kernels/space.cu``): lane ``l`` sums the edges ``lo + l, lo + l + 32, ..`` in turn, then
    the lanes' sums are halved pairwise."""
    partial = np.zeros(32, np.float64)
    for j in range(lo, hi):
        u = units[a + j]
        for k in range(MAX_GROUPS - 1):
            if (u >> k) & 1:
                sizes[k] += 1
        if frac[a + j] > 0.0:
            sizes[MAX_GROUPS - 1] += 1
            partial[(j - lo) % 32] += frac[a + j]
    half = 16
    while half > 0:
        for lane in range(half):
            partial[lane] = partial[lane] + partial[lane + half]
        half //= 2
    return partial[0]


@cpu_kernel()
def _vertex_sizes(units, frac, a, d, first_chunk, chunks, chunk_sizes, chunk_decimal):
    """A touched vertex's group sizes and the sum of its decimal parts, chunk by chunk in order: from its chunks'
    (``chunks`` of them from ``first_chunk``: :func:`_chunks_cpu`) if it has more than ``CHUNK`` edges, else from
    its edges ``a .. a+d-1``."""
    sizes = np.zeros(MAX_GROUPS, np.int64)
    decimal = 0.0
    if chunks == 0:
        decimal += _chunk_sizes(units, frac, a, 0, d, sizes)
    for c in range(first_chunk, first_chunk + chunks):
        for k in range(MAX_GROUPS):
            sizes[k] += chunk_sizes[c * MAX_GROUPS + k]
        decimal += chunk_decimal[c]
    return sizes, decimal


@cpu_kernel(parallel=True)
def _chunks_cpu(indptr, units, frac, n, chunk_vertex, chunk_index, chunk_sizes, chunk_decimal):
    """Each chunk ``c < n`` of a vertex of more than ``CHUNK`` edges (its edges ``chunk_index[c] * CHUNK ..``, of
    touched vertex ``chunk_vertex[c]``): its group sizes into ``chunk_sizes[c * MAX_GROUPS ..]`` and the sum of its
    decimal parts."""
    for c in prange(n):
        a = indptr[chunk_vertex[c]]
        lo = chunk_index[c] * CHUNK
        hi = min(indptr[chunk_vertex[c] + 1] - a, lo + CHUNK)
        sizes = np.zeros(MAX_GROUPS, np.int64)
        chunk_decimal[c] = _chunk_sizes(units, frac, a, lo, hi, sizes)
        chunk_sizes[c * MAX_GROUPS:(c + 1) * MAX_GROUPS] = sizes


@cpu_kernel()
def _kind(size, d, dense_fraction):
    if size == 1:
        return _ONE
    return _DENSE if size >= dense_fraction * d else _LISTED


@cpu_kernel(parallel=True)
def _sorted_rows_cpu(indptr, values, out):
    """Each row ``values[indptr[i] .. indptr[i+1]-1]`` sorted into the same range of ``out``, rows in parallel."""
    for i in prange(indptr.shape[0] - 1):
        out[indptr[i]:indptr[i + 1]] = np.sort(values[indptr[i]:indptr[i + 1]])


def _sorted_rows(x, indptr, values):
    """Each row ``values[indptr[i] .. indptr[i+1]-1]`` sorted in place of it (arrays of ``x``)."""
    if x is np:
        out = np.empty_like(values)
        _sorted_rows_cpu(indptr, values, out)
        return out
    return values[_pair_order(x, segments(x, x.diff(indptr))[0], values)]


def _pair_order(x, first, second):
    """The stable order sorting the pairs ``(first[i], second[i])`` (non-negative int64 arrays of ``x``): one sort
    of a combined key where it fits in 63 bits, else two stable sorts."""
    if not first.shape[0]:
        return x.zeros(0, np.int64)
    span = int(second.max()) + 1
    if int(first.max()) < (1 << 62) // span:
        return x.argsort(first * span + second, kind="stable")
    order = x.argsort(second, kind="stable")
    return order[x.argsort(first[order], kind="stable")]


@cpu_kernel(parallel=True)
def _count_groups(indptr, units, frac, dense_fraction, n, chunk_start, chunk_count, chunk_sizes, chunk_decimal,
                  groups, listed):
    """How many groups each touched vertex ``i < n`` (edges ``indptr[i] .. indptr[i+1]-1``) has, and how many
    members it lists (those of its ``LISTED`` groups), into ``groups[i]`` and ``listed[i]``."""
    for i in prange(n):
        a = indptr[i]
        d = indptr[i + 1] - a
        sizes, _ = _vertex_sizes(units, frac, a, d, chunk_start[i], chunk_count[i], chunk_sizes, chunk_decimal)
        groups[i] = 0
        listed[i] = 0
        for k in range(MAX_GROUPS):
            if sizes[k] > 0:
                groups[i] += 1
                listed[i] += sizes[k] if _kind(sizes[k], d, dense_fraction) == _LISTED else 0


@cpu_kernel()
def _place_members(units, frac, a, lo, hi, count, row, m, group_kind, group_bit, group_start, offset, members):
    """Place the members of the edges ``a+lo .. a+hi-1`` (local offsets, in edge order) in the ``LISTED`` groups of
    a vertex's ``count`` groups (rows ``row ..``), group ``g``'s after the ``offset[g]`` placed before them, and
    write a ``ONE`` group's edge into its ``group_start``."""
    filled = np.zeros(MAX_GROUPS, np.int64)
    for j in range(lo, hi):
        for g in range(count):
            kind = group_kind[row + g]
            if kind != _DENSE and _in_group(units, frac, a + j, group_bit[row + g]):
                if kind == _ONE:
                    group_start[row + g] = j
                else:
                    members[m + group_start[row + g] + offset[g] + filled[g]] = j
                    filled[g] += 1


@cpu_kernel(parallel=True)
def _build(indptr, units, frac, dense_fraction, n, chunk_start, chunk_count, chunk_sizes, chunk_decimal,
           chunk_offset, member_start, members, group_row, group_kind, group_bit, group_start, group_size, alias_prob,
           alias_other):
    """The groups and alias table of each touched vertex ``i < n`` (edges ``indptr[i] .. indptr[i+1]-1`` of
    ``units`` and ``frac``) into its block of the group pool from ``group_row[i]``, and its listed members into its
    block of the member pool from ``member_start[i]``; for a vertex of more than ``CHUNK`` edges, where each of its
    chunks' members go (``chunk_offset[c * MAX_GROUPS + g]``: group ``g``'s placed before chunk ``c``), which
    :func:`_place_cpu` places."""
    for i in prange(n):
        a = indptr[i]
        d = indptr[i + 1] - a
        sizes, decimal = _vertex_sizes(units, frac, a, d, chunk_start[i], chunk_count[i], chunk_sizes, chunk_decimal)
        row = group_row[i]
        weights = np.zeros(MAX_GROUPS, np.float64)
        count = 0
        start = 0
        for k in range(MAX_GROUPS):
            if sizes[k] == 0:
                continue
            bit = DECIMAL if k == MAX_GROUPS - 1 else k
            kind = _kind(sizes[k], d, dense_fraction)
            group_kind[row + count] = kind
            group_bit[row + count] = bit
            group_start[row + count] = start if kind == _LISTED else 0
            group_size[row + count] = sizes[k]
            weights[count] = decimal if bit == DECIMAL else np.float64(sizes[k]) * 2.0 ** k
            start += sizes[k] if kind == _LISTED else 0
            count += 1
        if count > 0:
            worklists = np.empty(2 * count, np.int64)
            vose(weights, 0, count, alias_prob, alias_other, row, worklists, worklists[count:], 0)
        if chunk_count[i] == 0:
            _place_members(units, frac, a, 0, d, count, row, member_start[i], group_kind, group_bit, group_start,
                           np.zeros(MAX_GROUPS, np.int64), members)
            continue
        for g in range(count):  # each group's members before each chunk
            k = MAX_GROUPS - 1 if group_bit[row + g] == DECIMAL else group_bit[row + g]
            before = 0
            for c in range(chunk_start[i], chunk_start[i] + chunk_count[i]):
                chunk_offset[c * MAX_GROUPS + g] = before
                before += chunk_sizes[c * MAX_GROUPS + k]


@cpu_kernel(parallel=True)
def _place_cpu(indptr, units, frac, n, chunk_vertex, chunk_index, chunk_offset, member_start, members, group_row,
               group_count, group_kind, group_bit, group_start):
    """The members of each chunk ``c < n`` of a vertex of more than ``CHUNK`` edges, placed after
    ``chunk_offset[c * MAX_GROUPS + g]`` of group ``g``'s (:func:`_build`), and its ``ONE`` groups' edges."""
    for c in prange(n):
        v = chunk_vertex[c]
        a = indptr[v]
        lo = chunk_index[c] * CHUNK
        _place_members(units, frac, a, lo, min(indptr[v + 1] - a, lo + CHUNK), group_count[v], group_row[v],
                       member_start[v], group_kind, group_bit, group_start,
                       chunk_offset[c * MAX_GROUPS:(c + 1) * MAX_GROUPS], members)


@cpu_kernel()
def pick_in_space(edge_start, degree, units, frac, member_start, members, group_row, group_count, group_kind,
                  group_bit, group_start, group_size, alias_prob, alias_other, key, stream, step, first, v):
    """The edge (its slot in the edge pool) drawn from vertex ``v`` of a space's arrays (-1 if it has none), with the
    draws ``first ..`` of ``(key, stream, step)``: draws ``first`` and ``first + 1`` pick the group through the alias
    table; draws ``first + 2t + 2`` and ``first + 2t + 3`` are the t-th try within it (the edge: a member, or in a
    dense group any edge, kept if in the group; then, in the decimal group, its acceptance with probability
    ``frac``). CUDA: ``gp_space_pick`` in ``kernels/dynamic.cuh``, defined with ``PICK_DEFINES``."""
    row = group_row[v]
    count = group_count[v]
    if count == 0:
        return np.int64(-1)
    slot = _rng.below(_rng.bits(key, stream, step, first), count)
    g = slot if _rng.unit(_rng.bits(key, stream, step, first + 1)) < alias_prob[row + slot] \
        else np.int64(alias_other[row + slot])
    kind = group_kind[row + g]
    bit = group_bit[row + g]
    if kind == _ONE:
        return edge_start[v] + group_start[row + g]
    t = np.int64(-1)
    while True:
        t += 1
        r = _rng.bits(key, stream, step, first + 2 * t + 2)
        if kind == _LISTED:
            e = edge_start[v] + members[member_start[v] + group_start[row + g] + _rng.below(r, group_size[row + g])]
        else:
            e = edge_start[v] + _rng.below(r, degree[v])
            if bit != DECIMAL and not (units[e] >> bit) & 1:
                continue
        if bit != DECIMAL or _rng.unit(_rng.bits(key, stream, step, first + 2 * t + 3)) < frac[e]:
            return e


@cpu_kernel(parallel=True)
def _sample_cpu(edge_start, degree, dst, units, frac, member_start, members, group_row, group_count, group_kind,
                group_bit, group_start, group_size, alias_prob, alias_other, key, n, vertex, stream, out):
    for i in prange(n):
        e = pick_in_space(edge_start, degree, units, frac, member_start, members, group_row, group_count, group_kind,
                          group_bit, group_start, group_size, alias_prob, alias_other, key, stream[i], 0, 0,
                          vertex[i])
        out[i] = -1 if e < 0 else dst[e]


PICK_DEFINES = {"DECIMAL_GROUP": DECIMAL, **{f"GROUP_{k.upper()}": v for k, v in KINDS.items()}}  # of gp_space_pick
SPACE_ARGS = (  # what a SpaceView's arrays hold, in the order every kernel that reads a space takes them
    Arg("edge_start", "i64[]", note="each vertex's first slot in the edge pool"), Arg("degree", "i64[]"),
    Arg("dst", "i64[]"), Arg("units", "i64[]", note="integer parts of the scaled biases"), Arg("frac", "f64[]"),
    Arg("member_start", "i64[]"), Arg("members", "i64[]", note="local edge offsets"),
    Arg("group_row", "i64[]", note="each vertex's first row in the group pool"), Arg("group_count", "i64[]"),
    Arg("group_kind", "i8[]"), Arg("group_bit", "i32[]"), Arg("group_start", "i64[]"), Arg("group_size", "i64[]"),
    Arg("alias_prob", "f64[]"), Arg("alias_other", "i32[]"))
SAMPLE = Kernel("dynamic.cu", "gp_dynamic_sample", twin=_sample_cpu, items="n", defines=PICK_DEFINES, args=(
    *SPACE_ARGS, Arg("key", "u64"), Arg("n", "i64"), Arg("vertex", "i64[n]"), Arg("stream", "i64[n]"),
    Arg("out", "i64[n]", out=True, note="neighbor, -1 for a vertex without edges")))


@cpu_kernel(parallel=True)
def _replay(op_start, order, codes, dst, weight, old_start, old_degree, old_dst, old_weight, slot_start, out_dst,
            out_weight, alive, failed):
    """Each touched vertex ``i``'s updates in log order, on a copy of its edges (``old_degree[i]`` of them from slot
    ``old_start[i]`` of the pool) in ``slot_start[i] ..`` (room for its inserts): an insert appends, a delete clears
    the earliest live copy, an update re-weights every live copy. ``failed[i]`` is the position of the vertex's
    first delete or update of an edge it lacks (-1: none). A vertex with more than ``LINEAR_MATCHES`` deletes and
    updates finds their copies in its edges sorted by destination (:func:`_replay_sorted`), not by a scan each."""
    for i in prange(op_start.shape[0] - 1):
        base = slot_start[i]
        end = base
        for e in range(old_start[i], old_start[i] + old_degree[i]):
            out_dst[end] = old_dst[e]
            out_weight[end] = old_weight[e]
            alive[end] = True
            end += 1
        matches = 0
        for q in range(op_start[i], op_start[i + 1]):
            matches += codes[order[q]] != _INSERT
        if matches > LINEAR_MATCHES:
            failed[i] = _replay_sorted(op_start[i], op_start[i + 1], order, codes, dst, weight, base, end, out_dst,
                                       out_weight, alive)
            continue
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


@cpu_kernel()
def _replay_sorted(first, last, order, codes, dst, weight, base, end, out_dst, out_weight, alive):
    """:func:`_replay` of one vertex's updates ``order[first:last]`` whose held edges are ``base .. end - 1``: its
    inserts appended first (in log order, each stamped with its position q), then each delete and update finds
    its edge's copies in them sorted by destination, a copy's order its age, through a binary search: a delete
    takes the first copy not yet taken (the earliest live one, a queue per edge), an update re-weights those from
    there on that were there before it. Returns the position of the first that found no live copy (-1: none)."""
    n = end - base
    for q in range(first, last):
        n += codes[order[q]] == _INSERT
    stamp = np.full(n, -1, np.int64)  # held copies: before every update of the batch
    for q in range(first, last):
        p = order[q]
        if codes[p] == _INSERT:
            out_dst[end] = dst[p]
            out_weight[end] = weight[p]
            alive[end] = True
            stamp[end - base] = q
            end += 1
    by = np.argsort(out_dst[base:end], kind="mergesort")  # stable: a destination's copies oldest first
    ordered = out_dst[base:end][by]
    head = np.full(n, -1, np.int64)  # at an edge's first copy: its first copy not taken (-1: that one)
    for q in range(first, last):
        p = order[q]
        if codes[p] == _INSERT:
            continue
        u = dst[p]
        g = lower_bound(ordered, 0, n, u)
        h = g if g == n or head[g] < 0 else head[g]
        if h == n or ordered[h] != u or stamp[by[h]] > q:  # none live now
            return p
        if codes[p] == _DELETE:
            alive[base + by[h]] = False
            head[g] = h + 1
        else:
            k = h
            while k < n and ordered[k] == u and stamp[by[k]] < q:
                out_weight[base + by[k]] = weight[p]
                k += 1
    return -1


@cpu_kernel(parallel=True)
def _elements_cpu(n, start, old_start, old_degree, first, order, codes, batch_dst, batch_weight, pool_dst, pool_weight,
                  total, vertex, kind, dst, weight, position):
    """The elements of a batch's play, touched vertex by touched vertex (vertex ``i``'s from ``start[i]``): the
    ``old_degree[i]`` copies it holds (from slot ``old_start[i]`` of the pool, kind ``HELD``, position -1), then its
    updates in log order (``order[first[i] ..]``, the batch's positions)."""
    for i in prange(n):
        held = old_degree[i]
        end = start[i + 1] if i + 1 < n else total
        for j in range(start[i], end):
            k = j - start[i]
            vertex[j] = i
            if k < held:
                kind[j] = _HELD
                dst[j] = pool_dst[old_start[i] + k]
                weight[j] = pool_weight[old_start[i] + k]
                position[j] = -1
            else:
                q = order[first[i] + k - held]
                kind[j] = codes[q]
                dst[j] = batch_dst[q]
                weight[j] = batch_weight[q]
                position[j] = q


@cpu_kernel()
def _play_cpu(total, by, vertex, dst, kind, position, weight, kept, alive, failed):
    """The batch's elements in the order ``by`` (by vertex, destination, then time: the copies a vertex held, then the
    batch's updates of the edge in log order) played run by run, a run the elements of one edge, as a queue: a copy
    (``HELD`` or an insert) joins the back, a delete takes the front, an update re-weights every copy in it
    (``weight``, by element). ``kept[e]``: element ``e`` is a copy that survives; ``alive[j]``: the j-th in the
    order does; ``failed[0]``: the least batch position of a delete or update that found no copy (left as it was if
    none)."""
    a = 0
    while a < total:
        v, u = vertex[by[a]], dst[by[a]]
        end = a
        while end < total and vertex[by[end]] == v and dst[by[end]] == u:
            end += 1
        head = a  # the queue's front: every copy from here to the current element is alive
        for j in range(a, end):
            e = by[j]
            k = kind[e]
            copy = k == _INSERT or k == _HELD
            alive[j] = copy
            kept[e] = copy
            if copy:
                continue
            while head < j and not (kind[by[head]] == _INSERT or kind[by[head]] == _HELD):
                head += 1
            if head == j:
                failed[0] = min(failed[0], position[e])
                break
            if k == _DELETE:
                alive[head] = False
                kept[by[head]] = False
                head += 1
            else:
                for m in range(head, j):
                    if kind[by[m]] == _INSERT or kind[by[m]] == _HELD:
                        weight[by[m]] = weight[e]
        a = end


_APPLY_DEFINES = {"MAX_GROUPS": MAX_GROUPS, "DECIMAL_GROUP": DECIMAL, "SPACE_CHUNK": CHUNK, "OP_HELD": _HELD,
                  **{f"OP_{k.upper()}": v for k, v in OPS.items()},
                  **{f"GROUP_{k.upper()}": v for k, v in KINDS.items()}}  # of kernels/space.cu
_TYPE_NAMES = {np.dtype(numpy_name): name for name, (numpy_name, _) in TYPES.items()}
_EDGES = (Arg("indptr", "i64[]", note="each touched vertex's edges"), Arg("units", "i64[]"), Arg("frac", "f64[]"))
_CHUNKS = (Arg("chunk_vertex", "i64[n]", note="a chunk's touched vertex"),
           Arg("chunk_index", "i64[n]", note="its edges from chunk_index * SPACE_CHUNK"))
_SIZES = (Arg("chunk_start", "i64[n]", note="a touched vertex's first chunk"),
          Arg("chunk_count", "i64[n]", note="0: it has at most SPACE_CHUNK edges"),
          Arg("chunk_sizes", "i64[]", note="MAX_GROUPS a chunk"), Arg("chunk_decimal", "f64[]"))
ELEMENTS = Kernel("space.cu", "gp_space_elements", twin=_elements_cpu, items="total", defines=_APPLY_DEFINES, args=(
    Arg("n", "i64"), Arg("start", "i64[n]", note="each touched vertex's first element"), Arg("old_start", "i64[n]"),
    Arg("old_degree", "i64[n]"), Arg("first", "i64[n]", note="its first update in order"), Arg("order", "i64[]"),
    Arg("codes", "i8[]"), Arg("batch_dst", "i64[]"), Arg("batch_weight", "f64[]"), Arg("pool_dst", "i64[]"),
    Arg("pool_weight", "f64[]"), Arg("total", "i64"), Arg("vertex", "i64[total]", out=True),
    Arg("kind", "i8[total]", out=True), Arg("dst", "i64[total]", out=True), Arg("weight", "f64[total]", out=True),
    Arg("position", "i64[total]", out=True, note="an update's in the batch, -1 for a held copy")))
PLAY = Kernel("space.cu", "gp_space_play", twin=_play_cpu, items="total", defines=_APPLY_DEFINES, args=(
    Arg("total", "i64"), Arg("by", "i64[total]", note="the elements by vertex, destination and time"),
    Arg("vertex", "i64[total]"), Arg("dst", "i64[total]"), Arg("kind", "i8[total]", note="an op's code, or HELD"),
    Arg("position", "i64[total]", note="an update's in the batch"), Arg("weight", "f64[total]", out=True),
    Arg("kept", "u8[total]", out=True, note="by element"), Arg("alive", "u8[total]", out=True, note="in order by"),
    Arg("failed", "i64[1]", out=True, note="the least position that failed")))
CHUNKS = Kernel("space.cu", "gp_space_chunks", twin=_chunks_cpu, items="n", lanes=32, defines=_APPLY_DEFINES, args=(
    *_EDGES, Arg("n", "i64"), *_CHUNKS, Arg("chunk_sizes", "i64[n*MAX_GROUPS]", out=True),
    Arg("chunk_decimal", "f64[n]", out=True)))
COUNT = Kernel("space.cu", "gp_space_count", twin=_count_groups, items="n", lanes=32, defines=_APPLY_DEFINES, args=(
    *_EDGES, Arg("dense_fraction", "f64"), Arg("n", "i64"), *_SIZES, Arg("groups", "i64[n]", out=True),
    Arg("listed", "i64[n]", out=True)))
BUILD = Kernel("space.cu", "gp_space_build", twin=_build, items="n", lanes=32, defines=_APPLY_DEFINES, args=(
    *_EDGES, Arg("dense_fraction", "f64"), Arg("n", "i64"), *_SIZES,
    Arg("chunk_offset", "i64[]", out=True, note="group g's members before chunk c at c * MAX_GROUPS + g"),
    Arg("member_start", "i64[n]"), Arg("members", "i64[]", out=True), Arg("group_row", "i64[n]"),
    *(Arg(name, f"{_TYPE_NAMES[np.dtype(dtype)]}[]", out=True) for name, dtype in _GROUP_FIELDS.items())))
PLACE = Kernel("space.cu", "gp_space_place", twin=_place_cpu, items="n", lanes=32, defines=_APPLY_DEFINES, args=(
    *_EDGES, Arg("n", "i64"), *_CHUNKS, Arg("chunk_offset", "i64[]"), Arg("member_start", "i64[]"),
    Arg("members", "i64[]", out=True), Arg("group_row", "i64[]"), Arg("group_count", "i64[]"),
    Arg("group_kind", "i8[]"), Arg("group_bit", "i32[]"), Arg("group_start", "i64[]", out=True)))


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
    adjacency: object  # each vertex's destinations sorted, in its slots of the edge pool, on the worker's device
    version: int = 0

    @property
    def indices(self):
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


def _slots(x, start, count):
    """The slots ``start[i] .. start[i] + count[i] - 1`` of every block, in order (arrays of ``x``)."""
    segment, position = segments(x, count)
    return start[segment] + position


def _exclusive(counts, x=np):
    """Where each of ``counts`` starts, laid out one after the other (arrays of ``x``)."""
    return x.cumsum(counts) - counts


class _Pool:
    """Arrays (``fields``: name -> dtype) on ``device`` holding each vertex's block, appended: a commit writes the
    touched vertices' new blocks one after another from ``top`` (the slots handed out), never over a slot a version
    reads, the arrays growing by doubling into new ones (an earlier version holds the old). A commit after which the
    blocks left behind would hold more slots than the ``live`` ones first gathers the blocks that stay into new
    arrays (:meth:`put`): a batch that touches most vertices copies few. A commit costs its blocks' slots, whatever
    their sizes: no free lists, and nothing to track for the versions views pin."""

    def __init__(self, device: str, fields: dict):
        self.device = device
        x = xp(device)
        self.arrays = {name: x.zeros(0, dtype) for name, dtype in fields.items()}
        self.top = 0  # slots handed out
        self.live = 0  # slots of the current version's blocks

    def put(self, columns: dict, counts, left: int, starts, staying):
        """Write ``columns`` (name -> values, the touched vertices' new blocks of ``counts`` slots one after another)
        from ``top``; ``left``: the slots of the blocks they replace. If the blocks left behind would then outnumber
        the live ones, the blocks that stay (every vertex's, at ``starts``, of ``staying()`` slots: those replaced
        0; arrays of the device) are first gathered into new arrays with room for as many again, and the new blocks
        written after them. Returns the new blocks' starts, and the staying blocks' new starts (None: not moved)."""
        x = xp(self.device)
        n = int(next(iter(columns.values())).shape[0])
        kept = self.live - left
        moved = None
        if self.top + n > 2 * (kept + n) + COMPACT_SLACK:
            counts_kept = staying()
            slots = _slots(x, starts, counts_kept)
            for name, old in self.arrays.items():
                self.arrays[name] = x.empty(max(2 * (kept + n), 64), old.dtype)
                self.arrays[name][:kept] = old[slots]
            self.top = kept
            moved = _exclusive(counts_kept, x)
        begin = self.top + _exclusive(counts, np if isinstance(counts, np.ndarray) else x)
        self._reserve(self.top + n)
        for name, values in columns.items():
            self.arrays[name][self.top:self.top + n] = x.asarray(values)
        self.top += n
        self.live = kept + n
        return begin, moved

    def _reserve(self, slots: int) -> None:
        size = next(iter(self.arrays.values())).shape[0]
        if slots <= size:
            return
        size = max(slots, 2 * size, 64)
        x = xp(self.device)
        for name, old in self.arrays.items():
            self.arrays[name] = x.empty(size, old.dtype)
            self.arrays[name][:self.top] = old[:self.top]

    @property
    def nbytes(self) -> int:
        return sum(self.top * a.itemsize for a in self.arrays.values())


class _Undo:
    """A space as it was before a commit: its counts, its tables and pools (references: a commit writes past every
    slot in use or into new arrays), and the rows of its tables that the commit writes in place (:meth:`write`)."""

    def __init__(self, space: SamplingSpace):
        self.counts = (space.num_vertices, space.num_edges, space.version, space._tables_pinned)
        self.tables = dict(space._tables)
        self.pools = [(dict(pool.arrays), pool.top, pool.live) for pool in space._pools()]
        self.rows = []  # (array, index, its values before)

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
        for pool, (arrays, top, live) in zip(space._pools(), self.pools):
            pool.arrays, pool.top, pool.live = arrays, top, live


def _threads(vertices: int) -> int:
    """Threads for a commit touching ``vertices``: one for a streaming update's few (see ``cpu_threads``)."""
    return 1 if vertices < 256 else 1 << 30


def _twins(x, vertices: int):
    """The CPU twins' threads for kernels on arrays of ``x`` touching ``vertices``; nothing for CUDA's."""
    return cpu_threads(_threads(vertices)) if x is np else contextlib.nullcontext()


@dataclass(frozen=True)
class Batch:
    """A checked batch of updates: ``codes`` (of ``OPS``, int8), ``src``, ``dst`` (int64) and ``weight`` (float64; 1 for
    a delete), and the ``op`` names and ``given`` weights, for messages (None in a part sent to a worker)."""

    op: np.ndarray | None
    codes: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    given: np.ndarray | None

    @classmethod
    def inserts(cls, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> Batch:
        """Inserts of edges already checked (a graph's own: int64 ids, positive finite float64 weights)."""
        op = np.broadcast_to(np.array("insert"), src.shape)  # one name, not one a row
        return cls(op, np.full(src.shape[0], _INSERT, np.int8), src, dst, weight, weight)

    def both_ways(self) -> Batch:
        """Each update, then its reverse (an undirected graph's), without the names and weights as given."""
        return self.part(np.arange(2 * len(self.src)), True)[0]

    def part(self, at: np.ndarray, both_ways: bool, lo: int = 0) -> tuple[Batch, np.ndarray]:
        """The updates at ``at`` — positions in this batch, or with ``both_ways`` (an undirected graph's) in it made
        both ways, ``2 i`` update ``i`` and ``2 i + 1`` its reverse — their sources less ``lo``, without the names
        and weights as given: a partition's part for its worker, which reports a bad update by its position; and
        the position in this batch of each."""
        if both_ways:
            position, reverse = at >> 1, (at & 1).astype(bool)
            src = np.where(reverse, self.dst[position], self.src[position])
            dst = np.where(reverse, self.src[position], self.dst[position])
        else:
            position, src, dst = at, self.src[at], self.dst[at]
        return Batch(None, self.codes[position], src - lo, dst, self.weight[position], None), position


def check_batch(op, src, dst, weight, first: int = 0) -> Batch:
    """``op``, ``src``, ``dst``, ``weight`` as a :class:`Batch`, or a GpipeValueError naming the first bad update
    by its position in the log (``first`` + its position in the batch)."""
    if isinstance(getattr(op, "dtype", None), pd.CategoricalDtype):  # e.g. a Parquet log's dictionary column
        op = pd.Categorical(op)  # its codes name each update's op: no hash of a string per update
        labels, names = op.codes, op.categories
    else:
        op = check_array("op", op).ravel()
        labels, names = pd.factorize(op)  # each distinct op named once: a hash, not a string compare per update
    given_src, given_dst = src, dst
    src = check_array("src", src).ravel()
    dst = check_array("dst", dst).ravel()
    numeric = getattr(weight, "dtype", None) is not None and weight.dtype.kind in "iuf"  # no objects to look through
    given = (np.asarray(weight) if numeric else np.asarray(weight, dtype=object)).ravel()
    if not len(op) == len(src) == len(dst) == len(given):
        raise GpipeValueError(f"'op', 'src', 'dst' and 'weight' must have one entry per update, got lengths "
                              f"{len(op)}, {len(src)}, {len(dst)} and {len(given)}")
    table = np.array([OPS.get(n, -1) if isinstance(n, str) else -1 for n in names] + [-1], np.int8)
    codes = table[labels]  # (a missing op is label -1: the table's last)
    if (codes < 0).any():
        bad = int(np.argmax(codes < 0))
        raise GpipeValueError(f"update {first + bad}: 'op' must be one of {sorted(OPS)}, got {str(op[bad])!r}")
    src, dst = _vertex_ids("src", src, given_src, first), _vertex_ids("dst", dst, given_dst, first)
    weighed = np.where(codes != _DELETE, given, 1.0)
    try:
        values = weighed.astype(np.float64)
    except (TypeError, ValueError):  # not numbers: find which
        values = np.array([w if isinstance(w, (int, float, np.integer, np.floating)) else np.nan for w in weighed],
                          np.float64)
    if not (np.isfinite(values) & (values > 0)).all():
        i = int(np.argmax(~(np.isfinite(values) & (values > 0))))
        shown = given[i].item() if isinstance(given[i], np.generic) else given[i]
        raise GpipeValueError(f"update {first + i}: the weight of an {op[i]} must be positive and finite, got "
                              f"{shown!r}")
    return Batch(op, codes, src, dst, values, given)


def _vertex_ids(name: str, ids: np.ndarray, given, first: int) -> np.ndarray:
    """``ids`` (``given`` as a flat array) as int64 vertex ids, as ``check_integers`` takes them; what it refuses
    told by update: the first value that is no id in [0, 2**63), as given (a list's ints may have become floats), or
    the dtype where no one value is to blame (floats that all hold ids)."""
    try:
        return check_integers(name, ids)
    except GpipeValueError:
        pass
    if ids.dtype.kind in "iuf":  # one pass over the array, not a Python loop (check_integers names no position)
        to_blame = ~((ids >= 0) & (ids < 2**63) & ((ids == np.floor(ids)) if ids.dtype.kind == "f" else True))
    else:  # strings, booleans, objects
        to_blame = np.array([isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral)
                             or not 0 <= v < 2**63 for v in ids.tolist()])
    if not to_blame.any():
        raise GpipeValueError(f"'{name}' must hold integer vertex ids, got dtype {ids.dtype}")
    bad = int(np.argmax(to_blame))
    shown = given[bad] if isinstance(given, (list, tuple)) and len(given) == len(ids) else ids[bad]
    shown = shown.item() if isinstance(shown, np.generic) else shown
    too_large = isinstance(shown, numbers.Real) and not isinstance(shown, bool) and 2**63 <= shown < float("inf")
    rule = "integer vertex ids below 2**63" if too_large else "non-negative integer vertex ids"
    raise GpipeValueError(f"update {first + bad}: '{name}' must hold {rule}, got {shown!r}")


def absent(batch: Batch, i: int, first: int = 0) -> GpipeValueError:
    """The error of update ``i`` of ``batch`` (``first + i`` of the log), a delete or update of an edge that is not
    there."""
    return GpipeValueError(f"update {first + i}: cannot {batch.op[i]} edge ({batch.src[i]}, {batch.dst[i]}): it is "
                           f"not in the graph")


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
        self.num_edges = 0
        self.version = 0  # commits
        self._edges = _Pool(self.device, _EDGE_FIELDS)
        self._members = _Pool(self.device, {"members": np.int64})
        self._groups = _Pool(self.device, _GROUP_FIELDS)
        self._tables = {name: xp(self.device).zeros(0, np.int64) for name in _TABLES}  # per vertex, room to grow
        self._tables_pinned = False  # a view holds the tables: the next commit writes a copy
        self._staged = None  # a batch replayed, not yet applied (_stage, _commit)
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

    def edges(self, v: int) -> tuple[np.ndarray, np.ndarray]:
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
        batch = Batch(batch.op, *(to_host(a) for a in (batch.codes, batch.src, batch.dst, batch.weight)), batch.given)
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
        scaled = weight * self.scale
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
                                          "adjacency": adjacency}, {"members": members}, built), left):
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
            self._undo = self._commit()

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

