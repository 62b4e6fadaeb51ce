"""The sampling space's pools (arrays in which each vertex owns a block, grown by doubling, compacted when the
blocks left behind outnumber the live ones) and the threads of its CPU twins (see ``_space``)."""

from __future__ import annotations

import contextlib

import numpy as np

from ..backend import cpu_threads, segments, xp

COMPACT_SLACK = 1 << 12  # a pool is compacted once its slots left behind would outnumber its live ones by this many


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


def _threads(vertices: int) -> int:
    """Threads for a commit touching ``vertices``: one for a streaming update's few (see ``cpu_threads``)."""
    return 1 if vertices < 256 else 1 << 30


def _twins(x, vertices: int):
    """The CPU twins' threads for kernels on arrays of ``x`` touching ``vertices``; nothing for CUDA's."""
    return cpu_threads(_threads(vertices)) if x is np else contextlib.nullcontext()
