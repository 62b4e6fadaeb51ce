"""Values made on the workers by direct calls and kept there as Dask data, with futures for them.

A result's blocks were made by Dask tasks: each a round trip through the scheduler, 8-12 ms on a local cluster
(a trivial task took 12 ms here, a direct call 1.7), which a walk of a few milliseconds noticed more than its
own work. Instead a direct call (:func:`~._watch.call_workers`) makes a worker's values and puts them in its
data, as a task's result would be; the client tells the scheduler where they are (:func:`announce`: as the
calls return, or while they run where their sizes are known before) and holds futures of them, as
``Client.scatter`` does for data a task scatters from its worker. From there on they are ordinary
Dask data: released with their futures, lost with their worker, moved or gathered by Dask. Should a call fail,
the client be interrupted, or the scheduler not take them, the values made are dropped from every worker, and
a call still making some keeps none of them when it ends: none is left behind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import dataclass

from dask.sizeof import sizeof
from distributed import Future
from distributed.utils import sync

from ._store import store
from ._watch import call_workers, tell_workers


def block_key(run_id: str, b: int) -> str:
    """The Dask key of block ``b`` of run ``run_id``'s result."""
    return f"gpipe-assemble-{run_id}-{b}"


def kept_blocks(client, blocks: dict[str, tuple], function, args_of, held: dict[int, str], phase: str,
                unit: str = "partition") -> dict:
    """Futures, by key, of the blocks ``blocks`` (key -> ``(worker, b)``), made and kept on their workers: each
    worker makes its own in one call, ``function(*args_of(worker), part=b)`` for each of its blocks ``b`` in
    the order given, and the scheduler is told of them as the calls return (their sizes are known then).
    Failures are watched as :func:`~._watch.call_workers` watches them (``held``: what each worker holds, to
    name on its loss)."""
    mine: dict[str, list] = {}
    for key, (worker, b) in blocks.items():
        mine.setdefault(worker, []).append((key, b))
    try:
        made = call_workers(client, [(worker, keep_here, (function, args_of(worker), parts), {})
                                     for worker, parts in mine.items()], held, phase, unit)
    except BaseException:
        drop_kept(client, {worker: [key for key, _ in parts] for worker, parts in mine.items()})
        raise
    kept = {key: value for sizes in made for key, value in sizes.items()}
    told = announce(client, {key: worker for key, (worker, _) in blocks.items()},
                    {key: size for key, (size, _) in kept.items()})
    return finished(client, told, kept)


@dataclass(frozen=True)
class Announced:
    """Values calls are making (key -> the worker making it: ``where``; key -> bytes: ``sizes``) that the scheduler
    is being told of (``telling``, whose result is their futures, pending): see :func:`announce`."""

    where: dict[str, str]
    sizes: dict[str, int]
    telling: concurrent.futures.Future


def announce(client, where: dict[str, str], sizes: dict[str, int]) -> Announced:
    """Started in the client's loop, not waited for: the scheduler told that the worker ``where[key]`` holds the
    value of each key of ``sizes`` (its bytes) for this client, as ``Client.scatter`` tells it, possibly before
    the call that makes them has made them, so that the round trip goes while the call runs (a replicated walk
    was ready that round trip after its run ended: 0.8-1.9 ms on an H200 host). Nothing asks for them
    meanwhile: only the futures that :func:`finished` hands over once the calls have kept them name them."""
    async def tell() -> dict:
        await client.scheduler.update_data(who_has={key: [where[key]] for key in sizes}, nbytes=sizes,
                                           client=client.id)
        return {key: Future(key, client) for key in sizes}

    return Announced(where, sizes, asyncio.run_coroutine_threadsafe(tell(), client.loop.asyncio_loop))


def finished(client, announced: Announced, kept: dict) -> dict:
    """The futures of ``announced``, finished now that its calls have kept the values (``kept``: key -> ``(bytes,
    type)``; sizes other than those announced told again); should the scheduler not take them, they are
    dropped from the workers and the scheduler told that this client no longer wants them."""
    try:
        futures = announced.telling.result()
        other = {key: size for key, (size, _) in kept.items() if size != announced.sizes[key]}
        if other:
            client.sync(client.scheduler.update_data, who_has={key: [announced.where[key]] for key in other},
                        nbytes=other)
    except BaseException:
        forget(client, announced)
        raise
    for key, (_, kind) in kept.items():
        client.futures[key].finish(type=kind)
    return futures


def forget(client, announced: Announced) -> None:
    """Best effort, once a call making values of ``announced`` has failed, or they were not taken: those values
    dropped from their workers (and not kept should a call still be making them), and the scheduler told that
    this client no longer wants them."""
    made: dict[str, list] = {}
    for key in announced.sizes:
        made.setdefault(announced.where[key], []).append(key)
    drop_kept(client, made)
    try:
        futures = announced.telling.result()
    except BaseException:
        return
    for future in futures.values():
        future.release()


def keep_here(function, args: tuple, parts: list[tuple]) -> dict:
    """On a worker: ``function(*args, part=b)`` of each ``(key, b)`` of ``parts``, kept in its data under
    ``key`` (none should one fail); each one's bytes and type."""
    here = store()
    values = None  # the call failed
    try:
        values = {key: function(*args, part=b) for key, b in parts}
    finally:  # the call ends: what was dropped meanwhile is not kept (see GpipeStore.keep)
        sync(here.worker.loop, here.keep, values, [key for key, _ in parts])
    return {key: (sizeof(value), type(value)) for key, value in values.items()}


def making(keys: list, function, *args, **kwargs):
    """On a worker: ``function(*args, **kwargs)``, a call that makes the values of ``keys`` with :func:`keep_here`
    as it ends (a run on one replica); should it fail before, it ends as a failed :func:`keep_here` does, and the
    drop that follows its failure marks nothing."""
    try:
        return function(*args, **kwargs)
    except BaseException:
        here = store()
        sync(here.worker.loop, here.keep, None, keys)
        raise


def drop_kept(client, made: dict[str, list]) -> None:
    """Best effort: the keys of ``made`` (worker -> the keys it makes) gone from the data of the workers still in
    the cluster, and not kept by a call still making them (a failed or interrupted :func:`kept_blocks` leaves
    nothing there); a worker remembers only its own keys (no call would make the others there). Each worker's
    event loop answers at once, however busy its runs' threads are."""
    tell_workers(client, sorted(made), "gpipe_drop", keys=made)
