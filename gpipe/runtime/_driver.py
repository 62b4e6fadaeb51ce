"""Starting a run: one task per worker, which runs all of the run's supersteps there.

Partitioned mode: every worker holding partitions runs a BSP loop
(:func:`_advance.run_partitions`): it advances its partitions' walkers, pushes
those that left into the inbox of the worker holding their new partition, and
swaps walker counts with its peers as the superstep's barrier, until no walker
is left anywhere; the client only waits (and watches for lost workers).
Replicated mode: each worker runs its share of the walkers on its own copy.
When no walker is left, what the step output stays in the workers' stores,
until the family sums it up (``run_supersteps``' ``summarize``) or assembles it into
blocks (``assemble_blocks``).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import defaultdict
from typing import Any, Callable, NamedTuple

import numpy as np
from dask.utils import format_bytes

from .. import config
from ..backend import unique
from ..errors import GpipeValueError
from . import _advance, _nccl, _packing
from ._kept import announce, block_key, finished, forget, making
from ._spec import OutputBlocks, RunSpec, StartSet, StepSpec
from ._store import drop_run, store, transfers
from ._watch import call_workers

_MEMORY: dict[tuple[str, str], tuple] = {}  # (client, worker) -> GpipeStore.memory(), asked once per cluster


def check_memory(graph, nbytes: int, names: str, what: str) -> None:
    """Refuse a run whose outputs would not fit in its workers' memory, before any work starts.

    ``nbytes`` estimates what the run keeps on the workers (its outputs and
    its walkers), ``names`` the parameters that make it that large. The bound
    is what the workers holding the graph can hold together: each its memory
    limit; a GPU worker its device memory if outputs never spill
    (``gpipe.memory.output-limit`` null), else that limit's worth on the device
    and the rest in host memory. A run refused here could not have finished:
    its worker would have run out of memory and been restarted, taking the
    graph along. One that passes may still run out, the graph taking memory too.
    """
    workers = sorted(set(graph.replicas or graph.placement))
    cluster = graph.client.id  # a later cluster may reuse an address for a worker of another size
    missing = [w for w in workers if (cluster, w) not in _MEMORY]
    if missing:
        held, unit = graph.holders
        asked = call_workers(graph.client, [(w, _memory, (), {}) for w in missing], held, "memory check", unit)
        _MEMORY.update(((cluster, w), memory) for w, memory in zip(missing, asked, strict=True))
    limit = config.get("memory.output-limit")
    room = 0
    for host, device, auto in (_MEMORY[(cluster, w)] for w in workers):
        if device is None:
            room += host
        else:
            spill = auto if limit == "auto" else limit
            room += device if spill is None else host + min(spill, device)
    if nbytes > room:
        raise GpipeValueError(f"{names}: the {what} would take {format_bytes(nbytes)}, more than the workers' "
                              f"{format_bytes(room)} of memory")


def _memory() -> tuple:
    return store().memory()


class Ran(NamedTuple):
    """What :func:`run_supersteps` returns: the run's id, the partitions that ran (with their workers), its
    statistics, and futures of its output blocks where its one worker made them as it ended (else None: made
    from what it left, :func:`assemble_blocks`)."""

    run_id: str
    partitions: dict[int, str]
    stats: dict
    made: list | None


def run_supersteps(graph, spec: StepSpec, initial: int | StartSet | dict, *, num_walks: int,
                   progress: Callable | None = None, summarize: Callable[[list], object] | None = None,
                   blocks: OutputBlocks | None = None) -> Ran:
    """Advance walkers with ``spec`` until none is left; what the step outputs stays in the workers' stores.

    ``initial`` is the number of walkers to start from every vertex or a
    :class:`StartSet` (made on the workers by ``spec.start``), or the walkers themselves (a dict of host
    arrays, each going to the partition owning its ``vertex``, or to partition
    ``to`` where given). Returns the run's id, the partitions that ran (with
    their workers) and statistics; with ``summarize``, ``stats['outputs']``: ``summarize(piece sets)`` of each
    partition that ran (in partition order), made by its worker as its run ends, the outputs staying there.
    With ``blocks`` (a walk-shaped output's), a partitioned run ends by sending its pieces to the workers making
    their blocks (``stats['gathered']``, see ``_gather``; on one worker nothing moves): the partitions returned are
    then one per worker, where its blocks' pieces are, and :func:`assemble_blocks` makes each worker's blocks
    there at once; a replicated graph's run on one replica makes its blocks as it ends (``Ran.made``:
    ``stats['seconds']`` includes making them, ``stats['assemble_seconds']`` is telling the scheduler of them).
    """
    if graph.replicas is not None:
        return _run_replicated(graph, spec, initial, progress, summarize, blocks)
    client = graph.client
    placement = graph.placement
    out_of_memory = graph.device_partitions is not None
    policy = config.get("memory.schedule")
    in_place_below = config.get("memory.read-in-place-below")
    workers = sorted(set(placement))
    exchange = _exchange_path(graph, workers)
    with contextlib.ExitStack() as stack:
        nccl = stack.enter_context(_nccl.lease(client, workers)) if exchange == "nccl" else None
        run = RunSpec(
            uuid.uuid4().hex[:12], graph.graph_id, tuple(placement), spec, policy=policy,
            in_place_below=in_place_below, output_limit=config.get("memory.output-limit"), bounds=np.asarray(graph.bounds),
            exchange=exchange, nccl=nccl,
            report=progress is not None, summarize=summarize, blocks=blocks, prelude=getattr(graph, "prelude", None),
            chunks=config.get("exchange-chunks"))
        run_id = run.run_id
        before = _transfers(graph) if out_of_memory else None
        t0 = time.perf_counter()
        with _reporting(client, run_id, progress, len(workers), num_walks):
            queues, counts = _initial_walkers(graph, initial)
            loops: list[tuple] = [(w, _advance.run_partitions,
                      (run, {p: q for p, q in queues.items() if placement[p] == w}, counts), {}) for w in workers]
            summaries = _call_run(client, run_id, loops, dict(enumerate(placement)), "supersteps")
        seconds = time.perf_counter() - t0
    steps = sum(s["steps"] for s in summaries)
    superstep = max(len(s["seconds"]) for s in summaries)
    per_superstep = np.zeros(superstep)
    for s in summaries:  # a superstep lasts as long as its slowest worker
        per_superstep[:len(s["seconds"])] = np.maximum(per_superstep[:len(s["seconds"])], s["seconds"])
    kernel_seconds = float(per_superstep.sum())
    # each superstep's steps and kernel seconds over all workers: a GPU's steps per second of its kernels
    stepped, spent = np.zeros(superstep, np.int64), np.zeros(superstep)
    for s in summaries:
        stepped[:len(s["superstep_steps"])] += s["superstep_steps"]
        spent[:len(s["seconds"])] += s["seconds"]
    ran = {p for s in summaries for p in s["ran"]}
    if progress is not None:
        progress(superstep=superstep, active=0, steps=steps, total=num_walks)
    stats = {**_stats(graph, summaries, "partitioned", partitions=graph.num_partitions, workers=len(workers),
                      steps=steps, seconds=seconds, supersteps=superstep, kernel_seconds=kernel_seconds),
             "exchange": exchange, "walker_bytes": sum(s["sent_bytes"] for s in summaries),
             "kernel_steps_per_second": float(steps / spent.sum()) if spent.sum() > 0 else 0.0,
             "superstep_kernels": {"steps": stepped.tolist(), "seconds": spent.tolist()},
             "crossings": sum(s["crossings"] for s in summaries),
             "crossings_per_step": sum(s["crossings"] for s in summaries) / steps if steps else 0.0,
             "wire": _packing.stated([packing for s in summaries for packing in s["wire"]]),  # a walker's bits
             **({"lent_bytes": sum(s["lent_bytes"] for s in summaries)} if spec.lends else {}),  # lists taken along
             "gathered": summaries[0]["gathered"] is not None,
             "exchange_seconds": max(s["exchange_seconds"] for s in summaries),  # the busiest worker's
             # of the exchange's time on the wire, what passed while a kernel ran (chunked supersteps), the most
             "exchange_hidden_seconds": max(s["exchange_hidden_seconds"] for s in summaries),
             # the slowest worker's time before its first superstep, and in all (``seconds`` less this: the calls)
             "opening_seconds": max(s["opening_seconds"] for s in summaries),
             "worker_seconds": max(s["worker_seconds"] for s in summaries),
             "host_memory_peak": max(s["host_memory_peak"] for s in summaries),
             # each worker's (the two above: the most)
             "memory_peaks": {w: {"host": s["host_memory_peak"], "device": s["device_memory_peak"]}
                              for w, s in zip(workers, summaries, strict=True)},
             "device_memory_peak": None if graph.device != "gpu" else max(s["device_memory_peak"]
                                                                        for s in summaries)}
    if stats["gathered"]:  # the busiest worker's seconds, every worker's bytes; the rows its steps wrote in place
        layouts = {w: s["rows"] for w, s in zip(workers, summaries, strict=True)}
        stats.update(gather_seconds=max(s["gathered"]["seconds"] for s in summaries),
                     gathered_bytes=sum(s["gathered"]["sent"] for s in summaries),
                     rows=layouts[workers[0]] if len(set(layouts.values())) == 1 else layouts)
    if out_of_memory:
        count, nbytes, copy_seconds, in_place = np.subtract(_transfers(graph), before)
        stats.update(device_partitions=graph.device_partitions, schedule=run.policy, partition_transfers=int(count),
                     partition_reads_in_place=int(in_place), bytes_moved=int(nbytes),
                     transfer_seconds=float(copy_seconds),
                     host_to_device_bytes_per_second=float(nbytes / copy_seconds) if copy_seconds > 0 else 0.0)
    return Ran(run_id, {p: placement[p] for p in sorted(ran)}, stats, None)


def _exchange_path(graph, workers: list[str]) -> str:
    """How the run's supersteps end between its workers (``gpipe.exchange``), decided before it starts: ``auto``
    is NCCL between GPU workers that have it, else Dask's comms; ``nccl`` where it cannot be used is an error;
    ``none`` on one worker, where nothing crosses."""
    asked = config.get("exchange")
    if asked == "nccl" and graph.device != "gpu":
        raise GpipeValueError(f"gpipe.exchange: 'nccl' needs GPU workers; the graph is on {graph.device} workers")
    if len(workers) == 1:
        return "none"
    if asked == "comms" or (asked == "auto" and graph.device != "gpu"):
        return "comms"
    why = _nccl.unusable(graph.client, workers)
    if asked == "nccl" and why:
        worker, reason = min(why.items())
        raise GpipeValueError(f"gpipe.exchange: 'nccl' needs NCCL on every GPU worker; worker {worker}: {reason}")
    return "comms" if why else "nccl"


def _run_replicated(graph, spec: StepSpec, initial: int | StartSet | dict, progress: Callable | None,
                    summarize: Callable[[list], object] | None, blocks: OutputBlocks | None):
    """Replicated mode: each worker runs its share of the walkers (or of the instances) on its own whole copy.

    Walkers are shared out by walk id, sampling entries by instance (an
    instance's entries stay together: its selections need all of them); the
    random streams are the same as in partitioned mode, so are the results.
    On one replica, ``blocks`` are made where the run is, as a partitioned
    run's on one worker (``stats['gathered']``).
    """
    client, replicas = graph.client, graph.replicas
    count = len(replicas)
    blocks = blocks if count == 1 else None
    run = RunSpec(uuid.uuid4().hex[:12], graph.graph_id, tuple(replicas), spec, output_limit=config.get("memory.output-limit"),
                  summarize=summarize, blocks=blocks)
    t0 = time.perf_counter()
    if isinstance(initial, int):
        cuts = np.linspace(0, graph.num_vertices, count + 1).astype(np.int64)
        shares: dict[int, Any] = {r: (initial, int(cuts[r]), int(cuts[r + 1]))
                                  for r in range(count) if cuts[r] < cuts[r + 1]}
    elif isinstance(initial, StartSet):
        cuts = np.linspace(0, len(initial.vertices), count + 1).astype(np.int64)
        shares = {r: initial.share(int(cuts[r]), int(cuts[r + 1])) for r in range(count) if cuts[r] < cuts[r + 1]}
    else:
        initial = {k: v for k, v in initial.items() if k != "to"}
        if count == 1:
            shares = {0: initial}
        else:
            group = (initial["instance"] if "instance" in initial else initial["walk_id"]) % count
            shares = {int(r): {k: v[group == r] for k, v in initial.items()} for r in unique(np, group)}
    # its one worker makes the blocks as the run ends: the scheduler is told of them while it runs
    keys = [] if blocks is None or not shares else [block_key(run.run_id, b) for b in range(blocks.count)]
    runs = [(replicas[r], making, (keys, _advance.advance_local, run, share), {"part": r})
            for r, share in shares.items()]
    blocks_told = None if not keys else announce(client, dict.fromkeys(keys, replicas[0]),
                                                 {key: blocks.nbytes(b) for b, key in enumerate(keys)})
    try:
        summaries = _call_run(client, run.run_id, runs, {r: replicas[r] for r in shares}, "replicated run", "replica")
    except BaseException:  # blocks its one worker made as the run ended, or is still making: none kept
        if blocks_told is not None:
            forget(client, blocks_told)
        raise
    seconds = time.perf_counter() - t0
    steps = sum(s["steps"] for s in summaries)
    supersteps = max((s["supersteps"] for s in summaries), default=0)
    if progress is not None:
        progress(superstep=supersteps, active=0, steps=steps, total=steps)
    stats = _stats(graph, summaries, "replicated", partitions=1, workers=count, steps=steps, seconds=seconds,
                   supersteps=supersteps, kernel_seconds=max((s["seconds"] for s in summaries), default=0.0))
    stats["gathered"] = blocks is not None
    made = None
    if blocks_told is not None:  # its one replica made its blocks as it ended
        t0 = time.perf_counter()
        futures = finished(client, blocks_told, summaries[0]["kept"])
        made = [futures[key] for key in keys]
        stats["assemble_seconds"] = time.perf_counter() - t0
    return Ran(run.run_id, {r: replicas[r] for r in shares}, stats, made)


def _call_run(client, run_id: str, calls: list[tuple], held: dict[int, str], phase: str, unit: str = "partition"):
    """:func:`call_workers` for a run's work; if it fails, the run's buffers on every worker go first."""
    try:
        return call_workers(client, calls, held, phase, unit)
    except BaseException:
        with contextlib.suppress(Exception):
            client.run(drop_run, run_id)
        raise


def _stats(graph, summaries: list[dict], mode: str, *, partitions: int, workers: int, steps: int, seconds: float,
           supersteps: int, kernel_seconds: float) -> dict:
    """What every run reports, in either mode (and the summaries of its outputs it was asked for)."""
    stats = {"steps": steps, "seconds": seconds, "steps_per_second": steps / seconds if seconds > 0 else 0.0,
             "supersteps": supersteps, "kernel_seconds": kernel_seconds, "partitions": partitions,
             "workers": workers, "mode": mode, "device": graph.device, "num_vertices": graph.num_vertices,
             "spilled_bytes": sum(s["spilled"] for s in summaries), "batches": sum(s["batches"] for s in summaries)}
    made = {p: out for s in summaries if s["outputs"] is not None for p, out in s["outputs"].items()}
    if made:
        stats["outputs"] = [made[p] for p in sorted(made)]
    return stats


def _initial_walkers(graph, initial: int | StartSet | dict):
    """Per partition, its first walkers (or how to make them on its worker), and their counts."""
    parts = graph.num_partitions
    if isinstance(initial, int):  # the first advance makes them on its worker
        sizes = np.diff(graph.bounds) * initial
        return {p: initial for p in range(parts)}, sizes.astype(np.int64)
    if isinstance(initial, StartSet):  # each partition's advance takes its own (the set goes once per worker)
        counts = initial.per_partition(graph.bounds)
        return {int(p): initial for p in np.flatnonzero(counts)}, counts
    initial = dict(initial)
    owner = initial.pop("to") if "to" in initial else np.searchsorted(graph.bounds, initial["vertex"],
                                                                      side="right") - 1
    counts = np.bincount(owner, minlength=parts).astype(np.int64)
    return {int(p): {k: v[owner == p] for k, v in initial.items()} for p in np.flatnonzero(counts)}, counts


@contextlib.contextmanager
def _reporting(client, run_id: str, progress: Callable | None, workers: int, total: int):
    """While a partitioned run lasts, pass its ``workers``' superstep reports (Dask events) to ``progress``.

    A superstep is reported once every worker has; reports come
    asynchronously, so the run's end is reported by the caller once the loops
    have returned.
    """
    if progress is None:
        yield
        return
    topic = f"gpipe-progress-{run_id}"
    heard: dict[int, list] = defaultdict(list)

    def hear(event) -> None:
        _, report = event
        reports = heard[report["superstep"]]
        reports.append(report)
        if len(reports) == workers and report["active"]:
            del heard[report["superstep"]]
            progress(superstep=report["superstep"], active=report["active"], steps=sum(r["steps"] for r in reports),
                     total=total)

    client.subscribe_topic(topic, hear)
    try:
        yield
    finally:
        client.unsubscribe_topic(topic)


def _transfers(graph) -> np.ndarray:
    """The graph's partition copies onto the devices so far, over all workers: [count, bytes, seconds, in place]."""
    return np.sum(list(graph.client.run(transfers, graph.graph_id).values()), axis=0)
