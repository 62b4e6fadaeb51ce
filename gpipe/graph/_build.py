"""Building a partitioned graph on the workers from chunks of dense-id edges.

Chunks are dicts of device arrays ``src, dst[, weight]`` (int64, int64,
float32), already renumbered. The pipeline, all on the workers:

1. ``prepare``: drop self-loops (unless kept), add reverse edges for
   undirected graphs, and histogram out-degrees over vertex buckets;
2. the client cuts the vertex range into P contiguous, edge-balanced ranges;
3. ``split``: each chunk splits its edges by the partition owning ``src``;
4. ``assemble``: one task per partition, pinned to its worker, concatenates its
   pieces, sorts by (src, dst), merges duplicates (keeping the largest weight,
   which is symmetric and order-independent) and stores the CSR in the
   worker's :class:`GpipeStore`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from ..backend import (
    cpu_kernel,
    device_of,
    free_memory,
    group_max,
    prange,
    ranges_within,
    to_host,
    xp,
)
from ..errors import TaskError
from ..runtime.workers import fetch_partitions, keep_partition, worker_xp
from ._partition import Partition

MAX_BUCKETS = 1 << 20
SORT_EDGE_BYTES = 48  # device bytes an edge takes while its range is sorted: src, dst, key, order, copies


def small_range(lo: int, hi: int, count: int) -> bool:
    """Whether integer ids ``lo .. hi`` are few enough to index an array by (a bitmap, a lookup table) for
    ``count`` of them."""
    return hi - lo < 4 * count + (1 << 20)


def id_table(x, ids, dtype) -> tuple | None:
    """``(least id, a table of the dense id of each id over the range, -1 where none)`` of the distinct integer
    ``ids`` (numpy or a device's; the dense id of ``ids[i]`` is ``i``), the table an array of ``x`` of ``dtype``;
    None when the range is not small."""
    lo, hi = int(ids.min()), int(ids.max())
    if not small_range(lo, hi, ids.size):
        return None
    table = x.full(hi - lo + 1, -1, dtype)
    table[x.asarray(ids) - lo] = x.arange(ids.size, dtype=dtype)
    return lo, table


def bucket_width(n: int) -> int:
    return max(1, -(-n // MAX_BUCKETS))


def prepare(chunk: dict, n: int, directed: bool, keep_self_loops: bool) -> dict:
    """Device copy of a chunk with self-loops dropped and reverse edges added."""
    x = worker_xp()
    src, dst = x.asarray(chunk["src"], dtype=x.int64), x.asarray(chunk["dst"], dtype=x.int64)
    weight = chunk.get("weight")
    weight = None if weight is None else x.asarray(weight, dtype=x.float32)
    if not keep_self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
        weight = None if weight is None else weight[keep]
    if not directed:
        loops = src == dst
        rev_src, rev_dst = dst[~loops], src[~loops]
        src, dst = x.concatenate([src, rev_src]), x.concatenate([dst, rev_dst])
        if weight is not None:
            weight = x.concatenate([weight, weight[~loops]])
    out = {"src": src, "dst": dst}
    if weight is not None:
        out["weight"] = weight
    return out


def whole(n: int) -> np.ndarray:
    """The bounds of one partition holding all ``n`` vertices."""
    return np.array([0, n], np.int64)


def histogram(chunk: dict, n: int):
    """Out-edges per vertex bucket, for choosing partition bounds: left on the worker's device (a megabyte
    or more for each chunk; :func:`total` brings their sum to the host)."""
    x = worker_xp()
    width = bucket_width(n)
    buckets = -(-n // width)
    return x.bincount(chunk["src"] // width, minlength=buckets).astype(x.int64, copy=False)


def total(hists: list) -> np.ndarray:
    """The sum of the chunks' histograms, on the host (those of another worker's device are copied in)."""
    x = xp("gpu" if any(device_of(h) == "gpu" for h in hists) else "cpu")
    out = x.zeros_like(x.asarray(hists[0]))
    for h in hists:
        out += x.asarray(h)
    return to_host(out)


def balanced_bounds(hist: np.ndarray, n: int, parts: int) -> np.ndarray:
    """P+1 vertex bounds cutting the bucket histogram into edge-balanced ranges."""
    width = bucket_width(n)
    cum = np.concatenate([[0], np.cumsum(hist)])
    targets = cum[-1] * np.arange(1, parts) / parts
    cuts = np.searchsorted(cum, targets, side="left") * width
    bounds = np.concatenate([[0], np.minimum(cuts, n), [n]]).astype(np.int64)
    return np.maximum.accumulate(bounds)


def split(chunk: dict, bounds: np.ndarray) -> list[dict]:
    """The chunk's edges grouped by the partition owning their source."""
    if len(bounds) == 2:  # one partition owns them all
        return [chunk]
    x = worker_xp()
    owner = x.searchsorted(x.asarray(bounds[1:-1]), chunk["src"], side="right")
    # a stable sort of 16-bit keys is numpy's radix sort: O(edges), where int64 owners took a merge sort
    order = x.argsort(owner.astype(x.uint16) if len(bounds) - 1 <= 1 << 16 else owner, kind="stable")
    counts = to_host(x.bincount(owner, minlength=len(bounds) - 1))
    ends = np.cumsum(counts)
    sorted_chunk = {k: v[order] for k, v in chunk.items()}
    return [
        {k: v[int(e - c) : int(e)] for k, v in sorted_chunk.items()} for c, e in zip(counts, ends, strict=True)
    ]


