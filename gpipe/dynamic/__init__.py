"""Graphs that change: Bingo's radix-factorized sampling space, updated in batches (issue 13).

:class:`DynamicGraph` holds a graph's partitions on the workers as :class:`SamplingSpace` s, each the edges of one
partition's vertices and, per vertex, the groups of its biases' radix factorization, an alias table over them and
the decimal group of floating-point biases; a batch of inserts, deletes and re-weights applies in log order per
vertex, completely or not at all. A :class:`Snapshot` pins one committed version for runs (the walks of
``gpipe.walks`` take one), which draw each step with ``pick_in_space`` (``gpipe/_space_pick.py``, which the
walks share; CUDA: ``kernels/dynamic.cuh``).
:func:`update_log` makes the logs of Bingo's evaluation from a graph's edges; :func:`read_updates` reads a log
from a file.
"""

from ._graph import Applied, DynamicGraph, Snapshot
from ._log import UPDATE_COLUMNS, read_updates, update_log
from ._space import SamplingSpace, SpaceView

__all__ = ["UPDATE_COLUMNS", "Applied", "DynamicGraph", "SamplingSpace", "Snapshot", "SpaceView", "read_updates",
           "update_log"]
