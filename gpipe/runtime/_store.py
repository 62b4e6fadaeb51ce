"""Worker-side state: one WorkerPlugin per worker holds graph partitions and run buffers.

Tasks pass keys, never the arrays: a partition is put here once when the graph
is built and looked up by ``(graph_id, partition)`` by every task that runs on
this worker. Walkers that leave a partition are pushed straight into the inbox
of the worker owning their destination (the ``gpipe_receive`` handler, over
Dask's worker-to-worker comms, as Dask's P2P shuffle does), so that the next
superstep finds them there; the workers then swap walker counts
(``gpipe_counts``) as the superstep's barrier. Off a worker, :func:`store` raises a
clear error.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import defaultdict
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psutil

from distributed import WorkerPlugin, get_worker
from distributed.comm.addressing import get_address_host
from distributed.protocol import to_serialize
from distributed.utils import sync

from ..backend import device_of, set_cpu_threads, to_host, xp
from . import _ipc, _pieces
from ._residency import Residency
from ..errors import GpipeError

PLUGIN_NAME = "gpipe"
RUN_THREADS = 8  # runs at once on one worker (each may wait on its peers at a superstep's barrier)
PING_SECONDS = 5.0  # how long a barrier waits on a silent peer before checking that it is still there

_running = threading.local()  # the store, in a thread running a call sent by call_workers


@dataclass(frozen=True)
class Arrival:
    """What one message of walkers must hold, checked where it arrives: a walker damaged on the way (a race in
    an exchange, a bad copy) stops the run with an error naming the sender, the superstep and the partition
    rather than faulting a kernel or walking on from a wrong vertex.
    """

    count: int  # walkers in the message: every field has this many
    vertices: tuple[int, int] | None  # [lo, hi) of the destination partition, for walkers routed by their vertex
    length: int | None  # a walk's length: steps lie in [0, length]

    def check(self, walkers: dict, sender: str, superstep: int, part: int) -> None:
        wrong = [f"{name} has {int(a.shape[0])} entries" for name, a in walkers.items() if a.shape[0] != self.count]
        rules = {name: rule for name, rule in (("vertex", self.vertices),
                                               ("step", None if self.length is None else (0, self.length + 1)))
                 if rule is not None and name in walkers}
        if not wrong and self.count and rules:
            x = xp(device_of(walkers[next(iter(rules))]))
            spans = to_host(x.stack([x.stack([walkers[name].min(), walkers[name].max()]).astype(x.int64)
                                     for name in rules]))  # one copy to the host
            for (name, (lo, hi)), (low, high) in zip(rules.items(), spans):
                if low < lo or high >= hi:
                    wrong.append(f"{name} spans [{low}, {high}], outside [{lo}, {hi - 1}]")
        if wrong:
            raise GpipeError(f"walkers from worker {sender} for partition {part} (superstep {superstep}) arrived "
                             f"damaged: {self.count} walkers sent, " + "; ".join(wrong))


class GpipeStore(WorkerPlugin):
    """The gpipe state of one worker: its device, its partitions and its run buffers."""

    name = PLUGIN_NAME

    def __init__(self, device: str):
        self.device = device

    def setup(self, worker):
        self.partitions: dict[tuple[str, int], object] = {}
        self.graph_arrays: dict[tuple[str, str], object] = {}  # (graph, name) -> a per-vertex array its runs read
        self.pieces: dict[tuple[str, int], list] = defaultdict(list)
        self._held = 0  # bytes of the pieces not spilled (on the device of a GPU worker)
        self._auto_limit = _output_limit(self.device)  # what gpipe.memory.output-limit 'auto' means here
        self.inbox: dict[tuple[str, int, int], list] = defaultdict(list)
        self.local_inbox: dict[tuple[str, int, int], list] = defaultdict(list)  # walkers from this worker's partitions
        self.blocks: dict[tuple[str, int], dict[int, dict]] = {}
        self.state: dict[tuple[str, int], object] = {}  # a run's own per-partition state (e.g. visited sets)
        self.counts: dict[tuple[str, int], dict] = defaultdict(dict)  # per (run, superstep): peer -> walker counts
        self.looping: set[str] = set()  # runs whose superstep loop runs here
        self.stopped: set[str] = set()  # of those, the ones dropped: their loops end in an error
        self.residency = Residency(self.device)  # partitions of out-of-memory graphs
        self._lock = threading.Lock()
        self._heard = threading.Condition(self._lock)
        self._far: set[str] = set()  # peers that could not open this worker's device memory
        self._ipc = _ipc.Buffers() if self.device == "gpu" else None
        self._sent: dict[str, list[int]] = {}  # run -> walker bytes sent [through CUDA IPC, through the comms]
        self._runner = ThreadPoolExecutor(RUN_THREADS, thread_name_prefix="gpipe-run")
        self.worker = worker
        self.worker_address = worker.address
        worker.handlers["gpipe_call"] = self._call
        worker.handlers["gpipe_receive"] = self._receive
        worker.handlers["gpipe_receive_ipc"] = self._receive_ipc
        worker.handlers["gpipe_counts"] = self._counts
        worker.handlers["gpipe_block"] = self._block
        worker.handlers["gpipe_partition"] = self._partition_arrays
        worker.handlers["gpipe_neighbors"] = self._neighbors

    def teardown(self, worker):
        self._runner.shutdown(wait=False)
        self.partitions.clear()
        self.graph_arrays.clear()
        self.residency = Residency(self.device)
        self.pieces.clear()
        self._held = 0
        self.inbox.clear()
        self.local_inbox.clear()
        self.blocks.clear()
        self.state.clear()
        self.counts.clear()

    async def _call(self, call: tuple) -> object:
        """Run ``function(*args, **kwargs)`` in a thread of this store (a run's work, sent by :func:`call_workers`)."""
        function, args, kwargs = call
        loop = asyncio.get_running_loop()
        return to_serialize(await loop.run_in_executor(self._runner, self._run_here, function, args, kwargs))

    def _run_here(self, function, args: tuple, kwargs: dict):
        _running.store = self
        set_cpu_threads(self.worker.state.nthreads)  # numba's thread count is per calling thread
        try:
            return function(*args, **kwargs)
        finally:
            _running.store = None

    async def _receive(self, run_id: str, superstep: int, part: int, sender: str, walkers: dict,
                       expect: Arrival) -> str:
        await asyncio.get_running_loop().run_in_executor(None, expect.check, walkers, sender, superstep, part)
        self.deliver(run_id, superstep, part, walkers)
        return "OK"

    async def _receive_ipc(self, run_id: str, superstep: int, part: int, sender: str, handle: bytes,
                           layout: list, expect: Arrival) -> str:
        """Walkers left in a peer's device memory (CUDA IPC); an answer other than OK sends them again by comms."""
        loop = asyncio.get_running_loop()
        try:
            walkers = await loop.run_in_executor(None, self._ipc.unpack, run_id, part, sender, handle, layout)
        except Exception as exc:  # e.g. the peer's GPU is not visible to this process
            return f"cannot open the sender's memory: {exc!r}"
        await loop.run_in_executor(None, expect.check, walkers, sender, superstep, part)
        self.deliver(run_id, superstep, part, walkers)
        return "OK"

    def _count(self, run_id: str, path: int, nbytes: int) -> None:
        with self._lock:
            self._sent.setdefault(run_id, [0, 0])[path] += nbytes

    def deliver(self, run_id: str, superstep: int, part: int, walkers: dict, local: bool = False) -> None:
        """Walkers for partition ``part`` (held here) to advance in ``superstep`` (``local``: from a partition here)."""
        with self._lock:
            (self.local_inbox if local else self.inbox)[(run_id, superstep, part)].append(walkers)

    def take_inbox(self, run_id: str, superstep: int, part: int) -> list[dict]:
        with self._lock:
            key = (run_id, superstep, part)
            return self.inbox.pop(key, []) + self.local_inbox.pop(key, [])

    def take_local(self, run_id: str, superstep: int, part: int) -> list[dict]:
        """Only the walkers that came from this worker's own partitions (the peers' stay, as their counts say)."""
        with self._lock:
            return self.local_inbox.pop((run_id, superstep, part), [])

    def local_waiting(self, run_id: str, superstep: int, part: int) -> bool:
        with self._lock:
            return bool(self.local_inbox.get((run_id, superstep, part)))

    def send(self, run_id: str, superstep: int, outbound: dict[int, dict], placement: list[str],
             ipc: bool = False, bounds: np.ndarray | None = None, length: int | None = None) -> None:
        """Deliver each destination's walkers to the worker holding it, and wait until all have them.

        With ``ipc``, walkers for a GPU worker on this host go device to device
        through CUDA IPC (see ``_ipc``); otherwise, and to a peer that cannot
        open this worker's memory, through Dask's comms. The bytes sent each way
        are counted per run (``sent_bytes``). The receiver checks what arrives
        (see :class:`Arrival`): the walkers' count, their vertices inside the
        destination's range of ``bounds`` (walkers routed by vertex), their
        steps within ``length`` (walks).
        """
        remote = {}
        for part, walkers in outbound.items():
            if placement[part] == self.worker_address:
                self.deliver(run_id, superstep, part, walkers, local=True)
            else:
                remote[part] = walkers
        if not remote:
            return
        expect = {part: Arrival(int(next(iter(walkers.values())).shape[0]),
                                None if bounds is None else (int(bounds[part]), int(bounds[part + 1])), length)
                  for part, walkers in remote.items()}
        packed = {part: self._ipc.pack(run_id, part, walkers) for part, walkers in remote.items()
                  if ipc and self._near(placement[part])}
        sync(self.worker.loop, self._push, run_id, superstep, remote, packed, placement, expect)

    def _near(self, peer: str) -> bool:
        """Whether ``peer`` may open this worker's device memory: a GPU worker on this host, not known to fail."""
        return (self.device == "gpu" and peer not in self._far
                and get_address_host(peer) == get_address_host(self.worker_address))

    def end_exchange(self, run_id: str) -> list[int]:
        """A run's walkers are all delivered: let its IPC buffers go; the bytes sent [through CUDA IPC, by comms]."""
        if self._ipc is not None:
            self._ipc.release(run_id)
        with self._lock:
            return self._sent.pop(run_id, [0, 0])

    async def _push(self, run_id: str, superstep: int, remote: dict[int, dict], packed: dict[int, tuple],
                    placement: list[str], expect: dict[int, Arrival]) -> None:
        async def one(part: int, walkers: dict):
            peer = placement[part]
            try:
                if part in packed:
                    handle, layout = packed[part]
                    answer = await self.worker.rpc(peer).gpipe_receive_ipc(
                        run_id=run_id, superstep=superstep, part=part, sender=self.worker_address, handle=handle,
                        layout=layout, expect=to_serialize(expect[part]))
                    if answer == "OK":
                        self._count(run_id, 0, _ipc.nbytes(walkers))
                        return
                    self._far.add(peer)  # it cannot open our memory (another GPU it cannot see): use the comms
                await self.worker.rpc(peer).gpipe_receive(
                    run_id=run_id, superstep=superstep, part=part, sender=self.worker_address,
                    walkers=to_serialize(walkers), expect=to_serialize(expect[part]))
                self._count(run_id, 1, _ipc.nbytes(walkers))
            except Exception as exc:
                cause = str(exc) if isinstance(exc, GpipeError) else repr(exc)
                raise GpipeError(f"could not send walkers to partition {part} on worker {peer}: {cause}") from exc

        await asyncio.gather(*(one(part, walkers) for part, walkers in remote.items()))

    def exchange_counts(self, run_id: str, superstep: int, sent: np.ndarray, peers: list[str]) -> np.ndarray:
        """The superstep's barrier: tell every peer how many walkers went to each partition, add up theirs.

        Call it once this worker's walkers of the superstep are delivered: a
        peer's counts arrive after its walkers, so once every peer is heard
        from the inboxes hold all of the next superstep's walkers. Waiting
        stops with an error when the run is dropped, or when a peer not heard
        from cannot be reached (pinged every ``PING_SECONDS``).
        """
        if peers:
            sync(self.worker.loop, self._tell, run_id, superstep, [int(c) for c in sent], peers)
        waited = 0.0
        with self._heard:
            while len(self.counts.get((run_id, superstep), ())) < len(peers):
                if run_id in self.stopped:
                    raise GpipeError(f"the run was stopped while waiting for the other workers' superstep {superstep}")
                if waited >= PING_SECONDS:
                    silent = sorted(set(peers) - set(self.counts.get((run_id, superstep), ())))
                    self._lock.release()
                    try:
                        sync(self.worker.loop, self._ping, silent, superstep)
                    finally:
                        self._lock.acquire()
                    waited = 0.0
                self._heard.wait(timeout=0.25)
                waited += 0.25
            heard = self.counts.pop((run_id, superstep), {})
        return sent + np.sum(list(heard.values()), axis=0, dtype=np.int64) if heard else sent

    async def _tell(self, run_id: str, superstep: int, sent: list[int], peers: list[str]) -> None:
        async def one(peer: str):
            try:
                await self.worker.rpc(peer).gpipe_counts(run_id=run_id, superstep=superstep, sender=self.worker_address,
                                                         sent=sent)
            except Exception as exc:
                raise GpipeError(f"could not reach worker {peer} at the end of superstep {superstep}: {exc!r}")

        await asyncio.gather(*(one(peer) for peer in peers))

    async def _ping(self, peers: list[str], superstep: int) -> None:
        async def one(peer: str):
            try:
                await asyncio.wait_for(self.worker.rpc(peer).identity(), PING_SECONDS)
            except Exception as exc:
                raise GpipeError(f"worker {peer} cannot be reached while waiting for its superstep {superstep}: "
                                 f"{exc!r}")

        await asyncio.gather(*(one(peer) for peer in peers))

    async def _counts(self, run_id: str, superstep: int, sender: str, sent: list[int]) -> str:
        with self._heard:
            if run_id not in self.stopped:
                self.counts[(run_id, superstep)][sender] = sent
            self._heard.notify_all()
        return "OK"

    def put_partition(self, graph_id: str, part: int, partition, budget: int | None = None) -> None:
        """Keep a partition: on the device, or — with a ``budget`` of device partitions — staged in host memory."""
        if budget is None:
            self.partitions[(graph_id, part)] = partition
        else:
            self.residency.put((graph_id, part), partition, budget)

    def partition(self, graph_id: str, part: int, run_id: str | None = None, policy: str = "workload",
                  in_place: bool = False):
        """Partition ``part`` on this worker's device (an out-of-memory one is copied in if it is not there).

        For an out-of-memory graph, ``run_id`` and ``policy`` choose what is
        evicted to make room: the partition with the fewest walkers of that run
        waiting in the inbox (``workload``) or the least recently used; with
        ``in_place`` a partition not on the device is read where it is staged.
        """
        key = (graph_id, part)
        if self.residency.manages(key):
            if in_place:
                return self.residency.read_in_place(key)
            return self.residency.get(key, self._pending(run_id, policy))
        try:
            return self.partitions[key]
        except KeyError:
            raise GpipeError(
                f"partition {part} of graph {graph_id} is not on worker {self.worker_address} "
                "(the worker restarted or the graph was released)"
            ) from None

    async def _partition_arrays(self, graph_id: str, part: int):
        p = self.partition(graph_id, part)
        return to_serialize({"indptr": to_host(p.indptr), "indices": to_host(p.indices),
                             "weights": None if p.weights is None else to_host(p.weights)})

    def fetch_partitions(self, graph_id: str, placement: list[str]) -> list[dict]:
        """Every partition's CSR arrays (host copies of remote ones, this worker's own as they are), in order."""
        local = {p: self.partition(graph_id, p) for p, w in enumerate(placement) if w == self.worker_address}
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
        wanted = {int(p): vertices[owner == p] for p in np.unique(owner)}
        remote = {p: v for p, v in wanted.items() if placement[p] != self.worker_address}
        fetched = dict(zip(remote, sync(self.worker.loop, self._fetch_neighbors, graph_id, placement, remote))
                       if remote else ())
        rows = [fetched[p] if p in remote else _rows(self._as_held(graph_id, p), v) for p, v in wanted.items()]
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
            return tuple(to_host(a) for a in _rows(self._as_held(graph_id, part), vertices))

        return to_serialize(await asyncio.get_running_loop().run_in_executor(None, read))

    def _as_held(self, graph_id: str, part: int):
        """Partition ``part`` where it is, to read a few rows: an out-of-memory one resident on the device or
        staged in host memory, neither copied in nor counted as a read in place."""
        key = (graph_id, part)
        if self.residency.manages(key):
            return self.residency.resident.get(key) or self.residency.staged[key]
        return self.partition(graph_id, part)

    def prefetch(self, graph_id: str, part: int, keep: int, run_id: str, policy: str) -> None:
        """Start copying an out-of-memory partition in while partition ``keep`` computes (GPU workers)."""
        if self.residency.manages((graph_id, part)):
            self.residency.prefetch((graph_id, part), (graph_id, keep), self._pending(run_id, policy))

    def _pending(self, run_id: str | None, policy: str):
        if run_id is None or policy != "workload":
            return None

        def waiting(key: tuple[str, int]) -> int:
            with self._lock:
                return sum(next(iter(w.values())).shape[0] for inbox in (self.inbox, self.local_inbox)
                           for (r, _, p), ws in inbox.items() if r == run_id and p == key[1] for w in ws)

        return waiting

    def put_graph_arrays(self, graph_id: str, arrays: dict) -> None:
        """Keep per-vertex arrays of a graph (e.g. its degrees) on this worker's device, for its runs to read by name.

        They are the store's, as the partitions are, and go with the graph: not
        Dask data, which Dask may move or drop (its memory manager drops the
        replicas of a broadcast value) without the runs that read it here knowing.
        """
        x = xp(self.device)
        for name, array in arrays.items():
            self.graph_arrays[(graph_id, name)] = x.asarray(array)

    def graph_array(self, graph_id: str, name: str):
        try:
            return self.graph_arrays[(graph_id, name)]
        except KeyError:
            raise GpipeError(f"worker {self.worker_address} holds no {name!r} of graph {graph_id} "
                             "(the worker restarted or the graph was released)") from None

    def memory(self) -> tuple[int, int | None, int | None]:
        """This worker's memory limit (the host's memory without one), its device memory and what
        ``gpipe.memory.output-limit`` 'auto' means here (None and None on a CPU worker)."""
        host = self.worker.memory_manager.memory_limit or psutil.virtual_memory().total
        device = xp("gpu").cuda.Device().mem_info[1] if self.device == "gpu" else None
        return host, device, self._auto_limit

    def transfers(self, graph_id: str) -> list:
        """Copies of this graph's partitions onto the device so far: [count, bytes, seconds, reads in place]."""
        return list(self.residency.counters.get(graph_id, [0, 0, 0.0, 0]))

    def drop_graph(self, graph_id: str) -> int:
        keys = [k for k in self.partitions if k[0] == graph_id]
        for k in keys:
            del self.partitions[k]
        for k in [k for k in self.graph_arrays if k[0] == graph_id]:
            del self.graph_arrays[k]
        staged = sum(1 for k in self.residency.staged if k[0] == graph_id)
        self.residency.drop(graph_id)
        return len(keys) + staged

    def add_pieces(self, run_id: str, part: int, pieces: dict, limit: int | str | None = None) -> int:
        """Keep what a kernel output; then, past ``limit`` bytes of outputs on the device, spill the oldest to host.

        ``limit`` is ``gpipe.memory.output-limit``: bytes, None (never spill),
        or 'auto' (half of a GPU's memory; no limit on CPU workers, whose
        outputs are in host memory already). Returns the bytes spilled. A run
        dropped while its loop runs here keeps nothing: its loop stops here
        with an error, after the kernel call it was in.
        """
        limit = self._auto_limit if limit == "auto" else limit
        with self._lock:
            if run_id in self.stopped:
                raise GpipeError("the run was stopped (it failed elsewhere, or its client was interrupted)")
            self.pieces[(run_id, part)].append(pieces)
            self._held += _nbytes(pieces)
            spilled = 0
            if limit is None or self._held <= limit:
                return spilled
            for sets in self.pieces.values():  # oldest first
                for i, s in enumerate(sets):
                    if self._held <= limit:
                        return spilled
                    if not isinstance(s, Spilled):
                        n = _nbytes(s)
                        sets[i] = Spilled(on_host(s))
                        self._held -= n
                        spilled += n
            return spilled

    def take_pieces(self, run_id: str, part: int) -> list:
        with self._lock:
            return self._taken(self.pieces.pop((run_id, part), []))

    def _taken(self, sets: list) -> list:
        """``sets``, no longer counted among the outputs on the device (call under the lock)."""
        self._held -= sum(_nbytes(s) for s in sets if not isinstance(s, Spilled))
        return sets

    def take_block(self, run_id: str, part: int, block: int, block_rows: int, n_blocks: int, dtype) -> list[dict]:
        """Partition ``part``'s pieces of output block ``block`` (grouping all its pieces on first call).

        Spilled pieces are grouped in host memory, apart: one piece set of the
        block for those on the device and one for those on the host.
        """
        with self._lock:
            groups = self.blocks.get((run_id, part))
            if groups is None:
                sets = self._taken(self.pieces.pop((run_id, part), []))
                held = [_pieces.group_by_block(x, [s for s in sets if isinstance(s, Spilled) == spilled], block_rows,
                                               n_blocks, dtype)
                        for x, spilled in ((xp(self.device), False), (np, True))
                        if any(isinstance(s, Spilled) == spilled for s in sets)]
                groups = self.blocks[(run_id, part)] = {b: [h[b] for h in held] for b in range(n_blocks)}
            taken = groups.pop(block)
            if not groups:
                del self.blocks[(run_id, part)]
            return taken

    async def _block(self, run_id: str, part: int, block: int, block_rows: int, n_blocks: int, dtype: str):
        loop = asyncio.get_running_loop()
        taken = await loop.run_in_executor(None, self.take_block, run_id, part, block, block_rows, n_blocks, dtype)
        return to_serialize(taken)

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

    def drop_run(self, run_id: str) -> None:
        """Forget a run's buffers; its loop here stops with an error (at its barrier, or after its kernel call)."""
        with self._heard:
            for key in [k for k in self.pieces if k[0] == run_id]:
                self._taken(self.pieces.pop(key))
            for buffers in (self.inbox, self.local_inbox, self.blocks, self.state, self.counts):
                for k in [k for k in buffers if k[0] == run_id]:
                    del buffers[k]
            self._sent.pop(run_id, None)
            if self._ipc is not None:
                self._ipc.release(run_id)
            if run_id in self.looping:
                self.stopped.add(run_id)
            self._heard.notify_all()

    @contextlib.contextmanager
    def loop(self, run_id: str):
        """While a run's superstep loop runs here (so that dropping the run stops it)."""
        with self._lock:
            self.looping.add(run_id)
        try:
            yield
        finally:
            with self._lock:
                self.looping.discard(run_id)
                self.stopped.discard(run_id)


class Spilled(dict):
    """A piece set moved from the device to host memory (``gpipe.memory.output-limit``)."""


def on_host(pieces: dict) -> dict:
    return {k: on_host(v) if isinstance(v, dict) else to_host(v) for k, v in pieces.items()}


def _nbytes(pieces: dict) -> int:
    return sum(_nbytes(v) if isinstance(v, dict) else v.nbytes for v in pieces.values())


def _output_limit(device: str) -> int | None:
    """'auto': half of this worker's GPU memory; none on a CPU worker."""
    if device != "gpu":
        return None
    import cupy

    return cupy.cuda.Device().mem_info[1] // 2


def _rows(p, vertices: np.ndarray) -> tuple:
    """The out-degrees and the concatenated out-neighbors of ``vertices`` (of partition ``p``)."""
    x = xp(device_of(p.indptr))
    local = x.asarray(vertices - p.lo)
    start, length = p.indptr[local], p.indptr[local + 1] - p.indptr[local]
    ends = x.cumsum(length)
    edge = x.arange(int(ends[-1]))
    row = x.searchsorted(ends, edge, side="right")
    return length, p.indices[start[row] + edge - (ends[row] - length[row])]


def on_store(method: str, *args, dask_worker=None):
    """Call a method of the worker's store (for ``client.run``); a worker without one is skipped."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return getattr(plugin, method)(*args) if plugin is not None else None


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
