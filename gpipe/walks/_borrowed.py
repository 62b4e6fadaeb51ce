"""The out-neighbor lists a walk run reads of other partitions (node2vec's previous vertex, static and dynamic):
brought along by the walkers (``StepSpec.lends``, see ``runtime/_lent.py``) or, where one is still missing,
fetched once a run through the runtime's :func:`~gpipe.runtime.neighbor_lists`; kept in the run's state."""

from __future__ import annotations

import numpy as np

from ..backend import free_memory, segments
from ..runtime import Run, neighbor_lists
from ..runtime.exchange import LentLists
from ..runtime.workers import worker_xp


def borrowed_lists(run: Run, graph: tuple[str, list[str]], bounds: np.ndarray, vertices=None,
                   most: int | None = None):
    """For a step function: a CSR ``(ids, indptr, indices)`` of out-neighbor lists of other partitions, ``ids``
    sorted: those of ``vertices`` (sorted, unique) and of every vertex borrowed before in ``run`` on this worker
    (``vertices`` None: those alone, or None if there are none), the lists walkers brought here kept first. A
    list is fetched once a run rather than once a superstep: the lists are kept (the run's
    :class:`~gpipe.runtime.exchange.LentLists` state) while they hold at most ``most`` edges (default: as many as a quarter of the memory free when they grow takes), beyond which those of ``vertices``
    come alone. (node2vec on R-MAT 16 in 2 partitions fetched 21 times the graph's edges a run: the same hubs'
    lists in each of 75 supersteps.)"""
    x = worker_xp()
    state = run.state(LentLists)
    kept, lent = state.kept, state.arrived
    while lent:  # the lists walkers brought along (``StepSpec.lends``), kept while there is room
        ids, indptr, indices = lent.pop()
        held = kept.get(graph[0])
        if held is not None:
            if held[2].shape[0] >= (most or free_memory(x) // 4 // held[2].dtype.itemsize):
                continue
            fresh = ~x.isin(ids, held[0])  # (borrowed before they came)
            ids, indptr, indices = _rows_of(x, (ids, indptr, indices), x.flatnonzero(fresh))
        kept[graph[0]] = _joined(x, held, ids, indptr, indices)
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
    kept[graph[0]] = _joined(x, held, vertices, indptr, indices)
    return kept[graph[0]]


def _joined(x, held: tuple | None, vertices, indptr, indices) -> tuple:
    """The kept lists ``held`` (or none) and new ones (``vertices`` none of them has), by id."""
    if held is None:
        order = x.argsort(vertices)
        return _rows_of(x, (vertices, indptr, indices), order)
    ids = x.concatenate([held[0], vertices])
    order = x.argsort(ids)
    lengths = x.concatenate([x.diff(held[1]), x.diff(indptr)])[order]
    starts = x.concatenate([held[1][:-1], indptr[:-1] + held[2].shape[0]])[order]
    row, position = segments(x, lengths)
    indices = x.concatenate([held[2], indices])[starts[row] + position]
    indptr = x.zeros(lengths.shape[0] + 1, x.int64)
    x.cumsum(lengths, out=indptr[1:])
    return ids[order], indptr, indices


def _rows_of(x, lists: tuple, picked) -> tuple:
    """The lists ``(ids, indptr, indices)`` of positions ``picked``, in that order."""
    ids, indptr, indices = lists
    lengths = (indptr[1:] - indptr[:-1])[picked]
    row, position = segments(x, lengths)
    out = x.zeros(lengths.shape[0] + 1, x.int64)
    x.cumsum(lengths, out=out[1:])
    return ids[picked], out, indices[indptr[:-1][picked][row] + position]
