"""Adjacency rows as the subgraph searches read them (mining and counting): a CSR sorted per vertex, each neighbor
once, so that a multigraph is searched as the simple graph underneath."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .backend import cpu_kernel


@dataclass(frozen=True)
class Rows:
    """A CSR as the searches read it: ``indptr`` and ``indices``, sorted per vertex, each neighbor once."""

    indptr: Any
    indices: Any


def simple_rows(x, indptr, indices, first: int | None = None) -> Rows:
    """The rows of a CSR (sorted per vertex; numpy or cupy arrays, ``x`` their module) with each neighbor once: a
    multigraph's repeated edges, side by side in a row, are searched as one edge of the simple graph underneath.
    Given ``first``, the vertex of the first row (the rows being those of ``first``, ``first + 1``, ...), self-loops
    are dropped too. The same arrays where nothing is dropped."""
    dropped = x.zeros(indices.shape[0], bool)
    x.equal(indices[1:], indices[:-1], out=dropped[1:])
    starts = indptr[:-1]  # an empty row's start is the next row's, or the end
    dropped[starts[starts < indices.shape[0]]] = False  # a row's first neighbor repeats nothing
    if first is not None:
        row = x.searchsorted(indptr[1:], x.arange(indices.shape[0]), side="right")
        dropped |= indices == row + first
    gone = x.flatnonzero(dropped)
    if not gone.shape[0]:
        return Rows(indptr, indices)
    return Rows(indptr - x.searchsorted(gone, indptr), indices[~dropped])  # less the slots dropped before


@cpu_kernel()
def row_span(indptr, row):
    """Where CSR row ``row`` starts in ``indices``, and its length: a CPU twin's read of a vertex's neighbors."""
    start = indptr[row]
    return start, indptr[row + 1] - start
