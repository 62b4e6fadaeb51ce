"""Multi-dimensional random walk (frontier sampling): CUDA in ``kernels/walk_frontier.cu``, CPU twin here.

Frontier sampling keeps a pool of ``frontier_size`` vertices, picks one with
probability proportional to its degree, and replaces it with a uniform
neighbor, recording the edge, until ``budget`` edges are sampled. That is the
same process as every pool member walking on its own in continuous time, moving
after an exponential wait of rate deg(v): the next member to move is member i
with probability deg_i / sum(deg). So the members run as independent walkers of
the partitioned runtime, each recording (src, dst, time) for its moves up to a
time horizon, and an instance's sample is its first ``budget`` moves in time
order. An instance with fewer moves than that by the horizon resumes its parked
members with a later one.

The moves stay in the stores of the workers that made them, each round's run
kept until the sample is made: its blocks (ranges of instances) are assembled
on the workers from every round's moves, sorted by instance and time and cut
at ``budget`` there (:class:`~gpipe.sampling.EdgeSample`). After each round only
each partition's moves per instance come to the client, and its parked members,
which the next round starts from (walkers, not the sample; they stay in the
stores too, until the sample is made, and are left out of it).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _rng
from .._csr import row_span
from ..backend import cpu_kernel, prange, to_host
from ..kernels import Arg, Kernel
from ..runtime import Run, Span, StepSpec, check_memory, run_supersteps
from ..runtime.workers import worker_xp
from ..sampling import EdgeSample, SampleLayout

INIT_STEP = 2**32 - 1  # the draw counter of a member's start vertex; moves use 0..budget-1
# the moves, each block sorted on its worker in canonical order (by instance, then time; ties by member and move)
# and cut to each instance's first ``budget`` (``_first_moves``); ``walk_id`` only sorts
LAYOUT = SampleLayout((("instance", "int64"), ("step", "int64"), ("src", "int64"), ("dst", "int64"),
                       ("time", "float64"), ("walk_id", "int64")), order=("instance", "time", "walk_id", "step"))
PARKED_FIELDS = ("walk_id", "vertex", "step", "time")
MOVED, PARKED = 1, 2  # a member's status after the kernel (0: done): the kernel's GP_MOVED, GP_PARKED


@dataclass(frozen=True)
class Frontier:
    """A round of frontier sampling: each member moves until its instance's ``budget`` or the time ``horizon``."""

    budget: int
    horizon: float
    frontier_size: int  # an instance's members: walk ids ``instance * frontier_size`` on


def advance_frontier(part, walkers: dict, spec: StepSpec, run: Run):
    """Step function for the runtime: walk the members here; keep their moves and park the ones at the horizon."""
    x = worker_xp()
    n = walkers["walk_id"].shape[0]
    room = spec.room
    rec = {"src": x.empty(n * room, x.int64), "dst": x.empty(n * room, x.int64), "time": x.empty(n * room, x.float64)}
    count = x.empty(n, x.int32)
    out = {"vertex": x.empty(n, x.int64), "step": x.empty(n, x.int32), "time": x.empty(n, x.float64)}
    status = x.empty(n, x.int8)
    ADVANCE.launch(indptr=part.indptr, indices=part.indices, lo=part.lo, hi=part.hi, key=spec.key,
                   budget=spec.params.budget, horizon=spec.params.horizon, room=room, n=n, walk_id=walkers["walk_id"],
                   vertex=walkers["vertex"], step=walkers["step"], time=walkers["time"], rec_src=rec["src"],
                   rec_dst=rec["dst"], rec_time=rec["time"], rec_count=count, out_vertex=out["vertex"],
                   out_step=out["step"], out_time=out["time"], status=status)
    # the moves: record j of member i is its move number step[i] + j
    total = int(count.sum())
    ends = x.cumsum(count)
    member = x.searchsorted(ends, x.arange(total), side="right")
    j = x.arange(total) - (ends[member] - count[member])
    walk_id = walkers["walk_id"][member]
    moves = {"instance": walk_id // spec.params.frontier_size, "walk_id": walk_id,
             "step": walkers["step"][member] + j, **{k: v[member * room + j] for k, v in rec.items()}}
    parked = status == PARKED
    outputs = {**moves, "parked": {"walk_id": walkers["walk_id"][parked], "vertex": out["vertex"][parked],
                                   "step": out["step"][parked], "time": out["time"][parked]}}
    moved = status == MOVED
    movers = {"walk_id": walkers["walk_id"][moved], **{k: v[moved] for k, v in out.items()}}
    return outputs, movers, total


