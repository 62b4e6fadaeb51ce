"""The Sampler's step on a worker: C-SAW's SELECT, GATHERNEIGHBORS and UPDATE over the entries of a partition
(see ``_sampler``): the fused launch, the pools, the candidates and their selection at the instances' homes, the
exponential races, and the visited sets and biases read on the workers."""

from __future__ import annotations

import dataclasses

import numpy as np
import psutil

from .. import _neighbor, _rng
from .._select import select
from ..backend import ranges_within, to_host, unique
from ..errors import GpipeValueError
from ..runtime import VERTEX, Run, Span, StartSet, StepSpec
from ..runtime.workers import graph_array, worker_xp
from ._race import race

POOL, FRONTIER, EXPAND, NEIGHBORS, RESOLVE = range(5)  # the stages an entry goes through


# The draw counter's step (``step << 32 | draw``) of each kind of draw, plus the depth: apart from each other.
NEIGHBOR_STEP, INSTANCE_NEIGHBOR_STEP, FRONTIER_STEP, DIRECTION_STEP, COUNT_STEP = 0, 1 << 29, 2 << 29, 3 << 29, 1 << 31


EDGE_COLUMNS = ("instance", "depth", "src", "dst")


CANDIDATE_BYTES = 64  # a candidate row of a step, about: its columns, its bias and SELECT's scratch


def entry_spans(instances: int, parts: int, depth: int) -> tuple[Span, ...]:
    """The values of the entries' fields, in a run of ``instances`` instances over ``parts`` partitions to
    ``depth``: a first entry of an implicit pool has no vertex (-1), a frontier row no candidate (-1); a drawn
    edge's id, a bias, a weight and a race's time have no span (they travel whole)."""
    return (Span("instance", 0, instances - 1), Span("vertex", -1, VERTEX), Span("depth", 0, depth),
            Span("stage", 0, RESOLVE), Span("to", 0, parts - 1), Span("frontier", 0, VERTEX),
            Span("candidate", -1, VERTEX))


def _step(part, entries: dict, spec: StepSpec, run: Run):
    """Step function for the runtime: this partition's entries, all at one stage of one depth."""
    x = worker_xp()
    if spec.params.fused:  # every depth at once: the seeds' entries are the only ones
        return _fused_sample(x, part, entries, spec)
    return _STAGES[int(entries["stage"][0])](x, part, entries, spec, run)


def _seed_entries(x, spec: StepSpec, lo: int, hi: int, n: int, seeds: StartSet) -> dict:
    """The first entries of the ``seeds`` (an instance each, numbered by its place) in vertices ``lo..hi-1``."""
    instance, vertex = seeds.within(x, lo, hi, n)
    return {"instance": instance, "vertex": vertex, "depth": x.zeros(instance.shape[0], x.int32),
            "stage": x.full(instance.shape[0], POOL, x.int8)}


def _fused_sample(x, part, entries: dict, spec: StepSpec):
    s = spec.params
    out = _neighbor.sample(x, part, entries["instance"], entries["vertex"], key=spec.key, num_vertices=s.num_vertices,
                        fanouts=s.neighbor_sizes, step=NEIGHBOR_STEP, weighted=s.edge_bias == "weight",
                        replace=s.replace, method=s.select, bitmap=s.bitmap, max_degree=s.max_degree)
    movers = {"instance": x.zeros(0, x.int64), "vertex": x.zeros(0, x.int64), "depth": x.zeros(0, x.int32),
              "stage": x.zeros(0, x.int8)}
    return out, movers, out["dst"].shape[0]  # the picks, known here: no wait for the device


def _pool(x, part, entries: dict, spec: StepSpec, run: Run):
    """At the vertex's owner: the pool entries of a depth, with their vertex biases if a frontier is selected."""
    n = spec.params.num_vertices
    key, first = x.unique(entries["instance"] * n + entries["vertex"], return_index=True)
    instance, vertex, depth = entries["instance"][first], entries["vertex"][first], entries["depth"][first]
    if spec.params.update == "unvisited":
        fresh = ~x.isin(key, _visited(x, part, run))
        instance, vertex, depth = instance[fresh], vertex[fresh], depth[fresh]
    if spec.params.frontier_size is None:
        return _expand(x, part, instance, vertex, depth, spec, run)
    local = vertex - part.lo
    table = _Table({"instance": instance, "vertex": vertex, "degree": part.indptr[local + 1] - part.indptr[local],
                    "depth": depth})
    bias = _biases(x, "vertex_bias", spec.params.vertex_bias, table)
    movers = {"instance": instance, "vertex": vertex, "depth": depth, "bias": bias,
              "stage": x.full(instance.shape[0], FRONTIER, x.int8), "to": instance % (len(part.bounds) - 1)}
    return _no_edges(x), movers, 0


