"""Worker-side state: one WorkerPlugin per worker holds its partitions and the registry of its runs.

The partitions (:class:`Partitions`) are put here once when a graph is built
and looked up by every task that runs on this worker. Each run has a
:class:`Run` here, which owns its buffers; the worker-to-worker handlers
(``gpipe_*``) find it by its id (its outputs through :class:`Outputs`), or serve
partitions' rows to peers (:class:`Peers`, which asks them too). The
client reaches a worker's store through the handler functions at the end of
this module (for ``client.run``) and :func:`call_workers`. Off a worker,
:func:`store` raises a clear error.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import numpy as np
import psutil
import pyarrow as pa
from distributed import Status, WorkerPlugin, get_worker
from distributed.worker_state_machine import FreeKeysEvent

from .. import errors
from ..backend import gpu_count, set_cpu_threads, xp
from ..errors import GpipeError
from ._cma import Loans
from ._nccl import Communicators
from ._outputs import Outputs
from ._partitions import Partitions
from ._peers import Peers
from ._run import ENDED, Run
from ._wire import pack, unpack

PLUGIN_NAME = "gpipe"
RUN_THREADS = 8  # runs at once on one worker (each may wait on its peers at a superstep's barrier)
ENDED_KEPT = 4096  # ended runs remembered, so that a message arriving after its run ended here is dropped
UNWANTED_KEPT = 4096  # marks of keys dropped before their calls ended, or whose calls failed, kept (_kept.py)

_logger = logging.getLogger(__name__)
_running = threading.local()  # the store, in a thread running a call sent by call_workers


class GpipeStore(WorkerPlugin):
    """The gpipe plugin of one worker and its registries: its device, its partitions, its runs (their outputs in
    ``outputs``, :class:`Outputs`), its NCCL communicators, and its way to its peers (``peers``, :class:`Peers`).
    ``local``: the worker is one of a local cluster that connect() started, sharing the terminal of its client."""

    name = PLUGIN_NAME

    def __init__(self, device: str, local: bool = False):
        self.device = device
        self.local = local

    def setup(self, worker):
        self.partitions = Partitions(self.device, worker.address)
        self.runs: dict[str, Run] = {}  # oldest first
        self.ended: dict[str, None] = {}  # ids of the last ENDED_KEPT runs to end here, oldest first
        self.lock = threading.Lock()  # the runs' and the registry's
        self.communicators = Communicators()  # NCCL's, by key (see _nccl)
        self._auto_limit = _output_limit(self.device)  # what gpipe.memory.output-limit 'auto' means here
        self.outputs = Outputs(self, self._auto_limit)
        self.peers = Peers(self)
        self._runner = ThreadPoolExecutor(RUN_THREADS, thread_name_prefix="gpipe-run")
        self.host_threads = _host_threads(self.device, worker.state.nthreads)
        pa.set_cpu_count(self.host_threads)  # Arrow follows the OMP_NUM_THREADS=1 that Dask's nanny sets otherwise
        self.worker = worker
        self.worker_address = worker.address
        worker.handlers["gpipe_call"] = self._call
        worker.handlers["gpipe_exchange"] = self._exchange
        worker.handlers["gpipe_block"] = self.outputs.block_handler
        worker.handlers["gpipe_partition"] = self.peers.partition_handler
        worker.handlers["gpipe_neighbors"] = self.peers.neighbors_handler
        worker.handlers["gpipe_drop"] = self.drop
        worker.handlers["gpipe_ended"] = self.has_ended
        self.loans = Loans(worker)  # arrays lent to clients until they give them back (_cma.py)
        worker.handlers["gpipe_return"] = self.loans.give_back
        self._unwanted: dict = {}  # key -> 'dropped' before its call ended, or 'failed' call; oldest first (_kept.py)
        if self.local:  # here for every worker, those its nanny starts again too
            _leave_the_terminal_to_the_client()
        # What the worker holds now (Dask, NumPy, numba, Arrow, gpipe: 270,000 objects) lives as long as the
        # process: left out of every collection, a failed call's (_let_go) scans only what the runs made since,
        # 0.01 s instead of 0.33 s on two cores
        gc.freeze()

    def teardown(self, worker):
        self._runner.shutdown(wait=False)
        for run in list(self.runs.values()):
            run.close()
        self.communicators.close()
        self.partitions = Partitions(self.device, worker.address)

    async def _call(self, comm, call: tuple) -> object:
        """Run ``function(*args, **kwargs)`` in a thread of this store (a run's work, sent by :func:`call_workers`).

        A call whose caller has gone (interrupted: it closed the connection) fails quietly, logged at debug
        level: nobody is left to tell, and Dask would raise the error out of its handler's task, which asyncio
        printed as a task exception never retrieved (40 lines a rank of an interrupted run).
        """
        function, args, kwargs = unpack(call)
        loop = asyncio.get_running_loop()
        try:
            return pack(await loop.run_in_executor(self._runner, self._run_here, function, args, kwargs))
        except Exception:
            if not comm.closed():
                raise
            _logger.debug("a call whose caller has gone failed", exc_info=True)
            return Status.dont_reply

    def transition(self, key, start: str, finish: str, **kwargs) -> None:
        """Dask's hook, on the event loop: a value that leaves this worker's data takes its loans along."""
        if start == "memory" and (self.loans.lent or self.loans.returned):
            self.loans.let_go(key)

    async def keep(self, values: dict | None, keys: list) -> None:
        """On the event loop, as a call making the values of ``keys`` ends: those it made (``values``; None where it
        failed) put in the worker's data, as a task's results would be, but those dropped meanwhile
        (``runtime/_kept.py``). Their marks go with the call; the keys of a call that failed are marked so, for
        the drop that follows its failure to mark nothing."""
        marks = {key: self._unwanted.pop(key, None) for key in keys}
        if values is None:
            tasks = self.worker.state.tasks
            self._mark([key for key, why in marks.items() if why != "dropped" and key not in tasks], "failed")
            return
        kept = {key: value for key, value in values.items() if marks[key] is None}
        if kept:
            self.worker.update_data(data=kept, stimulus_id=f"gpipe-kept-{time.time()}")

    async def values(self, keys: list) -> dict:
        """On the event loop: the values this worker holds as Dask data under ``keys`` (brought back from its
        disk where Dask spilled them there)."""
        return {key: self.worker.data[key] for key in keys}

    async def drop(self, keys: dict[str, list]) -> None:
        """``gpipe_drop``, on the event loop at once (however busy the runs' threads): ``keys`` (by the worker
        making them) gone from the worker's data, and those this worker makes not kept should a call still making
        them end later; a failed call's keys need no mark."""
        tasks = self.worker.state.tasks
        held = [key for made in keys.values() for key in made if key in tasks]
        mine = [key for key in keys.get(self.worker_address, ()) if key not in tasks]
        self._mark([key for key in mine if self._unwanted.pop(key, None) != "failed"], "dropped")
        if held:
            self.worker.handle_stimulus(FreeKeysEvent(keys=held, stimulus_id=f"gpipe-dropped-{time.time()}"))

    def _mark(self, keys: list, why: str) -> None:
        """``keys`` marked (on the event loop); the last ``UNWANTED_KEPT`` marks are kept: a call that never came
        leaves its marks, and a failed call whose drop never came."""
        self._unwanted.update(dict.fromkeys(keys, why))
        while len(self._unwanted) > UNWANTED_KEPT:
            del self._unwanted[next(iter(self._unwanted))]

    def _run_here(self, function, args: tuple, kwargs: dict):
        _running.store = self
        set_cpu_threads(self.host_threads)  # numba's thread count is per calling thread
        try:
            return function(*args, **kwargs)
        except BaseException as exc:
            _let_go(exc)
            raise
        finally:
            _running.store = None

    # -- the runs

    def run(self, run_id: str) -> Run | None:
        """The run ``run_id`` here, made on first use (its loop starting, a family's state, or a peer's walkers or
        counts arriving); None once it has ended here.

        A run that has ended here is never made again, whatever comes for it
        late (its loop, queued behind busy run threads, starting after a
        peer failed; a peer's message; a listing's ranges after an
        interrupt): it would be a run that nothing ends, holding what it
        made and, a loop, a run thread waiting for peers that have stopped.
        """
        with self.lock:
            run = self.runs.get(run_id)
            if run is None and run_id not in self.ended:
                run = self.runs[run_id] = Run(run_id, self)
            return run

    def going(self, run_id: str) -> Run:
        """The run ``run_id`` here, as :meth:`run` makes it; an error once it has ended here."""
        run = self.run(run_id)
        if run is None:
            raise GpipeError(f"run {run_id} has ended on worker {self.worker_address} (it failed elsewhere, or its "
                             "client let it go)")
        return run

    def unregister(self, run: Run) -> None:
        """``run`` has ended here (call under the lock)."""
        if self.runs.get(run.id) is run:
            del self.runs[run.id]
            self._ended(run.id)

    def _ended(self, run_id: str) -> None:
        self.ended[run_id] = None
        if len(self.ended) > ENDED_KEPT:
            del self.ended[next(iter(self.ended))]

    def drop_run(self, run_id: str) -> None:
        """End a run here because it failed elsewhere or its client let it go: its loop here stops with an error.
        A run not begun here is marked ended, so that what comes for it late (a peer's message, a GNN rank that
        starts after a sibling failed) finds it so rather than begin it."""
        with self.lock:
            run = self.runs.get(run_id)
            if run is None:
                self._ended(run_id)
                return
        run.fail("it failed elsewhere, or its client was interrupted")

    async def has_ended(self, run_id: str) -> bool:
        """``gpipe_ended``, on the event loop: whether run ``run_id`` has ended here (asked by a peer's rank that
        waits on this one: see ``_exchange.Watch``)."""
        return run_id in self.ended

    def find(self, run_id: str) -> Run | None:
        """The run here, not made if it is not (to take what it left)."""
        with self.lock:
            return self.runs.get(run_id)

    async def _exchange(self, run_id: str, superstep: int, rank: int, words: np.ndarray, payload) -> str:
        """A peer's end of ``superstep`` of a run, through the comms (see ``_exchange.CommsTransport``)."""
        run = self.run(run_id)
        if run is None:
            return ENDED
        run.hear(superstep, rank, words, payload)
        return "OK"

    def memory(self) -> tuple[int, int | None, int | None]:
        """This worker's memory limit (the host's memory without one), its device memory and what
        ``gpipe.memory.output-limit`` 'auto' means here (None and None on a CPU worker)."""
        host = self.worker.memory_manager.memory_limit or psutil.virtual_memory().total
        device = xp("gpu").cuda.Device().mem_info[1] if self.device == "gpu" else None
        return host, device, self._auto_limit


_GPIPE_ERRORS = tuple(f"{name}(" for name in errors.__all__)  # how a task's exception text starts


class _GpipeErrorsToTheClient(logging.Filter):
    """Drops a worker's record of a gpipe error that the client raises (with the worker's traceback): Dask's 'Compute
    Failed' of a task, and its 'Exception while handling op gpipe_call' with the traceback of a direct call
    (:func:`call_workers`; 30 to 60 lines each). Other errors of a call (a bug, not a failure gpipe names) keep
    theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        failed_task = (str(record.msg).startswith("Compute Failed") and len(args) > 3
                       and str(args[3]).startswith(_GPIPE_ERRORS))
        failed_call = (str(record.msg).startswith("Exception while handling op") and args == ("gpipe_call",)
                       and record.exc_info is not None and isinstance(record.exc_info[1], GpipeError))
        return not (failed_task or failed_call)


_TO_THE_CLIENT = _GpipeErrorsToTheClient()  # one filter, added once however often the store is set up


def _leave_the_terminal_to_the_client() -> None:
    """On a worker of a local cluster, which writes to the terminal of the command or script that started it: a
    Ctrl-C there (which reaches the whole process group) and the gpipe errors of its tasks are the client's, which
    stops the workers and raises the errors; each worker printed a KeyboardInterrupt traceback, or Dask's record of
    the failed task or call above gpipe's one-line error."""
    if threading.current_thread() is threading.main_thread():  # a worker process's event loop runs there
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("distributed.worker", "distributed.core"):
        logging.getLogger(name).addFilter(_TO_THE_CLIENT)


def _let_go(exc: BaseException) -> None:
    """What the frames of a failed call held (a run's walkers, pieces, exchange buffers) goes now: the error and
    its causes go back to the client with their tracebacks, whose frames would keep those arrays until the
    garbage collector breaks the cycles they are in, and a GPU's next run would find them held (a walk failing as
    its pieces were gathered kept 1-3 KB of device memory past the test's wait)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__
    gc.collect()


def _host_threads(device: str, nthreads: int) -> int:
    """Host threads one task of this worker may use (numba's CPU twins, Arrow's readers): its task threads on a CPU
    worker, which run tasks side by side; on a GPU worker, which runs one task at a time, its share of the cores it
    may run on, among the GPUs of the host (a worker each)."""
    if device != "gpu":
        return max(1, nthreads)
    return max(1, len(os.sched_getaffinity(0)) // max(1, gpu_count()))


def _output_limit(device: str) -> int | None:
    """'auto': half of this worker's GPU memory; none on a CPU worker."""
    if device != "gpu":
        return None
    import cupy

    return cupy.cuda.Device().mem_info[1] // 2


# The client's calls to every worker's store (``client.run(drop_run, run_id)``); a worker without one is skipped.

def drop_run(run_id: str, dask_worker=None) -> None:
    """End a run on this worker: it failed elsewhere, or its client let it go (see ``GpipeStore.drop_run``)."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    if plugin is not None:
        plugin.drop_run(run_id)


def drop_graph(graph_id: str, dask_worker=None) -> int | None:
    """Let a graph's partitions and arrays go on this worker; how many partitions went."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return plugin.partitions.drop(graph_id) if plugin is not None else None


def kept_for_clients(dask_worker=None) -> dict | None:
    """What this worker keeps for its clients beyond their Dask data: loans (``loans``, ``lent_bytes``), tokens
    given back before their calls lent (``returned``) and keys dropped before they were kept (``marked``)."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return None if plugin is None else {**plugin.loans.summary(), "marked": len(plugin._unwanted)}


def transfers(graph_id: str, dask_worker=None) -> list | None:
    """Copies of a graph's partitions onto this worker's device so far: [count, bytes, seconds, reads in place]."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return plugin.partitions.transfers(graph_id) if plugin is not None else None


def store() -> GpipeStore:
    """The gpipe store of the worker running this task (or this run, sent by :func:`call_workers`)."""
    here = getattr(_running, "store", None)
    if here is not None:
        return here
    try:
        worker = get_worker()
    except ValueError:
        raise GpipeError("gpipe's worker store is only reachable from a task running on a Dask worker") from None
    try:
        return cast(GpipeStore, worker.plugins[PLUGIN_NAME])
    except KeyError:
        raise GpipeError(
            f"worker {worker.address} has no gpipe store: attach the client with gpipe.connect() "
            "or gpipe.attach(client) before building graphs"
        ) from None


def call_peer(peer: str, function, *args) -> Any:
    """On a worker: ``function(*args)`` run on worker ``peer``'s gpipe store, its result here (see
    ``Peers.call``)."""
    return store().peers.call(peer, function, *args)
