"""How walkers travel between workers: packed, each in whole uint32 words, its fields one after another in their
bits, each in as few bits as its values take (its value less the lowest it may hold, in the bits the span of its
values needs), and the header that says how.

The widths are chosen as the run starts (:class:`Wire`), the same on every rank: ``walk_id`` in the bits of the
run's walks, ``vertex`` (and any field a family spans up to :data:`~gpipe.runtime.VERTEX`) in those of the graph's
vertices, ``step`` in those of the walks' length, a family's own fields in those of its
:class:`~gpipe.runtime.Span` s (``StepSpec.spans``); a field of unknown values (no span, or a float) travels at its
dtype's full width, its bits as they are: never cut; a field whose span is one value travels in no bits (it is not
read, and arrives holding that value: a walk's carried sector, which stays on its worker). DeepWalk on R-MAT 24 with 10 walks a vertex of 80 steps: 28 +
24 + 7 bits, 8 bytes a walker (``stats['wire']``, :func:`stated`). A partition's walkers lie word-major (word 0 of
each, then word 1, ...), partitions in ascending order, each starting on an ``ALIGN``-byte offset; the payload is
bytes, which either transport of ``_exchange`` carries as they are. The sender packs in one pass (a CuPy kernel
written for the packing on GPU workers, the same arithmetic in numpy on CPU ones) and stops the run where a value
does not fit its bits; the receiver unpacks each field to the dtype it left with, from the :class:`Header` alone.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..backend import device_of, xp
from ..errors import GpipeError
from ._spec import VERTEX

ALIGN = 16  # bytes: every array of a payload starts on such an offset
WORD_BITS = 32  # a walker travels as whole uint32 words
CHUNK = 1 << 16  # walkers packed or unpacked at a time on the CPU: the passes over their values stay in its caches
SCHEMA_WORDS = 32  # int64 words of a header holding the walkers' fields (256 ASCII bytes)
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
            for j in range(offset // WORD_BITS, -(-(offset + slot.bits) // WORD_BITS) if slot.bits else 0):
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
        at ``base + j * stride + i``; ``bad[k]`` set where slot k's values do not fit its bits. A slot of no bits
        (its span one value) is not read: every walker arrives holding that value."""
        fields = [field.view(slot.carrier) if slot.bits else None
                  for field, slot in zip(fields, self.slots, strict=True)]
        if self.words == 0:  # every field of no bits: nothing to write
            return
        if x is np:
            _pack_numpy(self, fields, words, base, stride, bad)
        else:
            _kernels(x, self)[0](*(field for field in fields if field is not None), base, stride, words, bad)

    def unpack(self, x, words, base: int, stride: int, count: int) -> dict:
        """The fields of ``count`` walkers packed by :meth:`pack`, by name, each of its dtype."""
        if x is np:
            fields = _unpack_numpy(self, words, base, stride, count)
        else:
            fields = [x.empty(count, slot.carrier) for slot in self.slots]
            _kernels(x, self)[1](words, base, stride, *fields)
        return {slot.name: field.view(slot.dtype) for slot, field in zip(self.slots, fields, strict=True)}


def _pack_numpy(packing: Packing, fields: list, words: np.ndarray, base: int, stride: int, bad: np.ndarray) -> None:
    """:meth:`Packing.pack` on the CPU: the kernel of :func:`_kernels` in numpy, the same bits, :data:`CHUNK`
    walkers at a time."""
    count = next(field for field in fields if field is not None).shape[0]
    for start in range(0, count, CHUNK):
        end = min(count, start + CHUNK)
        values: list = []
        for k, (field, slot) in enumerate(zip(fields, packing.slots, strict=True)):
            if field is None:  # no bits: not read
                values.append(None)
                continue
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
        for field, slot, cuts in zip(fields, packing.slots, packing.by_slot, strict=True):
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
    read = ", ".join(f"{slot.carrier.name} f{k}" for k, slot in enumerate(slots) if slot.bits)  # what pack reads
    pack = []
    for k, slot in enumerate(slots):
        if not slot.bits:
            continue
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
    return (x.ElementwiseKernel(f"{read}, int64 base, int64 stride", "raw uint32 out, raw int32 bad",
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
            n = walker_count(walkers)
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


def walker_count(walkers: dict) -> int:
    """How many walkers a set holds (every field has as many)."""
    return int(next(iter(walkers.values())).shape[0])
