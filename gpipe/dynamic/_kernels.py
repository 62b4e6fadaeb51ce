"""The sampling space's kernels, each declared once with its numba twin (CUDA in ``kernels/space.cu`` and
``kernels/dynamic.cu``): building a vertex's groups, members and alias table, replaying and playing a batch's
updates, and drawing an edge from a vertex's space; and the constants of the layout they share (see ``_space``)."""

from __future__ import annotations

import numpy as np

from .._alias import vose
from .._search import lower_bound
from .._space_pick import DECIMAL, KINDS, PICK_DEFINES, SPACE_ARGS, _DENSE, _LISTED, _ONE, pick_in_space
from ..backend import cpu_kernel, prange, segments
from ..kernels import TYPES, Arg, Kernel

MAX_GROUPS = 64  # 63 radix bits of an int64 integer part, and the decimal group


OPS = {"insert": 0, "delete": 1, "update": 2}


_INSERT, _DELETE = OPS["insert"], OPS["delete"]


_HELD = 3  # in a batch's play on the device: a copy of an edge the vertex held before the batch


CHUNK = 1024  # a touched vertex of more edges is rebuilt by a warp per chunk of this many (its decimal parts summed


# chunk by chunk, in order, each chunk's in a warp's order)
LINEAR_MATCHES = 8  # a vertex with at most this many deletes and updates in a batch scans its edges for each


_GROUP_FIELDS = {"group_kind": np.int8, "group_bit": np.int32, "group_start": np.int64, "group_size": np.int64,
                 "alias_prob": np.float64, "alias_other": np.int32}  # a row a group


_TABLES = ("edge_start", "degree", "member_start", "member_count", "group_row", "group_count")  # a row a vertex


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


@cpu_kernel(parallel=True)
def _sample_cpu(edge_start, degree, dst, units, frac, member_start, members, group_row, group_count, group_kind,
                group_bit, group_start, group_size, alias_prob, alias_other, key, n, vertex, stream, out):
    for i in prange(n):
        e = pick_in_space(edge_start, degree, units, frac, member_start, members, group_row, group_count, group_kind,
                          group_bit, group_start, group_size, alias_prob, alias_other, key, stream[i], 0, 0,
                          vertex[i])
        out[i] = -1 if e < 0 else dst[e]


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
