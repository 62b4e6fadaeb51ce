"""Waiting for tasks pinned to the workers that hold partitions, without waiting forever for a dead one."""

from __future__ import annotations

from distributed import wait

from ..errors import WorkerLostError

WATCH_SECONDS = 1.0  # how often a wait checks that the workers are still there


def wait_pinned(client, futures: list, held: dict[int, str], phase: str, unit: str = "partition") -> None:
    """Wait for tasks pinned to workers that hold partitions (``held``: partition, or replica, -> worker).

    A task pinned to a worker that has died would wait forever for it to come
    back; instead, once any worker in ``held`` has left, the tasks are cancelled
    and a :class:`WorkerLostError` names it and its partitions.
    """
    while True:
        try:
            wait(futures, timeout=WATCH_SECONDS)
            return
        except TimeoutError:
            alive = set(client.scheduler_info()["workers"])
            lost = {p: w for p, w in held.items() if w not in alive}
            if lost:
                client.cancel(futures)
                raise WorkerLostError(phase, sorted(set(lost.values())), sorted(lost), unit) from None
