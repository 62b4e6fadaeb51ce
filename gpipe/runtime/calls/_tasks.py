"""Dask's client calls, by Dask's names, with the two rules every gpipe task follows.

``submit``: a gpipe task is never taken for an equal one (``pure=False``:
two reads of one file, two chunks of one generator, are two tasks), and one
given ``workers`` runs there and nowhere else (a run keeps its rows there).
``scatter``: values are placed under keys of their own (``hash=False``), and
an interrupted wait does not leak what was placed. The rest are the client's
own, as they are (``run``, ``gather``, ``compute``, ``replicate``,
``who_has``, ``cancel``, ``as_current``): past the runtime, nothing calls the
client itself (``tests/test_boundaries.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib

from distributed import Client, Future


def submit(client: Client, function, *args, workers: list[str] | None = None, key: str | None = None,
           **kwargs) -> Future:
    """``client.submit(function, *args, **kwargs, pure=False)``: on ``workers`` and no other where given, else
    where the scheduler picks; ``key``: the task's name, else a fresh one (``kwargs`` go to ``function``)."""
    placement = {} if workers is None else {"workers": workers, "allow_other_workers": False}
    return client.submit(function, *args, **kwargs, pure=False, **placement, **({} if key is None else {"key": key}))


def scatter(client: Client, values: list, *, broadcast: bool = False) -> list:
    """``client.scatter(values, broadcast=broadcast, hash=False)``: futures of ``values``, each on a worker the
    scheduler picks or, with ``broadcast``, on every worker; run to its end in the client's loop should the wait
    for it be interrupted, and what it placed then let go: the scheduler takes the values as this client's before
    the client makes their futures, and only those futures let them go (an interrupted PPR kept its sources and
    ranks on every worker until its client closed)."""
    scattering = asyncio.run_coroutine_threadsafe(
        client.scatter(values, broadcast=broadcast, hash=False, asynchronous=True),
        client.loop.asyncio_loop)  # type: ignore[union-attr]
    try:
        return scattering.result()
    except BaseException:
        scattering.add_done_callback(_let_go)
        raise


def _let_go(scattered: concurrent.futures.Future) -> None:
    if not scattered.cancelled() and scattered.exception() is None:
        for future in scattered.result():
            future.release()


def run(client: Client, function, *args, workers: list[str] | None = None) -> dict:
    """``client.run(function, *args, workers=workers)``: ``function`` in each worker's process itself (outside its
    task threads), every worker's or those of ``workers``; the results by worker."""
    return client.run(function, *args, workers=workers)


def gather(client: Client, futures: list) -> list:
    """``client.gather(futures)``: their values, here, in their order."""
    return client.gather(futures)


def compute(client: Client, collections: list) -> list:
    """``client.compute(collections)``: a future of each of ``collections`` (Dask collections, e.g. a dask frame's
    ``to_delayed()`` partitions), computed on the workers."""
    return client.compute(collections)


def replicate(client: Client, futures: list) -> None:
    """``client.replicate(futures)``: ``futures``' values copied to every worker."""
    client.replicate(futures)


def who_has(client: Client, futures: list) -> dict:
    """``client.who_has(futures)``: the workers holding each of ``futures``, by key."""
    return client.who_has(futures)


def cancel(client: Client, futures: list) -> None:
    """``client.cancel(futures)``: their tasks stopped where not yet run, their values let go."""
    client.cancel(futures)


def as_current(client: Client) -> contextlib.AbstractContextManager:
    """``client.as_current()``: ``client`` the one Dask's collections compute on inside the ``with``."""
    return client.as_current()


def gather_in_background(client: Client, future: Future) -> concurrent.futures.Future:
    """``client.gather(future)`` in the client's loop, while the caller goes on: ``future``'s value, brought to the
    client as soon as it is ready (a renumbered graph's id map comes while the graph is assembled, not after: 19 MB
    for R-MAT 22's edge list)."""
    return asyncio.run_coroutine_threadsafe(client.gather(future, asynchronous=True),
                                            client.loop.asyncio_loop)  # type: ignore[union-attr]
