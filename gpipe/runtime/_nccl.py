"""NCCL communicators over the GPU workers of a run, bootstrapped through Dask (as cuGraph's comms are).

The client keeps, per cluster and set of workers, the communicators no run
uses now (:func:`lease`): a run takes one, or makes one (its unique id made on
the first worker and sent to every worker with the run), and gives it back
when it ends well. One run at a time uses NCCL on a worker (:func:`turn`):
another waits for its turn. A run that fails gives its communicator up: the
workers abort it (a peer may be stuck in a collective on it) and forget it.

On a worker the store keeps them by key (:class:`Communicator`). Creating one
waits for every rank (``ncclCommInitRank``), so it runs in a thread the rank
watches like any wait on its peers; a first tiny exchange between every pair
opens their connections, so that later groups only enqueue work. Its work goes
on a stream of its own that does not wait for the legacy default stream, nor
it for that one: a collective waiting there for a peer would otherwise hold up
the default stream's copies of this worker, among them the rows a peer's
step asks it for (``gpipe_neighbors``) before it can reach the collective —
a deadlock (it happened, in node2vec).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid

from ..errors import GpipeError

_USABLE: dict[tuple[str, str], tuple] = {}  # (client, worker) -> available() there
_FREE: dict[tuple, list[str]] = {}  # (client, workers) -> keys of communicators no run holds
_LOCK = threading.Lock()
_ABANDONED: list[threading.Thread] = []  # this worker's joins whose runs stopped waiting (see joined)
SPIN_SECONDS = 0.002  # a wait polls its event without sleeping this long, then sleeps between polls
JOIN_SECONDS = 120.0  # the longest a rank waits for the others to make a communicator with it


def available() -> tuple[str | None, str | None]:
    """Why NCCL cannot be used in this process (None if it can), and which GPU it would use (host and PCI bus)."""
    if any(thread.is_alive() for thread in _ABANDONED):
        return ("a communicator this worker began making is stuck in ncclCommInitRank (NCCL_DEBUG=INFO says why): "
                "NCCL here may not work again until the worker restarts"), None
    try:
        import cupy
        from cupy.cuda import nccl
    except Exception as exc:  # cupy itself missing
        return f"cupy cannot be imported ({exc!r})", None
    if not nccl.available:
        return "cupy finds no NCCL library (pip install nvidia-nccl-cu13, or the gpu extra)", None
    return None, f"{socket.gethostname()} {cupy.cuda.Device().pci_bus_id}"


def unique_id() -> bytes:
    """A new communicator's id (on the worker of rank 0)."""
    from cupy.cuda import nccl

    return nccl.get_unique_id()


def unusable(client, workers: list[str]) -> dict[str, str]:
    """The workers among ``workers`` that cannot use NCCL, with why (asked once per cluster and worker): NCCL
    itself missing, or a GPU shared with another of them (a communicator has one rank per GPU)."""
    missing = [w for w in workers if (client.id, w) not in _USABLE]
    if missing:
        _USABLE.update(((client.id, w), found) for w, found in client.run(available, workers=missing).items())
    why: dict = {}
    gpus: dict = {}
    for w in workers:
        reason, gpu = _USABLE[(client.id, w)]
        if reason is None and gpu in gpus:
            reason = f"it shares GPU {gpu} with worker {gpus[gpu]} (NCCL needs a GPU of its own for each worker)"
        gpus.setdefault(gpu, w)
        if reason is not None:
            why[w] = reason
    return why


@contextlib.contextmanager
def lease(client, workers: list[str]):
    """A communicator over ``workers`` (in rank order) for one run: ``(key, unique id or None if the workers
    have it already)``, once the run has its turn on them (:func:`turn`); given back when the run ends well,
    given up (aborted and forgotten) if it fails."""
    with turn(client, workers):
        pool = (client.id, tuple(workers))
        with _LOCK:
            free = _FREE.setdefault(pool, [])
            key = free.pop() if free else None
        uid = None
        if key is None:
            key = uuid.uuid4().hex[:12]
            uid = client.run(unique_id, workers=[workers[0]])[workers[0]]
        try:
            yield key, uid
        except BaseException:
            with contextlib.suppress(Exception):
                client.run(forget, key, workers=workers)
            with _LOCK:  # asked again before the next run: a worker's NCCL may have become unusable
                for w in workers:
                    _USABLE.pop((client.id, w), None)
            raise
        with _LOCK:
            _FREE[pool].append(key)


@contextlib.contextmanager
def turn(client, workers: list[str]):
    """Until the run ends, no other run uses NCCL on any of ``workers``, whichever client started it: a Dask lock
    per worker (``gpipe-nccl-<address>``), taken in address order so that two runs sharing workers never hold
    one each. NCCL's user guide ("Using multiple NCCL communicators concurrently") asks for this: operations on
    different communicators of a device in different epochs, under a lock, in the same order on every rank (its
    kernels wait on their peers, and a rank making a communicator or handing memory back waits for its whole
    device). Two partitioned DeepWalks at once at R-MAT 24 on two H200s hung before it. A second run on the same
    workers waits for the first to end, and gives the same walks."""
    from distributed import Lock

    taken = []
    try:
        for worker in sorted(workers):
            lock = Lock(f"gpipe-nccl-{worker}", scheduler_rpc=client.scheduler, loop=client.loop)
            lock.acquire()
            taken.append(lock)
        yield
    finally:
        for lock in reversed(taken):
            lock.release()


