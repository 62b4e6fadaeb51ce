"""The out-neighbor lists a walk run borrows from other partitions (node2vec's previous vertex, static and dynamic):
fetched once a run through the runtime's :func:`~gpipe.runtime.neighbor_lists`, kept in the run's state."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..backend import free_memory, segments
from ..runtime import Run, neighbor_lists, worker_xp


@dataclasses.dataclass
class Borrowed:
    """A walk run's state on a worker: the out-neighbor lists of other partitions it borrowed, by graph id."""

    lists: dict = dataclasses.field(default_factory=dict)


def borrowed_lists(run: Run, graph: tuple[str, list[str]], bounds: np.ndarray, vertices=None,
                   most: int | None = None):
    """For a step function: a CSR ``(ids, indptr, indices)`` of out-neighbor lists of other partitions, ``ids``
    sorted: those of ``vertices`` (sorted, unique) and of every vertex borrowed before in ``run`` on this worker
    (``vertices`` None: those alone, or None if there are none). A list is fetched once a run rather than once a
    superstep: the lists are kept (the run's :class:`Borrowed` state) while they hold at most ``most`` edges
    (default: as many as a quarter of the memory free when they grow takes), beyond which those of ``vertices``
    come alone. (node2vec on R-MAT 16 in 2 partitions fetched 21 times the graph's edges a run: the same hubs'
    lists in each of 75 supersteps.)"""
    x = worker_xp()
    kept = run.state(Borrowed).lists
    held = kept.get(graph[0])
    if vertices is None:
        return held
    if held is not None:
        missing = vertices[~x.isin(vertices, held[0])]
        if not missing.shape[0]:
            return held
        if most is None:
            most = free_memory(x) // 4 // held[2].dtype.itemsize
        if held[2].shape[0] >= most:  # full: these lists alone
            return (vertices, *neighbor_lists(graph, bounds, vertices))
        vertices = missing
    indptr, indices = neighbor_lists(graph, bounds, vertices)
    if held is not None:  # the kept lists and the new ones, by id
        ids = x.concatenate([held[0], vertices])
        order = x.argsort(ids)
        lengths = x.concatenate([x.diff(held[1]), x.diff(indptr)])[order]
        starts = x.concatenate([held[1][:-1], indptr[:-1] + held[2].shape[0]])[order]
        row, position = segments(x, lengths)
        indices = x.concatenate([held[2], indices])[starts[row] + position]
        vertices, indptr = ids[order], x.zeros(lengths.shape[0] + 1, x.int64)
        x.cumsum(lengths, out=indptr[1:])
    kept[graph[0]] = (vertices, indptr, indices)
    return vertices, indptr, indices