pick = operator.getitem


def assemble(graph_id: str, part: int, bounds: np.ndarray, keep_duplicates: bool, budget: int | None,
             *pieces: dict) -> dict:
    """Build partition ``part`` from its pieces and store it on this worker (staged in host memory, with a
    ``budget`` of device partitions per worker: only this partition's edges are ever on the device)."""
    try:
        x = worker_xp()
        lo, hi, n = int(bounds[part]), int(bounds[part + 1]), int(bounds[-1])
        index_dtype = x.int32 if n < 2**31 else x.int64
        indptr, dst, weight, loops = csr(x, pieces, lo=lo, hi=hi, n=n, keep_duplicates=keep_duplicates,
                                         index_dtype=index_dtype)
        partition = Partition(part, lo, hi, np.asarray(bounds), indptr, dst, weight)
        keep_partition(graph_id, part, partition, budget)
        return {"edges": partition.num_edges, "self_loops": loops, "nbytes": partition.nbytes}
    except Exception as exc:
        raise TaskError("assemble", part, None, repr(exc)) from exc


def csr(x, pieces: Sequence[dict], *, lo: int, hi: int, n: int, keep_duplicates: bool, index_dtype) -> tuple:
    """The CSR ``(indptr, indices, weights, self-loops)`` of rows ``lo .. hi - 1`` from the edge ``pieces`` (arrays of
    ``x``, every source in the rows), sorted by (src, dst), duplicates merged to their largest weight unless kept;
    ``indices`` of ``index_dtype``."""
    weighted = bool(pieces) and "weight" in pieces[0]
    if x is np:  # rows by counting, then each row sorted on its own, on every core
        src = np.concatenate([p["src"] for p in pieces]) if pieces else np.zeros(0, np.int64)
        dst = np.concatenate([p["dst"] for p in pieces]) if pieces else np.zeros(0, np.int64)
        weight = np.concatenate([p["weight"] for p in pieces]) if weighted else None
        indptr, dst, weight, loops = _csr_cpu(src - lo, dst, weight, hi - lo, lo, keep_duplicates)
        return indptr, dst.astype(index_dtype, copy=False), weight, loops
    most = free_memory(x) // 4 // SORT_EDGE_BYTES  # edges sorted at once: a quarter of the free memory
    return _csr_device(x, pieces, weighted, lo=lo, hi=hi, n=n, keep_duplicates=keep_duplicates,
                       index_dtype=index_dtype, most=max(1, most))


