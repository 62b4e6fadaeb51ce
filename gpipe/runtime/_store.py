"""Worker-side state: one WorkerPlugin per worker holds its partitions and the registry of its runs.

The partitions (:class:`Partitions`) are put here once when a graph is built
and looked up by every task that runs on this worker. Each run has a
:class:`Run` here, which owns its buffers; the worker-to-worker handlers
(``gpipe_*``) find it by its id, or serve partitions' rows to peers. The
client reaches a worker's store through the handler functions at the end of
this module (for ``client.run``) and :func:`call_workers`. Off a worker,
:func:`store` raises a clear error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psutil
import pyarrow as pa
from dask.utils import parse_bytes
from distributed import WorkerPlugin, get_worker
from distributed.protocol import to_serialize
from distributed.utils import sync

from .. import config, errors
from .._validate import check_int
from ..backend import device_of, gpu_count, set_cpu_threads, to_host, unique, xp
from ._partitions import Partitions
from ._nccl import Communicators
from ._run import ENDED, Run
from ._wire import pack, unpack
from ..errors import GpipeError, GpipeValueError

PLUGIN_NAME = "gpipe"
RUN_THREADS = 8  # runs at once on one worker (each may wait on its peers at a superstep's barrier)
ENDED_KEPT = 4096  # ended runs remembered, so that a message arriving after its run ended here is dropped

_running = threading.local()  # the store, in a thread running a call sent by call_workers


class GpipeStore(WorkerPlugin):
    """The gpipe state of one worker: its device, its partitions and its runs. ``local``: the worker is one of a
    local cluster that connect() started, sharing the terminal of its client."""

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
        self._runner = ThreadPoolExecutor(RUN_THREADS, thread_name_prefix="gpipe-run")
        self.host_threads = _host_threads(self.device, worker.state.nthreads)
        pa.set_cpu_count(self.host_threads)  # Arrow follows the OMP_NUM_THREADS=1 that Dask's nanny sets otherwise
        self.worker = worker
        self.worker_address = worker.address
        worker.handlers["gpipe_call"] = self._call
        worker.handlers["gpipe_exchange"] = self._exchange
        worker.handlers["gpipe_block"] = self._block
        worker.handlers["gpipe_partition"] = self._partition_arrays
        worker.handlers["gpipe_neighbors"] = self._neighbors
        if self.local:  # here for every worker, those its nanny starts again too
            _leave_the_terminal_to_the_client()

    def teardown(self, worker):
        self._runner.shutdown(wait=False)
        for run in list(self.runs.values()):
            run.close()
        self.communicators.close()
        self.partitions = Partitions(self.device, worker.address)

    async def _call(self, call: tuple) -> object:
        """Run ``function(*args, **kwargs)`` in a thread of this store (a run's work, sent by :func:`call_workers`)."""
        function, args, kwargs = unpack(call)
        loop = asyncio.get_running_loop()
        return pack(await loop.run_in_executor(self._runner, self._run_here, function, args, kwargs))

    def _run_here(self, function, args: tuple, kwargs: dict):
        _running.store = self
        set_cpu_threads(self.host_threads)  # numba's thread count is per calling thread
        try:
            return function(*args, **kwargs)
        finally:
            _running.store = None

    # -- the runs

    def run(self, run_id: str, late: bool = False) -> Run | None:
        """The run ``run_id`` here, made on first use (its loop starting, or a peer's walkers or counts arriving).

        With ``late`` (a peer's message), None once the run has ended here: a
        message arriving after a failure would otherwise make an empty run
        that nothing ends, holding its walkers.
        """
        with self.lock:
            run = self.runs.get(run_id)
            if run is None:
                if late and run_id in self.ended:
                    return None
                run = self.runs[run_id] = Run(run_id, self)
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

    def output_limit(self, limit: int | str | None) -> int | None:
        """``gpipe.memory.output-limit`` here, in bytes: 'auto' is half of a GPU's memory, and no limit (None) on a
        CPU worker, whose outputs are in host memory already."""
        return self._auto_limit if limit == "auto" else limit

    def keep_block(self, block, limit: int | str | None):
        """An assembled output block as it is to be kept: on the device while this GPU's live arrays (the runs'
        outputs, the graphs, the blocks made so far) stay within ``limit`` (:meth:`output_limit`), else in host
        memory, which the blocks of a result too large for the devices then fill (R-MAT 24 with 10 walks per
        vertex: 54 GB of walks besides the graph on two 80 GB GPUs)."""
        limit = self.output_limit(limit)
        if self.device == "cpu" or limit is None:
            return block
        import cupy

        if cupy.get_default_memory_pool().used_bytes() <= limit:
            return block
        return to_host(block)

    def spill_outputs(self, limit: int | str) -> int:
        """Past ``limit`` bytes of every run's outputs on the device (:meth:`output_limit`), move the oldest to host
        memory; returns the bytes moved (call under the lock)."""
        limit = self.output_limit(limit)
        over = sum(run.held for run in self.runs.values()) - limit if limit is not None else 0
        spilled = 0
        for run in self.runs.values():
            if spilled >= over:
                break
            spilled += run.spill(over - spilled)
        return spilled

    async def _exchange(self, run_id: str, superstep: int, rank: int, words: np.ndarray, payload) -> str:
        """A peer's end of ``superstep`` of a run, through the comms (see ``_exchange.CommsTransport``)."""
        run = self.run(run_id, late=True)
        if run is None:
            return ENDED
        run.hear(superstep, rank, words, payload)
        return "OK"

    async def _block(self, run_id: str, part: int, block: int, block_rows: int, n_blocks: int, dtype: str):
        loop = asyncio.get_running_loop()
        taken = await loop.run_in_executor(None, self.take_block, run_id, part, block, block_rows, n_blocks, dtype)
        return to_serialize(taken)

    def take_block(self, run_id: str, part: int, block: int, block_rows: int, n_blocks: int, dtype) -> list[dict]:
        """Partition ``part``'s pieces of output block ``block`` of a run (none if the run left none here)."""
        run = self._find(run_id)
        return [] if run is None else run.take_block(part, block, block_rows, n_blocks, dtype)

    def take_pieces(self, run_id: str, part: int) -> list:
        """What a run output on partition ``part`` (none if the run left none here)."""
        run = self._find(run_id)
        return [] if run is None else run.take_pieces(part)

    def pieces(self, run_id: str, part: int) -> list:
        """What a run output on partition ``part`` so far, left here (none if the run left none here)."""
        run = self._find(run_id)
        return [] if run is None else run.pieces(part)

    def take_group(self, run_id: str, part: int, key, group) -> object:
        """Group ``key`` of what a run output on partition ``part`` (see ``Run.take_group``; from no pieces if the
        run left none here)."""
        run = self._find(run_id)
        return group([])[key] if run is None else run.take_group(part, key, group)

    def gather_group(self, run_id: str, key, partitions: dict[int, str], group) -> list:
        """Every partition's group ``key`` of a run's outputs, in the order of ``partitions``: taken here, or
        taken by the worker holding them and fetched from it."""
        remote = {p: w for p, w in partitions.items() if w != self.worker_address}
        fetched = dict(zip(remote, sync(self.worker.loop, self._fetch_groups, run_id, key, remote, group))
                       if remote else ())
        return [fetched[p] if p in remote else self.take_group(run_id, p, key, group) for p in partitions]

    async def _fetch_groups(self, run_id: str, key, remote: dict[int, str], group) -> list:
        return await asyncio.gather(*(self._call_peer(w, _take_group, (run_id, p, key, group))
                                      for p, w in remote.items()))

    def _find(self, run_id: str) -> Run | None:
        """The run here, not made if it is not (to take what it left)."""
        with self.lock:
            return self.runs.get(run_id)

    def gather_block(self, run_id: str, block: int, partitions: dict[int, str], block_rows: int, n_blocks: int,
                     dtype) -> list[dict]:
        """Every partition's pieces of output block ``block``: taken here, or fetched from the worker holding them."""
        dtype = np.dtype(dtype).name
        local = [self.take_block(run_id, p, block, block_rows, n_blocks, dtype)
                 for p, w in partitions.items() if w == self.worker_address]
        remote = {p: w for p, w in partitions.items() if w != self.worker_address}
        fetched = (sync(self.worker.loop, self._fetch, run_id, block, remote, block_rows, n_blocks, dtype)
                   if remote else [])
        return [piece_set for per_part in local + fetched for piece_set in per_part]

    async def _fetch(self, run_id: str, block: int, remote: dict[int, str], block_rows: int, n_blocks: int,
                     dtype: str) -> list[dict]:
        return await asyncio.gather(*(
            self.worker.rpc(w).gpipe_block(run_id=run_id, part=p, block=block, block_rows=block_rows,
                                           n_blocks=n_blocks, dtype=dtype)
            for p, w in remote.items()))

    # -- the partitions

    async def _partition_arrays(self, graph_id: str, part: int):
        p = self.partitions.get(graph_id, part)
        return to_serialize({"indptr": to_host(p.indptr), "indices": to_host(p.indices),
                             "weights": None if p.weights is None else to_host(p.weights)})

    def fetch_partitions(self, graph_id: str, placement: list[str]) -> list[dict]:
        """Every partition's CSR arrays (host copies of remote ones, this worker's own as they are), in order."""
        local = {p: self.partitions.get(graph_id, p) for p, w in enumerate(placement) if w == self.worker_address}
        remote = {p: w for p, w in enumerate(placement) if w != self.worker_address}
        fetched = dict(zip(remote, sync(self.worker.loop, self._fetch_partitions, graph_id, remote))) if remote else {}
        return [vars(local[p]) if p in local else fetched[p] for p in range(len(placement))]

    async def _fetch_partitions(self, graph_id: str, remote: dict[int, str]) -> list[dict]:
        return await asyncio.gather(*(self.worker.rpc(w).gpipe_partition(graph_id=graph_id, part=p)
                                      for p, w in remote.items()))

    def neighbor_lists(self, graph_id: str, placement: list[str], bounds: np.ndarray, vertices) -> tuple:
        """The out-neighbors of ``vertices`` (sorted, unique, of any partitions): a CSR ``(indptr, indices)`` on this
        worker's device, read from the partitions here and fetched from the workers holding the others."""
        vertices = to_host(vertices)
        owner = np.searchsorted(bounds, vertices, side="right") - 1
        wanted = {int(p): vertices[owner == p] for p in unique(np, owner)}
        remote = {p: v for p, v in wanted.items() if placement[p] != self.worker_address}
        fetched = dict(zip(remote, sync(self.worker.loop, self._fetch_neighbors, graph_id, placement, remote))
                       if remote else ())
        rows = [fetched[p] if p in remote else _rows(self.partitions.as_held(graph_id, p), v)
                for p, v in wanted.items()]
        x = xp(self.device)
        indptr = x.zeros(vertices.shape[0] + 1, x.int64)
        x.cumsum(x.concatenate([x.asarray(length) for length, _ in rows]), out=indptr[1:])
        return indptr, x.concatenate([x.asarray(indices) for _, indices in rows])

    async def _fetch_neighbors(self, graph_id: str, placement: list[str], remote: dict[int, np.ndarray]) -> list:
        return await asyncio.gather(*(self.worker.rpc(placement[p]).gpipe_neighbors(graph_id=graph_id, part=p,
                                                                                    vertices=to_serialize(v))
                                      for p, v in remote.items()))

    async def _neighbors(self, graph_id: str, part: int, vertices: np.ndarray):
        def read():
            return tuple(to_host(a) for a in _rows(self.partitions.as_held(graph_id, part), vertices))

        return to_serialize(await asyncio.get_running_loop().run_in_executor(None, read))

    def call_peer(self, peer: str, function, *args):
        """``function(*args)`` run on ``peer``'s store (this worker's own, without a message), its result here: a
        family's worker-to-worker exchange of what its runs hold (e.g. mining's table chunks)."""
        if peer == self.worker_address:
            return function(*args)
        return sync(self.worker.loop, self._call_peer, peer, function, args)

    async def _call_peer(self, peer: str, function, args: tuple):
        return unpack(await self.worker.rpc(peer).gpipe_call(call=pack((function, args, {}))))

    def memory(self) -> tuple[int, int | None, int | None]:
        """This worker's memory limit (the host's memory without one), its device memory and what
        ``gpipe.memory.output-limit`` 'auto' means here (None and None on a CPU worker)."""
        host = self.worker.memory_manager.memory_limit or psutil.virtual_memory().total
        device = xp("gpu").cuda.Device().mem_info[1] if self.device == "gpu" else None
        return host, device, self._auto_limit


_GPIPE_ERRORS = tuple(f"{name}(" for name in errors.__all__)  # how a task's exception text starts


class _GpipeErrorsToTheClient(logging.Filter):
    """Drops a worker's 'Compute Failed' record of a task that raised a gpipe error: the client raises the error
    (with the task's traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (str(record.msg).startswith("Compute Failed") and len(args) > 3
                    and str(args[3]).startswith(_GPIPE_ERRORS))


_TO_THE_CLIENT = _GpipeErrorsToTheClient()  # one filter, added once however often the store is set up


def _leave_the_terminal_to_the_client() -> None:
    """On a worker of a local cluster, which writes to the terminal of the command or script that started it: a
    Ctrl-C there (which reaches the whole process group) and the gpipe errors of its tasks are the client's, which
    stops the workers and raises the errors; each worker printed a KeyboardInterrupt traceback, or Dask's 6-line
    record of the failed task above gpipe's one-line error."""
    if threading.current_thread() is threading.main_thread():  # a worker process's event loop runs there
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed.worker").addFilter(_TO_THE_CLIENT)


def output_limit_setting() -> int | str | None:
    """``gpipe.memory.output-limit``: 'auto', None, or bytes (an int or a string such as '4 GB')."""
    limit = config.get("memory.output-limit")
    if limit is None or limit == "auto":
        return limit
    if isinstance(limit, str):
        try:
            limit = parse_bytes(limit)
        except ValueError:
            raise GpipeValueError("'gpipe.memory.output-limit' must be 'auto', null or a byte count such as "
                                  f"'4 GB', got {limit!r}") from None
    return check_int("gpipe.memory.output-limit", limit, minimum=0)


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


def _rows(p, vertices: np.ndarray) -> tuple:
    """The out-degrees and the concatenated out-neighbors of ``vertices`` (of partition ``p``)."""
    if hasattr(p, "rows"):  # a dynamic graph's view lays its rows out in blocks of its own
        return p.rows(vertices)
    x = xp(device_of(p.indptr))
    rows = p.indptr.shape[0] - 1
    local = x.minimum(x.asarray(vertices - p.lo), rows)
    start = p.indptr[local]
    length = p.indptr[x.minimum(local + 1, rows)] - start
    ends = x.cumsum(length)
    edge = x.arange(int(ends[-1]))
    row = x.searchsorted(ends, edge, side="right")
    return length, p.indices[start[row] + edge - (ends[row] - length[row])]


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


def transfers(graph_id: str, dask_worker=None) -> list | None:
    """Copies of a graph's partitions onto this worker's device so far: [count, bytes, seconds, reads in place]."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return plugin.partitions.transfers(graph_id) if plugin is not None else None


def _take_group(run_id: str, part: int, key, group) -> object:
    return store().take_group(run_id, part, key, group)


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
        return worker.plugins[PLUGIN_NAME]
    except KeyError:
        raise GpipeError(
            f"worker {worker.address} has no gpipe store: attach the client with gpipe.connect() "
            "or gpipe.attach(client) before building graphs"
        ) from None


def call_peer(peer: str, function, *args):
    """On a worker: ``function(*args)`` run on worker ``peer``'s gpipe store, its result here (see
    ``GpipeStore.call_peer``)."""
    return store().call_peer(peer, function, *args)
