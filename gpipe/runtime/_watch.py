"""Work on the workers that hold partitions, without waiting forever for a dead one.

A run's work is called on its workers directly (:func:`call_workers`); other
work runs as Dask tasks pinned to those workers. Either would wait for a
worker that has died: a task pinned to it until it comes back, a call to its
address for the connect timeout (30 s). So every wait of the client on gpipe
work goes through this module: it waits a second at a time, and between
waits checks that the workers holding the partitions (or replicas) are still
in the scheduler's table (not at once: a call of a few milliseconds would wait
for that scheduler round trip too, and a worker gone before the call fails
it, which checks the same); if one has left, it cancels the
tasks (or the calls) and the wait raises a :class:`WorkerLostError` naming it
and what it held. A wait that fails otherwise (a task cancelled with the lost
worker's data) checks the same once. A failure naming one of those workers (a
task, or this client, failing to reach it) can come before the scheduler has
seen the worker leave: the scheduler then has up to ``GONE_SECONDS`` to.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import re
import time
from collections.abc import Callable

from distributed import wait
from distributed.comm import CommClosedError

from ..errors import GpipeError, WorkerLostError
from ._session import workers_info
from ._wire import pack, unpack

PENDING = object()  # what a wait's block returns while its work is not done
WATCH_SECONDS = 1.0  # how often a wait checks that the workers are still there
GONE_SECONDS = 3.0  # how long the scheduler may take to notice that a worker that broke its connection is gone
TELL_SECONDS = 5  # what a message handled on a worker's event loop is waited for (that loop answers at once)


def gather_pinned(client, futures: list, held: dict[int, str], phase: str, unit: str = "partition") -> list:
    """``client.gather(futures)``, watched (``held``: partition, or replica, -> worker)."""
    def block(timeout: float) -> list | object:
        if not _finished(futures, timeout):
            return PENDING
        _raise_first_failure(futures)
        return client.gather(futures)

    return _watched(client, held, phase, unit, block, lambda: client.cancel(futures))


def wait_pinned(client, futures: list, held: dict[int, str], phase: str, unit: str = "partition") -> None:
    """``distributed.wait(futures)``, watched, raising the first one's error if any failed; the results stay on
    the workers."""
    def block(timeout: float) -> None | object:
        if not _finished(futures, timeout):
            return PENDING
        _raise_first_failure(futures)
        return None

    _watched(client, held, phase, unit, block, lambda: client.cancel(futures))


def call_workers(client, calls: list[tuple], held: dict[int, str], phase: str, unit: str = "partition") -> list:
    """Run each ``(worker, function, args, kwargs)`` on its worker's gpipe store, straight from the client.

    A run's work goes to the workers holding its partitions (or replicas)
    without the scheduler: one message each way instead of a task's several
    hops (about 4 ms at each end on a GPU host, which a 30 ms run notices).
    Arguments travel with the call. A worker that leaves (before the call or
    during it) is noticed as a watched wait notices it, and the call raises a
    :class:`WorkerLostError` naming what it held (``held``: partition, or
    replica, -> worker); a worker still in the cluster that this client cannot
    connect to is a :class:`GpipeError` saying so.
    """
    async def one(worker: str, function, args: tuple, kwargs: dict):
        try:
            return unpack(await client.rpc(worker).gpipe_call(call=pack((function, args, kwargs))))
        except (OSError, CommClosedError) as exc:
            raise _Gone(worker) from exc

    async def every():
        return await asyncio.gather(*(one(*call) for call in calls))

    calls_done = asyncio.run_coroutine_threadsafe(every(), client.loop.asyncio_loop)
    try:
        return _watched(client, held, phase, unit,
                        lambda timeout: calls_done.result() if _done(calls_done, timeout) else PENDING,
                        calls_done.cancel)
    except _Gone as gone:  # its connection broke, yet it stays in the cluster (one that left is a WorkerLostError)
        raise GpipeError(
            f"{phase}: this client cannot connect to worker {gone.worker}, which is still in the cluster "
            f"({gone.__cause__!r}); gpipe sends a run's work to its workers directly, so run the client "
            "where it reaches them (e.g. inside the batch job)") from None
    finally:
        calls_done.cancel()  # an interrupted wait stops the calls (done, they are not touched)


def tell_workers(client, workers: list[str], op: str, **message) -> None:
    """Best effort: handler ``op`` (one answered on the event loop) of those of ``workers`` still in the cluster
    called with ``message``, each waited for at most :data:`TELL_SECONDS`; a worker gone or silent is skipped.
    No worker, no message: not even the scheduler's round trip (a compute() through the comms lends nothing)."""
    if not workers:
        return

    async def one(worker: str):
        with contextlib.suppress(Exception):
            await asyncio.wait_for(getattr(client.rpc(worker), op)(**message), TELL_SECONDS)

    async def every():
        alive = set((await client.scheduler.identity(n_workers=-1))["workers"])
        await asyncio.gather(*(one(worker) for worker in workers if worker in alive))

    with contextlib.suppress(Exception):
        client.sync(every)


