"""Sums over the workers of a run on the GPU workers' data plane: the NCCL communicator the runtime leases for a
run (:func:`._nccl.lease`), for a family whose workers keep replicas of one table and add up their changes to it
(word2vec's data-parallel training). Where it cannot be used (CPU workers, one worker, a worker without NCCL) there
is none, and the family moves its tables as Dask data."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from . import _nccl
from ._exchange import Watch
from ._session import current
from ._store import store
from ._superstep import failing
from .calls import end_later


@dataclass(frozen=True)
class Summing:
    """A run's NCCL communicator over ``workers`` (rank order), as each worker takes it."""

    run_id: str
    key: str
    uid: bytes | None
    workers: tuple[str, ...]

    def all_reduce(self, arrays: list) -> None:
        """On a worker of the run: each of ``arrays`` (CuPy float32, the same shapes on every rank) replaced, in
        place, by its sum over the ranks; the wait stops, and the communicator is aborted, if the run ends here or a
        peer is gone meanwhile (as the exchange's waits)."""
        from cupy.cuda import nccl

        st = store()
        me = st.worker_address
        watch = Watch(st.going(self.run_id), [w for w in self.workers if w != me])
        with failing("sum", self.workers.index(me), None, "worker"):
            communicator = st.communicators.get(self.key, self.uid, len(self.workers), self.workers.index(me), watch)
            stream = communicator.after_current()
            nccl.groupStart()
            for a in arrays:
                communicator.comm.allReduce(a.data.ptr, a.data.ptr, a.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                                            stream.ptr)
            nccl.groupEnd()
            watch.start()
            communicator.wait(stream, watch, "the other workers' sums")


@contextlib.contextmanager
def summing(client, workers: list[str]) -> Iterator[Summing | None]:
    """A :class:`Summing` over ``workers`` for the block's duration (its communicator leased, the run's state on the
    workers let go after), or None where NCCL cannot join them: CPU workers, one worker, or one without NCCL."""
    if len(workers) < 2 or current(client).device != "gpu" or _nccl.unusable(client, workers):
        yield None
        return
    run_id = uuid.uuid4().hex[:12]
    try:
        with _nccl.lease(client, workers) as (key, uid):
            yield Summing(run_id, key, uid, tuple(workers))
    finally:
        end_later(client, run_id)
