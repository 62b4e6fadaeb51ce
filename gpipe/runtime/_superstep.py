"""One superstep of a partitioned run on a worker: its partitions' walkers advanced, their leavers routed to the
partitions they go to (an inbox here, or held for a peer), and the exchange that ends it (``_exchange``), whole or
in chunks whose exchanges overlap the next chunk's kernel. ``_advance.run_partitions`` loops over them.

A task's failure here is a :class:`TaskError` naming the phase, the superstep and the partition (:func:`failing`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ..backend import to_host, xp
from ..errors import GpipeError, TaskError
from ._packing import walker_count
from ._run import Run
from ._spec import Grouped, RunSpec, StartSet, StepSpec
from ._store import store


@contextlib.contextmanager
def failing(name: str, part: int, superstep: int | None = None, unit: str = "partition") -> Iterator[None]:
    """Turn a failure into a :class:`TaskError` naming the phase, the superstep and the partition (or other unit)."""
    try:
        yield
    except TaskError:
        raise
    except Exception as exc:
        cause = str(exc) if isinstance(exc, GpipeError) else repr(exc)
        # the failed step's frames let go of their arrays now: a traceback that outlives the run (in a log, in a
        # reference cycle only the garbage collector breaks) would keep their device memory from the next runs
        traceback.clear_frames(exc.__traceback__)
        raise TaskError(name, part, superstep, cause, unit) from exc


def phase(name: str, unit: str = "partition"):
    def wrap(task):
        @functools.wraps(task)
        def run(*args, part: int, superstep: int | None = None, **kwargs):
            with failing(name, part, superstep, unit):
                return task(*args, part=part, superstep=superstep, **kwargs)
        return run
    return wrap


def worker_xp() -> ModuleType:
    """numpy or cupy: the array module of the device this worker computes on."""
    return xp(store().device)


def worker_device() -> str:
    """The device of the worker running this task; 'cpu' outside a worker (a task run in the client's process)."""
    try:
        return store().device
    except GpipeError:
        return "cpu"


@dataclass
class _Superstep:
    """What one superstep did on a worker: the next superstep's walker count per partition, the steps taken, its
    kernels' seconds, the outputs' bytes spilled, the batches, the walkers that crossed to another partition, the
    partitions that ran, and the seconds this worker waited on its exchange, and those of its exchange's time on
    the wire that passed while a kernel ran (:class:`~._exchange.Round`)."""

    counts: np.ndarray
    steps: Any = 0  # an int, or a count on the device (a whole-graph step's)
    seconds: float = 0.0
    spilled: int = 0
    batches: int = 0
    crossed: int = 0
    ran: set = field(default_factory=set)
    exchange_seconds: float = 0.0
    hidden_seconds: float = 0.0

    def add(self, part: int, summary: dict) -> None:
        """Count in what :func:`_advance_partition` did on ``part``."""
        self.spilled += summary["spilled"]
        self.batches += summary["batches"]
        self.steps += summary["steps"]
        self.crossed += summary["crossed"]
        self.seconds += summary["seconds"]
        self.ran.add(part)


def at_once(spec: RunSpec, run: Run, exchange, initial: dict, *, mine: list[int], span, counts: np.ndarray,
            superstep: int) -> _Superstep:
    """Advance this worker's partitions' walkers (joined in ``span``, or each, draining what crosses between them
    where the walkers are order-free), then end the superstep with one exchange."""
    residency = store().partitions.residency
    sent = np.zeros(len(spec.placement), np.int64)
    done = _Superstep(sent)
    if span is not None:
        advanced = _pass_span(spec, run, initial, span, counts[mine].sum(), superstep)
    else:
        order = _order(counts, mine, set(residency.resident_parts(spec.graph_id)), spec.policy)
        advanced = _pass(spec, run, initial, order, counts, superstep)
    if spec.step.order_free and not residency.manages((spec.graph_id, mine[0])):  # all on the device
        advanced = itertools.chain(advanced, _drain(spec, run, mine, superstep, span))
    for p, taken, summary in advanced:
        for q, n in taken.items():
            sent[q] -= n
        sent += summary["to"]
        done.add(p, summary)
    t0 = time.perf_counter()
    with failing("exchange", store().worker_address, superstep, "worker"):
        done.counts = exchange.end_superstep(superstep, sent, run.take_outbound(), run.routed)
    done.exchange_seconds = time.perf_counter() - t0
    return done


# A superstep of a run whose workers each hold one partition is taken in up to this many chunks of at least this
# many walkers a worker (``gpipe.exchange-chunks: auto``): each chunk's leavers are on their way while the next
# chunk's kernel runs.
AUTO_CHUNKS, CHUNK_WALKERS = 4, 1 << 20


def chunkable(spec: RunSpec, workers: list[str]) -> bool:
    """Whether the run's supersteps may be taken in chunks (the same on every rank): order-free walkers (a chunk's
    do not depend on another's) taking no lists along, on several workers holding one partition each."""
    return (spec.chunks != 1 and spec.step.order_free and spec.step.lends is None and len(workers) > 1
            and len(spec.placement) == len(workers))


def chunk_count(spec: RunSpec, counts: np.ndarray, ranks: int) -> int:
    """How many chunks this superstep is taken in, from the walker counts every rank has."""
    if spec.chunks == "auto":
        return int(max(1, min(AUTO_CHUNKS, counts.sum() // (CHUNK_WALKERS * ranks))))
    return int(spec.chunks)


def in_chunks(spec: RunSpec, run: Run, exchange, initial: dict, *, part: int, waiting: int, chunks: int,
              superstep: int) -> _Superstep:
    """Advance partition ``part``'s ``waiting`` walkers in ``chunks`` consecutive slices, each ending in an exchange
    round of its leavers (``Exchange.start``); a round is finished while the next chunk's kernel runs (the step calls
    ``Run.while_kernel`` between its kernel's launch and its wait: on a GPU, the round's send/recv on the
    communicator's stream overlaps the kernel), or after the chunk's step where it does not. Every rank takes as
    many rounds, empty or not. The walkers' order in the inboxes differs from one superstep's exchange; order-free
    walkers do not depend on it."""
    done = _Superstep(np.zeros(len(spec.placement), np.int64))
    walkers, size = {}, 0
    if waiting:
        with failing("advance", part, superstep):
            walkers = _arrivals(spec, run, store().partitions.get(spec.graph_id, part), initial.pop(part, None),
                                part, superstep)
        size = -(-walker_count(walkers) // chunks)
    me = store().worker_address
    pending = None
    for i in range(chunks):
        chunk = {k: v[i * size:(i + 1) * size] for k, v in walkers.items()}
        to = np.zeros(len(spec.placement), np.int64)
        if chunk and walker_count(chunk):
            if pending is not None:
                run.overlap(pending.wait)
            with failing("advance", part, superstep):
                summary = _advance_partition(spec, run, chunk, part, superstep)
            if pending is not None and run.overlap(None):  # its wait, in the step's seconds, was the exchange's
                summary["seconds"] -= pending.waiting
            done.add(part, summary)
            to = summary["to"]
        with failing("exchange", me, superstep, "worker"):
            if pending is not None:
                done.counts += _finished(pending, done)
            pending = exchange.start(superstep, to, run.take_outbound(), run.routed, chunk=i)
    with failing("exchange", me, superstep, "worker"):
        done.counts += _finished(pending, done)
    return done


def _finished(pending, done: _Superstep) -> np.ndarray:
    """A chunk's exchange round finished (at once where the step did it), its seconds counted in ``done``."""
    counts = pending.finish()
    done.exchange_seconds += pending.waited
    done.hidden_seconds += pending.hidden
    return counts


def _pass(spec: RunSpec, run: Run, initial: dict, order: list[int], counts: np.ndarray, superstep: int):
    """Advance the superstep's walkers of each partition in ``order``: yields it, ``{}`` (none of its walkers was
    counted as sent by this superstep) and the summary of :func:`_advance_partition`.

    An out-of-memory partition off the device that few walkers wait for is
    read in place; the next partition to copy in is prefetched.
    """
    residency = store().partitions.residency
    in_place = {p for p in order if residency.in_place((spec.graph_id, p), counts[p], spec.in_place_below)}
    for i, p in enumerate(order):
        following = next((q for q in order[i + 1:] if q not in in_place), None)  # to prefetch
        with failing("advance", p, superstep):
            summary = _advance_partition(spec, run, initial.pop(p, None), p, superstep, following, p in in_place)
        yield p, {}, summary


def _pass_span(spec: RunSpec, run: Run, initial: dict, span, waiting: int, superstep: int):
    """Advance the superstep's walkers of this worker's partitions joined in ``span`` (``waiting`` of them) at once,
    as one partition (see ``Partitions.span``): yields the first, ``{}`` and the summary of :func:`_advance_partition`.
    Their first walkers are of one kind (as many from each vertex, or one :class:`StartSet`), made over the span."""
    if waiting == 0:
        return
    first = [initial.pop(q) for q in span.parts if q in initial]
    with failing("advance", span.part, superstep):
        summary = _advance_partition(spec, run, first[0] if first else None, span.part, superstep, span=span)
    yield span.part, {}, summary


def _drain(spec: RunSpec, run: Run, mine: list[int], superstep: int, span=None):
    """Advance the walkers this worker's partitions (or its ``span``) sent to one another, or stopped in them to
    go on, until none is left.

    Only for order-free walkers (walks), which do not depend on one another, on a worker
    whose partitions are all on its device: a walker crossing between them goes
    on in this superstep instead of waiting for the next (on one worker, a walk
    then takes one superstep). Walkers from peers wait for the next superstep,
    as the peers' counts say. (Out of memory, draining the resident partitions
    saved transfers but cost more in small kernel calls: R-MAT 24 DeepWalk with
    2 of 4 partitions resident went from 3.3 to 4.7 s; so did partitions on the
    device, each advanced on its own, until they were joined in a span.) Yields
    the partition advanced (a span's first), how many walkers it took from each
    partition's inbox, and the summary of :func:`_advance_partition`.
    """
    x = worker_xp()
    units = [span.parts] if span is not None else [[q] for q in mine]
    while True:
        ready = [u for u in units if any(run.local_waiting(superstep + 1, q) for q in u)]
        if not ready:
            return
        for unit in ready:
            arrived = {q: run.take_local(superstep + 1, q) for q in unit}
            taken = {q: sum(int(w["walk_id"].shape[0]) for w in sets) for q, sets in arrived.items()}
            sets = [w for q in unit for w in arrived[q]]
            walkers = sets[0] if len(sets) == 1 else {k: x.concatenate([w[k] for w in sets]) for k in sets[0]}
            with failing("advance", unit[0], superstep):
                summary = _advance_partition(spec, run, walkers, unit[0], superstep, span=span)
            yield unit[0], taken, summary


def _order(counts: np.ndarray, mine: list[int], resident: set[int], policy: str) -> list[int]:
    """This worker's partitions with walkers, in the order it advances them.

    ``workload``: the partitions already on the device first, then the
    busiest; ``round-robin``: in partition order. (Only out-of-memory graphs
    have partitions off the device; the next in order is prefetched.)
    """
    active = [p for p in mine if counts[p] > 0]
    if policy == "workload":
        active.sort(key=lambda p: (p not in resident, -int(counts[p]), p))
    return active


def _advance_partition(spec: RunSpec, run: Run, walkers: dict | int | StartSet | None, part: int, superstep: int,
                       prefetch: int | None = None, in_place: bool = False, *, span=None) -> dict:
    """Run the step on partition ``part``'s walkers; keep the pieces, push the leavers to their new partitions.

    The step returns ``(pieces, movers, steps)``; a mover goes to the partition
    owning its ``vertex``, or to partition ``to`` if the movers have that field.

    ``walkers`` is None when they are in this worker's inbox, on the first
    superstep an int (that many walkers from every vertex of the partition)
    or a :class:`StartSet` (its vertices in the partition), made by
    ``spec.step.start``, or the walkers themselves. With a ``span`` (this worker's
    partitions from ``part`` on, joined), the walkers of all of them advance in it.
    Order-free walkers run in batches whose paths take at most a quarter of
    ``gpipe.memory.output-limit`` (see :func:`batches`): the first superstep
    starts every walker of the partition, and one path buffer for all of them
    (R-MAT 24, 10 walks per vertex, a quarter of the graph: 13.6 GB) beside the
    outputs does not fit an 80 GB GPU.
    Leavers for this worker's partitions go into their inboxes, those for a
    peer's are held for the superstep's exchange. Returns how many walkers
    went to each partition, the steps taken, the kernel's seconds, the bytes of
    outputs spilled, the batches and the walkers that crossed to another partition. ``prefetch`` and
    ``in_place`` steer out-of-memory graphs (see ``Residency``).
    """
    x = worker_xp()
    partitions, step = store().partitions, spec.step
    pending = run.waiting if spec.policy == "workload" else None  # what an out-of-memory graph evicts by
    p = span if span is not None else partitions.get(spec.graph_id, part, pending, in_place)
    if prefetch is not None:  # out of memory: copy the worker's next partition in while this one computes
        partitions.prefetch(spec.graph_id, prefetch, part, pending)
    walkers = _arrivals(spec, run, p, walkers, part, superstep, span)
    seconds, steps, spilled, moved = 0.0, 0, 0, []
    routed = step.routed_room is not None and not p.whole  # (a dynamic graph's snapshot has no routed room)
    for batch in batches(walkers, step, p.indices.dtype.itemsize, store().outputs.limit(spec.output_limit), routed):
        t0 = time.perf_counter()
        pieces, movers, taken = step.step(p, batch, step, run)  # synchronous: it counts its movers on the host
        seconds += time.perf_counter() - t0
        spilled += run.add_pieces(part, pieces, spec.output_limit)
        steps += taken
        moved.append(movers)
    counts = np.zeros(len(p.bounds) - 1, np.int64)
    inside = (p.bounds[:-1] >= p.lo) & (p.bounds[1:] <= p.hi)  # the partitions of p (a span's, or its own)
    here = store().worker_address
    for q, walkers, routed in _routes(x, moved, p.bounds):
        counts[q] += walker_count(walkers)  # type: ignore[arg-type]
        if spec.placement[q] == here:
            run.deliver(superstep + 1, q, walkers, local=True)  # type: ignore[arg-type]
        else:
            run.hold(q, walkers, routed)  # type: ignore[arg-type]
    return {"to": counts, "steps": steps, "seconds": seconds, "spilled": spilled, "batches": len(moved),
            "crossed": int(counts[~inside].sum())}


def _routes(x, moved: list, bounds: np.ndarray):
    """Each destination partition of the movers of a step's batches, its movers and whether they go by their ``to``
    field (sampling entries) rather than by the partition owning their ``vertex``: as a :class:`Grouped` step
    grouped them, else grouped here (the batches' movers joined first)."""
    grouped = [m for m in moved if isinstance(m, Grouped)]
    for movers in grouped:
        for q, walkers in movers.by_part.items():
            yield q, walkers, False
    plain = [m for m in moved if not isinstance(m, Grouped)]
    if not plain:
        return
    movers = plain[0] if len(plain) == 1 else {k: x.concatenate([m[k] for m in plain]) for k in plain[0]}  # type: ignore[assignment]
    routed = "to" in movers  # type: ignore[operator]  # to partition ``to``, not to the owner of ``vertex``
    dest = movers.pop("to") if routed else x.searchsorted(x.asarray(bounds[1:-1]), movers["vertex"], side="right")  # type: ignore[attr-defined, index]
    counts = to_host(x.bincount(dest, minlength=len(bounds) - 1)).astype(np.int64)
    for q, walkers in _by_destination(x, movers, dest, counts):  # type: ignore[arg-type]
        yield q, walkers, routed


def _arrivals(spec: RunSpec, run: Run, p, walkers: dict | int | StartSet | None, part: int, superstep: int,
              span=None) -> dict:
    """The walkers partition ``p`` (number ``part``, or the ``span`` it starts) advances in ``superstep``, on this
    worker's device: those in its inbox where ``walkers`` is None, those ``spec.step.start`` makes from an int or
    a :class:`StartSet`, or ``walkers`` themselves (see :func:`_advance_partition`)."""
    x = worker_xp()
    if walkers is None:
        arrived = [w for q in (span.parts if span is not None else [part]) for w in run.take_inbox(superstep, q)]
        walkers = arrived[0] if len(arrived) == 1 else {k: x.concatenate([x.asarray(w[k]) for w in arrived])
                                                        for k in arrived[0]}
    elif isinstance(walkers, (int, StartSet)):
        walkers = spec.step.start(x, spec.step, p.lo, p.hi, int(p.bounds[-1]), walkers)
    return {k: x.asarray(v) for k, v in walkers.items()}  # type: ignore[union-attr]


def _by_destination(x, movers: dict, dest, counts: np.ndarray):
    """Each destination partition with movers, and its movers in the order they came: all of them as they are
    where they all go to one (a partition's leavers, on a graph of two partitions), else sorted by a stable sort
    of the destinations in the smallest integer type that holds them (fewer radix passes than int64's eight)."""
    going = np.flatnonzero(counts)
    if len(going) == 1:
        yield int(going[0]), movers
        return
    order = x.argsort(dest.astype(np.min_scalar_type(len(counts) - 1)), kind="stable")
    ends = np.cumsum(counts)
    for q in going:
        yield int(q), {k: v[order[int(ends[q] - counts[q]):int(ends[q])]] for k, v in movers.items()}


def batches(walkers: dict, step: StepSpec, itemsize: int, limit: int | None, routed: bool = False):
    """``walkers`` in consecutive batches whose paths (each walker's room, of ``itemsize`` bytes a vertex; its
    ``routed_room`` where it is ``routed``: on a partition not whole) take at most a quarter of ``limit`` bytes:
    all at once where there is no limit, no length, or walkers depend on each other. Each walker's random stream is
    its own, so the paths do not depend on the batches."""
    count = next(iter(walkers.values())).shape[0]
    if limit is None or step.length is None or not step.order_free or count == 0:
        yield walkers
        return
    most = step.routed_room if routed else step.room
    room = step.length + 1 if most is None else min(step.length + 1, most)
    size = max(1, limit // 4 // (room * itemsize))
    for lo in range(0, count, size):
        yield {k: v[lo:lo + size] for k, v in walkers.items()}
