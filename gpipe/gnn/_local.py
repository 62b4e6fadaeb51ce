"""A graph's CSR in the trainer's own process: gathered once from the workers' partitions, kept per graph and device;
or on a worker, assembled from the pieces its peers computed (:mod:`._workers`).

With :mod:`._workers`, the modules of ``gpipe.gnn`` that talk to the cluster; they use the graph's public attributes
and ``gpipe.runtime``'s public names only.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import to_host, xp
from ..errors import GpipeValueError
from ..graph import Partition
from ..runtime.calls import gather_pinned, submit
from ..runtime.workers import held_partition

_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Graph -> {device: LocalGraph}


@dataclass(frozen=True)
class LocalGraph:
    """The whole CSR as one partition on this process's device, its largest degree, and the graph's ids there."""

    part: Partition
    max_degree: int
    id_map: Any


def local_graph(g) -> LocalGraph:
    """``g``'s CSR on its device (numpy, or cupy on this process's current GPU), fetched on first use."""
    kept = _KEPT.setdefault(g, {})
    if g.device not in kept:
        kept[g.device] = _fetch(g)
    return kept[g.device]


def check_integer_ids(g) -> None:
    if g.id_map is not None and not np.issubdtype(g.id_map.dtype, np.integer):
        raise GpipeValueError(f"gpipe.gnn needs a graph with integer vertex ids; this one's are {g.id_map.dtype}")


def csr_pieces(g, workers: list[str] | None = None) -> list:
    """Futures of the host CSR pieces of ``g``, each computed by the worker holding it; with ``workers``, a list of
    them per worker: a replicated graph's own replica where the worker holds one."""
    client = g.client
    parts = [submit(client, _partition_csr, g.graph_id, p, workers=[w]) for p, w in enumerate(g.placement)]
    if workers is None:
        return parts
    replicas = set(g.replicas or ())
    return [[submit(client, _partition_csr, g.graph_id, 0, workers=[w])] if w in replicas and w != g.placement[0]
            else parts
            for w in workers]


def assemble(pieces: list[tuple], num_vertices: int, id_map, device: str) -> LocalGraph:
    """The whole CSR on ``device`` (this process's current GPU for 'gpu') from its partitions' host pieces."""
    x = xp(device)
    ends = np.cumsum([0] + [indices.shape[0] for _, indices, _ in pieces])
    indptr = np.concatenate([ptr[:-1] + start for (ptr, _, _), start in zip(pieces, ends[:-1], strict=True)] +
                            [ends[-1:]])
    weighted = pieces[0][2] is not None
    weights = np.concatenate([w for _, _, w in pieces]) if weighted else None
    part = Partition(0, 0, num_vertices, np.array([0, num_vertices]), x.asarray(indptr),
                     x.asarray(np.concatenate([i for _, i, _ in pieces])),
                     None if weights is None else x.asarray(weights))
    return LocalGraph(part, int(np.diff(indptr).max(initial=0)), None if id_map is None else x.asarray(id_map))


def _fetch(g) -> LocalGraph:
    check_integer_ids(g)
    pieces = gather_pinned(g.client, csr_pieces(g), dict(enumerate(g.placement)), "gnn graph fetch")
    return assemble(pieces, g.num_vertices, g.id_map, g.device)


def _partition_csr(graph_id: str, part: int) -> tuple:
    """On the worker holding it: partition ``part``'s ``indptr``, ``indices`` and ``weights`` in host memory."""
    p = held_partition(graph_id, part)
    return (to_host(p.indptr), to_host(p.indices), None if p.weights is None else to_host(p.weights))
