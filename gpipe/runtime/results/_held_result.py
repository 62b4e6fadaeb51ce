"""The base of every result a family keeps on the workers in blocks until it is asked for (walks, PPR, samples)."""

from __future__ import annotations

import time
import uuid
import weakref
from collections.abc import Callable
from typing import Self

from distributed import Future
from distributed.utils import sync

from ..._files import atomic_dir
from ..._validate import check_callable, check_path, check_picklable
from ...errors import GpipeError
from .. import _cma
from .._store import store
from .._watch import call_workers, gather_pinned, tell_workers, wait_pinned
from ..calls import end_later, scatter, submit
from ._ipc import DeviceResult, written


class HeldResult:
    """A result held on the workers in blocks.

    The runs that made it leave their outputs in the workers' stores; the
    first use makes the blocks there (``persist``: each family's
    :meth:`_assemble`; a walk on one replica made them as it ended) and lets the runs go, the blocks holding everything
    from then on; should making them fail, the runs are let go at once, so the
    next run has the memory back. The runs are let go too when the result is
    garbage-collected first. ``map_blocks`` runs a function on each block where
    it is held (each family says what a block is to it), ``compute`` gathers
    the result to the client, ``to_dask`` and ``to_parquet`` make it on the
    workers. ``stats`` says how the runs went, and ``assemble_seconds`` how
    long the blocks took. Waits name what a worker that left the cluster held.
    A family whose runs keep the blocks' rows themselves until the result goes
    (mining's listings) sets ``KEEPS_RUNS``: its runs are let go with it.
    """

    KEEPS_RUNS = False

    def __init__(self, client, held: dict[int, str], id_map, stats: dict, run_ids: tuple[str, ...],
                 unit: str = "partition"):
        self._client = client
        self._held = held  # partition -> worker: where the runs left their outputs, whose loss the waits watch for
        self._unit = unit  # what ``held`` maps: partitions, or a replicated graph's replicas
        self._id_map = id_map
        self._id_future = None
        self._block_futures: list | None = None
        self._holders: list[str] | None = None  # the worker holding each block (asked of the scheduler once)
        self.stats = stats
        self._finalizers = [weakref.finalize(self, end_later, client, run_id) for run_id in run_ids]

    def _assemble(self) -> list:
        """Futures of the blocks, made on the workers from what the runs left there (each family's)."""
        raise NotImplementedError

    def _blocks(self) -> list:
        """Futures of the blocks (made on first use)."""
        if self._client.status in ("closing", "closed"):  # its blocks went with it (FuturesCancelledError said so)
            raise GpipeError(f"this result's Dask client is closed (its status: {self._client.status!r}), and its "
                             "blocks went with it; run it again with a connected client")
        if self._block_futures is None:
            if not all(f.alive for f in self._finalizers):
                raise GpipeError("this result's assembly failed and its runs were let go; run it again")
            self._block_futures = self._assemble()
        return self._block_futures

    def persist(self) -> Self:
        """Make the blocks on the workers and wait for them; ``stats['assemble_seconds']`` says how long."""
        t0 = time.perf_counter()
        try:
            wait_pinned(self._client, self._blocks(), self._held, "assembly", self._unit)
        except BaseException:
            self._block_futures = self._holders = None
            for finalizer in self._finalizers:  # what the runs left goes now: nothing else would let it go
                finalizer()
            raise
        for finalizer in self._finalizers if not self.KEEPS_RUNS else ():  # the blocks hold the result now
            finalizer.detach()
        self.stats.setdefault("assemble_seconds", time.perf_counter() - t0)
        return self

    def _ids(self):
        """A future of the graph's id map on every worker (None for dense ids), sent once."""
        if self._id_map is not None and self._id_future is None:
            self._id_future = scatter(self._client, [self._id_map], broadcast=True)[0]
        return self._id_future

    def _on_blocks(self, func, args_of: Callable[[int], tuple] = lambda b: (), **kwargs) -> list:
        """Futures of ``func(block, *args_of(b), **kwargs)`` of each block ``b``, run where it is held: pinned there,
        as a task the scheduler placed or a worker stole elsewhere copies the block to that worker, and Dask's
        memory manager then drops one of the two copies within seconds, maybe the one :meth:`_gather` found it on
        (a KeyError there, seen under load)."""
        self.persist()
        futures = self._blocks()
        who_has = self._client.who_has(futures)
        return [submit(self._client, func, block, *args_of(b), **kwargs,
                       workers=list(who_has[block.key][:1]) or None) for b, block in enumerate(futures)]

    def _gather(self, phase: str, func, args_of: Callable[[int], tuple] = lambda b: (), *, lent: bool = False,
                into: Callable | None = None) -> list:
        """``func(block, *args_of(b))`` of each block ``b``, in block order, watched: one direct call to each
        worker holding blocks (:func:`~._watch.call_workers`), the results in its reply. A task per block took
        ~5 ms of scheduling each (a neighbor sample's six blocks on a GPU worker ran one after another), and its
        result another round trip to gather. Arguments that are futures (an id map sent once to every worker,
        which Dask may not have copied to each yet) make it a task per block, which Dask gives them.

        With ``lent`` (results of host arrays, or dicts of them: ``compute``), a worker whose memory this process
        can read lends them instead, and they are read from there (:mod:`._cma`); ``stats['transfer']`` says
        which way the blocks came; ``into(b, lent)``, for results of one array: the bytes block ``b``'s is read
        into (``_cma.borrowed``)."""
        self.persist()  # first: should the blocks fail to be made, the runs go
        futures = self._blocks()
        args = [args_of(b) for b in range(len(futures))]
        by_tasks = any(isinstance(a, Future) for per_block in args for a in per_block)
        if self._holders is None and not by_tasks:
            who_has = self._client.who_has(futures)
            if all(who_has.get(f.key) for f in futures):  # else a block is lost: the tasks' wait names how
                self._holders = [who_has[f.key][0] for f in futures]
        if by_tasks or self._holders is None:
            self._transferred(lent, {"comms"})
            return gather_pinned(self._client, self._on_blocks(func, lambda b: args[b]), self._held, phase,
                                 self._unit)
        mine: dict[str, list[int]] = {}
        for b, worker in enumerate(self._holders):
            mine.setdefault(worker, []).append(b)
        read = _cma.readable(self._client, list(mine)) if lent else dict.fromkeys(mine, False)
        token = uuid.uuid4().hex
        calls: list[tuple] = []
        for worker, blocks in mine.items():
            items = [(futures[b].key, args[b]) for b in blocks]
            calls.append((worker, _lent_here, (items, func, token), {}) if read[worker]
                         else (worker, _applied_here, (items, func), {}))
        results = [None] * len(futures)
        try:
            done = call_workers(self._client, calls, self._held, phase, self._unit)
            for blocks, replies in zip(mine.values(), done, strict=True):
                for b, result in zip(blocks, replies, strict=True):
                    results[b] = result
            loaned = [b for b, worker in enumerate(self._holders) if read[worker]]  # read at once, every worker's
            placed = None if into is None else lambda i, lent: into(loaned[i], lent)
            for b, result in zip(loaned, _cma.borrowed([results[b] for b in loaned],
                                                       [self._holders[b] for b in loaned], placed), strict=True):
                results[b] = result
        finally:  # the loans, read or not (a worker still lending when the call fails keeps none)
            tell_workers(self._client, [w for w in mine if read[w]], "gpipe_return", token=token,
                         keys=[f.key for f in futures])
        self._transferred(lent, {"memory" if read[w] else "comms" for w in mine})
        return results

    def _transferred(self, lent: bool, ways: set[str]) -> None:
        if lent:
            self.stats["transfer"] = " and ".join(sorted(ways))

    def _on_client_gpu(self, phase: str, laid_out: Callable[[], tuple[dict, list[int]]], part,
                       args_of=lambda b: (), *, ids: tuple[str, ...] = ()) -> dict:
        """``device=True``: arrays ``columns`` (name -> (shape, dtype)) on this process's GPU, each block ``b``
        writing ``part(block, *args_of(b))`` (a name -> its rows) there from row ``firsts[b]``, straight from its
        worker's GPU (:mod:`._ipc`: no host memory, no Dask comms); the columns named in ``ids`` (dense ids) are
        mapped to original ids there. ``laid_out()`` gives ``(columns, firsts)``, asked once the path is checked
        (a result that sizes its blocks first does no work for a refusal)."""
        result = DeviceResult(self._client, self._id_map if ids else None)
        columns, firsts = laid_out()
        result.allocate(columns)
        self._gather(phase, written, lambda b: (result.rows(firsts[b]), part, *args_of(b)))
        return result.arrays(ids)

    def _fetch(self, phase: str) -> list:
        """The blocks themselves, in order (host arrays: a family whose blocks may be on a GPU maps them first)."""
        self.persist()
        return gather_pinned(self._client, self._blocks(), self._held, phase, self._unit)

    def _map(self, view, fn, args: tuple, kwargs: dict) -> list:
        """``map_blocks``: futures of ``fn(view(block), *args, **kwargs)``, each run where its block is held."""
        fn = check_picklable("fn", check_callable("fn", fn))
        return self._on_blocks(_applied, lambda b: (view, fn, args, kwargs))

    def _write(self, path, overwrite: bool, owned: str, write, args_of: Callable[[int], tuple]) -> str:
        """``to_parquet``: ``write(block, *args_of(b), folder)`` of each block into a folder that replaces ``path``
        whole once every block is written (``owned``: the names of the files gpipe writes there)."""
        path = check_path("path", path)
        with atomic_dir(path, owned=owned, overwrite=overwrite) as tmp:
            self._gather("writing", write, lambda b: (*args_of(b), tmp))
        return path


def _applied(block, view, fn, args: tuple, kwargs: dict):
    return fn(view(block), *args, **kwargs)


def _applied_here(items: list[tuple], func) -> list:
    """On a worker: ``func(block, *args)`` of each ``(key, args)`` of ``items``, ``block`` the value it holds as
    Dask data under ``key``."""
    here = store()
    held = sync(here.worker.loop, here.values, [key for key, _ in items])
    return [func(held[key], *args) for key, args in items]


def _lent_here(items: list[tuple], func, token: str) -> list:
    """On a worker: :func:`_applied_here`'s results lent under ``token`` (:func:`._cma.lend`); as the call ends,
    the arrays kept until the token is given back, unless it was already (:class:`._cma.Loans`)."""
    here = store()
    made = []
    try:
        made = [_cma.lend(result) for result in _applied_here(items, func)]
    finally:  # none kept where the call failed
        sync(here.worker.loop, here.loans.keep, token, [key for key, _ in items], [a for _, lent in made for a in lent])
    return [loan for loan, _ in made]