def replica(graph_id: str, replica_id: str, placement: list[str], bounds: np.ndarray) -> int:
    """Store the whole graph ``graph_id`` on this worker as partition 0 of ``replica_id``: its replica.

    The partitions held elsewhere are fetched from their workers; the CSR arrays are concatenated.
    """
    try:
        x = worker_xp()
        parts = fetch_partitions(graph_id, placement)
        sizes = [int(p["indices"].shape[0]) for p in parts]
        starts = np.concatenate([[0], np.cumsum(sizes)])
        indptr = x.concatenate([x.asarray(parts[0]["indptr"][:1])] + [
            x.asarray(p["indptr"][1:]) + int(start)
            for p, start in zip(parts, starts[:-1], strict=True)]).astype(x.int64)
        indices = x.concatenate([x.asarray(p["indices"]) for p in parts])
        weighted = parts[0]["weights"] is not None
        weights = x.concatenate([x.asarray(p["weights"]) for p in parts]) if weighted else None
        n = int(bounds[-1])
        whole = Partition(0, 0, n, np.array([0, n]), indptr, indices, weights)
        keep_partition(replica_id, 0, whole)
        return whole.nbytes
    except Exception as exc:
        raise TaskError("replicate", 0, None, repr(exc)) from exc


def _csr_cpu(rel: np.ndarray, dst: np.ndarray, weight, rows: int, lo: int, keep_duplicates: bool):
    """The CSR ``(indptr, indices, weights, self-loops)`` of edges ``rel -> dst`` (``rel``: rows 0..rows-1,
    vertex ``lo + row``): the rows of the sort by (src, dst) with duplicates merged to their largest weight, as
    the device path's sort gives them, in O(edges) plus a sort per row."""
    weighted = weight is not None
    counts = np.bincount(rel, minlength=rows)
    start = np.zeros(rows + 1, np.int64)
    np.cumsum(counts, out=start[1:])
    by_row, by_row_w = np.empty_like(dst), np.empty(len(dst) if weighted else 0, np.float32)
    _place(rel, dst, weight if weighted else by_row_w, weighted, start, by_row, by_row_w)
    kept = np.empty(rows, np.int64)
    loops = _sort_rows(start, by_row, by_row_w, weighted, keep_duplicates, lo, kept)
    if keep_duplicates:
        return start, by_row, by_row_w if weighted else None, int(loops)
    indptr = np.zeros(rows + 1, np.int64)
    np.cumsum(kept, out=indptr[1:])
    out, out_w = np.empty(indptr[-1], dst.dtype), np.empty(indptr[-1] if weighted else 0, np.float32)
    _compact_rows(start, indptr, by_row, by_row_w, weighted, out, out_w)
    return indptr, out, out_w if weighted else None, int(loops)


@cpu_kernel()
def _place(rel, dst, weight, weighted, start, by_row, by_row_w):
    cursor = start[:-1].copy()
    for i in range(rel.shape[0]):
        c = cursor[rel[i]]
        by_row[c] = dst[i]
        if weighted:
            by_row_w[c] = weight[i]
        cursor[rel[i]] = c + 1


@cpu_kernel(parallel=True)
def _sort_rows(start, by_row, by_row_w, weighted, keep_duplicates, lo, kept):
    """Each row sorted by destination (stable), duplicates merged in place unless kept; per row the count kept.
    Returns the self-loops kept."""
    loops = 0
    for r in prange(start.shape[0] - 1):
        a, b = start[r], start[r + 1]
        if b - a > 1:
            order = np.argsort(by_row[a:b], kind="mergesort")
            by_row[a:b] = by_row[a:b][order]
            if weighted:
                by_row_w[a:b] = by_row_w[a:b][order]
        k = b
        if not keep_duplicates and b > a:
            k = a + 1
            for e in range(a + 1, b):
                if by_row[e] != by_row[k - 1]:
                    by_row[k] = by_row[e]
                    if weighted:
                        by_row_w[k] = by_row_w[e]
                    k += 1
                elif weighted and by_row_w[e] > by_row_w[k - 1]:
                    by_row_w[k - 1] = by_row_w[e]
        kept[r] = k - a
        for e in range(a, k):
            if by_row[e] == lo + r:
                loops += 1
    return loops


