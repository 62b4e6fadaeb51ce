"""The end of a superstep: every worker's walker counts to every worker, and the walkers that left to their new
partitions' workers, in one exchange through NCCL (GPU workers) or Dask's comms.

Each worker holding partitions is a rank (its place among the run's workers,
sorted). At the end of each superstep every rank sends every other rank a
header of int64 words (``_packing.Header``):

- ``sent``: how many walkers it added to (or took from) each partition's count,
  whose sum over the ranks is the next superstep's walker count per partition,
  the same on every rank;
- ``moved``: how many of its walkers it sends now to each partition of
  another rank;
- ``routed``: whether those walkers go by a ``to`` field (sampling entries)
  rather than by the partition owning their ``vertex``;
- ``schema``: how the walkers' fields travel (``_packing.Slot`` s: ``name:dtype:lo:bits;...`` in ASCII).

and then to each other rank one payload: the walkers for that rank's
partitions, packed in as few bits as their values take (``_packing``: 8 bytes a DeepWalk walker of R-MAT 24). The
receiver unpacks them from the header alone, checks what arrived (:class:`Arrival`) and puts it in the inboxes of
the next superstep, senders in rank order. The exchange is the superstep's barrier: once it returns, every
walker of the next superstep is in its inbox. A superstep taken in chunks
(``_superstep.in_chunks``) ends in a round of this exchange per chunk
(:meth:`Exchange.start`, a :class:`Round` each), every rank taking as many: a
round's walkers are on their way while the next chunk's kernel runs, and the
next superstep's counts are the sum of its rounds'.

Two transports carry it, chosen when the run starts and never changed:

- ``nccl`` (:class:`NcclTransport`): the headers by an all-gather on the
  device, the payloads by grouped send/recv, GPU to GPU (NVLink within a
  host, the network NCCL finds across hosts). The host waits for the
  collectives by polling an event, watching the run (a failure elsewhere
  aborts the communicator) and pinging silent peers through Dask.
- ``comms`` (:class:`CommsTransport`): header and payload in one Dask message
  per peer (``gpipe_exchange``); for CPU workers, and GPU workers without NCCL.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from distributed.protocol import to_serialize
from distributed.utils import sync

from ..backend import device_of, to_host, xp
from ..errors import GpipeError
from ._packing import Header, Packing, Wire, pack, unpack, walker_count

PING_SECONDS = 5.0  # how long an exchange waits on its peers before checking that they are still there
UNRESPONSIVE_SECONDS = 60.0  # how long a peer the scheduler still lists may leave those checks unanswered
OPENING = -(1 << 62)  # the mailbox number of what ranks agree on before a run's first superstep (supersteps count
# up from 0, the lent lists' rounds down from -1)
CHUNKED, MAX_CHUNKS = 1 << 60, 1 << 10  # the mailbox numbers of a chunked superstep's rounds: CHUNKED +
# superstep x MAX_CHUNKS + chunk (above the rounds that end a run, which count on from its last superstep)


@dataclass(frozen=True)
class Arrival:
    """What one partition's walkers from one sender must hold, checked where they arrive: a walker damaged on the
    way (a race in an exchange, a bad copy) stops the run with an error naming the sender, the superstep and the
    partition rather than faulting a kernel or walking on from a wrong vertex.
    """

    count: int  # walkers: every field has this many
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
            for (name, (lo, hi)), (low, high) in zip(rules.items(), spans, strict=True):
                if low < lo or high >= hi:
                    wrong.append(f"{name} spans [{low}, {high}], outside [{lo}, {hi - 1}]")
        if wrong:
            raise GpipeError(f"walkers from worker {sender} for partition {part} (superstep {superstep}) arrived "
                             f"damaged: {self.count} walkers sent, " + "; ".join(wrong))


class Watch:
    """How a rank waits on its peers: it stops when its run ends here, and asks a peer it has waited
    ``PING_SECONDS`` for whether the run has ended there (through Dask, the control plane).

    A peer where the run has ended (its loop failed, or the client ended the
    run there but could not here) will not come: the wait stops. A peer whose connection fails is gone: the wait
    stops at once. A peer that does not answer in time is busy
    (its event loop held by a long copy or serialization: at R-MAT 24, two runs at once failed so, the peer
    alive) or gone without closing its connections: the wait goes on while the scheduler still lists it, for at
    most ``UNRESPONSIVE_SECONDS``.
    """

    def __init__(self, run, peers: list[str]):
        self.run, self.peers = run, peers
        self._since = time.perf_counter()
        self._unanswered: dict[str, float] = {}  # peer -> when it first left a check unanswered

    def start(self) -> None:
        self._since = time.perf_counter()

    def __call__(self, what: str, silent: list[str] | None = None) -> None:
        self.run.raise_if_failed(f" while waiting for {what}")
        if time.perf_counter() - self._since >= PING_SECONDS:
            store = self.run.store
            sync(store.worker.loop, _ping, store.worker, self.run.id, self.peers if silent is None else silent, what,
                 self._unanswered)
            self._since = time.perf_counter()


async def _ping(worker, run_id: str, peers: list[str], what: str, unanswered: dict[str, float]) -> None:
    async def one(peer: str):
        try:
            ended = await asyncio.wait_for(worker.rpc(peer).gpipe_ended(run_id=run_id), PING_SECONDS)
        except TimeoutError:
            first = unanswered.setdefault(peer, time.perf_counter() - PING_SECONDS)
            await _still_there(worker, peer, time.perf_counter() - first, what)
            return
        except Exception as exc:
            raise GpipeError(f"worker {peer} cannot be reached while waiting for {what}: {exc!r}") from exc
        unanswered.pop(peer, None)
        if ended:
            raise GpipeError(f"the run has ended on worker {peer} (it failed there, or its client let it go) while "
                             f"waiting for {what}")

    await asyncio.gather(*(one(peer) for peer in peers))


async def _answered(worker, run, peer: str, call, what: str):
    """What ``call`` (a message to ``peer``) answers, checked on as a :class:`Watch` checks on a silent peer: it
    fails when the run ends here, when the scheduler no longer lists the peer, or after ``UNRESPONSIVE_SECONDS``
    (a peer stopped with its connections open would hold the sender for good)."""
    task = asyncio.ensure_future(call)
    start = time.perf_counter()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=PING_SECONDS)
            if done:
                return task.result()
            run.raise_if_failed(f" while waiting for worker {peer}")
            await _still_there(worker, peer, time.perf_counter() - start, what)
    finally:
        task.cancel()


async def _still_there(worker, peer: str, silent: float, what: str) -> None:
    """Nothing if ``peer``, silent for ``silent`` seconds, may still be waited for: the scheduler lists it (or does
    not answer in time itself) and it has been silent less than ``UNRESPONSIVE_SECONDS``; else an error saying so."""
    try:
        identity = await asyncio.wait_for(worker.scheduler.identity(), PING_SECONDS)
        listed = peer in identity.get("workers", {})
    except TimeoutError:
        listed = True
    if not listed or silent >= UNRESPONSIVE_SECONDS:
        raise GpipeError(f"worker {peer} has not answered for {silent:.1f} s while waiting for {what}"
                         + ("" if listed else "; the scheduler no longer lists it"))


class CommsTransport:
    """Header and payload in one Dask message to each peer (``gpipe_exchange``, sent without waiting for an
    answer: one crossing a superstep, not a round trip); the peers' arrive in the run's mailbox (``Run.hear``)."""

    name = "comms"

    def __init__(self, run, workers: list[str], rank: int):
        self.run, self.workers, self.rank = run, workers, rank

    def start(self, superstep: int, words: np.ndarray, payloads: dict, watch: Watch, sizes):
        """Send this rank's header and payloads of round ``superstep``. Returns the call that waits for the peers':
        it gives every rank's header (a row each), the payloads received by rank, and the seconds from this
        rank's sending to the last peer's message arriving."""
        peers = [r for r in range(len(self.workers)) if r != self.rank]
        if peers:
            sync(self.run.store.worker.loop, self._tell, superstep, words, payloads, peers)
        started = time.perf_counter()

        def finish():
            heard = self.run.wait_heard(superstep, {self.workers[r]: r for r in peers}, watch)
            matrix = np.empty((len(self.workers), words.shape[0]), np.int64)
            matrix[self.rank] = words
            received = {}
            for r, (row, payload, _) in heard.items():
                matrix[r] = row
                if payload is not None:
                    received[r] = payload
            last = max((when for _, _, when in heard.values()), default=started)
            return matrix, received, max(0.0, last - started)

        return finish

    async def _tell(self, superstep: int, words: np.ndarray, payloads: dict, peers: list[int]) -> None:
        worker, run = self.run.store.worker, self.run

        async def one(r: int):
            peer = self.workers[r]
            payload = payloads.get(r)
            try:
                await _answered(worker, run, peer, worker.rpc(peer).gpipe_exchange(  # no answer awaited: what the
                    # peer sends back for this superstep is its own end of it, which the mailbox waits for
                    run_id=run.id, superstep=superstep, rank=self.rank, words=to_serialize(words),
                    payload=None if payload is None else to_serialize(payload), reply=False),
                    f"it to take superstep {superstep}")
            except Exception as exc:
                cause = str(exc) if isinstance(exc, GpipeError) else repr(exc)
                raise GpipeError(f"could not reach worker {peer} at the end of superstep {superstep}: {cause}") from exc

        await asyncio.gather(*(one(r) for r in peers))

    def close(self, failed: bool) -> None:
        pass


class NcclTransport:
    """Headers by an all-gather, payloads by grouped send/recv, on one NCCL communicator (see :mod:`_nccl`)."""

    name = "nccl"

    def __init__(self, communicator, workers: list[str], rank: int):
        self.communicator, self.workers, self.rank = communicator, workers, rank
        self._headers: dict[int, tuple] = {}  # by words: this rank's header and all of them, pinned and on the device

    def _header_buffers(self, words: int) -> tuple:
        """Buffers for the headers of ``words`` words, made once a run (a superstep's headers, a lending round's):
        copies to and from pinned memory are queued on the communicator's stream with the all-gather, and the host
        waits once for the three. The device buffers come from the pool's memory of the communicator's stream,
        which waits for nothing of the current stream: from the current stream's, they could be memory that its
        kernels still queued use (freed by the host as they were launched), and the all-gather would write under
        them (walkers and lent lists arrived damaged, node2vec at R-MAT 24 x10 on two H200s)."""
        import cupy
        import cupyx

        if words not in self._headers:
            size = len(self.workers)
            with self.communicator.stream:
                self._headers[words] = (cupyx.empty_pinned(words, np.int64), cupy.empty(words, cupy.int64),
                                        cupy.empty(size * words, cupy.int64),
                                        cupyx.empty_pinned(size * words, np.int64))
        return self._headers[words]

    def start(self, superstep: int, words: np.ndarray, payloads: dict, watch: Watch, sizes):
        """All-gather the headers (waited for here: they size what comes), then queue the payloads' send/recv on
        the communicator's stream, after the work queued so far on the current stream (the payloads' packing), not
        after what it is given next (a kernel they then overlap). Returns the call that waits for them (see
        :meth:`CommsTransport.start`; the seconds: the send/recv's on the stream)."""
        import cupy
        from cupy.cuda import nccl

        comm, size = self.communicator.comm, len(self.workers)
        host, mine, gathered, everyone = self._header_buffers(words.shape[0])
        stream = self.communicator.stream  # the header waits for no kernel: not after the current stream's work
        host[...] = words
        mine.set(host, stream=stream)
        comm.allGather(mine.data.ptr, gathered.data.ptr, words.shape[0], nccl.NCCL_INT64, stream.ptr)
        cupy.asnumpy(gathered, stream=stream, out=everyone, blocking=False)
        self.communicator.wait(stream, watch, f"the other workers' superstep {superstep}")
        matrix = everyone.reshape(size, -1).copy()
        expected = sizes(matrix)
        received = {r: cupy.empty(n, cupy.uint8) for r, n in expected.items() if n}
        sending = {r: p for r, p in payloads.items() if p.shape[0]}
        if not (sending or received):
            return lambda: (matrix, received, 0.0)
        stream = self.communicator.after_current()  # the payloads are packed, the receive buffers allocated
        began = stream.record()
        nccl.groupStart()
        for r, payload in sending.items():
            comm.send(payload.data.ptr, payload.shape[0], nccl.NCCL_UINT8, r, stream.ptr)
        for r, payload in received.items():
            comm.recv(payload.data.ptr, payload.shape[0], nccl.NCCL_UINT8, r, stream.ptr)
        nccl.groupEnd()
        ended = stream.record()

        def finish():
            self.communicator.wait(stream, watch, f"the walkers of superstep {superstep}")
            sending.clear()  # held until sent: freed while the stream read them, a kernel could be given them
            return matrix, received, cupy.cuda.get_elapsed_time(began, ended) / 1e3

        return finish

    def close(self, failed: bool) -> None:
        if failed:  # a peer may be stuck in a collective with us: nothing may use this communicator again
            self.communicator.abort()


class Exchange:
    """One rank's end of every superstep of a run (see the module's docstring)."""

    def __init__(self, run, transport, workers: list[str], placement: tuple[str, ...], bounds: np.ndarray,
                 length: int | None, device: str, *, walks: int | None = None, spans: tuple = ()):
        self.run, self.transport, self.workers, self.placement = run, transport, workers, placement
        self.rank = transport.rank
        self.bounds, self.length, self.device = bounds, length, device
        self.wire = Wire(int(bounds[-1]), length, walks, spans)  # how the walkers travel (``walks``: the run's
        # walks, where it is a walk run; ``spans``: its family's, ``StepSpec.spans``)
        self.lending: Any = None  # a ``_lent.Lending`` where the walkers take neighbor lists along
        self.parts = len(placement)
        self.of_rank = [[p for p, w in enumerate(placement) if w == worker] for worker in workers]
        self.watch = Watch(run, [w for r, w in enumerate(workers) if r != self.rank])
        self.sent_bytes = 0

    def everyone(self, yes: bool) -> bool:
        """Whether every rank says yes: a word from each, before the run's first superstep (numbered
        :data:`OPENING` in the comms' mailbox)."""
        self.watch.start()
        matrix, _ = self.swap(OPENING, np.array([int(yes)], np.int64), {}, lambda m: {})
        return bool(matrix.all())

    def swap(self, superstep: int, words: np.ndarray, payloads: dict, sizes) -> tuple[np.ndarray, dict]:
        """A round of the transport's, sent and waited for: every rank's header (a row each) and the payloads
        received by rank (``sizes``: the bytes each peer sends, from the headers)."""
        matrix, received, _ = self.transport.start(superstep, words, payloads, self.watch, sizes)()
        return matrix, received

    def end_superstep(self, superstep: int, sent: np.ndarray, outbound: dict[int, list[dict]],
                      routed: bool) -> np.ndarray:
        """Swap headers and payloads with every peer; the walkers that came go into the inboxes of ``superstep``
        + 1 and the next superstep's walker count per partition is returned."""
        return self.start(superstep, sent, outbound, routed).finish()

    def start(self, superstep: int, sent: np.ndarray, outbound: dict[int, list[dict]], routed: bool,
              chunk: int | None = None) -> Round:
        """Send this rank's header and the walkers of ``outbound`` (emptied), as :meth:`end_superstep` does, and
        return the :class:`Round` whose ``finish`` takes the peers'. ``chunk``: the round of one of the
        superstep's chunks (:data:`CHUNKED` numbers its mail), whose ``sent`` counts only that chunk's walkers."""
        x = xp(self.device)
        if self.lending is not None:  # the lists the walkers leaving will read, to their peers first
            self.lending.round(superstep, outbound)
        packing = self.wire.packing(_schema(outbound))
        moved = np.zeros(self.parts, np.int64)
        for part, sets in outbound.items():
            moved[part] = sum(walker_count(w) for w in sets)
        words = Header(np.asarray(sent, np.int64), moved, routed, packing.slots).words()
        bad = x.zeros(len(packing.slots), x.int32)  # a slot's values that did not fit its bits
        payloads = {r: pack(x, outbound, {p: int(moved[p]) for p in self.of_rank[r] if moved[p]}, packing, bad)
                    for r in range(len(self.workers)) if r != self.rank and any(moved[p] for p in self.of_rank[r])}
        outbound.clear()
        if payloads:
            self.wire.sent.add(packing)
        if payloads and not all(slot.raw for slot in packing.slots):
            wrong = [f"{slot.name} outside [{slot.lo}, {slot.lo + (1 << slot.bits) - 1}] (its {slot.bits} bits)"
                     for slot, flag in zip(packing.slots, to_host(bad), strict=True) if flag]
            if wrong:
                raise GpipeError(f"walkers leaving at the end of superstep {superstep} hold values that their "
                                 f"family's spans and the run's sizes leave out: " + "; ".join(wrong))
        self.sent_bytes += sum(int(p.shape[0]) for p in payloads.values())
        mine = self.of_rank[self.rank]

        def sizes(matrix: np.ndarray) -> dict[int, int]:
            return {r: Packing(Header.read(row, self.parts).schema).places(
                        {p: int(row[self.parts + p]) for p in mine if row[self.parts + p]})[1]
                    for r, row in enumerate(matrix) if r != self.rank}

        self.watch.start()
        t0 = time.perf_counter()
        number = superstep if chunk is None else CHUNKED + superstep * MAX_CHUNKS + chunk
        finish = self.transport.start(number, words, payloads, self.watch, sizes)
        return Round(self, superstep, finish, time.perf_counter() - t0)

    def _arrived(self, superstep: int, matrix: np.ndarray, received: dict) -> np.ndarray:
        """Put the walkers of a round in the inboxes of ``superstep`` + 1, checked; its walker counts."""
        mine = self.of_rank[self.rank]
        for r in sorted(received):
            header = Header.read(matrix[r], self.parts)
            sender = self.workers[r]
            for part, walkers in unpack(received[r], header, mine).items():
                Arrival(int(header.moved[part]),
                        None if header.routed else (int(self.bounds[part]), int(self.bounds[part + 1])),
                        self.length).check(walkers, sender, superstep + 1, part)
                self.run.deliver(superstep + 1, part, walkers)
        return matrix[:, :self.parts].sum(axis=0)


class Round:
    """One exchange of a superstep on its way: its walkers sent, the peers' not yet taken.

    A superstep taken in chunks (``_advance``) waits for a chunk's round while
    the next chunk's kernel runs (:meth:`wait`), then takes its walkers
    (:meth:`finish`): ``hidden`` is how much of the round's time on the wire (its send/recv on the communicator's
    stream; through the comms, until the last peer's message came) passed before this rank waited for it, and
    ``waited`` how long this rank spent on it (sending, waiting, and taking the walkers in).
    """

    def __init__(self, exchange: Exchange, superstep: int, wait, sending: float):
        self._exchange, self._superstep, self._wait = exchange, superstep, wait
        self._sent_at = time.perf_counter()
        self._heard: tuple | None = None
        self.waited, self.waiting, self.hidden = sending, 0.0, 0.0  # waiting: of waited, in :meth:`wait`
        self.counts: np.ndarray | None = None

    def wait(self) -> None:
        """Until the peers' headers and payloads of the round are here (once)."""
        if self._heard is None and self.counts is None:
            t0 = time.perf_counter()
            matrix, received, on_wire = self._wait()
            self._heard = (matrix, received)
            self.waiting = time.perf_counter() - t0
            self.waited += self.waiting
            self.hidden = max(0.0, min(on_wire, t0 - self._sent_at))

    def finish(self) -> np.ndarray:
        """The peers' walkers, in the inboxes of the next superstep (once; later calls return at once): the walker
        counts the round adds to each partition's."""
        if self.counts is None:
            self.wait()
            t0 = time.perf_counter()
            self.counts = self._exchange._arrived(self._superstep, *self._heard)
            self._heard = None  # its walkers are in the inboxes
            self.waited += time.perf_counter() - t0
        return self.counts


def _schema(outbound: dict[int, list[dict]]) -> tuple:
    """The fields of the walkers sent, the same for every set (a family's movers all carry the same)."""
    schema = None
    for sets in outbound.values():
        for walkers in sets:
            fields = tuple((name, array.dtype.str) for name, array in walkers.items())
            if schema is None:
                schema = fields
            elif fields != schema:
                raise GpipeError(f"walkers leaving with fields {fields} and {schema} in one superstep")
    return schema or ()
