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
from dataclasses import dataclass

import numpy as np

MAX_EDGES = 4
MAX_VERTICES = MAX_EDGES + 1
LABEL_BITS = 10  # label ranks below 2**10: 5 positions, 10 adjacency bits and the vertex count fit in 63 bits
MAX_LABELS = 1 << LABEL_BITS
_ADJACENCY_SHIFT = LABEL_BITS * MAX_VERTICES
_COUNT_SHIFT = _ADJACENCY_SHIFT + MAX_VERTICES * (MAX_VERTICES - 1) // 2


def _label_shift(a: int) -> int:
    return LABEL_BITS * (MAX_VERTICES - 1 - a)


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


@dataclass(frozen=True)
class Canonical:
    """A raw code's canonical code, the canonical position of each of its positions, and the orbit (under the
    pattern's automorphisms: the least position it maps to) of each canonical position."""

    code: int
    position: tuple
    orbit: tuple


@functools.lru_cache(maxsize=1 << 16)
def canonical(raw: int) -> Canonical:
    """The canonical form of a raw code, by trying every order of its (at most 5) vertices."""
    labels, edges = unpack(raw)
    n = len(labels)
    best, best_order = None, None
    for order in itertools.permutations(range(n)):  # order[a]: the new position of position a
        code = pack(tuple(labels[order.index(b)] for b in range(n)),
                    frozenset((order[a], order[b]) for a, b in edges))
        if best is None or code < best:
            best, best_order = code, order
    canon_labels, canon_edges = unpack(best)
    orbit = list(range(n))
    for order in itertools.permutations(range(n)):
        if pack(tuple(canon_labels[order.index(b)] for b in range(n)),
                frozenset((order[a], order[b]) for a, b in canon_edges)) == best:
            for a in range(n):
                orbit[a] = min(orbit[a], order[a])
    return Canonical(best, tuple(best_order), tuple(orbit))


def canonical_tables(raw_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For distinct raw codes: their canonical codes, and the orbit (canonical) of each raw position, -1 past the
    pattern's vertices (a row of ``MAX_VERTICES`` per raw code)."""
    codes = np.empty(raw_codes.shape[0], np.int64)
    orbits = np.full((raw_codes.shape[0], MAX_VERTICES), -1, np.int64)
    for i, raw in enumerate(raw_codes.tolist()):
        form = canonical(raw)
        codes[i] = form.code
        orbits[i, :len(form.position)] = [form.orbit[p] for p in form.position]
    return codes, orbits
