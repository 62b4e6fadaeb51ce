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

import itertools

import numpy as np

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


def unpack(code: int) -> tuple[tuple, frozenset]:
    """A code's label ranks by position and its edges between positions."""
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