@cpu_kernel(parallel=True)
def _advance_cpu(indptr, indices, lo, hi, key, budget, horizon, room, n, walk_id, vertex, step, time, rec_src,
                 rec_dst, rec_time, rec_count, out_vertex, out_step, out_time, status):
    for i in prange(n):
        v = vertex[i]
        s = step[i]
        t = time[i]
        o = i * room
        c = 0
        st = 0
        while True:
            if s >= budget:
                break
            a, d = row_span(indptr, v - lo)
            if d == 0:
                break
            nt = t - np.log(1.0 - _rng.unit(_rng.bits(key, walk_id[i], s, 0))) / np.float64(d)
            if nt > horizon:
                st = PARKED
                break
            if c == room:
                st = MOVED
                break
            u = np.int64(indices[a + _rng.below(_rng.bits(key, walk_id[i], s, 1), d)])
            rec_src[o + c] = v
            rec_dst[o + c] = u
            rec_time[o + c] = nt
            c += 1
            s += 1
            t = nt
            v = u
            if u < lo or u >= hi:
                st = MOVED
                break
        rec_count[i] = c
        out_vertex[i] = v
        out_step[i] = s
        out_time[i] = t
        status[i] = st


ADVANCE = Kernel("walk_frontier.cu", "gp_walk_frontier", twin=_advance_cpu, items="n", queued=True,
                 defines={"GP_MOVED": MOVED, "GP_PARKED": PARKED}, args=(
    Arg("indptr", "i64[]"), Arg("indices", "IdT[]"), Arg("lo", "i64"), Arg("hi", "i64"), Arg("key", "u64"),
    Arg("budget", "i32"), Arg("horizon", "f64"), Arg("room", "i32"), Arg("n", "i64"), Arg("walk_id", "i64[n]"),
    Arg("vertex", "i64[n]"), Arg("step", "i32[n]"), Arg("time", "f64[n]"), Arg("rec_src", "i64[n*room]", out=True),
    Arg("rec_dst", "i64[n*room]", out=True), Arg("rec_time", "f64[n*room]", out=True),
    Arg("rec_count", "i32[n]", out=True), Arg("out_vertex", "i64[n]", out=True), Arg("out_step", "i32[n]", out=True),
    Arg("out_time", "f64[n]", out=True), Arg("status", "i8[n]", out=True, note="0 done, MOVED, PARKED")))


@cpu_kernel(parallel=True)
def _uniform_starts(key, walk_id, candidates):
    """Each member's start vertex, uniform among ``candidates``."""
    out = np.empty(walk_id.shape[0], np.int64)
    for i in prange(walk_id.shape[0]):
        out[i] = candidates[_rng.below(_rng.bits(key, walk_id[i], INIT_STEP, 0), candidates.shape[0])]
    return out


