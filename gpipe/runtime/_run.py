"""One run on one worker: its inboxes, outputs, barrier, IPC buffers and the family's own state, ended as one.

The store keeps a :class:`Run` per run id (as ``distributed.shuffle`` keeps a
``ShuffleRun``), made on first use here: the run's loop starting, or a peer's
walkers or counts arriving before it. Walkers that leave a partition are pushed
straight into the inbox of the worker owning their destination (the
``gpipe_receive`` handler, over Dask's worker-to-worker comms, as Dask's P2P
shuffle does), so that the next superstep finds them there; the workers then
swap walker counts (``gpipe_counts``) as the superstep's barrier. A run leaves
the store when it is closed or failed, or once its loop has ended here and its
outputs have all been taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from distributed.protocol import to_serialize
from distributed.utils import sync

from ..backend import device_of, to_host, xp
from ..errors import GpipeError
from . import _ipc, _pieces

if TYPE_CHECKING:
    from ._store import GpipeStore

PING_SECONDS = 5.0  # how long a barrier waits on a silent peer before checking that it is still there
ENDED = "ended"  # a store's answer to walkers or counts for a run that has ended there


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


class Run:
    """A run's state on this worker; the store's registry holds it by its ``id``.

    Its loop thread, the worker's event loop (the handlers) and tasks call it
    at once: its state is read and written under the store's lock, which
    spilling outputs holds across runs too.
    """

    def __init__(self, run_id: str, store: GpipeStore):
        self.id = run_id
        self._store = store
        self._lock = store.lock
        self._heard = threading.Condition(store.lock)  # a peer's counts arrived, or the run ended
        self._inbox: dict[tuple[int, int], list] = defaultdict(list)  # (superstep, part) -> walkers from peers
        self._local_inbox: dict[tuple[int, int], list] = defaultdict(list)  # from this worker's partitions
        self._counts: dict[int, dict[str, list]] = defaultdict(dict)  # superstep -> peer -> walkers sent per part
        self._pieces: dict[int, list] = defaultdict(list)  # part -> what the step output there, oldest first
        self._blocks: dict[int, dict] = {}  # part -> output block (or group) -> its piece sets
        self._held = 0  # bytes of the pieces not spilled (on the device of a GPU worker)
        self._sent = [0, 0]  # walker bytes sent [through CUDA IPC, through the comms]
        self.ipc = _ipc.Buffers() if store.device == "gpu" else None
        self.state: dict = {}  # the family's own while the loop runs here (e.g. the sampler's visited sets)
        self.looping = False  # whether the run's superstep loop runs here
        self._failure: str | None = None  # why the run ended here, if it did

    # -- its loop

    @contextlib.contextmanager
    def loop(self):
        """While the run's superstep loop runs here; its walkers' buffers and the family's state go when it ends."""
        with self._lock:
            self.looping = True
        try:
            yield self
        finally:
            if self.ipc is not None:  # every walker is delivered: no one reads them
                self.ipc.release()
            with self._lock:
                self.looping = False
                self.state.clear()
                self._leave_if_drained()

    @property
    def sent_bytes(self) -> list[int]:
        """Walker bytes sent so far [through CUDA IPC, through the comms]."""
        with self._lock:
            return list(self._sent)

    def fail(self, reason: str) -> None:
        """End the run here: its loop stops with an error saying ``reason`` (at its barrier, or after its kernel
        call), and everything it holds goes."""
        with self._lock:
            self._failure = reason
            self._leave()
        if self.ipc is not None:
            self.ipc.release()

    def close(self) -> None:
        """End the run here: what it holds goes (a loop still running stops with an error)."""
        self.fail("it was closed")

    def _raise_if_failed(self, waiting: str = "") -> None:
        if self._failure is not None:
            raise GpipeError(f"the run was stopped{waiting} ({self._failure})")

    def _leave(self) -> None:
        """Let everything go and leave the store's registry (under the lock)."""
        self._inbox.clear()
        self._local_inbox.clear()
        self._counts.clear()
        self._blocks.clear()
        self._pieces.clear()
        self._held = 0
        self.state.clear()
        self._heard.notify_all()
        self._store.unregister(self)

    def _leave_if_drained(self) -> None:
        """Leave the registry once the loop has ended here and every output was taken (under the lock)."""
        if not (self.looping or self._pieces or self._blocks):
            self._store.unregister(self)

    # -- walkers

    def deliver(self, superstep: int, part: int, walkers: dict, local: bool = False) -> None:
        """Walkers for partition ``part`` (held here) to advance in ``superstep`` (``local``: from a partition here)."""
        with self._lock:
            (self._local_inbox if local else self._inbox)[(superstep, part)].append(walkers)

    def take_inbox(self, superstep: int, part: int) -> list[dict]:
        with self._lock:
            return self._inbox.pop((superstep, part), []) + self._local_inbox.pop((superstep, part), [])

    def take_local(self, superstep: int, part: int) -> list[dict]:
        """Only the walkers that came from this worker's own partitions (the peers' stay, as their counts say)."""
        with self._lock:
            return self._local_inbox.pop((superstep, part), [])

    def local_waiting(self, superstep: int, part: int) -> bool:
        with self._lock:
            return bool(self._local_inbox.get((superstep, part)))

    def waiting(self, key: tuple[str, int]) -> int:
        """Walkers waiting in the inboxes for partition ``key`` (its graph, its number): the workload policy's."""
        with self._lock:
            return sum(next(iter(w.values())).shape[0] for inbox in (self._inbox, self._local_inbox)
                       for (_, p), ws in inbox.items() if p == key[1] for w in ws)

    async def receive(self, superstep: int, part: int, sender: str, walkers: dict, expect: Arrival) -> str:
        await asyncio.get_running_loop().run_in_executor(None, expect.check, walkers, sender, superstep, part)
        self.deliver(superstep, part, walkers)
        return "OK"

    async def receive_ipc(self, superstep: int, part: int, sender: str, handle: bytes, layout: list,
                          expect: Arrival) -> str:
        """Walkers left in a peer's device memory (CUDA IPC); an answer other than OK sends them again by comms."""
        loop = asyncio.get_running_loop()
        try:
            walkers = await loop.run_in_executor(None, self.ipc.unpack, part, sender, handle, layout)
        except Exception as exc:  # e.g. the peer's GPU is not visible to this process
            return f"cannot open the sender's memory: {exc!r}"
        await loop.run_in_executor(None, expect.check, walkers, sender, superstep, part)
        self.deliver(superstep, part, walkers)
        return "OK"

    def send(self, superstep: int, outbound: dict[int, dict], placement: tuple[str, ...], ipc: bool = False,
             bounds: np.ndarray | None = None, length: int | None = None) -> None:
        """Deliver each destination's walkers to the worker holding it, and wait until all have them.

        With ``ipc``, walkers for a GPU worker on this host go device to device
        through CUDA IPC (see ``_ipc``); otherwise, and to a peer that cannot
        open this worker's memory, through Dask's comms. The bytes sent each way
        are counted (``sent_bytes``). The receiver checks what arrives (see
        :class:`Arrival`): the walkers' count, their vertices inside the
        destination's range of ``bounds`` (walkers routed by vertex), their
        steps within ``length`` (walks).
        """
        here = self._store.worker_address
        remote = {}
        for part, walkers in outbound.items():
            if placement[part] == here:
                self.deliver(superstep, part, walkers, local=True)
            else:
                remote[part] = walkers
        if not remote:
            return
        expect = {part: Arrival(int(next(iter(walkers.values())).shape[0]),
                                None if bounds is None else (int(bounds[part]), int(bounds[part + 1])), length)
                  for part, walkers in remote.items()}
        packed = {part: self.ipc.pack(part, walkers) for part, walkers in remote.items()
                  if ipc and self._store.near(placement[part])}
        sync(self._store.worker.loop, self._push, superstep, remote, packed, placement, expect)

    async def _push(self, superstep: int, remote: dict[int, dict], packed: dict[int, tuple],
                    placement: tuple[str, ...], expect: dict[int, Arrival]) -> None:
        worker, here = self._store.worker, self._store.worker_address

        async def one(part: int, walkers: dict):
            peer = placement[part]
            try:
                if part in packed:
                    handle, layout = packed[part]
                    answer = await worker.rpc(peer).gpipe_receive_ipc(
                        run_id=self.id, superstep=superstep, part=part, sender=here, handle=handle,
                        layout=layout, expect=to_serialize(expect[part]))
                    if answer == "OK":
                        self._count(0, _ipc.nbytes(walkers))
                        return
                    if answer == ENDED:  # the run has ended there: nothing waits for these walkers
                        return
                    self._store.far.add(peer)  # it cannot open our memory (another GPU it cannot see): use the comms
                await worker.rpc(peer).gpipe_receive(
                    run_id=self.id, superstep=superstep, part=part, sender=here,
                    walkers=to_serialize(walkers), expect=to_serialize(expect[part]))
                self._count(1, _ipc.nbytes(walkers))
            except Exception as exc:
                cause = str(exc) if isinstance(exc, GpipeError) else repr(exc)
                raise GpipeError(f"could not send walkers to partition {part} on worker {peer}: {cause}") from exc

        await asyncio.gather(*(one(part, walkers) for part, walkers in remote.items()))

    def _count(self, path: int, nbytes: int) -> None:
        with self._lock:
            self._sent[path] += nbytes

    # -- the barrier

    def exchange_counts(self, superstep: int, sent: np.ndarray, peers: list[str]) -> np.ndarray:
        """The superstep's barrier: tell every peer how many walkers went to each partition, add up theirs.

        Call it once this worker's walkers of the superstep are delivered: a
        peer's counts arrive after its walkers, so once every peer is heard
        from the inboxes hold all of the next superstep's walkers. Waiting
        stops with an error when the run ends here, or when a peer not heard
        from cannot be reached (pinged every ``PING_SECONDS``).
        """
        store = self._store
        if peers:
            sync(store.worker.loop, self._tell, superstep, [int(c) for c in sent], peers)
        waited = 0.0
        with self._heard:
            while len(self._counts.get(superstep, ())) < len(peers):
                self._raise_if_failed(f" while waiting for the other workers' superstep {superstep}")
                if waited >= PING_SECONDS:
                    silent = sorted(set(peers) - set(self._counts.get(superstep, ())))
                    self._lock.release()
                    try:
                        sync(store.worker.loop, self._ping, silent, superstep)
                    finally:
                        self._lock.acquire()
                    waited = 0.0
                self._heard.wait(timeout=0.25)
                waited += 0.25
            heard = self._counts.pop(superstep, {})
        return sent + np.sum(list(heard.values()), axis=0, dtype=np.int64) if heard else sent

    async def _tell(self, superstep: int, sent: list[int], peers: list[str]) -> None:
        worker, here = self._store.worker, self._store.worker_address

        async def one(peer: str):
            try:
                await worker.rpc(peer).gpipe_counts(run_id=self.id, superstep=superstep, sender=here, sent=sent)
            except Exception as exc:
                raise GpipeError(f"could not reach worker {peer} at the end of superstep {superstep}: {exc!r}")

        await asyncio.gather(*(one(peer) for peer in peers))

    async def _ping(self, peers: list[str], superstep: int) -> None:
        worker = self._store.worker

        async def one(peer: str):
            try:
                await asyncio.wait_for(worker.rpc(peer).identity(), PING_SECONDS)
            except Exception as exc:
                raise GpipeError(f"worker {peer} cannot be reached while waiting for its superstep {superstep}: "
                                 f"{exc!r}")

        await asyncio.gather(*(one(peer) for peer in peers))

    def hear_counts(self, superstep: int, sender: str, sent: list[int]) -> None:
        """A peer's walker counts of ``superstep`` (the ``gpipe_counts`` handler)."""
        with self._heard:
            if self._failure is None:
                self._counts[superstep][sender] = sent
            self._heard.notify_all()

    # -- outputs

    def add_pieces(self, part: int, pieces: dict, limit: int | str | None) -> int:
        """Keep what a step output; then, past ``limit`` bytes of outputs on the device, spill the oldest to host.

        ``limit`` (``gpipe.memory.output-limit``: bytes, 'auto' or None, never
        spill) counts the outputs of every run on this worker; the oldest
        spill first, whichever run's (see ``GpipeStore.spill_outputs``). Returns the bytes
        spilled. A run that has ended here keeps nothing: its loop stops with
        an error, after the kernel call it was in.
        """
        with self._lock:
            self._raise_if_failed()
            self._pieces[part].append(pieces)
            self._held += _nbytes(pieces)
            if limit is None:
                return 0
            return self._store.spill_outputs(limit)

    def spill(self, over: int) -> int:
        """Move piece sets to host memory, oldest first, until ``over`` bytes have gone or none is left on the
        device; returns the bytes moved (call under the lock)."""
        spilled = 0
        for sets in self._pieces.values():
            for i, s in enumerate(sets):
                if spilled >= over:
                    break
                if not isinstance(s, Spilled):
                    spilled += _nbytes(s)
                    sets[i] = Spilled(on_host(s))
        self._held -= spilled
        return spilled

    @property
    def held(self) -> int:
        """Bytes of outputs on the device (call under the lock)."""
        return self._held

    def take_pieces(self, part: int) -> list:
        with self._lock:
            taken = self._taken(self._pieces.pop(part, []))
            self._leave_if_drained()
            return taken

    def _taken(self, sets: list) -> list:
        """``sets``, no longer counted among the outputs on the device (call under the lock)."""
        self._held -= sum(_nbytes(s) for s in sets if not isinstance(s, Spilled))
        return sets

    def take_block(self, part: int, block: int, block_rows: int, n_blocks: int, dtype) -> list[dict]:
        """Partition ``part``'s pieces of output block ``block`` (grouping all its pieces on first call).

        Spilled pieces are grouped in host memory, apart: one piece set of the
        block for those on the device and one for those on the host.
        """
        def by_block(sets: list) -> dict:
            kinds = [(x, [s for s in sets if isinstance(s, Spilled) == spilled])
                     for x, spilled in ((xp(self._store.device), False), (np, True))]
            sets.clear()  # group_by_block frees each set once it is split
            held = [_pieces.group_by_block(x, mine, block_rows, n_blocks, dtype) for x, mine in kinds if mine]
            return {b: [h[b] for h in held] for b in range(n_blocks)}

        return self.take_group(part, block, by_block)

    def take_group(self, part: int, key, group: Callable[[list], dict]):
        """Group ``key`` of partition ``part``'s outputs: on the first call every piece set there is taken and
        split by ``group`` (piece sets -> every group by key), later calls take the other groups."""
        with self._lock:
            groups = self._blocks.get(part)
            if groups is None:
                groups = self._blocks[part] = group(self._taken(self._pieces.pop(part, [])))
            taken = groups.pop(key)
            if not groups:
                del self._blocks[part]
                self._leave_if_drained()
            return taken

    def pieces(self, part: int) -> list:
        """What the step output on partition ``part`` so far, left here."""
        with self._lock:
            return list(self._pieces.get(part, ()))


class Spilled(dict):
    """A piece set moved from the device to host memory (``gpipe.memory.output-limit``)."""


def on_host(pieces: dict) -> dict:
    return {k: on_host(v) if isinstance(v, dict) else to_host(v) for k, v in pieces.items()}


def _nbytes(pieces: dict) -> int:
    return sum(_nbytes(v) if isinstance(v, dict) else v.nbytes for v in pieces.values())
