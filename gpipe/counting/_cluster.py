"""The counting package's one contact with the cluster (through public ``gpipe.runtime`` names only): work on each
partition of the data graph where it is held, work split by contiguous ranges over the graph's workers, and whether
that work fits in their memory."""

from __future__ import annotations

import contextlib

import numpy as np

from .._csr import simple_rows
from ..backend import to_host
from ..errors import GpipeError
from ..graph import Graph
from ..runtime import call_peer, call_workers, check_memory, drop_run, store
from ._common import LANES


def on_partitions(g: Graph, phase: str, function, *args) -> list:
    """``function(indptr, indices, lo, labels, *args)`` on the rows of each of the graph's partitions, where they
    are held (a replicated graph's one partition: on its first replica); the results in partition order.

    ``indptr`` (local) and ``indices`` (global vertex ids) are the partition's CSR of rows ``lo..`` in the simple
    graph underneath (each neighbor once, no self-loops: counting reads a multigraph as its simple graph) and
    ``labels`` the whole graph's vertex labels, all host numpy arrays."""
    g.put_on_workers(["labels"])
    held, unit = g.holders
    calls = [(held[p], _on_partition, (g.graph_id, p, function, *args), {}) for p in range(g.num_partitions)]
    return call_workers(g.client, calls, held, phase, unit)


def on_workers(g: Graph, phase: str, calls: list[tuple]) -> list:
    """Each ``(worker, function, args)`` on that worker (one of ``g``'s); the results in that order."""
    held, unit = g.holders
    return call_workers(g.client, [(w, function, args, {}) for w, function, args in calls], held, phase, unit)


def workers(g: Graph) -> list[str]:
    """The workers holding ``g`` (its partitions or replicas), in address order: those :func:`spread` calls."""
    return sorted(set(g.holders[0].values()))


def run_state(run_id: str) -> dict:
    """On a worker: the state a run keeps here (made on first use), held by the store's ``Run`` until
    :func:`end_run`; a run that has ended here is not made again (an error)."""
    run = store().run(run_id, late=True)
    if run is None:
        raise GpipeError(f"counting run {run_id} has ended on worker {store().worker_address}")
    return run.state


def from_peer(peer: str, function, *args):
    """On a worker: ``function(*args)`` run on worker ``peer`` (here, without a message, when it is this one)."""
    return call_peer(peer, function, *args)


def here() -> str:
    """On a worker: its address."""
    return store().worker_address


def end_run(g: Graph, run_id: str) -> None:
    """Let what a run keeps on the graph's workers (the only ones it reaches) go: straight from the client, or,
    should that fail, through the scheduler to every worker."""
    try:
        on_workers(g, "counting: end", [(w, _drop_here, (run_id,)) for w in workers(g)])
    except Exception:
        with contextlib.suppress(Exception):
            g.client.run(drop_run, run_id)


def _drop_here(run_id: str) -> None:
    store().drop_run(run_id)


def _on_partition(graph_id: str, part: int, function, *args):
    p = store().partitions.as_held(graph_id, part)
    labels = to_host(store().partitions.array(graph_id, "labels"))
    rows = simple_rows(np, to_host(p.indptr), to_host(p.indices), first=int(p.lo))
    return function(rows.indptr, rows.indices, int(p.lo), labels, *args)


def check_sample_memory(g: Graph, samples: int, positions: int, python: bool) -> None:
    """Refuse, before any work, an estimate whose per-sample arrays would not fit in the workers' memory, as walks
    refuse an oversize run: each group of samples' sum and valid count (12 bytes); with a refine written in Python
    (``python``), which holds a worker's share of the samples at once, each sample's partial match (16 bytes a
    position) and columns (about 64 bytes) too: a lower bound, its tables of local candidates come on top."""
    groups = -(-int(samples) // LANES)
    per_sample = 16 * positions + 64 if python else 0
    check_memory(g, groups * (12 + LANES * per_sample), f"'samples' ({samples})", "estimate's per-sample arrays")


def spread(g: Graph, function, total: int, *args) -> list:
    """``function(start, count, *args)`` on each of the graph's workers, for contiguous ranges covering
    ``0..total-1`` in order; the results in that order (a worker with an empty range is not called)."""
    held, unit = g.holders
    workers = sorted(set(held.values()))
    cuts = [total * i // len(workers) for i in range(len(workers) + 1)]
    calls = [(w, function, (lo, hi - lo, *args), {}) for w, lo, hi in zip(workers, cuts, cuts[1:]) if hi > lo]
    return call_workers(g.client, calls, held, "counting", unit)