def forget(key: str, dask_worker=None) -> None:
    """Abort and drop communicator ``key`` on this worker, if it has it (``client.run``: no task runs it, so the
    store is the worker's plugin)."""
    from ._store import PLUGIN_NAME

    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    if plugin is not None:
        plugin.communicators.drop(key)


def joined(thread: threading.Thread, watch, seconds: float) -> None:
    """Until ``thread`` (a rank making its communicator) ends, watching the run meanwhile; an error after
    ``seconds``. A rank whose peers stopped joining stays in ``ncclCommInitRank`` for good (seen at R-MAT 24
    after a peer failed to make its own: two runs waited on it until the stress suite was stopped); the thread
    cannot be stopped, but the run no longer waits on it."""
    start = time.perf_counter()
    watch.start()
    while thread.is_alive():
        thread.join(0.05)
        if thread.is_alive():
            watch("the other workers to join the NCCL communicator")
            if time.perf_counter() - start >= seconds:
                raise GpipeError(f"the NCCL communicator was not made in {seconds:.0f} s: a rank is stuck making it "
                                 "(NCCL_DEBUG=INFO says why); this worker's NCCL may not work again until it restarts")


class Communicator:
    """One NCCL communicator on this worker: the rank's end of it, and how it waits for its work."""

    def __init__(self, key: str, comm, device: int):
        import cupy

        self.key, self.comm, self.device = key, comm, device
        with cupy.cuda.Device(device):
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self._aborted = False

    @classmethod
    def create(cls, key: str, uid: bytes, size: int, rank: int, watch) -> Communicator:
        """Join the communicator every rank creates with ``uid``; waits, watching the run, for all of them."""
        import cupy
        from cupy.cuda import nccl

        device = cupy.cuda.Device().id
        # NCCL's buffers come from the driver, not from CuPy's pool: memory the pool keeps for reuse after a large
        # run (R-MAT 24 DeepWalk x10: all of an H200) goes back first, or the communicator cannot be made
        # (NCCL_ERROR_UNHANDLED_CUDA_ERROR, then every run after it failed the same way)
        cupy.get_default_memory_pool().free_all_blocks()
        made: dict = {}

        def join():
            try:
                with cupy.cuda.Device(device):
                    comm = nccl.NcclCommunicator(size, uid, rank)
            except BaseException as exc:
                made["error"] = exc
                return
            with _LOCK:
                made["comm"] = comm
                if made.get("abandoned"):  # made after its run gave up on it: nothing will use it
                    comm.abort()

        thread = threading.Thread(target=join, name=f"gpipe-nccl-{key}", daemon=True)
        thread.start()
        try:
            joined(thread, watch, JOIN_SECONDS)
        except BaseException:
            with _LOCK:
                made["abandoned"] = True
                if "comm" in made:
                    made["comm"].abort()
                _ABANDONED.append(thread)
            raise
        if "error" in made:
            raise GpipeError(f"could not create the NCCL communicator: {made['error']!r}")
        self = cls(key, made["comm"], device)
        self._connect(size, rank, watch)
        return self

    def _connect(self, size: int, rank: int, watch) -> None:
        """One byte to and from every peer: NCCL connects a pair on its first send/recv, waiting for both."""
        import cupy
        from cupy.cuda import nccl

        stream = self.after_current()
        out, into = cupy.zeros(size, cupy.uint8), cupy.empty(size, cupy.uint8)
        nccl.groupStart()
        for peer in range(size):
            if peer != rank:
                self.comm.send(out.data.ptr + peer, 1, nccl.NCCL_UINT8, peer, stream.ptr)
                self.comm.recv(into.data.ptr + peer, 1, nccl.NCCL_UINT8, peer, stream.ptr)
        nccl.groupEnd()
        self.wait(stream, watch, "the other workers to connect")

    def after_current(self):
        """The communicator's stream, made to wait for the work queued so far on this thread's current stream (the
        walkers and buffers the collectives read)."""
        import cupy

        self.stream.wait_event(cupy.cuda.get_current_stream().record())
        return self.stream

    def wait(self, stream, watch, what: str) -> None:
        """Until the work queued on ``stream`` is done; if the run ends here or a peer is gone meanwhile, the
        communicator is aborted (its kernels stop) and the wait raises."""
        event = stream.record()
        start = time.perf_counter()
        checked = start
        while not event.done:
            now = time.perf_counter()
            if now - checked >= 0.05:
                checked = now
                try:
                    watch(what)
                except BaseException:
                    self.abort()
                    raise
            time.sleep(0 if now - start < SPIN_SECONDS else 1e-4)
        self.comm.check_async_error()

    def abort(self) -> None:
        if not self._aborted:
            self._aborted = True
            with contextlib.suppress(Exception):
                self.comm.abort()

    @property
    def aborted(self) -> bool:
        return self._aborted


class Communicators:
    """A worker's communicators by key (the store's)."""

    def __init__(self):
        self._held: dict[str, Communicator] = {}
        self._lock = threading.Lock()

    def get(self, key: str, uid: bytes | None, size: int, rank: int, watch) -> Communicator:
        with self._lock:
            held = self._held.get(key)
        if held is not None and not held.aborted:
            return held
        if uid is None:
            raise GpipeError(f"this worker has no NCCL communicator {key} (it was restarted since it was made)")
        made = Communicator.create(key, uid, size, rank, watch)
        with self._lock:
            self._held[key] = made
        return made

    def drop(self, key: str) -> None:
        with self._lock:
            held = self._held.pop(key, None)
        if held is not None:
            held.abort()

    def close(self) -> None:
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for communicator in held:
            communicator.abort()
