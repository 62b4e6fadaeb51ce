"""run_on_workers: a training function on every worker of the graph's cluster, each with a NeighborLoader over its
share of the seeds against its own copy of the graph's CSR: data-parallel training (torch DDP) with no client in the
loop."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from .._validate import check_callable, check_mapping, check_picklable
from ..backend import to_host
from ..errors import GpipeError, GpipeValueError, TaskError
from ..runtime import workers_info
from ..runtime.calls import cancel, check_held, dumps, end_later, gather_pinned, loads, run, scatter, submit
from ..runtime.workers import end_here, run_going
from ._loader import LoaderSpec, NeighborLoader, check_loader
from ._local import assemble, check_integer_ids, csr_pieces

PHASE = "gnn training"


@dataclass(frozen=True)
class RankTask:
    """What a rank of :func:`run_on_workers` is told besides its data (its CSR pieces, seeds, features and labels,
    which go as the task's own arguments: futures among them are resolved by Dask only there)."""

    train_fn: Callable
    run_id: str
    rank: int
    world: int
    rendezvous: dict  # MASTER_ADDR and MASTER_PORT
    num_vertices: int
    id_map: Any  # the graph's original ids, or None
    device: str
    spec: LoaderSpec
    kwargs: dict  # train_fn's own keywords
_RESERVED = ("loader", "rank", "world_size")  # train_fn's own arguments: not in ``kwargs``


def run_on_workers(train_fn, g, seeds, fanouts, batch_size: int, *, shuffle: bool = True, drop_last: bool = False,
                   seed: int = 0, features=None, labels=None, replace: bool = False, weighted: bool = False,
                   fused: bool = True, edge_dir: str = "out", kwargs: dict | None = None) -> list:
    """Run ``train_fn(loader, rank, world_size, **kwargs)`` on every worker at once, each with a loader of its own.

    Data-parallel training as torch DDP does it, with the cluster's workers
    as the ranks (one per GPU under dask-cuda; CPU workers too): every
    worker assembles the graph's CSR from the partitions it and its peers
    hold (peer to peer, on its GPU when the graph is on GPUs) and gets a
    :class:`NeighborLoader` over its share of the seeds; the batches are
    sampled on the worker, the client only waits for the results.

    Ranks are the workers in order of address (the same whatever order they
    started in). Rank ``r`` of ``W`` takes ``seeds[r:W*s:W]``, with
    ``s = len(seeds) // W``: equal shares, so every rank runs as many
    batches (DDP's collectives need it); the last ``len(seeds) % W`` seeds
    (fewer than ``W``) are left out. Rank ``r``'s loader yields the batches
    ``NeighborLoader(g, seeds[r:W*s:W], fanouts, batch_size, ...)`` yields
    with the same arguments.

    While ``train_fn`` runs, the environment holds what ``torch.distributed``'s
    default ``env://`` rendezvous reads: ``MASTER_ADDR`` (rank 0's host),
    ``MASTER_PORT`` (a port free on it), ``RANK`` and ``WORLD_SIZE``; so
    ``torch.distributed.init_process_group("gloo" or "nccl", rank=rank,
    world_size=world_size)`` joins the ranks (call ``destroy_process_group()``
    before returning). On a dask-cuda worker the worker's GPU is CUDA device
    0 (``torch.device("cuda", 0)``). gpipe itself does not import torch.

    The ranks end together: when one fails (or the client is interrupted,
    or a worker leaves), the others' loaders raise a :class:`GpipeError`
    at their next batch, so the workers are free for the next call.

    Parameters
    ----------
    train_fn : callable
        ``train_fn(loader, rank, world_size, **kwargs)``, picklable; its
        return value (picklable) comes back to the client.
    g : gpipe.Graph
        A graph with integer vertex ids.
    seeds : array-like of int
        Distinct vertices (the training vertices), split among the ranks.
    fanouts, batch_size, shuffle, drop_last, seed, features, labels, replace, weighted, fused, edge_dir
        As for :class:`NeighborLoader`; ``features`` and ``labels`` (host or
        device arrays) are sent once to every worker.
    kwargs : dict, optional
        More keyword arguments of ``train_fn`` (not ``loader``, ``rank`` or
        ``world_size``), the same on every rank.

    Returns
    -------
    list
        ``train_fn``'s results, in rank order.

    Raises
    ------
    GpipeValueError
        As :class:`NeighborLoader`; ``train_fn`` not callable or not
        picklable; ``kwargs`` not a mapping of names or not picklable, or
        holding one of ``train_fn``'s own arguments; fewer seeds than workers.
    TaskError
        ``train_fn`` raised (or called ``sys.exit``) on a worker, or returned
        what cannot be pickled: the message names the rank and the error.
    WorkerLostError
        A worker holding the graph has left the cluster (before the call,
        which then fails at once, or during it; no worker left at all
        included), or a rank's worker did.
    GpipeError
        A rank's result cannot be unpickled on the client.

    Examples
    --------
    >>> def count(loader, rank, world_size, scale):
    ...     return rank, world_size, scale * sum(batch.output_nodes.size for batch in loader)
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=1)
    ...     gpipe.gnn.run_on_workers(count, g, seeds=range(100), fanouts=[10, 5], batch_size=32, seed=3,
    ...                              kwargs={"scale": 2})
    [(0, 1, 200)]
    """
    check_picklable("train_fn", check_callable("train_fn", train_fn))
    g, dense, spec, features, labels = check_loader(
        g, seeds, fanouts=fanouts, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, seed=seed,
        features=features, labels=labels, replace=replace, weighted=weighted, fused=fused, edge_dir=edge_dir)
    kwargs = check_picklable("kwargs", _check_kwargs(kwargs))
    check_integer_ids(g)
    client = g.client
    info = workers_info(client)
    workers = sorted(info)
    held, unit = g.holders
    # Once the ranks are known: a holder still there now is a rank, watched while they run; one gone already would
    # leave them waiting forever on its CSR pieces (and with no worker left, there would be no rank at all).
    check_held(client, held, PHASE, unit)
    world = len(workers)
    share = dense.size // world
    if share == 0:
        raise GpipeValueError(f"'seeds' must hold at least one vertex per worker ({world}), got {dense.size}")
    rendezvous = {"MASTER_ADDR": info[workers[0]]["host"],  # the scheduler's: its address's host
                  "MASTER_PORT": str(run(client, _free_port, workers=[workers[0]])[workers[0]])}
    pieces = csr_pieces(g, workers)
    features, labels = (None if a is None else scatter(client, [to_host(a)], broadcast=True)[0]
                        for a in (features, labels))
    run_id = uuid.uuid4().hex
    futures = [submit(client, _train, RankTask(train_fn, run_id, rank, world, rendezvous, g.num_vertices,
                                                 g.id_map, g.device, spec, kwargs),
                      pieces[rank], dense[rank:world * share:world], features, labels,
                      workers=[w], key=f"gpipe-gnn-train-{run_id}-{rank}")
                 for rank, w in enumerate(workers)]
    try:
        results = gather_pinned(client, futures, dict(enumerate(workers)), PHASE, unit="rank")
    except BaseException:
        cancel(client, futures)
        end_later(client, run_id)  # the ranks still training stop at their next batch
        raise
    return [_unpickled(rank, result) for rank, result in enumerate(results)]


def _check_kwargs(kwargs) -> dict:
    kwargs = check_mapping("kwargs", {} if kwargs is None else kwargs)
    for name in kwargs:
        if not isinstance(name, str) or not name.isidentifier():
            raise GpipeValueError(f"'kwargs' must map argument names to values, got the key {name!r}")
        if name in _RESERVED:
            raise GpipeValueError(f"'kwargs' must not hold {', '.join(_RESERVED)} (run_on_workers gives them), "
                                  f"got {name!r}")
    return kwargs


def _free_port() -> int:
    """A TCP port free on this host now (for rank 0's rendezvous; the OS picks it)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _unpickled(rank: int, result: bytes):
    try:
        return loads(result)
    except Exception as exc:  # whatever a reduction raises: a class this process cannot import, a device it lacks
        raise GpipeError(f"{PHASE}: the result of rank {rank} cannot be unpickled here: {exc!r}") from None


class _RankLoader(NeighborLoader):
    """A rank's loader: between batches it stops the rank (a :class:`GpipeError`) once the run has ended on this
    worker, because another rank failed or the client gave up (``drop_run``)."""

    def __iter__(self):
        for batch in super().__iter__():
            if not run_going(self._run_id):
                raise GpipeError(f"{PHASE}: stopped, because another rank failed or the client was interrupted")
            yield batch


def _train(task: RankTask, pieces: list, seeds, features, labels) -> bytes:
    """On the worker of rank ``task.rank``: its loader, then ``train_fn`` with the rendezvous in the environment
    (restored after); the result pickled here, where a result that cannot be is a TaskError naming the rank."""
    train_fn, run_id, rank, world, rendezvous = task.train_fn, task.run_id, task.rank, task.world, task.rendezvous
    num_vertices, id_map, device, spec, kwargs = task.num_vertices, task.id_map, task.device, task.spec, task.kwargs
    if not run_going(run_id):  # the run's mark in the store, made here: ``drop_run`` ends it
        raise GpipeError(f"{PHASE}: stopped before rank {rank} started")
    loader = _RankLoader._on(assemble(pieces, num_vertices, id_map, device), device, seeds, spec, features, labels)
    loader._run_id = run_id
    env = dict(rendezvous, RANK=str(rank), WORLD_SIZE=str(world))
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        result = train_fn(loader, rank, world, **kwargs)
    except (Exception, SystemExit) as exc:  # sys.exit caught too: let through, it would end the worker and its data
        raise TaskError(PHASE, rank, None, repr(exc), unit="rank") from exc
    finally:
        end_here(run_id)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        return dumps(result)
    except Exception as exc:  # whatever a reduction raises
        raise TaskError(PHASE, rank, None, f"train_fn's result cannot be pickled to reach the client: {exc!r}",
                        unit="rank") from None
