"""Worker-side tasks of a run: the superstep loops (with the walker exchange), assembly and collection.

Each takes the run's :class:`RunSpec` and works on the worker's :class:`Run`,
and wraps its failure in a :class:`TaskError` naming the phase, the superstep
and the partition. Walkers are dicts of arrays on the worker's device
(``walk_id`` int64, ``vertex`` int64, ``step`` int32, plus whatever a family
keeps, e.g. a walk's ``prev``).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from ..backend import to_device, to_host, xp
from ..errors import GpipeError, TaskError
from . import _exchange, _gather, _lent, _pieces
from ._kept import block_key, keep_here
from ._run import Run
from ._spec import Grouped, OutputBlocks, RunSpec, StartSet, StepSpec
from ._store import store


@contextlib.contextmanager
def failing(name: str, part: int, superstep: int | None = None, unit: str = "partition"):
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


def _phase(name: str, unit: str = "partition"):
    def wrap(task):
        @functools.wraps(task)
        def run(*args, part: int, superstep: int | None = None, **kwargs):
            with failing(name, part, superstep, unit):
                return task(*args, part=part, superstep=superstep, **kwargs)
        return run
    return wrap


def worker_xp():
    """numpy or cupy: the array module of the device this worker computes on."""
    return xp(store().device)


def worker_device() -> str:
    """The device of the worker running this task; 'cpu' outside a worker (a task run in the client's process)."""
    try:
        return store().device
    except GpipeError:
        return "cpu"


def step_kernel(fill=None, *, writes: tuple[str, ...] | None = None, ends: bool = False):
    """Make a runtime step function from a kernel that fills per-walker outputs.

    ``fill(x, partition, walkers, spec, out)`` gets room for the steps each
    walker may take in this superstep (every step it has left, at most
    ``spec.room``): ``out['offset']`` into ``out['flat']``. It writes each
    walker's vertices there, starting with the walk's vertex at the walker's
    current step, the count in ``out['length']``, the new value of each walker
    field it changes in ``out[field]`` (which starts as a copy), and
    ``out['moved']`` = 1 for a walker to be
    delivered to the partition owning its new ``vertex`` (which may be this
    one), 0 for one whose walk has ended. ``fill(..., run)`` also gets the
    run's state on this worker (e.g. a walk's borrowed lists, ``walks/_borrowed.py``).
    ``@step_kernel(writes=fields)``: the kernel writes those fields for every
    walker, so ``out`` has room for them alone (no copy), the others leave as
    they came. ``ends=True``: every walker's walk ends in the call (a graph whole here, which none leaves), so
    none moves on and ``out['moved']`` is not read: the step waits for the kernel, and brings no count to the
    host. The steps taken are counted on the device (no wait for them here).
    Where the run keeps the rows of every walk's block here (``Run.rows`` of
    its only worker), ``out['flat']`` is those rows and each walker's room its
    walk's row from its step on: the kernel writes the output in place, and
    the step leaves no pieces.
    """
    if fill is None:
        return functools.partial(step_kernel, writes=writes, ends=ends)

    @functools.wraps(fill)
    def advance(part, walkers: dict, spec: StepSpec, run: Run):
        x = worker_xp()
        n = walkers["walk_id"].shape[0]
        rows = run.rows  # in place where every walk's row is here, of the ids the kernel writes
        if rows is not None and (rows.ranks != 1 or rows.array.dtype != part.indices.dtype):
            rows = None
        if rows is None:
            offset, total = _pieces.regions(x, walkers["step"], spec.length, spec.room)
            flat = x.empty(total, part.indices.dtype)
        else:  # every walk's row is here: written in place
            offset = rows.row(walkers["walk_id"]) * rows.blocks.width + walkers["step"]
            flat = rows.array.reshape(-1)
        if writes is None:
            out = {k: v.copy() for k, v in walkers.items()}
        else:
            out = {k: x.empty_like(walkers[k]) for k in writes}
        out.update(offset=offset, flat=flat, length=x.empty(n, x.int32), moved=x.empty(n, x.int8))
        fill(x, part, walkers, spec, out, run)
        pieces = None if rows is not None else _pieces.compact(
            {"walk_id": walkers["walk_id"], "start": walkers["step"], "length": out["length"], "offset": offset,
             "flat": flat})
        steps = (out["step"] - walkers["step"]).sum(dtype=x.int64)  # on the device: summed once the run ends
        if ends:  # waited for (what the step's seconds time), with no count to bring
            if x is not np:
                x.cuda.get_current_stream().synchronize()
            return pieces, {k: v[:0] for k, v in walkers.items()}, steps
        moved = x.flatnonzero(out["moved"])  # one count to the host, not one a field
        changed = {k: out.get(k, walkers[k]) for k in walkers}
        movers = {k: v if moved.shape[0] == n else v[moved] for k, v in changed.items()}
        return pieces, movers, steps

    return advance


def neighbor_lists(graph: tuple[str, list[str]], bounds: np.ndarray, vertices) -> tuple:
    """For a step function: the out-neighbors of ``vertices`` (sorted, unique, of any partitions of ``graph``, its
    id and placement) as a CSR ``(indptr, indices)`` on this worker's device, fetched from the workers holding them."""
    graph_id, placement = graph
    return store().peers.neighbor_lists(graph_id, placement, bounds, vertices)


def run_partitions(spec: RunSpec, initial: dict, counts: np.ndarray) -> dict:
    """Partitioned mode: run this worker's partitions' supersteps until no walker is left anywhere.

    It runs on every worker holding partitions, for the whole run (a BSP loop
    with no client or scheduler in it; see ``call_workers``). In each superstep
    the worker advances each of its partitions that has walkers (``counts`` of
    them, over the whole graph); walkers leaving for a partition of this worker
    wait in its inbox, those for a peer's are held. At the superstep's end the
    exchange (see ``_exchange``) sends every peer this worker's walker counts
    and the walkers held for it, and puts theirs in the inboxes: the sum of the
    counts is the next superstep's ``counts``, the same on every worker. The run
    ends when it is zero everywhere. Order-free walkers (``spec.step.order_free``)
    on a worker whose partitions are all on its device do not wait for the next
    superstep to cross between them (see :func:`_drain`). Where every worker holds one partition, order-free
    walkers' supersteps are taken in chunks (``spec.chunks``), each chunk's leavers sent while the next chunk's
    kernel runs (see :func:`_in_chunks`).

    ``initial`` holds this worker's partitions' first walkers (see
    :func:`_advance_partition`); ``spec`` says how to run them (see
    :class:`RunSpec`; ``spec.policy`` orders the partitions, see
    :func:`_order`). Returns the steps taken (and in each superstep), each superstep's kernel seconds, the walkers
    that crossed to another partition, the bytes of outputs spilled to host memory, the batches the walkers ran
    in, the bytes of walkers sent to peers, the seconds this worker waited on its exchanges and those of their time
    on the wire that passed while its kernels ran, the peak memory seen at the superstep ends, the partitions that ran, and the seconds before the first superstep
    (the prelude, the exchange's communicator, the rows' room) and in all.
    """
    started = time.perf_counter()
    st = store()
    if spec.prelude is not None:
        function, args = spec.prelude
        function(*args)
    me = st.worker_address
    placement = spec.placement
    mine = [p for p, w in enumerate(placement) if w == me]
    workers = sorted(set(placement))
    memory = _Peaks(st.device)
    # order-free walkers on several partitions here, all on the device: walked as one, crossing freely between them
    span = st.partitions.span(spec.graph_id, mine) if spec.step.order_free and len(mine) > 1 else None
    with st.going(spec.run_id).loop() as run, _exchange_of(spec, run, workers) as exchange:
        rows = None
        if spec.blocks is not None and spec.step.rows is not None:
            with failing("advance", mine[0], 0):  # the partition may be gone (a released snapshot's)
                written = st.partitions.as_held(spec.graph_id, mine[0]).indices.dtype
            rows = _keep_rows(spec, run, len(workers), workers.index(me), written, exchange)
        superstep = steps = spilled = batches = crossings = 0
        seconds, stepped, ran = [], [], set()
        exchanging = hidden = 0.0
        opening = time.perf_counter() - started
        chunking = _chunkable(spec, workers)  # the same on every rank
        while counts.sum() > 0:
            chunks = _chunks(spec, counts, len(workers)) if chunking else 1
            if chunks > 1:
                done = _in_chunks(spec, run, exchange, initial, mine[0], int(counts[mine[0]]), chunks, superstep)
            else:
                done = _superstep(spec, run, exchange, initial, mine, span, counts, superstep)
            counts = done.counts
            spilled += done.spilled
            batches += done.batches
            crossings += done.crossed
            steps += done.steps
            seconds.append(done.seconds)
            stepped.append(done.steps)  # on the device where a whole-graph step counted there: read as the run ends
            ran |= done.ran
            exchanging += done.exchange_seconds
            hidden += done.hidden_seconds
            memory.see()
            superstep += 1
            if spec.report:
                st.worker.log_event(f"gpipe-progress-{spec.run_id}", {"worker": me, "superstep": superstep,
                                                                    "steps": int(steps), "active": int(counts.sum())})
        gathered = None
        if spec.blocks is not None:  # every piece of the blocks this worker makes, kept with its first partition
            with failing("gather", me, superstep, "worker"):
                gathered = run.keep_with(mine[0]) if len(workers) == 1 else _ends(spec, run, exchange, mine[0],
                                                                                 superstep)
            spilled += gathered["spilled"]
            ran = {mine[0]}
            memory.see()
        sent_bytes = exchange.sent_bytes
        lent_bytes = 0 if exchange.lending is None else exchange.lending.sent_bytes
    return {"steps": int(steps), "seconds": seconds, "superstep_steps": [int(n) for n in stepped],
            "crossings": crossings, "spilled": spilled, "batches": batches, "sent_bytes": sent_bytes,
            "lent_bytes": lent_bytes, "wire": list(exchange.wire.sent),
            "exchange_seconds": exchanging, "exchange_hidden_seconds": hidden, "ran": sorted(ran),
            "outputs": _summaries(spec, ran),
            "gathered": gathered, "rows": rows, **memory.peaks(), "opening_seconds": opening,
            "worker_seconds": time.perf_counter() - started}


def _ends(spec: RunSpec, run: Run, exchange, part: int, superstep: int) -> dict:
    """The end of a walk-shaped run on several workers: the rows of every walk merged into each worker's blocks
    where its steps wrote them all (``_gather.merge_rows``), then the pieces sent to the workers making their blocks
    (``_gather.gather``: none where every step wrote in place). Both sides' bytes, spills and seconds."""
    merged = {"sent": 0, "spilled": 0, "seconds": 0.0, "rounds": 0}
    if run.rows is not None and run.rows.ranks == 1:
        merged = _gather.merge_rows(run, exchange, spec.blocks, superstep)
    gathered = _gather.gather(run, exchange, spec.blocks, part, superstep + merged["rounds"], spec.output_limit)
    return {k: merged[k] + gathered[k] for k in ("sent", "spilled", "seconds")}


@dataclass
class _Superstep:
    """What one superstep did on a worker: the next superstep's walker count per partition, the steps taken, its
    kernels' seconds, the outputs' bytes spilled, the batches, the walkers that crossed to another partition, the
    partitions that ran, and the seconds this worker waited on its exchange, and those of its exchange's time on
    the wire that passed while a kernel ran (:class:`~._exchange.Round`)."""

    counts: np.ndarray
    steps: object = 0  # an int, or a count on the device (a whole-graph step's)
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


def _superstep(spec: RunSpec, run: Run, exchange, initial: dict, mine: list[int], span, counts: np.ndarray,
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


def _chunkable(spec: RunSpec, workers: list[str]) -> bool:
    """Whether the run's supersteps may be taken in chunks (the same on every rank): order-free walkers (a chunk's
    do not depend on another's) taking no lists along, on several workers holding one partition each."""
    return (spec.chunks != 1 and spec.step.order_free and spec.step.lends is None and len(workers) > 1
            and len(spec.placement) == len(workers))


def _chunks(spec: RunSpec, counts: np.ndarray, ranks: int) -> int:
    """How many chunks this superstep is taken in, from the walker counts every rank has."""
    if spec.chunks == "auto":
        return int(max(1, min(AUTO_CHUNKS, counts.sum() // (CHUNK_WALKERS * ranks))))
    return spec.chunks


def _in_chunks(spec: RunSpec, run: Run, exchange, initial: dict, part: int, waiting: int, chunks: int,
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
        size = -(-next(iter(walkers.values())).shape[0] // chunks)
    me = store().worker_address
    pending = None
    for i in range(chunks):
        chunk = {k: v[i * size:(i + 1) * size] for k, v in walkers.items()}
        to = np.zeros(len(spec.placement), np.int64)
        if chunk and next(iter(chunk.values())).shape[0]:
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


# Up to this many workers, exchanging through these transports, each holds the rows of every walk while a run's
# steps write them (see _keep_rows). Through Dask's comms (about 1 GB/s between two workers of a host) the bytes
# decide, and pieces send fewer: R-MAT 22 x10 through comms between two workers of one H200 gathered its pieces
# in 9.4 s and merged the rows in 15.5 s.
EVERY_ROW_RANKS, EVERY_ROW_EXCHANGES = 4, ("nccl",)


def _keep_rows(spec: RunSpec, run: Run, ranks: int, rank: int, written, exchange=None) -> str | None:
    """Rows for this worker's steps to write to (``StepSpec.rows``), where they fit now (``Outputs.rows_fit``): on
    a run's only worker, its blocks'; on 2 to :data:`EVERY_ROW_RANKS` workers exchanging through NCCL, every
    walk's, where every step writes every vertex in place (with room beside them to copy its own blocks out as
    the run ends, see ``_gather.merge_rows``: R-MAT 24 x10 on 2 H200s, 54 GB of rows within the output limit's
    70, and 27 GB more free); else, for first-order walks (``"home"``), its blocks', written while a walker is
    here; else none: its steps write pieces alone (and where the ids they write, ``written``, are not the
    rows' dtype: a dynamic graph's int64 edge pool under int32 walks). Every walk's rows are kept only where every
    rank has room for them (``exchange.everyone``): a run's end differs with them (``_ends`` merges rows), and
    ranks that decided alone ended one merging rows and the other sending pieces, their collectives mismatched
    (R-MAT 24 x10 on two H200s: damaged walkers in the next run on the same communicator).

    Every walk's rows send each peer a block's cells whole, written here or not: ``ranks - 1`` cells for each
    vertex written here, 4 bytes each (int32 ids), where pieces of 1.3 vertices (R-MAT 24) send about 10 bytes a
    vertex and take four passes to group and scatter: up to 4 workers, about as many bytes and none of the
    passes. Returns which rows it keeps: ``"every walk"``, ``"its blocks"`` or None."""
    st, x = store(), worker_xp()

    def room(more: int = 0):
        def where(nbytes: int):
            return x if nbytes and st.outputs.rows_fit(nbytes, spec.output_limit, more) else None
        return where

    blocks = spec.blocks
    fits = np.dtype(written) == np.dtype(blocks.dtype)
    own = blocks.rows * blocks.width * np.dtype(blocks.dtype).itemsize * len(_pieces.OwnedRows.owned(blocks, ranks,
                                                                                                   rank))
    rows, kept = None, None
    every = 1 < ranks <= EVERY_ROW_RANKS and spec.exchange in EVERY_ROW_EXCHANGES  # the same on every rank
    if fits and (ranks == 1 or every):
        with st.outputs.allotting:  # room seen and taken by one run at a time (two at once both saw it free)
            rows = _pieces.OwnedRows.made(room(own if every else 0), blocks, 1, 0)
        kept = "every walk" if every else "its blocks"
    if every and not exchange.everyone(rows is not None):
        rows = None  # let go: another rank has no room for them
    if fits and rows is None and ranks > 1 and spec.step.rows == "home":
        with st.outputs.allotting:
            rows, kept = _pieces.OwnedRows.made(room(), blocks, ranks, rank), "its blocks"
    if rows is None:
        return None
    run.keep_rows(rows)
    return kept


@contextlib.contextmanager
def _exchange_of(spec: RunSpec, run: Run, workers: list[str]):
    """This worker's end of the run's exchange, on the transport the run was given; a failure while the run
    lasts gives its NCCL communicator up (a peer may be stuck in a collective on it)."""
    st = store()
    rank = workers.index(st.worker_address)
    watch = _exchange.Watch(run, [w for w in workers if w != st.worker_address])
    if spec.exchange == "nccl" and len(workers) > 1:
        key, uid = spec.nccl
        with failing("exchange", st.worker_address, 0, "worker"):
            communicator = st.communicators.get(key, uid, len(workers), rank, watch)
        transport = _exchange.NcclTransport(communicator, workers, rank)
    else:
        transport = _exchange.CommsTransport(run, workers, rank)
    try:
        exchange = _exchange.Exchange(run, transport, workers, spec.placement, spec.bounds, spec.step.length,
                                      st.device, walks=None if spec.blocks is None else spec.blocks.walks,
                                      spans=spec.step.spans)
        if spec.step.lends is not None and len(workers) > 1:
            with failing("exchange", st.worker_address, 0, "worker"):  # the partition may be gone (a snapshot's)
                exchange.lending = _lent.Lending(exchange, spec.graph_id, spec.step.lends)
        yield exchange
    except BaseException:
        transport.close(failed=True)
        raise


class _Peaks:
    """The most memory this worker's process held (host, its resident set) and its device's arrays took (CuPy's pool
    in use: the graph, every run's outputs and walkers), where it was looked at (each superstep's end)."""

    def __init__(self, device: str):
        import psutil

        self._process = psutil.Process()
        self._pool = xp("gpu").get_default_memory_pool() if device == "gpu" else None
        self.host = self.device = 0
        self.see()

    def see(self) -> None:
        self.host = max(self.host, self._process.memory_info().rss)
        if self._pool is not None:
            self.device = max(self.device, self._pool.used_bytes())

    def peaks(self) -> dict:
        return {"host_memory_peak": self.host, "device_memory_peak": self.device if self._pool is not None else None}


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
            walkers = {k: x.concatenate([w[k] for w in sets]) for k in sets[0]}
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
    ``gpipe.memory.output-limit`` (see :func:`_batches`): the first superstep
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
    for batch in _batches(walkers, step, p.indices.dtype.itemsize, store().outputs.limit(spec.output_limit)):
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
        counts[q] += next(iter(walkers.values())).shape[0]
        if spec.placement[q] == here:
            run.deliver(superstep + 1, q, walkers, local=True)
        else:
            run.hold(q, walkers, routed)
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
    movers = plain[0] if len(plain) == 1 else {k: x.concatenate([m[k] for m in plain]) for k in plain[0]}
    routed = "to" in movers  # to partition ``to``, not to the owner of ``vertex``
    dest = movers.pop("to") if routed else x.searchsorted(x.asarray(bounds[1:-1]), movers["vertex"], side="right")
    counts = to_host(x.bincount(dest, minlength=len(bounds) - 1)).astype(np.int64)
    for q, walkers in _by_destination(x, movers, dest, counts):
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
    return {k: x.asarray(v) for k, v in walkers.items()}


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


@_phase("advance", unit="replica")
def advance_local(spec: RunSpec, walkers: dict | tuple | StartSet, *, part: int, superstep=None) -> dict:
    """Replicated mode: advance replica ``part``'s share of the walkers until every one has ended, here.

    The whole graph is partition 0 on this worker, so nothing leaves it: the
    supersteps run back to back with no exchange and no round trip to the
    client. ``walkers`` are the walkers themselves, ``(count, lo, hi)``:
    that many from each vertex of ``lo..hi-1``, or a :class:`StartSet`, made
    by ``spec.step.start``. Walkers that need no other (``order_free``) run
    in batches whose output fits a quarter of ``gpipe.memory.output-limit``
    (see :func:`_batches`), so a share's paths need not fit the device at once.
    With ``spec.blocks`` (the one replica's run), its blocks are made as the run ends and kept in the worker's
    data (``kept``: their keys' bytes and types, for the client to register): no second call to make them.
    """
    x = worker_xp()
    st = store()
    step = spec.step
    p = st.partitions.get(spec.graph_id, 0)
    n = int(p.bounds[-1])
    if isinstance(walkers, tuple):
        count, lo, hi = walkers
        walkers = step.start(x, step, lo, hi, n, count)
    elif isinstance(walkers, StartSet):
        walkers = step.start(x, step, 0, n, n, walkers)
    walkers = {k: x.asarray(v) for k, v in walkers.items()}
    steps = supersteps = spilled = batches = 0
    seconds = 0.0
    with st.going(spec.run_id).loop() as run:
        if spec.blocks is not None and step.rows is not None:  # one replica (see run_supersteps' blocks)
            _keep_rows(spec, run, 1, 0, p.indices.dtype)
        for batch in _batches(walkers, step, p.indices.dtype.itemsize, st.outputs.limit(spec.output_limit)):
            batches += 1
            taken_supersteps = 0
            while next(iter(batch.values())).shape[0]:
                t0 = time.perf_counter()
                pieces, batch, taken = step.step(p, batch, step, run)
                seconds += time.perf_counter() - t0
                spilled += run.add_pieces(part, pieces, spec.output_limit)
                batch.pop("to", None)
                steps += taken
                taken_supersteps += 1
            supersteps = max(supersteps, taken_supersteps)
    summary = {"steps": int(steps), "seconds": seconds, "supersteps": supersteps, "spilled": spilled,
               "batches": batches, "outputs": _summaries(spec, [part]), "kept": None}
    if spec.blocks is not None:
        summary["kept"] = keep_here(assemble_owned, (spec.run_id, part, spec.blocks, 1, 0, spec.output_limit),
                                    [(block_key(spec.run_id, b), b) for b in range(spec.blocks.count)])
    return summary


def _batches(walkers: dict, step: StepSpec, itemsize: int, limit: int | None):
    """``walkers`` in consecutive batches whose paths (each walker's room, of ``itemsize`` bytes a vertex) take at
    most a quarter of ``limit`` bytes: all at once where there is no limit, no length, or walkers depend on each
    other. Each walker's random stream is its own, so the paths do not depend on the batches."""
    count = next(iter(walkers.values())).shape[0]
    if limit is None or step.length is None or not step.order_free or count == 0:
        yield walkers
        return
    room = step.length + 1 if step.room is None else min(step.length + 1, step.room)
    size = max(1, limit // 4 // (room * itemsize))
    for lo in range(0, count, size):
        yield {k: v[lo:lo + size] for k, v in walkers.items()}


@_phase("assemble", unit="output block")
def assemble(run_id: str, partitions: dict[int, str], blocks: OutputBlocks, limit, *, part: int, superstep=None):
    """Block ``part`` of the result, ``(rows, width)``: its pieces taken from every partition that ran; on the
    device, or in host memory once the device holds ``limit`` (``gpipe.memory.output-limit``; see
    ``Outputs.keep_block``)."""
    x = worker_xp()
    base = part * blocks.rows
    rows = min(blocks.rows, blocks.walks - base)
    st = store()
    piece_sets = st.outputs.gather_block(run_id, part, partitions, blocks.rows, blocks.count, blocks.dtype)
    piece_sets = [{k: to_device(v, st.device) for k, v in ps.items()} for ps in piece_sets]
    block = _pieces.scatter(x, _pieces.concat(x, piece_sets, blocks.dtype), base, rows, blocks.width, blocks.dtype)
    return st.outputs.keep_block(block, limit)


@_phase("assemble", unit="output block")
def assemble_owned(run_id: str, held: int, blocks: OutputBlocks, ranks: int, rank: int, limit, *, part: int,
                   superstep=None):
    """Block ``part`` of the result of a run that gathered each block's pieces on the worker making it (``_gather``;
    ``rank`` of ``ranks``), kept with partition ``held``: the first call makes every block of this worker at once
    (``_pieces.owned_blocks``), in the rows its steps wrote to or new ones (where ``Outputs.blocks_module``
    says), later calls take theirs."""
    st = store()

    def made(piece_sets: list, rows: _pieces.OwnedRows | None) -> dict:
        if rows is None:  # the run's steps wrote pieces alone
            rows = _pieces.OwnedRows.made(functools.partial(st.outputs.blocks_module, piece_sets, limit), blocks,
                                          ranks, rank)
        return _pieces.owned_blocks(rows, piece_sets)

    return st.outputs.take_group(run_id, held, part, made, rows=True)


def _summaries(spec: RunSpec, parts) -> dict | None:
    """``spec.summarize`` of the outputs of each of partitions ``parts`` here, by partition; None if not asked."""
    if spec.summarize is None:
        return None
    return {p: spec.summarize(store().outputs.pieces(spec.run_id, p)) for p in parts}


def output_totals(sets: list[dict], rows_of: str, sums: tuple[str, ...]) -> dict[str, int]:
    """The rows of output ``rows_of`` and the totals of ``sums`` in a partition's piece sets."""
    totals = {name: sum(int(s[name].sum()) for s in sets if name in s) for name in sums}
    totals["rows"] = sum(int(s[rows_of].shape[0]) for s in sets if rows_of in s)
    return totals