def check_held(client, held: dict[int, str], phase: str, unit: str = "partition") -> None:
    """Raise the :class:`WorkerLostError` naming those of ``held`` whose workers have left the cluster (one
    scheduler round trip): for work that reaches only some of the workers, yet needs them all."""
    lost = _lost(client, held)
    if lost:
        raise _lost_error(client, lost, phase, unit, 0.0)


class _Gone(Exception):
    """The connection of a call to ``worker`` broke; the message is its address (a failure naming the worker)."""

    def __init__(self, worker: str):
        super().__init__(worker)
        self.worker = worker


def _stays(client, worker: str) -> bool:
    """Whether ``worker`` is still in the cluster after ``GONE_SECONDS`` (a dead one is gone well before)."""
    deadline = time.monotonic() + GONE_SECONDS
    while time.monotonic() < deadline:
        if worker not in workers_info(client):
            return False
        time.sleep(0.1)
    return True


def _lost_error(client, lost: dict[int, str], phase: str, unit: str, since: float) -> WorkerLostError:
    """The error naming the ``lost`` partitions' workers, and those their nannies restarted for running out of
    memory since ``since`` (the 'worker-restart-memory' events the scheduler keeps; logged before the restart,
    so they are there by the time the worker is known gone)."""
    workers = sorted(set(lost.values()))
    out_of_memory = []
    with contextlib.suppress(Exception):
        restarts = client.get_events("worker-restart-memory")
        out_of_memory = sorted({event["worker"] for at, event in restarts if at >= since} & set(workers))
    return WorkerLostError(phase, workers, sorted(lost), unit, out_of_memory)


def _lost(client, held: dict[int, str]) -> dict[int, str]:
    with contextlib.suppress(Exception):
        alive = set(workers_info(client))
        return {p: w for p, w in held.items() if w not in alive}
    return {}


def _raise_first_failure(futures: list) -> None:
    """The error of the first of ``futures`` that failed, if one did, raised as a copy of the one its state keeps.

    Raised as it is kept (``client.gather`` raises that object), the error gathers the frames it passes through
    on its way up, and theirs hold the futures of the call (``to_corpus``'s blocks and writes): the futures' state
    in ``client.futures`` then keeps the error, which keeps the futures, and their values stayed on the workers
    for good once the call had failed."""
    failed = next((f for f in futures if f.status == "error"), None)
    if failed is not None:
        kept = failed.exception()
        raise copy.copy(kept).with_traceback(failed.traceback()) from kept.__cause__


def _finished(futures: list, timeout: float) -> bool:
    """Whether the Dask ``futures`` are all finished (done or failed) within ``timeout`` seconds, or one failed
    (its error is then raised while the others may still run, as ``client.gather`` raises it). Futures settled
    already (a result's blocks, finished as they are kept) are not waited for: that wait is a round trip through
    the client's event loop, about a millisecond of a walk's persist() on a GPU host."""
    if all(f.done() for f in futures):
        return True
    try:
        wait(futures, timeout=timeout)
    except TimeoutError:
        return any(f.status == "error" for f in futures)
    return True


def _done(future: concurrent.futures.Future, timeout: float) -> bool:
    return bool(concurrent.futures.wait([future], timeout=timeout).done)


def _watched(client, held: dict[int, str], phase: str, unit: str, block: Callable, cancel: Callable):
    """What ``block(timeout)`` returns once it is not ``PENDING`` (waited for ``WATCH_SECONDS`` at a time), while
    between waits the workers of ``held`` are checked to be still there; ``cancel()`` ends the work when one has
    left."""
    since = time.time()
    lost: dict[int, str] = {}
    while True:
        try:
            result = block(WATCH_SECONDS)
            if result is not PENDING:
                return result
            lost.update(_lost(client, held))
            if lost:
                cancel()
        except BaseException as failure:  # also a cancelled wait's: a lost worker's data may take its tasks along
            lost.update(_lost(client, held))
            if not lost:  # an address followed by no further digit: naming tcp://h:8000 does not name tcp://h:80
                named = {w for w in set(held.values()) if re.search(re.escape(w) + r"(?!\d)", str(failure))}
                gone = {w for w in named if not _stays(client, w)}
                lost.update({p: w for p, w in held.items() if w in gone})
            if lost:
                raise _lost_error(client, lost, phase, unit, since) from None
            raise
        if lost:
            raise _lost_error(client, lost, phase, unit, since)
