"""A graph's CSR in the trainer's own process: gathered once from the workers' partitions, kept per graph and device.

The one module of ``gpipe.gnn`` that talks to the cluster; it uses the graph's public attributes and
``gpipe.runtime``'s public names only.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..backend import to_host, xp
from ..errors import GpipeValueError
from ..graph import Partition
from ..runtime import gather_pinned, store

_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Graph -> {device: LocalGraph}


@dataclass(frozen=True)
class LocalGraph:
    """The whole CSR as one partition on this process's device, its largest degree, and the graph's ids there."""

    part: Partition
    max_degree: int
    id_map: object | None


def local_graph(g) -> LocalGraph:
    """``g``'s CSR on its device (numpy, or cupy on this process's current GPU), fetched on first use."""
    kept = _KEPT.setdefault(g, {})
    if g.device not in kept:
        kept[g.device] = _fetch(g)
    return kept[g.device]


def _fetch(g) -> LocalGraph:
    if g.id_map is not None and not np.issubdtype(g.id_map.dtype, np.integer):
        raise GpipeValueError(f"gpipe.gnn needs a graph with integer vertex ids; this one's are {g.id_map.dtype}")
    x = xp(g.device)
    client = g.client
    futures = [client.submit(_partition_csr, g.graph_id, p, workers=[w], allow_other_workers=False, pure=False)
               for p, w in enumerate(g.placement)]
    pieces = gather_pinned(client, futures, dict(enumerate(g.placement)), "gnn graph fetch")
    ends = np.cumsum([0] + [indices.shape[0] for _, indices, _ in pieces])
    indptr = np.concatenate([ptr[:-1] + start for (ptr, _, _), start in zip(pieces, ends)] + [ends[-1:]])
    weights = np.concatenate([w for _, _, w in pieces]) if g.weighted else None
    n = g.num_vertices
    part = Partition(0, 0, n, np.array([0, n]), x.asarray(indptr), x.asarray(np.concatenate([i for _, i, _ in pieces])),
                     None if weights is None else x.asarray(weights))
    return LocalGraph(part, int(np.diff(indptr).max(initial=0)), None if g.id_map is None else x.asarray(g.id_map))


def _partition_csr(graph_id: str, part: int) -> tuple:
    """On the worker holding it: partition ``part``'s ``indptr``, ``indices`` and ``weights`` in host memory."""
    p = store().partitions.as_held(graph_id, part)
    return (to_host(p.indptr), to_host(p.indices), None if p.weights is None else to_host(p.weights))
