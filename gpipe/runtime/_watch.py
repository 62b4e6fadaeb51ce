"""Waiting for tasks pinned to the workers that hold partitions, without waiting forever for a dead one.

A task pinned to a worker that has died would wait forever for it to come
back. While a wait lasts, a watchdog thread checks once a second that the
workers holding the partitions (or replicas) are still there; if one has left,
it cancels the tasks and the wait raises a :class:`WorkerLostError` naming it
and what it held. A wait that fails otherwise (a task failing to reach the
lost worker, or cancelled with the data it held) checks the same once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from distributed import wait

from ..errors import WorkerLostError

WATCH_SECONDS = 1.0  # how often the watchdog checks that the workers are still there


def gather_pinned(client, futures: list, held: dict[int, str], phase: str, unit: str = "partition") -> list:
    """``client.gather(futures)``, watched (``held``: partition, or replica, -> worker)."""
    return _watched(client, futures, held, phase, unit, lambda: client.gather(futures))


def wait_pinned(client, futures: list, held: dict[int, str], phase: str, unit: str = "partition") -> None:
    """``distributed.wait(futures)``, watched; the results stay on the workers."""
    _watched(client, futures, held, phase, unit, lambda: wait(futures))


def _watched(client, futures: list, held: dict[int, str], phase: str, unit: str, block: Callable):
    lost: dict[int, str] = {}
    done = threading.Event()

    def check() -> None:
        alive = set(client.scheduler_info()["workers"])
        lost.update({p: w for p, w in held.items() if w not in alive})

    def watch() -> None:
        while not done.wait(WATCH_SECONDS):
            check()
            if lost:
                client.cancel(futures)
                return

    watchdog = threading.Thread(target=watch, name="gpipe-watchdog", daemon=True)
    watchdog.start()
    try:
        result = block()
    except BaseException:  # also a cancelled future's CancelledError: a lost worker's data may take its tasks along
        done.set()
        if not lost:
            with contextlib.suppress(Exception):
                check()
        if lost:
            raise WorkerLostError(phase, sorted(set(lost.values())), sorted(lost), unit) from None
        raise
    finally:
        done.set()
    if lost:  # the wait ended because the watchdog cancelled the tasks
        raise WorkerLostError(phase, sorted(set(lost.values())), sorted(lost), unit)
    return result
