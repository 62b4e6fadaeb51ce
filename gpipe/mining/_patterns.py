"""Small labeled patterns packed into one int64, and their canonical codes (GAMMA's aggregation map).

A pattern of at most ``MAX_VERTICES`` vertices packs as: its vertex count
(bits 60-62), its adjacency (bit 50 + ``pair(a, b)`` for each edge between
positions ``a < b``) and the label rank of each position ``a`` (bits
``LABEL_BITS * (MAX_VERTICES - 1 - a)`` up: the first position highest, so canonical codes list labels
ascending). The packing of an embedding's pattern with its
vertices in the order they appear (``kernels/fpm.cu``) is its raw code; the
smallest packing over all orders of the vertices is the canonical code: two
patterns share it exactly when they are isomorphic, labels included.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from .._search import has_edge
from ..backend import cpu_kernel, prange
from ..kernels import Arg, Kernel

MAX_EDGES = 4
MAX_VERTICES = MAX_EDGES + 1
LABEL_BITS = 10  # label ranks below 2**10: 5 positions, 10 adjacency bits and the vertex count fit in 63 bits
MAX_LABELS = 1 << LABEL_BITS
_ADJACENCY_SHIFT = LABEL_BITS * MAX_VERTICES
_PAIRS = MAX_VERTICES * (MAX_VERTICES - 1) // 2
_COUNT_SHIFT = _ADJACENCY_SHIFT + _PAIRS


@cpu_kernel()
def _label_shift(a: int) -> int:
    return LABEL_BITS * (MAX_VERTICES - 1 - a)


@cpu_kernel()
def pair(a: int, b: int) -> int:
    """The adjacency bit of positions ``a < b`` (as ``kernels/fpm.cu`` numbers them)."""
    return a * (2 * MAX_VERTICES - a - 1) // 2 + b - a - 1


def pack(labels: tuple, edges: frozenset) -> int:
    """The code of a pattern with label ranks ``labels`` by position and ``edges`` between positions."""
    code = len(labels) << _COUNT_SHIFT
    for a, b in edges:
        code |= 1 << (_ADJACENCY_SHIFT + pair(min(a, b), max(a, b)))
    for a, label in enumerate(labels):
        code |= label << _label_shift(a)
    return code


@functools.lru_cache(maxsize=1 << 16)
def unpack(code: int) -> tuple[tuple, frozenset]:
    """A code's label ranks by position and its edges between positions (kept for the next call with it: a
    mining level reads each pattern's several times)."""
    n = code >> _COUNT_SHIFT
    labels = tuple((code >> _label_shift(a)) & (MAX_LABELS - 1) for a in range(n))
    edges = frozenset((a, b) for a, b in itertools.combinations(range(n), 2)
                      if code >> (_ADJACENCY_SHIFT + pair(a, b)) & 1)
    return labels, edges


@cpu_kernel(parallel=True)
def _canonical_cpu(n, raw, code, orbit):
    for i in prange(n):
        r = raw[i]
        nv = r >> _COUNT_SHIFT
        label = np.empty(MAX_VERTICES, np.int64)
        ea, eb = np.empty(_PAIRS, np.int64), np.empty(_PAIRS, np.int64)
        least, order = np.empty(MAX_VERTICES, np.int64), np.empty(MAX_VERTICES, np.int64)
        left = np.empty(MAX_VERTICES, np.int64)
        ne, total = 0, 1
        for a in range(nv):
            label[a] = (r >> _label_shift(a)) & (MAX_LABELS - 1)
            total *= a + 1
            for b in range(a + 1, nv):
                if (r >> (_ADJACENCY_SHIFT + pair(a, b))) & 1:
                    ea[ne], eb[ne] = a, b
                    ne += 1
        best = np.int64(0x7FFFFFFFFFFFFFFF)
        for k in range(total):
            for a in range(nv):
                left[a] = a
            f, radix = k, total
            for a in range(nv):
                radix //= nv - a
                d = f // radix
                f %= radix
                order[a] = left[d]
                for t in range(d, nv - a - 1):
                    left[t] = left[t + 1]
            c = np.int64(nv) << _COUNT_SHIFT
            for e in range(ne):
                lo, hi = min(order[ea[e]], order[eb[e]]), max(order[ea[e]], order[eb[e]])
                c |= np.int64(1) << (_ADJACENCY_SHIFT + pair(lo, hi))
            for a in range(nv):
                c |= label[a] << _label_shift(order[a])
            if c < best:
                best = c
                for a in range(nv):
                    least[a] = order[a]
            elif c == best:
                for a in range(nv):
                    least[a] = min(least[a], order[a])
        code[i] = best
        for a in range(MAX_VERTICES):
            orbit[i * MAX_VERTICES + a] = least[a] if a < nv else -1


CANONICAL = Kernel(
    "fpm.cu", "gp_canonical", twin=_canonical_cpu, items="n",
    defines={"GP_FPM_MAX_EDGES": MAX_EDGES, "GP_FPM_LABEL_BITS": LABEL_BITS}, args=(
        Arg("n", "i64", note="codes"), Arg("raw", "i64[n]", note="raw pattern codes"),
        Arg("code", "i64[n]", out=True, note="canonical codes"),
        Arg("orbit", f"i64[n*{MAX_VERTICES}]", out=True, note="each raw position's orbit, -1 past the pattern's")))