def _frontier(x, part, entries: dict, spec: StepSpec, run: Run):
    """At the instance's home: select each instance's frontier from its pool."""
    n = spec.params.num_vertices
    level = int(entries["depth"][0])
    if spec.params.implicit and level == 0:
        instance, vertex = _implicit_vertices(x, entries["instance"], spec)
        iterations = x.zeros(1, x.int64)
    else:
        order = x.argsort(entries["instance"] * n + entries["vertex"])
        pool_instance, pool_vertex = entries["instance"][order], entries["vertex"][order]
        streams, offsets = _segments(x, pool_instance)
        want = x.full(streams.shape[0], spec.params.frontier_size, dtype=x.int64)
        _, picks, iterations = select(entries["bias"][order], offsets, want, streams, spec.key,
                                      FRONTIER_STEP + level, method=spec.params.select, bitmap=spec.params.bitmap)
        instance, vertex = pool_instance[picks], pool_vertex[picks]
    if spec.params.neighbor_pool == "frontier":  # for the candidates' in_frontier
        run.state(SamplerState).frontier[part.part] = instance * n + vertex
    movers = {"instance": instance, "vertex": vertex, "depth": x.full(instance.shape[0], level, x.int32),
              "stage": x.full(instance.shape[0], EXPAND, x.int8)}
    return _no_edges(x, picks=instance.shape[0], iterations=int(iterations.sum())), movers, 0


def _expand_stage(x, part, entries: dict, spec: StepSpec, run: Run):
    return _expand(x, part, entries["instance"], entries["vertex"], entries["depth"], spec, run)


def _expand(x, part, instance, vertex, depth, spec: StepSpec, run: Run):
    """At the vertex's owner: expand the frontier, whose vertices are nodes of their instances, edges or not."""
    out, movers, steps = _gather_neighbors(x, part, instance, vertex, depth, spec, run)
    out.update(node_instance=instance, node_vertex=vertex)
    return out, movers, steps


def _gather_neighbors(x, part, instance, vertex, depth, spec: StepSpec, run: Run):
    """The frontier's out-edges: pick from each vertex's, or send them to the instance's home."""
    n = spec.params.num_vertices
    key = instance * n + vertex
    if spec.params.update == "unvisited":
        _visited(x, part, run, add=key)
    level = int(depth[0]) if depth.size else 0  # every entry here is at the same depth
    if spec.params.neighbor_pool == "vertex" and _row_picks(spec, level):  # off the CSR rows, no candidate table
        s = spec.params
        out = _neighbor.sample(x, part, instance, vertex, key=spec.key, num_vertices=n,
                            fanouts=(s.neighbor_sizes[level],), step=NEIGHBOR_STEP + level,
                            weighted=s.edge_bias == "weight", replace=s.replace, method=s.select, bitmap=s.bitmap, max_degree=s.max_degree)
        return _picked(x, spec, out["instance"], level, out["src"], out["dst"], out["iterations"])
    local = vertex - part.lo
    start, end = part.indptr[local], part.indptr[local + 1]
    if spec.params.neighbor_pool == "vertex":  # each entry's picks its own: taken in chunks of entries
        chunks = [_pick_from(x, part, instance[c], vertex[c], depth[c], key=key[c], start=start[c], end=end[c],
                             level=level, spec=spec)
                  for c in _entry_chunks(x, end - start, spec.params.candidate_budget)]
        picked_instance, src, dst, iterations = (x.concatenate([chunk[i] for chunk in chunks]) for i in range(4))
        return _picked(x, spec, picked_instance, level, src, dst, iterations)
    offsets, edge, table = _candidates(x, part, instance, vertex, depth, start=start, end=end, spec=spec)
    if _races(spec, level):
        return _race_entries(x, part, table, instance, vertex, key=key, offsets=offsets, edge=edge, level=level,
                             spec=spec)
    parts = len(part.bounds) - 1
    frontier_rows = spec.params.frontier_size is None  # the home learns the frontier from these
    rows = {k: table[k] for k in ("instance", "frontier", "candidate", "weight")}
    weight = rows["weight"]
    if frontier_rows:
        rows = {k: x.concatenate([v, {"instance": instance, "frontier": vertex,
                                      "candidate": x.full(vertex.shape[0], -1, x.int64),
                                      "weight": x.zeros(vertex.shape[0], weight.dtype)}[k]])
                for k, v in rows.items()}
    size = rows["instance"].shape[0]
    movers = dict(rows, depth=x.full(size, level, x.int32), stage=x.full(size, NEIGHBORS, x.int8),
                  to=rows["instance"] % parts)
    return _no_edges(x), movers, 0


