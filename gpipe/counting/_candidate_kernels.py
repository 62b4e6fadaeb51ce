"""The kernels that build a candidate graph (``kernels/candidates.cu``) and their CPU twins.

Each reads the rows ``lo..`` of a CSR (local ``indptr``, global ``indices``; sorted per vertex, each neighbor once,
no self-loop) and, for all data vertices, ``sets``: bit ``u`` of ``sets[v]`` when ``v`` is a candidate of query
vertex ``u``."""

from __future__ import annotations

import numpy as np

from ..backend import cpu_kernel, prange
from ..kernels import Arg, Kernel
from ._inputs import MAX_QUERY_VERTICES


@cpu_kernel(parallel=True)
def _filter_cpu(n, indptr, indices, lo, kind, k, kinds, query_kind, query_degree, need, sets):
    for r in prange(n):
        v = lo + r
        degree = indptr[r + 1] - indptr[r]
        wanted = 0  # the query vertices whose label and degree v passes
        for u in range(k):
            if query_kind[u] == kind[v] and degree >= query_degree[u]:
                wanted |= 1 << u
        if wanted == 0:
            continue
        most = np.zeros(kinds, np.int64)  # neighbors of kind j worth counting: as many as one of them needs
        counts = np.zeros(kinds, np.int64)
        for j in range(kinds):
            for u in range(k):
                if wanted >> u & 1:
                    most[j] = max(most[j], need[u, j])
        missing = most.sum()
        for e in range(indptr[r], indptr[r + 1]):
            if missing == 0:
                break
            j = kind[indices[e]]
            if j >= 0 and counts[j] < most[j]:
                counts[j] += 1
                missing -= 1
        passed = 0
        for u in range(k):
            if wanted >> u & 1:
                passes = True
                for j in range(kinds):
                    passes &= counts[j] >= need[u, j]
                if passes:
                    passed |= 1 << u
        sets[v] |= np.uint32(passed)


@cpu_kernel()
def _refine_cpu(n, indptr, indices, lo, k, neighbor_bits, stale, sets, changed):
    dropped_any = 0
    for r in range(n):
        v = lo + r
        mine = np.int64(sets[v])
        if mine == 0:
            continue
        need = 0  # the query vertices v must have a candidate neighbor of
        for u in range(k):
            if mine >> u & 1:
                need |= neighbor_bits[u] & stale
        if need == 0:
            continue
        seen = 0
        for e in range(indptr[r], indptr[r + 1]):  # one scan for all of v's query vertices, to the first hits
            seen |= np.int64(sets[indices[e]]) & need
            if seen == need:
                break
        if seen == need:
            continue
        dropped = 0
        for u in range(k):
            if mine >> u & 1 and neighbor_bits[u] & stale & ~seen:
                dropped |= 1 << u
        sets[v] = np.uint32(mine & ~dropped)
        dropped_any |= dropped
    changed[0] |= np.uint64(dropped_any)


@cpu_kernel(parallel=True)
def _degree_cpu(n, rows, indptr, indices, lo, sets, u, count):
    for i in prange(n):
        row = rows[i] - lo
        c = 0
        for e in range(indptr[row], indptr[row + 1]):
            c += sets[indices[e]] >> u & 1
        count[i] = c


@cpu_kernel(parallel=True)
def _edges_cpu(n, rows, indptr, indices, lo, sets, u, rank, offset, entries):
    for i in prange(n):
        row = rows[i] - lo
        at = offset[i]
        for e in range(indptr[row], indptr[row + 1]):
            w = indices[e]
            if sets[w] >> u & 1:
                entries[at] = rank[w]
                at += 1


_DEFINES = {"GP_CAND_MAX_QUERY": MAX_QUERY_VERTICES}
_ROWS = (Arg("indptr", "i64[]", note="local"), Arg("indices", "IdT[]", note="global, sorted per vertex"),
         Arg("lo", "i64", note="the rows' first vertex"))
_SETS = Arg("sets", "u32[]", note="per data vertex: bit u, a candidate of query vertex u")
FILTER = Kernel("candidates.cu", "gp_candidate_filter", twin=_filter_cpu, items="n", defines=_DEFINES, args=(
    Arg("n", "i64", note="rows"), *_ROWS,
    Arg("kind", "i8[]", note="per data vertex: its label's rank among the query's, -1 for none"), Arg("k", "i32"),
    Arg("kinds", "i32"), Arg("query_kind", "i64[k]"), Arg("query_degree", "i64[k]"),
    Arg("need", "i64[k,kinds]", note="query vertex u's neighbors of kind j"),
    Arg("sets", "u32[]", out=True, note="or-ed in: the rows' query vertices passing the filters")))
REFINE = Kernel("candidates.cu", "gp_candidate_refine", twin=_refine_cpu, items="n", defines=_DEFINES, args=(
    Arg("n", "i64", note="rows"), *_ROWS, Arg("k", "i32"),
    Arg("neighbor_bits", "i64[k]", note="query vertex u's neighbors"),
    Arg("stale", "i64", note="the query vertices whose candidates changed since the last pass"),
    Arg("sets", "u32[]", out=True, note="in place: the rows' candidates dropped"),
    Arg("changed", "u64[1]", out=True, note="or-ed in: the query vertices that lost candidates")))
DEGREE = Kernel("candidates.cu", "gp_candidate_degree", twin=_degree_cpu, items="n", lanes=32, defines=_DEFINES,
                args=(Arg("n", "i64"), Arg("rows", "i64[n]", note="data vertices among the rows"), *_ROWS, _SETS,
                      Arg("u", "i32", note="a query vertex"),
                      Arg("count", "i64[n]", out=True, note="the neighbors that are candidates of u")))
EDGES = Kernel("candidates.cu", "gp_candidate_edges", twin=_edges_cpu, items="n", lanes=32, defines=_DEFINES,
               args=(*DEGREE.args[:7], Arg("rank", "i32[]", note="data vertex -> index among u's candidates"),
                     Arg("offset", "i64[n]", note="exclusive prefix sums of DEGREE"),
                     Arg("entries", "i32[]", out=True, note="the rows' candidate neighbors' ranks, in row order")))