@cpu_kernel(parallel=True)
def _compact_rows(start, indptr, by_row, by_row_w, weighted, out, out_w):
    for r in prange(start.shape[0] - 1):
        a, o = start[r], indptr[r]
        for j in range(indptr[r + 1] - o):
            out[o + j] = by_row[a + j]
            if weighted:
                out_w[o + j] = by_row_w[a + j]


def _csr_device(x, pieces, weighted: bool, *, lo: int, hi: int, n: int, keep_duplicates: bool, index_dtype,
                most: int):
    """The CSR ``(indptr, indices, weights, self-loops)`` of the pieces' edges, sorted by (src, dst) with
    duplicates merged to their largest weight, one range of rows at a time, each of at most ``most`` edges
    (an edge takes ``SORT_EDGE_BYTES`` while sorted): the pieces are never concatenated whole (R-MAT 26 on one
    H200, 2.1 G edges: out of memory with 139 GB allocated)."""
    rows = hi - lo
    counts = x.zeros(rows, x.int64)
    for p in pieces:
        counts += x.bincount(p["src"] - lo, minlength=rows)
    ranges = ranges_within(to_host(x.cumsum(counts)), most) if rows else [slice(0, 0)]
    kept, indices, weights, loops = [], [], [], 0
    for r in ranges:
        a, b = lo + r.start, lo + r.stop
        taken = pieces if len(ranges) == 1 else [_rows_in(p, a, b) for p in pieces]
        src, dst = (x.concatenate([p[k] for p in taken]) if taken else x.zeros(0, x.int64) for k in ("src", "dst"))
        weight = x.concatenate([p["weight"] for p in taken]) if weighted else None
        src, dst, weight = _sort_edges(x, src, dst, weight, a, b, n)
        if not keep_duplicates and src.shape[0] > 1:
            first = x.ones(src.shape[0], dtype=bool)
            first[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
            if weight is not None:
                weight = group_max(x, weight, x.cumsum(first) - 1)
            src, dst = src[first], dst[first]
        kept.append(x.bincount(src - a, minlength=b - a))
        loops += int((src == dst).sum())
        indices.append(dst.astype(index_dtype))
        weights.append(weight)
        del src, dst, weight, taken
    indptr = x.zeros(rows + 1, dtype=x.int64)
    x.cumsum(x.concatenate(kept), out=indptr[1:])
    return indptr, x.concatenate(indices), x.concatenate(weights) if weighted else None, loops


def _rows_in(piece: dict, a: int, b: int) -> dict:
    """The edges of ``piece`` whose source is in ``a .. b - 1``."""
    inside = (piece["src"] >= a) & (piece["src"] < b)
    return {k: v[inside] for k, v in piece.items()}


def _sort_edges(x, src, dst, weight, lo: int, hi: int, n: int):
    """Edges sorted by (src, dst); one int64 key when (src - lo) * n + dst fits."""
    if (hi - lo) * n < 2**62:
        key = (src - lo) * n + dst
        if weight is None:
            key = x.sort(key)
        else:
            order = x.argsort(key, kind="stable")  # a duplicate's weights in the pieces' order (numpy too)
            key, weight = key[order], weight[order]
        return key // n + lo, key % n, weight
    order = x.lexsort(x.stack([dst, src]))
    return src[order], dst[order], None if weight is None else weight[order]