def _candidates(x, part, instance, vertex, depth, *, start, end, spec: StepSpec):
    """The out-edges ``start .. end - 1`` of the entries as a candidate table (its columns made when read: a
    built-in bias reads few of them), with each entry's first row (``offsets``) and each row's edge."""
    offsets = x.zeros(vertex.shape[0] + 1, dtype=x.int64)
    x.cumsum(end - start, out=offsets[1:])
    total = int(offsets[-1])
    segment = x.searchsorted(offsets[1:], x.arange(total), side="right")
    edge = start[segment] + x.arange(total) - offsets[segment]
    table = _Table({}, size=total, instance=lambda: instance[segment], frontier=lambda: vertex[segment],
                   candidate=lambda: part.indices[edge].astype(x.int64), depth=lambda: depth[segment],
                   weight=lambda: part.weights[edge] if part.weights is not None else x.ones(total, x.float32),
                   degree=lambda: _graph_array(spec, "degrees")[table["candidate"]])  # type: ignore[has-type]
    return offsets, edge, table


def _pick_from(x, part, instance, vertex, depth, *, key, start, end, level: int, spec: StepSpec) -> tuple:
    """Each entry's picks among its own vertex's out-edges: the picks' instance, source and destination, and
    SELECT's draws per entry."""
    offsets, edge, table = _candidates(x, part, instance, vertex, depth, start=start, end=end, spec=spec)
    bias = _biases(x, "edge_bias", spec.params.edge_bias, table)
    want = _wanted(x, spec, key, level, COUNT_STEP + level, end - start)
    pick_offsets, picks, iterations = select(bias, offsets, want, key, spec.key, NEIGHBOR_STEP + level,
                                             method=spec.params.select, bitmap=spec.params.bitmap,
                                             replace=spec.params.replace)
    owner = x.searchsorted(pick_offsets[1:], x.arange(picks.shape[0]), side="right")
    return instance[owner], vertex[owner], part.indices[edge[picks]].astype(x.int64), iterations


