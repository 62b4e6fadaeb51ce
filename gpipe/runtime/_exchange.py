"""The end of a superstep: every worker's walker counts to every worker, and the walkers that left to their new
partitions' workers, in one exchange through NCCL (GPU workers) or Dask's comms.

Each worker holding partitions is a rank (its place among the run's workers,
sorted). At the end of each superstep every rank sends every other rank a
header of int64 words (:class:`Header`):

- ``sent``: how many walkers it added to (or took from) each partition's count,
  whose sum over the ranks is the next superstep's walker count per partition,
  the same on every rank;
- ``moved``: how many of its walkers it sends now to each partition of
  another rank;
- ``routed``: whether those walkers go by a ``to`` field (sampling entries)
  rather than by the partition owning their ``vertex``;
- ``schema``: how the walkers' fields travel (:class:`Slot` s: ``name:dtype:lo:bits;...`` in ASCII).

and then to each other rank one payload: the walkers for that rank's
partitions, packed (:class:`Packing`): each walker in whole uint32 words, its
fields one after another in their bits, each in as few bits as its values
take: its value less the lowest it may hold, in the bits the span of its values
needs. The widths are chosen as the run starts (:class:`Wire`), the same on
every rank: ``walk_id`` in the bits of the run's walks, ``vertex`` (and any
field a family spans up to :data:`~gpipe.runtime.VERTEX`) in those of the
graph's vertices, ``step`` in those of the walks' length, a family's own fields
in those of its :class:`~gpipe.runtime.Span` s (``StepSpec.spans``); a field of
unknown values (no span, or a float) travels at its dtype's full width, its
bits as they are: never cut. DeepWalk on R-MAT 24 with 10 walks a vertex of 80
steps: 28 + 24 + 7 bits, 8 bytes a walker (``stats['wire']``, :func:`stated`).
A partition's walkers lie word-major (word 0 of each, then word 1, ...),
partitions in ascending order, each starting on an ``ALIGN``-byte offset; the
payload is bytes, which either transport carries as they are. The sender packs
in one pass (a CuPy kernel written for the packing on GPU workers, the same
arithmetic in numpy on CPU ones) and stops the run where a value does not fit
its bits; the receiver unpacks each field to the dtype it left with, from the
header alone, checks what arrived (:class:`Arrival`) and puts it in the inboxes of the next superstep, senders in
rank order. The exchange is the superstep's barrier: once it returns, every
walker of the next superstep is in its inbox. A superstep taken in chunks
(``_advance._in_chunks``) ends in a round of this exchange per chunk
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
import functools
import time
from dataclasses import dataclass

import numpy as np

from distributed.protocol import to_serialize
from distributed.utils import sync

from ..backend import device_of, to_host, xp
from ..errors import GpipeError
from ._spec import VERTEX

ALIGN = 16  # bytes: every array of a payload starts on such an offset
WORD_BITS = 32  # a walker travels as whole uint32 words
CHUNK = 1 << 16  # walkers packed or unpacked at a time on the CPU: the passes over their values stay in its caches
SCHEMA_WORDS = 32  # int64 words of a header holding the walkers' fields (256 ASCII bytes)
PING_SECONDS = 5.0  # how long an exchange waits on its peers before checking that they are still there
UNRESPONSIVE_SECONDS = 60.0  # how long a peer the scheduler still lists may leave those checks unanswered
OPENING = -(1 << 62)  # the mailbox number of what ranks agree on before a run's first superstep (supersteps count
# up from 0, the lent lists' rounds down from -1)
CHUNKED, MAX_CHUNKS = 1 << 60, 1 << 10  # the mailbox numbers of a chunked superstep's rounds: CHUNKED +
# superstep x MAX_CHUNKS + chunk (above the rounds that end a run, which count on from its last superstep)
_C_TYPES = {"int8": "signed char", "uint8": "unsigned char", "int16": "short", "uint16": "unsigned short",
            "int32": "int", "uint32": "unsigned int", "int64": "long long", "uint64": "unsigned long long"}


@dataclass(frozen=True)
class Slot:
    """One field of a packed walker: ``bits`` bits holding its value less ``lo``, or, at its dtype's full width
    (:attr:`raw`: a field of unknown values, a float), its bit pattern as it is."""

    name: str
    dtype: np.dtype  # as it leaves and arrives
    lo: int
    bits: int

    @classmethod
    def of(cls, name: str, dtype, span: tuple[int, int] | None) -> Slot:
        """The slot of a field of ``dtype`` whose values lie in ``span`` (lo, hi; None: unknown)."""
        dtype = np.dtype(dtype)
        full = dtype.itemsize * 8
        if dtype.kind == "b":
            span = (0, 1)
        if span is None or dtype.kind not in "iub":
            return cls(name, dtype, 0, full)
        lo, hi = span
        bits = (hi - lo).bit_length()
        return cls(name, dtype, lo, bits) if bits < full else cls(name, dtype, 0, full)

    @property
    def raw(self) -> bool:
        return self.bits == self.dtype.itemsize * 8

    @property
    def carrier(self) -> np.dtype:
        """The integer dtype the field is viewed as while it is packed and unpacked: its own, or, for a raw field,
        a float or a bool, the unsigned one of its size."""
        return self.dtype if self.dtype.kind in "iu" and not self.raw else np.dtype(f"u{self.dtype.itemsize}")


@dataclass(frozen=True)
class Packing:
    """How walkers of one schema travel: each field's :class:`Slot` after the one before in the bits of
    :attr:`words` uint32 words a walker, a partition's walkers word-major (word 0 of each, then word 1, ...)."""

    slots: tuple[Slot, ...]

    @functools.cached_property
    def cuts(self) -> tuple[tuple[int, int, int], ...]:
        """Each ``(slot, word, shift)`` where a slot's bits lie in a word: the word holds the value shifted right
        by ``shift`` (left by ``-shift`` where negative)."""
        cuts, offset = [], 0
        for k, slot in enumerate(self.slots):
            for j in range(offset // WORD_BITS, -(-(offset + slot.bits) // WORD_BITS)):
                cuts.append((k, j, j * WORD_BITS - offset))
            offset += slot.bits
        return tuple(cuts)

    @functools.cached_property
    def by_word(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """For each word, its :attr:`cuts` as ``(slot, shift)``."""
        return tuple(tuple((k, shift) for k, i, shift in self.cuts if i == j) for j in range(self.words))

    @functools.cached_property
    def by_slot(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """For each slot, its :attr:`cuts` as ``(word, shift)``."""
        return tuple(tuple((j, shift) for i, j, shift in self.cuts if i == k) for k in range(len(self.slots)))

    @functools.cached_property
    def words(self) -> int:
        return -(-sum(slot.bits for slot in self.slots) // WORD_BITS)

    def places(self, counts: dict[int, int]) -> tuple[list[tuple], int]:
        """Where the walkers of each partition of ``counts`` (walkers, > 0) lie in a payload, in ascending order:
        ``[(part, uint32 word offset, count)]``, and the payload's bytes."""
        places, size = aligned((part, np.uint32, self.words * counts[part]) for part in sorted(counts))
        return [(part, offset // 4, counts[part]) for part, _, offset, _ in places], size

    def pack(self, x, fields: list, words, base: int, stride: int, bad) -> None:
        """Pack ``fields`` (arrays of one walker set, in slot order) into ``words`` (uint32): word j of walker i
        at ``base + j * stride + i``; ``bad[k]`` set where slot k's values do not fit its bits."""
        fields = [field.view(slot.carrier) for field, slot in zip(fields, self.slots)]
        if x is np:
            _pack_numpy(self, fields, words, base, stride, bad)
        else:
            _kernels(x, self)[0](*fields, base, stride, words, bad)

    def unpack(self, x, words, base: int, stride: int, count: int) -> dict:
        """The fields of ``count`` walkers packed by :meth:`pack`, by name, each of its dtype."""
        if x is np:
            fields = _unpack_numpy(self, words, base, stride, count)
        else:
            fields = [x.empty(count, slot.carrier) for slot in self.slots]
            _kernels(x, self)[1](words, base, stride, *fields)
        return {slot.name: field.view(slot.dtype) for slot, field in zip(self.slots, fields)}


def _pack_numpy(packing: Packing, fields: list, words: np.ndarray, base: int, stride: int, bad: np.ndarray) -> None:
    """:meth:`Packing.pack` on the CPU: the kernel of :func:`_kernels` in numpy, the same bits, :data:`CHUNK`
    walkers at a time."""
    count = fields[0].shape[0]
    for start in range(0, count, CHUNK):
        end = min(count, start + CHUNK)
        values = []
        for k, (field, slot) in enumerate(zip(fields, packing.slots)):
            value = field[start:end].astype(np.uint64)  # a signed one sign-extended: its two's complement
            if not slot.raw:
                value -= np.uint64(slot.lo % (1 << 64))
                if int(value.max()) >> slot.bits:
                    bad[k] = 1
            values.append(value)
        for j, cuts in enumerate(packing.by_word):
            words[base + j * stride + start:base + j * stride + end] = functools.reduce(
                np.bitwise_or, (_shifted(values[k], shift) for k, shift in cuts))  # cast: its low 32 bits


def _unpack_numpy(packing: Packing, words: np.ndarray, base: int, stride: int, count: int) -> list:
    """:meth:`Packing.unpack` on the CPU: the kernel of :func:`_kernels` in numpy, the same values, :data:`CHUNK`
    walkers at a time."""
    fields = [np.empty(count, slot.carrier) for slot in packing.slots]
    for start in range(0, count, CHUNK):
        end = min(count, start + CHUNK)
        read = [words[base + j * stride + start:base + j * stride + end].astype(np.uint64)
                for j in range(packing.words)]
        for field, slot, cuts in zip(fields, packing.slots, packing.by_slot):
            pieces = [_shifted(read[j], -shift) for j, shift in cuts] or [np.zeros(end - start, np.uint64)]
            value = functools.reduce(np.bitwise_or, pieces)
            if slot.bits < 64:  # a new array: ``value`` may be one of ``read``
                value = value & np.uint64((1 << slot.bits) - 1)
            if not slot.raw:
                value += np.uint64(slot.lo % (1 << 64))
            field[start:end] = value  # cast: its low bits
    return fields


def _shifted(value: np.ndarray, shift: int) -> np.ndarray:
    """``value`` shifted right by ``shift`` bits (left where negative)."""
    if shift > 0:
        return value >> np.uint64(shift)
    return value << np.uint64(-shift) if shift < 0 else value


@functools.cache
def _kernels(x, packing: Packing) -> tuple:
    """The CuPy kernels packing and unpacking walkers of ``packing``, one pass each (a thread a walker), their
    code written for its slots: the same arithmetic as :func:`_pack_numpy` and :func:`_unpack_numpy`."""
    slots = packing.slots
    fields = ", ".join(f"{slot.carrier.name} f{k}" for k, slot in enumerate(slots))
    pack = []
    for k, slot in enumerate(slots):
        if slot.raw:
            pack.append(f"const unsigned long long u{k} = (unsigned long long)f{k};")
        else:
            pack.append(f"const unsigned long long u{k} = (unsigned long long)((long long)f{k} - ({slot.lo}LL));")
            pack.append(f"if (u{k} >> {slot.bits}) bad[{k}] = 1;")
    for j in range(packing.words):
        terms = [f"(unsigned int)(u{k} >> {shift})" if shift >= 0 else f"(unsigned int)(u{k} << {-shift})"
                 for k, shift in packing.by_word[j]]
        pack.append(f"out[base + {j} * stride + i] = {' | '.join(terms)};")
    unpack = [f"const unsigned long long w{j} = words[base + {j} * stride + i];" for j in range(packing.words)]
    for k, slot in enumerate(slots):
        terms = [f"(w{j} << {shift})" if shift >= 0 else f"(w{j} >> {-shift})"
                 for j, shift in packing.by_slot[k]] or ["0ULL"]
        value = " | ".join(terms)
        if slot.bits < 64:
            value = f"(({value}) & {(1 << slot.bits) - 1}ULL)"
        ctype = _C_TYPES[slot.carrier.name]
        unpack.append(f"f{k} = ({ctype})({value});" if slot.raw else
                      f"f{k} = ({ctype})((long long)({value}) + ({slot.lo}LL));")
    return (x.ElementwiseKernel(f"{fields}, int64 base, int64 stride", "raw uint32 out, raw int32 bad",
                                "\n".join(pack), "gpipe_pack_walkers"),
            x.ElementwiseKernel("raw uint32 words, int64 base, int64 stride", fields, "\n".join(unpack),
                                "gpipe_unpack_walkers"))


class Wire:
    """How a run's walkers travel: each field in as few bits as its values take, chosen as the run starts from its
    sizes (``num_vertices``, walks of ``length`` steps: None, not walks; ``walks`` walks: None, unknown) and its
    family's :class:`~gpipe.runtime.Span` s, the same on every rank; and the packings its walkers took."""

    def __init__(self, num_vertices: int, length: int | None, walks: int | None, spans: tuple = ()):
        self.spans = {"vertex": (0, num_vertices - 1)}
        if walks is not None:  # ids 0..walks-1
            self.spans["walk_id"] = (0, walks - 1)
        if length is not None:
            self.spans["step"] = (0, length)
        for span in spans:
            self.spans[span.name] = (span.lo, num_vertices - 1 if span.hi == VERTEX else span.hi)
        self._packings: dict[tuple, Packing] = {}  # by schema
        self.sent: set[Packing] = set()  # those of the walkers this rank sent

    def packing(self, schema: tuple) -> Packing:
        """The packing of walkers with the fields of ``schema`` (``(name, dtype.str)`` each)."""
        if schema not in self._packings:
            self._packings[schema] = Packing(tuple(Slot.of(name, dtype, self.spans.get(name))
                                                   for name, dtype in schema))
        return self._packings[schema]


def stated(packings: list[Packing]) -> dict | None:
    """What a run's stats say of its walkers on the wire (``stats['wire']``), from the packings its ranks sent: the
    bytes a walker took (the most, where its fields change from superstep to superstep, as sampling's stages do)
    and each field's bits; None where no walker crossed."""
    if not packings:
        return None
    return {"bytes_per_walker": max(4 * p.words for p in packings),
            "bits": {slot.name: slot.bits for p in packings for slot in p.slots}}


@dataclass(frozen=True)
class Header:
    """One rank's header of a superstep (see the module's docstring)."""

    sent: np.ndarray  # int64, one per partition
    moved: np.ndarray  # int64, one per partition
    routed: bool
    schema: tuple[Slot, ...]  # the walkers' fields as they travel, in packing order

    def words(self) -> np.ndarray:
        text = ";".join(f"{s.name}:{s.dtype.str}:{s.lo}:{s.bits}" for s in self.schema).encode("ascii")
        if len(text) > SCHEMA_WORDS * 8:
            raise GpipeError(f"walker fields {text.decode()!r} take more than {SCHEMA_WORDS * 8} bytes to describe")
        schema = np.frombuffer(text.ljust(SCHEMA_WORDS * 8, b"\0"), np.int64)
        return np.concatenate([self.sent, self.moved, [int(self.routed)], schema]).astype(np.int64)

    @classmethod
    def read(cls, words: np.ndarray, parts: int) -> Header:
        text = np.ascontiguousarray(words[2 * parts + 1:], np.int64).tobytes().rstrip(b"\0").decode("ascii")
        fields = (field.split(":") for field in text.split(";")) if text else ()
        schema = tuple(Slot(name, np.dtype(dtype), int(lo), int(bits)) for name, dtype, lo, bits in fields)
        return cls(words[:parts], words[parts:2 * parts], bool(words[2 * parts]), schema)


def aligned(arrays) -> tuple[list[tuple], int]:
    """Where each of ``arrays`` (``(key, dtype, count)``) lies in a payload, one after another, each starting on an
    ``ALIGN``-byte offset: ``[(key, dtype, offset, count)]``, and the payload's bytes (the walkers' payloads here,
    ``_gather``'s pieces and ``_lent``'s lists)."""
    places, size = [], 0
    for key, dtype, count in arrays:
        dtype = np.dtype(dtype)
        places.append((key, dtype, size, count))
        size += -(-count * dtype.itemsize // ALIGN) * ALIGN
    return places, size


def packed(x, places: list[tuple], size: int, arrays: dict):
    """A payload of ``size`` bytes holding each array of ``arrays`` (by key) where :func:`aligned` ``places`` it,
    cast to its dtype as it is copied in (one copy)."""
    payload = x.empty(size, x.uint8)
    for key, dtype, offset, count in places:
        payload[offset:offset + count * dtype.itemsize].view(dtype)[...] = arrays[key]
    return payload


def viewed(payload, places: list[tuple]) -> dict:
    """Each array of a payload laid out as :func:`aligned` ``places`` it, by key (views into the payload)."""
    return {key: payload[offset:offset + count * dtype.itemsize].view(dtype) for key, dtype, offset, count in places}


def pack(x, outbound: dict[int, list[dict]], counts: dict[int, int], packing: Packing, bad):
    """The payload of the walkers of ``outbound`` (part -> walker sets) for the partitions of ``counts`` (part ->
    walkers, > 0: those of one rank), packed by ``packing`` (``bad``: see :meth:`Packing.pack`)."""
    places, size = packing.places(counts)
    payload = x.empty(size, x.uint8)
    words = payload.view(x.uint32)
    for part, base, count in places:
        first = 0
        for walkers in outbound[part]:
            n = _count(walkers)
            if n:
                packing.pack(x, [walkers[slot.name] for slot in packing.slots], words, base + first, count, bad)
            first += n
    return payload


def unpack(payload, header: Header, parts: list[int]) -> dict[int, dict]:
    """The walkers of each of ``parts`` in a payload packed as the sender's ``header`` says, each field of its
    dtype."""
    packing = Packing(header.schema)
    places, size = packing.places({p: int(header.moved[p]) for p in parts if header.moved[p]})
    if payload.shape[0] != size:
        raise GpipeError(f"a payload of {payload.shape[0]} bytes arrived where its header said {size}")
    x = xp(device_of(payload))
    words = payload.view(x.uint32)
    return {part: packing.unpack(x, words, base, count, count) for part, base, count in places}


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
            for (name, (lo, hi)), (low, high) in zip(rules.items(), spans):
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
            raise GpipeError(f"worker {peer} cannot be reached while waiting for {what}: {exc!r}")
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

    def exchange(self, superstep: int, words: np.ndarray, payloads: dict, watch: Watch, sizes=None):
        matrix, received, _ = self.start(superstep, words, payloads, watch, sizes)()
        return matrix, received

    def start(self, superstep: int, words: np.ndarray, payloads: dict, watch: Watch, sizes=None):
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
                raise GpipeError(f"could not reach worker {peer} at the end of superstep {superstep}: {cause}")

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

    def exchange(self, superstep: int, words: np.ndarray, payloads: dict, watch: Watch, sizes):
        matrix, received, _ = self.start(superstep, words, payloads, watch, sizes)()
        return matrix, received

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
        self.lending = None  # a ``_lent.Lending`` where the walkers take neighbor lists along
        self.parts = len(placement)
        self.of_rank = [[p for p, w in enumerate(placement) if w == worker] for worker in workers]
        self.watch = Watch(run, [w for r, w in enumerate(workers) if r != self.rank])
        self.sent_bytes = 0

    def everyone(self, yes: bool) -> bool:
        """Whether every rank says yes: a word from each, before the run's first superstep (numbered
        :data:`OPENING` in the comms' mailbox)."""
        self.watch.start()
        matrix, _ = self.transport.exchange(OPENING, np.array([int(yes)], np.int64), {}, self.watch, lambda m: {})
        return bool(matrix.all())

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
            moved[part] = sum(_count(w) for w in sets)
        words = Header(np.asarray(sent, np.int64), moved, routed, packing.slots).words()
        bad = x.zeros(len(packing.slots), x.int32)  # a slot's values that did not fit its bits
        payloads = {r: pack(x, outbound, {p: int(moved[p]) for p in self.of_rank[r] if moved[p]}, packing, bad)
                    for r in range(len(self.workers)) if r != self.rank and any(moved[p] for p in self.of_rank[r])}
        outbound.clear()
        if payloads:
            self.wire.sent.add(packing)
        if payloads and not all(slot.raw for slot in packing.slots):
            wrong = [f"{slot.name} outside [{slot.lo}, {slot.lo + (1 << slot.bits) - 1}] (its {slot.bits} bits)"
                     for slot, flag in zip(packing.slots, to_host(bad)) if flag]
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
        if self._heard is None:
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
            self._heard = ((), {})  # the payloads, as the inboxes hold them
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


def _count(walkers: dict) -> int:
    return int(next(iter(walkers.values())).shape[0])
