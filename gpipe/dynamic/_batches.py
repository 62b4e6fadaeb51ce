"""A batch of edge updates for a partition's sampling space, checked at the boundary (see ``_space``)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validate import check_array, check_integers
from ..errors import GpipeValueError
from ._kernels import OPS, _DELETE, _INSERT


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
    if numeric:
        values = weighed.astype(np.float64)
    else:  # objects: real numbers only (numpy would take True for 1.0, and the string "3" for 3.0)
        values = np.array([np.nan if isinstance(w, (bool, np.bool_)) or not isinstance(w, numbers.Real) else w
                           for w in weighed.tolist()], np.float64)
    if not (np.isfinite(values) & (values > 0)).all():
        i = int(np.argmax(~(np.isfinite(values) & (values > 0))))
        shown = given[i].item() if isinstance(given[i], np.generic) else given[i]
        raise GpipeValueError(f"update {first + i}: the weight of an {op[i]} must be a positive finite number, got "
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
                             or not 0 <= v < 2**63 for v in ids.tolist()])  # type: ignore[operator]
    if not to_blame.any():
        raise GpipeValueError(f"'{name}' must hold integer vertex ids, got dtype {ids.dtype}")
    bad = int(np.argmax(to_blame))
    shown = given[bad] if isinstance(given, (list, tuple)) and len(given) == len(ids) else ids[bad]
    shown = shown.item() if isinstance(shown, np.generic) else shown
    too_large = isinstance(shown, numbers.Real) and not isinstance(shown, bool) and 2**63 <= shown < float("inf")  # type: ignore[operator]
    rule = "integer vertex ids below 2**63" if too_large else "non-negative integer vertex ids"
    raise GpipeValueError(f"update {first + bad}: '{name}' must hold {rule}, got {shown!r}")


def absent(batch: Batch, i: int, first: int = 0) -> GpipeValueError:
    """The error of update ``i`` of ``batch`` (``first + i`` of the log), a delete or update of an edge that is not
    there."""
    return GpipeValueError(f"update {first + i}: cannot {batch.op[i]} edge ({batch.src[i]}, {batch.dst[i]}): it is "
                           f"not in the graph")