def canonical_forms(x, raw):
    """For raw codes (numpy or cupy, on their device): their canonical codes, and the orbit (the least canonical
    position it can take) of each raw position, -1 past the pattern's vertices (a row of ``MAX_VERTICES`` per
    code). Isomorphic patterns, labels included, share a canonical code, and only they do."""
    code = x.empty(raw.shape[0], dtype=x.int64)
    orbit = x.empty((raw.shape[0], MAX_VERTICES), dtype=x.int64)
    CANONICAL.launch(n=raw.shape[0], raw=x.ascontiguousarray(raw, dtype=x.int64), code=code, orbit=orbit.reshape(-1))
    return code, orbit


@cpu_kernel()
def label_of(code: int, a: int) -> int:
    """The label rank of position ``a`` of a packed pattern."""
    return (code >> _label_shift(a)) & (MAX_LABELS - 1)


@cpu_kernel()
def adjacent(code: int, a: int, b: int) -> bool:
    """Whether positions ``a != b`` of a packed pattern are adjacent."""
    return (code >> (_ADJACENCY_SHIFT + pair(min(a, b), max(a, b)))) & 1 == 1


@cpu_kernel()
def _grown_one(code, partner_ptr, partner, out, o, write):
    """The patterns one edge larger than ``code`` (into ``out[o:]`` with ``write``): an edge between two of its
    positions, or to a new one, whose labels are a pair of the sorted lists ``partner`` (CSR by label); how many."""
    n = code >> _COUNT_SHIFT
    c = 0
    for a in range(n):
        la = label_of(code, a)
        first, count = partner_ptr[la], partner_ptr[la + 1] - partner_ptr[la]
        for b in range(a + 1, n):
            if not adjacent(code, a, b) and has_edge(partner, first, count, label_of(code, b)):
                if write:
                    out[o + c] = code | (np.int64(1) << (_ADJACENCY_SHIFT + pair(a, b)))
                c += 1
        if n < MAX_VERTICES:
            base = (code + (np.int64(1) << _COUNT_SHIFT)) | (np.int64(1) << (_ADJACENCY_SHIFT + pair(a, n)))
            for j in range(first, first + count):
                if write:
                    out[o + c] = base | (np.int64(partner[j]) << _label_shift(n))
                c += 1
    return c


@cpu_kernel()
def _grown_cpu(codes, partner_ptr, partner, offset, out, write, count):
    for i in range(codes.shape[0]):
        count[i] = _grown_one(codes[i], partner_ptr, partner, out, offset[i], write)


def grown(codes: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """The raw codes of the patterns one edge larger than each of ``codes`` whose new edge's labels are one of
    ``pairs`` (label rank pairs, a row each, both orders given)."""
    order = np.lexsort((pairs[:, 1], pairs[:, 0])) if pairs.size else np.empty(0, np.int64)
    partner = np.ascontiguousarray(pairs[order, 1], dtype=np.int64)
    partner_ptr = np.zeros(MAX_LABELS + 1, np.int64)
    np.cumsum(np.bincount(pairs[:, 0], minlength=MAX_LABELS), out=partner_ptr[1:])
    codes = np.ascontiguousarray(codes, dtype=np.int64)
    count = np.empty(codes.size, np.int64)
    _grown_cpu(codes, partner_ptr, partner, count, count, False, count)
    offset = np.cumsum(count) - count
    out = np.empty(int(count.sum()), np.int64)
    _grown_cpu(codes, partner_ptr, partner, offset, out, True, count)
    return out


@cpu_kernel()
def _smaller_cpu(codes, raw, kept):
    for i in range(codes.shape[0]):
        code = codes[i]
        n = code >> _COUNT_SHIFT
        s = 0
        for a in range(n):
            for b in range(a + 1, n):
                if not adjacent(code, a, b):
                    continue
                around = np.zeros(MAX_VERTICES, np.int64)  # each position's neighbors without edge (a, b), a mask
                for p in range(n):
                    for q in range(n):
                        if p != q and adjacent(code, p, q) and not ((p == a and q == b) or (p == b and q == a)):
                            around[p] |= 1 << q
                alive = 0
                for p in range(n):
                    if around[p]:
                        alive |= 1 << p
                reached, frontier = alive & -alive, alive & -alive  # from the lowest position left
                while frontier:
                    grown = 0
                    for p in range(n):
                        if frontier >> p & 1:
                            grown |= around[p]
                    frontier = grown & ~reached
                    reached |= grown
                if alive == 0 or reached != alive:  # no edge left, or two pieces
                    continue
                m, new = 0, np.full(MAX_VERTICES, -1, np.int64)
                for p in range(n):
                    if alive >> p & 1:
                        new[p] = m
                        kept[i, s, m] = p
                        m += 1
                packed = np.int64(m) << _COUNT_SHIFT
                for p in range(n):
                    if alive >> p & 1:
                        packed |= label_of(code, p) << _label_shift(new[p])
                        for q in range(p + 1, n):
                            if around[p] >> q & 1:
                                packed |= np.int64(1) << (_ADJACENCY_SHIFT + pair(new[p], new[q]))
                raw[i, s] = packed
                s += 1


def smaller(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The connected patterns one edge smaller than each of ``codes``: per edge whose removal leaves one connected
    pattern (a vertex it leaves alone goes), its raw code (a row of ``MAX_EDGES`` per code, -1 past the last) and
    the position of ``codes``' pattern each of its positions was (-1 past its last)."""
    raw = np.full((codes.size, MAX_EDGES), -1, np.int64)
    kept = np.full((codes.size, MAX_EDGES, MAX_VERTICES), -1, np.int64)
    _smaller_cpu(np.ascontiguousarray(codes, dtype=np.int64), raw, kept)
    return raw, kept