def sample(g, frontier_size: int, budget: int, instances: int, seed: int, pool: np.ndarray | None,
           progress) -> EdgeSample:
    """The sampled edges ``instance, step, src, dst, time`` (dense ids, ``step`` the rank in time), kept on the
    workers, with the run's statistics (``stats``, without the family's own).

    ``pool`` holds each instance's starting pool (dense ids, ``(instances, frontier_size)``);
    by default it is drawn uniformly among the vertices with out-edges.
    """
    key = np.uint64(_rng.key(seed))
    degrees = g.degrees().to_numpy()
    walk_id = np.arange(instances * frontier_size, dtype=np.int64)
    if pool is None:
        vertex = _uniform_starts(key, walk_id, np.flatnonzero(degrees > 0))
    else:
        vertex = pool.reshape(-1).astype(np.int64)
    rate = np.bincount(walk_id // frontier_size, weights=degrees[vertex], minlength=instances)
    horizon = 1.25 * budget / max(rate.min(), 1.0)
    walkers = {"walk_id": walk_id, "vertex": vertex, "step": np.zeros(walk_id.size, np.int32),
               "time": np.zeros(walk_id.size, np.float64)}
    room = max(1, min(budget, math.ceil(2 * budget / frontier_size)))
    # the moves kept (44 bytes each, about budget per instance), each member's room for moves in the kernel
    # (src, dst, time) and the members themselves
    check_memory(g, instances * budget * 44 + walk_id.size * (room * 24 + 28), "'instances' x 'budget'",
                 "sampled edges")
    run_ids, held = [], {}
    have = np.zeros(instances, np.int64)
    stats: dict[str, Any] = {"steps": 0, "seconds": 0.0, "kernel_seconds": 0.0, "supersteps": 0, "rounds": 0}
    summed = ("steps", "seconds", "kernel_seconds", "supersteps", "walker_bytes", "exchange_seconds", "opening_seconds",
              "worker_seconds")
    summarize = functools.partial(_round_summary, instances=instances)
    while True:
        spec = StepSpec(advance_frontier, key, Frontier(budget, horizon, frontier_size), room=room,
                        spans=(Span("walk_id", 0, walk_id.size - 1), Span("step", 0, budget)))
        run_id, partitions, run, _ = run_supersteps(g, spec, walkers, num_walks=len(walkers["walk_id"]),
                                                    progress=progress, summarize=summarize)
        run_ids.append(run_id)
        held.update(partitions)
        for k in summed:
            if k in run:  # the exchange's: partitioned graphs
                stats[k] = stats.get(k, 0) + run[k]
        if run.get("wire") is not None:  # every round's walkers travel alike (the same fields, spans and sizes)
            stats["wire"] = run["wire"]
        for k in ("host_memory_peak", "device_memory_peak"):
            if run.get(k) is not None:
                stats[k] = max(stats.get(k, 0), run[k])
        for worker, peaks in run.get("memory_peaks", {}).items():
            seen = stats.setdefault("memory_peaks", {}).setdefault(worker, dict(peaks))
            seen.update({k: max(seen[k], v) for k, v in peaks.items() if v is not None})
        stats["rounds"] += 1
        summaries = run.pop("outputs")
        have += sum(moves for moves, _ in summaries)
        parked = {k: np.concatenate([p[k] for _, p in summaries]) for k in PARKED_FIELDS}
        resume = np.isin(parked["walk_id"] // frontier_size, np.flatnonzero(have < budget))
        if not resume.any():
            break
        walkers = {k: v[resume] for k, v in parked.items()}
        horizon *= 2
    stats.update({k: run[k] for k in ("partitions", "workers", "device", "num_vertices", "mode", "exchange")
                  if k in run})
    layout = dataclasses.replace(LAYOUT, finish=functools.partial(_first_moves, budget=budget))
    return EdgeSample.of_runs(g.client, tuple(run_ids), held, layout=layout, instances=instances,
                              rows=int(np.minimum(have, budget).sum()), id_map=g.id_map, stats=stats)


def _round_summary(sets: list[dict], instances: int) -> tuple[np.ndarray, dict]:
    """A partition's moves per instance in a round, and its parked members (host arrays)."""
    def column(name: str, dtype, of=lambda s: s) -> np.ndarray:
        return np.concatenate([np.zeros(0, dtype)] + [to_host(of(s)[name]).astype(dtype, copy=False) for s in sets])

    moves = np.bincount(column("instance", np.int64), minlength=instances)
    parked = {k: column(k, dtype, lambda s: s["parked"])
              for k, dtype in zip(PARKED_FIELDS, (np.int64, np.int64, np.int32, np.float64), strict=True)}
    return moves, parked


def _first_moves(edges: dict, budget: int) -> dict:
    """Each instance's first ``budget`` moves of a block sorted in canonical order, ``step`` their rank."""
    instance = edges["instance"]
    rank = np.arange(instance.size) - np.searchsorted(instance, instance, side="left")
    keep = rank < budget
    return {"instance": instance[keep], "step": rank[keep], **{k: edges[k][keep] for k in ("src", "dst", "time")}}
