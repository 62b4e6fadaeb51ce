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
import time
from collections.abc import Callable

import numpy as np

from ..backend import to_device, xp
from . import _exchange, _gather, _lent, _pieces, _superstep
from ._kept import block_key, keep_here
from ._run import Run
from ._spec import OutputBlocks, RunSpec, StartSet, StepSpec
from ._store import store
from ._superstep import failing, phase, worker_xp


def step_kernel(fill=None, *, writes: tuple[str, ...] | None = None, ends: bool = False) -> Callable:
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
    superstep to cross between them (see ``_superstep._drain``). Where every worker holds one partition, order-free
    walkers' supersteps are taken in chunks (``spec.chunks``), each chunk's leavers sent while the next chunk's
    kernel runs (see ``_superstep.in_chunks``).

    ``initial`` holds this worker's partitions' first walkers (see ``_superstep._advance_partition``); ``spec``
    says how to run them (see :class:`RunSpec`; ``spec.policy`` orders the partitions, see ``_superstep._order``).
    Returns the steps taken (and in each superstep), each superstep's kernel seconds, the walkers that crossed to
    another partition, the bytes of outputs spilled to host memory, the batches the walkers ran in, the bytes of
    walkers sent to peers, the seconds this worker waited on its exchanges and those of their time on the wire
    that passed while its kernels ran, the peak memory seen at the superstep ends, the partitions that ran, and
    the seconds before the first superstep
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
        run.here = to_device(np.array([w == me for w in placement], np.int8), st.device)
        rows = None
        if spec.blocks is not None and spec.step.rows is not None:
            with failing("advance", mine[0], 0):  # the partition may be gone (a released snapshot's)
                written = st.partitions.as_held(spec.graph_id, mine[0]).indices.dtype
            rows = _keep_rows(spec, run, len(workers), workers.index(me), written, exchange)
        superstep = steps = spilled = batches = crossings = 0
        seconds, stepped, ran = [], [], set()
        exchanging = hidden = 0.0
        opening = time.perf_counter() - started
        chunking = _superstep.chunkable(spec, workers)  # the same on every rank
        while counts.sum() > 0:
            chunks = _superstep.chunk_count(spec, counts, len(workers)) if chunking else 1
            if chunks > 1:
                done = _superstep.in_chunks(spec, run, exchange, initial, part=mine[0], waiting=int(counts[mine[0]]),
                                            chunks=chunks, superstep=superstep)
            else:
                done = _superstep.at_once(spec, run, exchange, initial, mine=mine, span=span, counts=counts,
                                          superstep=superstep)
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
    gathered = _gather.gather(run, exchange, spec.blocks, part, superstep + merged["rounds"], spec.output_limit)  # type: ignore[arg-type]
    return {k: merged[k] + gathered[k] for k in ("sent", "spilled", "seconds")}


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
        transport: _exchange.NcclTransport | _exchange.CommsTransport = _exchange.NcclTransport(communicator, workers,
                                                                                                rank)
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


@phase("advance", unit="replica")
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
    walkers = {k: x.asarray(v) for k, v in walkers.items()}  # type: ignore[union-attr]
    steps = supersteps = spilled = batches = 0
    seconds = 0.0
    with st.going(spec.run_id).loop() as run:
        if spec.blocks is not None and step.rows is not None:  # one replica (see run_supersteps' blocks)
            _keep_rows(spec, run, 1, 0, p.indices.dtype)
        for batch in _superstep.batches(walkers, step, p.indices.dtype.itemsize, st.outputs.limit(spec.output_limit)):
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


@phase("assemble", unit="output block")
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


@phase("assemble", unit="output block")
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