def _entry_chunks(x, degree, budget: int | None) -> list[slice]:
    """Consecutive ranges of entries whose out-edges (``degree`` each) make candidate tables within
    ``gpipe.sampling.candidate-budget`` (an entry with more is a range of its own): the picks are the same,
    each entry drawing from its own stream, and a frontier of hubs needs no table of all their edges at once
    (R-MAT 24, 20,000 instances preferring hubs: a 41.5 GB column)."""
    if budget is None:  # 'auto'
        budget = (x.cuda.Device().mem_info[1] if x is not np else psutil.virtual_memory().available) // 4
    most = max(1, budget // CANDIDATE_BYTES)
    count = int(degree.shape[0])
    if count == 0 or int(degree.sum()) <= most:
        return [slice(0, count)]
    return ranges_within(to_host(x.cumsum(degree)), most)


def _neighbors(x, part, entries: dict, spec: StepSpec, run: Run):
    """At the instance's home: pick neighbors from all candidates of the instance's frontier (layer sampling)."""
    n = spec.params.num_vertices
    level = int(entries["depth"][0])
    if spec.params.implicit and spec.params.frontier_size is None and level == 0:
        # the pool is every edge: draw global edge ids, resolved by their owners
        ends = x.cumsum(_graph_array(spec, spec.params.edge_pool))
        instance, edge = _first_distinct(x, entries["instance"], spec.params.neighbor_sizes[0], int(ends[-1]),
                                         INSTANCE_NEIGHBOR_STEP, spec)
        first_edges = x.concatenate([x.zeros(1, ends.dtype), ends])[x.asarray(part.bounds[1:-1])]
        owner = x.searchsorted(first_edges, edge, side="right")
        movers = {"instance": instance, "edge": edge, "reverse": _reverse(x, instance, spec),
                  "depth": x.zeros(instance.shape[0], x.int32), "stage": x.full(instance.shape[0], RESOLVE, x.int8),
                  "to": owner}
        return _no_edges(x, picks=instance.shape[0]), movers, 0
    if "race" in entries:  # each partition's fastest: the instance's picks are the fastest of them all
        won = _fastest(x, entries, level, spec)
        return _picked(x, spec, entries["instance"][won], level, entries["frontier"][won],
                       entries["candidate"][won], x.full(1, int(won.shape[0]), x.int64))
    rows = entries["candidate"] >= 0
    frontier = _frontier_keys(x, part, entries, rows, spec, run)
    order = x.lexsort(x.stack([entries["candidate"][rows], entries["frontier"][rows], entries["instance"][rows]]))
    instance, src, candidate, weight = (entries[k][rows][order] for k in ("instance", "frontier", "candidate",
                                                                          "weight"))
    streams, offsets = _segments(x, instance)
    table = _Table({"instance": instance, "frontier": src, "candidate": candidate, "weight": weight,
                    "depth": x.full(instance.shape[0], level, x.int32)},
                   degree=lambda: _graph_array(spec, "degrees")[candidate],
                   in_frontier=lambda: x.isin(instance * n + candidate, frontier))
    bias = _biases(x, "edge_bias", spec.params.edge_bias, table)
    want = _wanted(x, spec, streams, level, COUNT_STEP + INSTANCE_NEIGHBOR_STEP + level, offsets[1:] - offsets[:-1])
    _, picks, iterations = select(bias, offsets, want, streams, spec.key, INSTANCE_NEIGHBOR_STEP + level,
                                  method=spec.params.select, bitmap=spec.params.bitmap, replace=spec.params.replace)
    return _picked(x, spec, instance[picks], level, src[picks], candidate[picks], iterations)


def _resolve(x, part, entries: dict, spec: StepSpec, run: Run):
    """At the owner of drawn edge ids of the pool: their endpoints, in the direction drawn.

    A vertex's edges in the pool are the last of its row (its out-edges are
    sorted by head): all of them, or, undirected, those to a head not below it.
    """
    pool = _graph_array(spec, spec.params.edge_pool)
    ends = x.cumsum(pool[part.lo:part.hi])
    local = entries["edge"] - pool[:part.lo].sum()
    row = x.searchsorted(ends, local, side="right")
    src = part.lo + row
    dst = part.indices[part.indptr[row + 1] - (ends[row] - local)].astype(x.int64)
    reverse = entries["reverse"]
    return _picked(x, spec, entries["instance"], 0, x.where(reverse, dst, src), x.where(reverse, src, dst),
                   x.zeros(1, x.int64), count_picks=False)


def _reverse(x, instance, spec: StepSpec):
    """Whether each edge drawn from the pool is reported head first: on an undirected graph a fair coin per pick
    (keyed by its instance and its rank there), so that either direction of an edge is as likely."""
    if spec.params.edge_pool == "degrees":
        return x.zeros(instance.shape[0], bool)
    _, offsets = _segments(x, instance)
    pick = x.arange(instance.shape[0])
    rank = pick - offsets[x.searchsorted(offsets[1:], pick, side="right")]
    return _rng.unit_array(_rng.draws(x, spec.key, instance, DIRECTION_STEP, rank)) < 0.5


def _row_picks(spec: StepSpec, level: int) -> bool:
    """Whether each entry at depth ``level`` picks straight off its vertex's CSR row (``_neighbor.sample``, one depth):
    a built-in edge bias and a fixed count, the same picks as SELECT over its candidate table, which is not made (at
    a hub, a row of its degree per instance that reaches it)."""
    return spec.params.edge_bias in ("uniform", "weight") and isinstance(spec.params.neighbor_sizes[level], int)


def _races(spec: StepSpec, level: int) -> bool:
    """Whether a selection over the whole frontier's neighbors at depth ``level`` runs as exponential races (see
    _race_entries)."""
    return (not callable(spec.params.edge_bias) and not spec.params.replace
            and spec.params.neighbor_sizes[level] is not None)


def _race_entries(x, part, table: _Table, instance, vertex, *, key, offsets, edge, level: int, spec: StepSpec):
    """At the frontier's owner: this partition's share of each instance's picks from its frontier's neighbors.

    Every candidate edge runs an exponential race (``kernels/race.cu``); an
    instance's picks are its ``k`` fastest over all partitions, in order —
    updated sampling's distribution — so each partition sends the home only
    its own ``k`` fastest per instance instead of the whole pool.
    """
    bias = _biases(x, "edge_bias", spec.params.edge_bias, table)
    step = INSTANCE_NEIGHBOR_STEP + level
    want = _wanted(x, spec, instance, level, COUNT_STEP + step, None)
    win_offsets, winners, races = race(bias, offsets, want, key, spec.key, step)
    entry = x.searchsorted(win_offsets[1:], x.arange(winners.shape[0]), side="right")
    rows = {"instance": instance[entry], "frontier": vertex[entry],
            "candidate": part.indices[edge[winners]].astype(x.int64), "race": races}
    won = _fastest(x, rows, level, spec)
    movers = {k: v[won] for k, v in rows.items()}
    size = won.shape[0]
    movers.update(depth=x.full(size, level, x.int32), stage=x.full(size, NEIGHBORS, x.int8),
                  to=movers["instance"] % (len(part.bounds) - 1))
    return _no_edges(x), movers, 0


def _fastest(x, rows: dict, level: int, spec: StepSpec):
    """Indices of each instance's ``k`` fastest rows, instance by instance, fastest first."""
    order = x.lexsort(x.stack([rows["race"], rows["instance"].astype(x.float64)]))
    instance = rows["instance"][order]
    streams, offsets = _segments(x, instance)
    want = _wanted(x, spec, streams, level, COUNT_STEP + INSTANCE_NEIGHBOR_STEP + level, None)
    rank = x.arange(instance.shape[0])
    segment = x.searchsorted(offsets[1:], rank, side="right")
    return order[rank - offsets[segment] < want[segment]]


_STAGES = {POOL: _pool, FRONTIER: _frontier, EXPAND: _expand_stage, NEIGHBORS: _neighbors, RESOLVE: _resolve}


def _picked(x, spec: StepSpec, instance, level: int, src, dst, iterations, *, count_picks: bool = True):
    """The sampled edges of a depth, and the picked vertices as the next depth's pool entries."""
    size = instance.shape[0]
    out = {"instance": instance, "depth": x.full(size, level, x.int32), "src": src, "dst": dst,
           "picks": x.full(1, size if count_picks else 0, x.int64), "iterations": x.full(1, int(iterations.sum()),
                                                                                        x.int64)}
    if level + 1 < spec.params.depth:
        movers = {"instance": instance, "vertex": dst, "depth": x.full(size, level + 1, x.int32),
                  "stage": x.full(size, POOL, x.int8)}
    else:
        movers = {"instance": x.zeros(0, x.int64), "vertex": x.zeros(0, x.int64), "depth": x.zeros(0, x.int32),
                  "stage": x.zeros(0, x.int8)}
    return out, movers, size


def _no_edges(x, picks: int = 0, iterations: int = 0) -> dict:
    return {"instance": x.zeros(0, x.int64), "depth": x.zeros(0, x.int32), "src": x.zeros(0, x.int64),
            "dst": x.zeros(0, x.int64), "picks": x.full(1, picks, x.int64), "iterations": x.full(1, iterations, x.int64)}


def _segments(x, instance):
    """The distinct instances of a sorted array and where each one's rows start and end."""
    streams, starts = x.unique(instance, return_index=True)
    return streams, x.concatenate([starts, x.asarray([instance.shape[0]])]).astype(x.int64)


class _Table(dict):
    """A bias function's table of ``size`` rows: its columns, plus those made on first read (name -> function)."""

    def __init__(self, columns: dict, size: int | None = None, **lazy):
        super().__init__(columns)
        self.size = size if size is not None else next(iter(columns.values())).shape[0]
        self._lazy = lazy

    def __missing__(self, name: str):
        if name not in self._lazy:
            raise KeyError(f"the bias table has no column {name!r}; it has {sorted([*self, *self._lazy])}")
        value = self[name] = self._lazy[name]()
        return value


def _graph_array(spec: StepSpec, name: str):
    """A per-vertex array of the run's graph (e.g. its out-degrees), on this worker's device."""
    return graph_array(spec.params.graph_id, name)


@dataclasses.dataclass
class SamplerState:
    """A sampler run's state on a worker, by partition: the (instance, vertex) keys it has expanded there, and the
    frontier keys its last draw of frontiers made (for ``in_frontier``)."""

    visited: dict = dataclasses.field(default_factory=dict)
    frontier: dict = dataclasses.field(default_factory=dict)


def _visited(x, part, run: Run, add=None):
    """The (instance, vertex) keys this run has expanded on this partition, after adding ``add``."""
    visited = run.state(SamplerState).visited
    seen = visited.get(part.part, x.zeros(0, x.int64))
    if add is not None:
        seen = visited[part.part] = unique(x, x.concatenate([seen, add]))
    return seen


def _frontier_keys(x, part, entries: dict, rows, spec: StepSpec, run: Run):
    """The (instance, vertex) keys of the frontier of this home's instances, for ``in_frontier``."""
    if spec.params.frontier_size is not None:
        return run.state(SamplerState).frontier.pop(part.part)
    return entries["instance"][~rows] * spec.params.num_vertices + entries["frontier"][~rows]


def _implicit_vertices(x, instances, spec: StepSpec):
    """Each instance's frontier drawn from every vertex: uniformly, or in proportion to degree via uniform edges."""
    if spec.params.vertex_bias == "uniform":
        return _first_distinct(x, instances, spec.params.frontier_size, spec.params.num_vertices, FRONTIER_STEP, spec)
    degrees = _graph_array(spec, "degrees")
    ends = x.cumsum(degrees)
    return _first_distinct(x, instances, spec.params.frontier_size, int(ends[-1]), FRONTIER_STEP, spec,
                           source=lambda e: x.searchsorted(ends, e, side="right"), distinct=int((degrees > 0).sum()))


def _first_distinct(x, instances, want: int, size: int, step: int, spec: StepSpec, *, source=None,
                    distinct: int | None = None):
    """Per instance, ``want`` uniform draws in [0, size) — or the vertices ``source(draw)`` they map to — the
    first distinct ones of the i.i.d. sequence (the successive picks of updated sampling), or all of them with
    ``spec.params.replace``.

    Returns ``(instance, value)`` rows, each instance's in pick order. ``distinct`` is how many distinct
    values there are (default ``size``).
    """
    replace = spec.params.replace
    want = want if replace else min(want, size if distinct is None else distinct)
    span = size if source is None else spec.params.num_vertices
    count = x.zeros(instances.shape[0], x.int64)
    drawn = x.zeros(instances.shape[0], x.int64)
    seen = x.zeros(0, x.int64)
    rows, values = [], []
    while True:
        need = want - count
        total = int(need.sum())
        if total == 0:
            break
        starts = x.cumsum(need) - need
        row = x.repeat(x.arange(instances.shape[0]), need)
        draw = drawn[row] + x.arange(total) - starts[row]
        v = x.minimum((_rng.unit_array(_rng.draws(x, spec.key, instances[row], step, draw)) * size)
                      .astype(x.int64), size - 1)
        if source is not None:
            v = source(v)
        if replace:
            accept = x.ones(total, bool)
        else:  # in draw order: a value new to its instance and not drawn before in this round
            keys = row * span + v
            _, first = x.unique(keys, return_index=True)
            accept = x.zeros(total, bool)
            accept[first] = True
            accept &= ~x.isin(keys, seen)
            seen = x.concatenate([seen, keys[accept]])
        rows.append(row[accept])
        values.append(v[accept])
        count += x.bincount(row[accept], minlength=instances.shape[0])
        drawn += need
    row, v = x.concatenate(rows), x.concatenate(values)
    order = x.argsort(row, kind="stable")
    return instances[row[order]], v[order]


def _wanted(x, spec: StepSpec, streams, level: int, step: int, degree):
    """Neighbors to pick per segment at depth ``level``: a constant, all, or (forest fire) geometric with mean
    p / (1 - p)."""
    size = spec.params.neighbor_sizes[level]
    if size is None:
        return degree.astype(x.int64)
    if isinstance(size, int):
        return x.full(streams.shape[0], size, dtype=x.int64)
    # geometric: count trials of probability p until one fails, one draw per trial
    p = size[1]
    count = x.zeros(streams.shape[0], dtype=x.int64)
    burning = x.ones(streams.shape[0], dtype=bool)
    trial = 0
    while bool(burning.any()):
        burning &= _rng.unit_array(_rng.draws(x, spec.key, streams, step, trial)) < p
        count += burning
        trial += 1
    return count


def _biases(x, name: str, bias, table: _Table):
    if bias == "uniform":
        return x.ones(table.size, dtype=x.float64)
    if bias in ("weight", "degree"):
        return table[bias].astype(x.float64)
    values = x.asarray(bias(table), dtype=x.float64).reshape(-1)
    if values.shape[0] != table.size:
        raise GpipeValueError(f"'{name}' must return one bias per row ({table.size}), got {values.shape[0]}")
    if not bool(x.all(x.isfinite(values) & (values >= 0))):
        raise GpipeValueError(f"'{name}' must return finite, non-negative biases")
    return values
