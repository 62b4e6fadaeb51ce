"""The bias-centric Sampler (C-SAW's MAIN loop) on the partitioned runtime.

C-SAW's loop, for every instance at once::

    FrontierPool = Seeds
    for depth in range(Depth):
        Frontier     = SELECT(VERTEXBIAS(FrontierPool), FrontierSize)    # per instance
        NeighborPool = GATHERNEIGHBORS(Frontier)
        Sampled     += SELECT(EDGEBIAS(NeighborPool), NeighborSize)      # per frontier vertex, or per instance
        FrontierPool = UPDATE(Sampled)

Entries ``(instance, vertex, depth)`` of all instances share one queue per
partition and travel, like walkers, to the partition owning their vertex, where
the vertex's degree and out-edges are. A selection over an instance's whole
pool (``frontier_size``, or ``neighbor_pool='frontier'``: layer sampling) sees
candidates from every partition, so those candidates go to the instance's
*home* partition (``instance % P``), which sorts them into a canonical order and
runs SELECT there — except that, with a built-in edge bias, a selection over
the frontier's neighbors runs as exponential races, where each partition sends
only its fastest candidates. Every selection draws from a stream keyed by what it
selects for — ``(instance, vertex)`` or ``instance`` — and the depth, so the
samples do not depend on the partitioning or the device.

Without seeds the pool is every vertex (or, for ``neighbor_pool='frontier'``
without ``frontier_size``, every edge): the home draws from it directly,
uniformly or by degree, without listing it — C-SAW's random node and random
edge sampling.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import psutil

from .. import _rng, config
from .._validate import (check_array, check_bool, check_budget, check_choice, check_int, check_optional_int,
                         check_picklable, check_probability, check_seed)
from ..backend import ranges_within, to_host, unique
from ..errors import GpipeValueError
from ..graph import check_graph
from ..runtime import (EdgeSample, Run, SampleLayout, StartSet, StepSpec, check_memory, output_totals, run_supersteps,
                       store, worker_xp)
from . import _fused
from ._race import race
from ._select import METHODS, select

VERTEX_BIASES = ("uniform", "degree")
EDGE_BIASES = ("uniform", "weight", "degree")
UPDATES = ("all", "unvisited")
NEIGHBOR_POOLS = ("vertex", "frontier")
POOL, FRONTIER, EXPAND, NEIGHBORS, RESOLVE = range(5)  # the stages an entry goes through
# The draw counter's step (``step << 32 | draw``) of each kind of draw, plus the depth: apart from each other.
NEIGHBOR_STEP, INSTANCE_NEIGHBOR_STEP, FRONTIER_STEP, DIRECTION_STEP, COUNT_STEP = 0, 1 << 29, 2 << 29, 3 << 29, 1 << 31
EDGE_COLUMNS = ("instance", "depth", "src", "dst")
# the sampled edges' rows, in canonical order: by instance, depth, src, dst; an instance's expanded vertices beside
SAMPLE_LAYOUT = SampleLayout((("instance", "int64"), ("depth", "int32"), ("src", "int64"), ("dst", "int64")),
                             order=EDGE_COLUMNS, vertices=("node_instance", "node_vertex"))


EDGE_BYTES = 28  # a sampled edge on the workers: instance (int64), depth (int32), src, dst (int64)
CANDIDATE_BYTES = 64  # a candidate row of a step, about: its columns, its bias and SELECT's scratch
_TOTALS = functools.partial(output_totals, rows_of="instance", sums=("picks", "iterations"))  # a partition's sample


@dataclass(frozen=True)
class Settings:
    """A sampler run's parameters, as its step reads them on the workers: the :class:`Sampler`'s, and the run's.

    ``implicit``: no seeds, every vertex (or edge) is the first pool;
    ``graph_id``: the graph whose per-vertex arrays (its degrees, in the
    workers' stores) the run reads; ``edge_pool``: the array whose prefix sums
    number the edges of the pool when every edge is it; ``fused``: every depth
    runs in one launch per worker (``_fused``), whose scratch holds a row of
    ``max_degree`` candidates; ``candidate_budget``: bytes, or None for 'auto', of a
    superstep's candidate table (``gpipe.sampling.candidate-budget``, see
    :func:`_entry_chunks`).
    """

    vertex_bias: str | Callable
    edge_bias: str | Callable
    update: str
    frontier_size: int | None
    neighbor_size: int | None | tuple
    neighbor_pool: str
    depth: int
    replace: bool
    select: str
    bitmap: bool
    num_vertices: int
    implicit: bool
    graph_id: str
    edge_pool: str | None
    fused: bool = False
    max_degree: int = 0
    candidate_budget: int | None = None


class Sampler:
    """A traversal sampler defined by its biases and its update rule (C-SAW's API).

    Parameters
    ----------
    vertex_bias : {'uniform', 'degree'} or callable
        The bias of each vertex of an instance's frontier pool, when
        ``frontier_size`` selects from it. A callable receives the table
        ``instance, vertex, degree, depth`` (a dict of arrays: numpy on the
        CPU, cupy on the GPU) and returns one non-negative bias per row. A
        callable runs on the workers, so it must be picklable by cloudpickle
        (not hold a lock or a file open for writing, say).
    edge_bias : {'uniform', 'weight', 'degree'} or callable
        The bias of each candidate edge: 1, its weight, or the out-degree of
        its head. A callable receives the candidate table ``instance,
        frontier, candidate, weight, degree, depth`` — and, with
        ``neighbor_pool='frontier'``, ``in_frontier`` (the candidate is in the
        instance's frontier) — and returns one bias per row, vectorized, so it
        runs unchanged on both devices. Columns are computed when first read.
        Picklable, as ``vertex_bias``.
    update : {'all', 'unvisited'}
        Which picked neighbors join the next frontier pool: all of them (a
        vertex once per instance and depth), or those the instance has not
        expanded yet.
    frontier_size : int or None
        Vertices each instance selects from its pool, by ``vertex_bias``, to
        expand; None: the whole pool.
    neighbor_size : int, None or ('geometric', p)
        Neighbors picked per frontier vertex (``neighbor_pool='vertex'``) or per
        instance from all its frontier's neighbors (``'frontier'``); None: all;
        ``('geometric', p)``: a count drawn each time, geometric with mean
        ``p / (1 - p)`` (forest fire's burning).
    neighbor_pool : {'vertex', 'frontier'}
        Where ``neighbor_size`` applies.
    depth : int
        Frontier expansions.
    replace : bool
        Pick neighbors with replacement (independent draws) instead of without.
    select : {'bipartite', 'updated', 'repeated', 'alias'}
        The SELECT method without replacement (same distribution; for the
        ablation, and 'alias' for speed: O(1) draws through alias tables,
        each row's kept with the graph for picks off the rows). Selections
        over the whole frontier's neighbors with a built-in ``edge_bias`` run
        as exponential races instead.
    bitmap : bool
        Detect SELECT's collisions with a strided bitmap (else by scanning the picks).

    Notes
    -----
    Neighbor-style sampling — ``edge_bias`` 'uniform' or 'weight', ``update='all'``, no ``frontier_size``, an
    int ``neighbor_size`` per vertex, seeds given — on a graph whole on each worker (replicated mode, or one
    partition) runs every depth in one launch per worker (``kernels/neighbor.cu``), with SELECT's draws for
    each (instance, vertex) and depth; other configurations, or ``gpipe.sampling.fused`` false, run supersteps.
    The sample is the same. In supersteps, picks by a built-in ``edge_bias`` and an int ``neighbor_size`` are
    made by the same kernel, one depth at a time, straight off the rows: no table of every candidate edge (at
    R-MAT 24 on 2 GPUs, 16,000 instances of fanout 8 and depth 3 took 214 ms a superstep with one).

    Examples
    --------
    The three functions that define neighbor sampling (C-SAW's Fig. 3)::

        VERTEXBIAS: none (frontier_size=None)   EDGEBIAS: 1   UPDATE: every picked neighbor
        Sampler(edge_bias="uniform", update="all", neighbor_size=fanout, depth=depth)

    >>> import gpipe
    >>> from gpipe.sampling import Sampler
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=0)
    ...     edges = Sampler(neighbor_size=2, depth=2).run(g, seeds=[0, 1, 2], seed=5).compute()
    >>> edges.columns.tolist()
    ['instance', 'depth', 'src', 'dst']
    >>> edges.groupby("instance").size().tolist()
    [6, 6, 3]
    """

    def __init__(self, vertex_bias: str | Callable = "uniform", edge_bias: str | Callable = "uniform",
                 update: str = "all", frontier_size: int | None = None, neighbor_size: int | None | tuple = 2,
                 neighbor_pool: str = "vertex", depth: int = 2, replace: bool = False, select: str = "bipartite",
                 bitmap: bool = True):
        self.vertex_bias = (check_picklable("vertex_bias", vertex_bias) if callable(vertex_bias)
                            else check_choice("vertex_bias", vertex_bias, VERTEX_BIASES))
        self.edge_bias = (check_picklable("edge_bias", edge_bias) if callable(edge_bias)
                          else check_choice("edge_bias", edge_bias, EDGE_BIASES))
        self.update = check_choice("update", update, UPDATES)
        self.frontier_size = check_optional_int("frontier_size", frontier_size, minimum=1)
        if isinstance(neighbor_size, tuple):
            if len(neighbor_size) != 2 or neighbor_size[0] != "geometric":
                raise GpipeValueError(f"'neighbor_size' must be an int, None or ('geometric', p), got {neighbor_size!r}")
            neighbor_size = ("geometric", check_probability("p", neighbor_size[1], open_high=True))
        elif neighbor_size is not None:
            neighbor_size = check_int("neighbor_size", neighbor_size, minimum=1)
        self.neighbor_size = neighbor_size
        self.neighbor_pool = check_choice("neighbor_pool", neighbor_pool, NEIGHBOR_POOLS)
        self.depth = check_int("depth", depth, minimum=1)
        replace = check_bool("replace", replace)
        if replace and neighbor_size is None:
            raise GpipeValueError("'replace' = True needs a 'neighbor_size' (all neighbors are taken once)")
        self.replace = replace
        self.select = check_choice("select", select, tuple(METHODS))
        self.bitmap = check_bool("bitmap", bitmap)

    def _most_edges(self, g, first_frontier: int) -> int | None:
        """The most edges one instance can sample from a first frontier of ``first_frontier`` vertices.

        None when ``neighbor_size`` is None (all neighbors: bounded by the
        graph alone) or random with replacement. Without replacement a vertex gives at most its degree
        and a level at most every edge, so a large ``neighbor_size`` or depth on a small graph is not refused.
        A random ``('geometric', p)`` count is taken at its mean, rounded up: its largest value, a hub's
        whole degree at every vertex, would refuse forest fire on any skewed graph (6.5 TiB for 2,000
        instances on R-MAT 22) for a sample that takes a few megabytes.
        """
        if isinstance(self.neighbor_size, tuple):  # ('geometric', p)
            asked = math.ceil(self.neighbor_size[1] / (1 - self.neighbor_size[1]))
        else:
            asked = self.neighbor_size
        if (self.replace and asked is None) or self.neighbor_size is None:
            return None
        most_degree = asked if self.replace else g.max_degree
        asked = most_degree if asked is None else asked
        frontier, most = min(first_frontier, g.num_vertices), 0
        for _ in range(self.depth):  # an instance's frontier holds each vertex once
            if self.frontier_size is not None:
                frontier = min(frontier, self.frontier_size)
            if self.neighbor_pool == "frontier":
                picks = min(asked, frontier * most_degree)
            else:
                picks = frontier * min(asked, most_degree)
            if not self.replace:  # distinct vertices pick distinct edges
                picks = min(picks, g.num_edges * (1 if g.directed else 2))  # stored both ways
            most += picks
            frontier = min(picks, g.num_vertices)
        return most

    def run(self, g, seeds=None, instances: int | None = None, seed: int = 0) -> EdgeSample:
        """Sample ``instances`` subgraphs.

        ``seeds``: a 1-D array (one instance per seed, or, given ``instances``,
        that many instances each starting from all of them), a 2-D array (a row
        of seeds per instance), or None: every vertex is the first frontier
        pool of each of ``instances`` (default 1) instances — which needs
        ``frontier_size`` (random node) or ``neighbor_pool='frontier'`` (random
        edge: an undirected edge is in the pool once, and picked in a random
        direction). Returns an :class:`EdgeSample`: ``compute()`` the sampled
        edges ``instance, depth, src, dst``, ``nodes()`` each instance's
        vertices ``instance, vertex`` — the frontiers it expanded (its seeds,
        its picked vertices: those without an edge too) and its edges' ends.
        """
        check_graph("g", g)
        seed = check_seed("seed", seed)
        instances = check_optional_int("instances", instances, minimum=1)
        for name, bias in (("edge_bias", self.edge_bias), ("vertex_bias", self.vertex_bias)):
            if bias == "weight" and not g.weighted:
                raise GpipeValueError(f"'{name}' = 'weight' needs a graph with edge weights; this graph has none")
        parts = g.num_partitions
        if seeds is None:
            count = instances or 1
            entries = self._implicit_entries(count, parts)
        else:
            seeds = check_array("seeds", seeds)
            if seeds.ndim not in (1, 2) or seeds.size == 0:
                raise GpipeValueError(f"'seeds' must be None or a non-empty 1-D or 2-D array of vertices, "
                                      f"got shape {seeds.shape}")
            if instances is not None and seeds.ndim == 2:
                raise GpipeValueError("'instances' applies to 1-D 'seeds' (each instance starts from all of them); "
                                      f"got 2-D seeds of shape {seeds.shape}")
            dense = g.to_internal(seeds, "seeds")
            if seeds.ndim == 1 and not instances:  # an instance per seed: the seeds go, their entries made there
                count, first = dense.size, 1
                entries = StartSet(dense.astype(g.vertex_dtype), 1, total=count)
            else:
                dense = np.tile(dense, (instances, 1)) if instances else dense.reshape(seeds.shape)
                count, first = dense.shape
                instance = np.repeat(np.arange(count, dtype=np.int64), first)
                entries = {"instance": instance, "vertex": dense.ravel().astype(np.int64),
                           "depth": np.zeros(instance.size, np.int32), "stage": np.full(instance.size, POOL, np.int8)}
        if seeds is None:
            first = self.frontier_size or g.num_vertices
        most = self._most_edges(g, first)
        if most is not None:  # refused before any work, not a worker lost to its memory
            check_memory(g, count * most * EDGE_BYTES, "'instances' x the seeds x 'neighbor_size' ** 'depth'",
                         "sampled edges")
        client = g.client
        edge_pool = None
        if seeds is None and self.frontier_size is None:  # every edge is the pool; an undirected one once
            edge_pool = "degrees" if g.directed else "upper_degrees"
        settings = Settings(**{k: getattr(self, k) for k in (
            "vertex_bias", "edge_bias", "update", "frontier_size", "neighbor_size", "neighbor_pool", "depth", "replace",
            "select", "bitmap")}, num_vertices=g.num_vertices, implicit=seeds is None, graph_id=g.graph_id,
            edge_pool=edge_pool, fused=self._fuses(g, seeds is not None, count), max_degree=int(g.max_degree),
            candidate_budget=check_budget("gpipe.sampling.candidate-budget", None, "sampling.candidate-budget"))
        arrays = {"degrees"} if self.edge_bias == "degree" or callable(self.edge_bias) else set()
        if seeds is None and self.frontier_size is not None and self.vertex_bias == "degree":
            arrays.add("degrees")
        if edge_pool is not None:
            arrays.add(edge_pool)
        g.put_on_workers(arrays)
        spec = StepSpec(_step, np.uint64(_rng.key(seed)), settings, start=_seed_entries)
        run_id, partitions, stats = run_supersteps(g, spec, entries, num_walks=count, summarize=_TOTALS)
        totals = stats.pop("outputs")
        edges, picks, iterations = (sum(t[name] for t in totals) for name in ("rows", "picks", "iterations"))
        stats.update(algorithm="sampler", instances=count, edges=edges,
                     edges_per_second=edges / stats["seconds"] if stats["seconds"] > 0 else 0.0,
                     select=self.select, bitmap=self.bitmap, select_picks=picks,
                     iterations_per_pick=iterations / picks if picks else 0.0)
        return EdgeSample.of_runs(client, (run_id,), partitions, SAMPLE_LAYOUT, count, edges, g.id_map, stats)

    def _fuses(self, g, seeded: bool, instances: int) -> bool:
        """Whether the run takes the fused path: neighbor-style sampling (picks per vertex by a built-in edge bias
        of the vertex's own edges, every pick in the next frontier) on a graph whole on each worker, unless
        ``gpipe.sampling.fused`` is false. The sample is the same either way."""
        return (bool(config.get("sampling.fused")) and seeded and self.edge_bias in ("uniform", "weight")
                and self.update == "all" and self.frontier_size is None and isinstance(self.neighbor_size, int)
                and self.neighbor_pool == "vertex" and (g.replicas is not None or g.num_partitions == 1)
                and instances * g.num_vertices * self.depth < 2 ** 62)  # a task's packed id fits

    def _implicit_entries(self, count: int, parts: int) -> dict:
        """The first entries when every vertex (or edge) is the pool: one per instance, sent to its home."""
        if self.frontier_size is not None:
            if callable(self.vertex_bias):
                raise GpipeValueError("without 'seeds' the pool is every vertex, which takes 'vertex_bias' = "
                                      f"'uniform' or 'degree', got {self.vertex_bias!r}")
            stage = FRONTIER
        elif self.neighbor_pool == "frontier":
            if self.edge_bias != "uniform" or not isinstance(self.neighbor_size, int):
                raise GpipeValueError("without 'seeds' and 'frontier_size' the pool is every edge, which takes "
                                      "'edge_bias' = 'uniform' and an int 'neighbor_size', got "
                                      f"{self.edge_bias!r} and {self.neighbor_size!r}")
            stage = NEIGHBORS
        else:
            raise GpipeValueError("'seeds' = None (every vertex is the pool) needs 'frontier_size' or "
                                  "'neighbor_pool' = 'frontier'")
        instance = np.arange(count, dtype=np.int64)
        return {"instance": instance, "vertex": np.full(count, -1, np.int64), "depth": np.zeros(count, np.int32),
                "stage": np.full(count, stage, np.int8), "to": instance % parts}


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
    out = _fused.sample(x, part, entries["instance"], entries["vertex"], key=spec.key, num_vertices=s.num_vertices,
                        depth=s.depth, fanout=s.neighbor_size, step=NEIGHBOR_STEP, weighted=s.edge_bias == "weight",
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
                                      FRONTIER_STEP + level, spec.params.select, spec.params.bitmap)
        instance, vertex = pool_instance[picks], pool_vertex[picks]
    if spec.params.neighbor_pool == "frontier":  # for the candidates' in_frontier
        run.state[(part.part, "frontier")] = instance * n + vertex
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
    if spec.params.neighbor_pool == "vertex" and _row_picks(spec):  # off the CSR rows, no candidate table
        s = spec.params
        out = _fused.sample(x, part, instance, vertex, key=spec.key, num_vertices=n, depth=1, fanout=s.neighbor_size,
                            step=NEIGHBOR_STEP + level, weighted=s.edge_bias == "weight", replace=s.replace,
                            method=s.select, bitmap=s.bitmap, max_degree=s.max_degree)
        return _picked(x, spec, out["instance"], level, out["src"], out["dst"], out["iterations"])
    local = vertex - part.lo
    start, end = part.indptr[local], part.indptr[local + 1]
    if spec.params.neighbor_pool == "vertex":  # each entry's picks its own: taken in chunks of entries
        chunks = [_pick_from(x, part, instance[c], vertex[c], depth[c], key[c], start[c], end[c], level, spec)
                  for c in _entry_chunks(x, end - start, spec.params.candidate_budget)]
        picked_instance, src, dst, iterations = (x.concatenate([chunk[i] for chunk in chunks]) for i in range(4))
        return _picked(x, spec, picked_instance, level, src, dst, iterations)
    offsets, edge, table = _candidates(x, part, instance, vertex, depth, start, end, spec)
    if _races(spec):
        return _race_entries(x, part, table, instance, vertex, key, offsets, edge, level, spec)
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


def _candidates(x, part, instance, vertex, depth, start, end, spec: StepSpec):
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
                   degree=lambda: _graph_array(spec, "degrees")[table["candidate"]])
    return offsets, edge, table


def _pick_from(x, part, instance, vertex, depth, key, start, end, level: int, spec: StepSpec) -> tuple:
    """Each entry's picks among its own vertex's out-edges: the picks' instance, source and destination, and
    SELECT's draws per entry."""
    offsets, edge, table = _candidates(x, part, instance, vertex, depth, start, end, spec)
    bias = _biases(x, "edge_bias", spec.params.edge_bias, table)
    want = _wanted(x, spec, key, COUNT_STEP + level, end - start)
    pick_offsets, picks, iterations = select(bias, offsets, want, key, spec.key, NEIGHBOR_STEP + level,
                                             spec.params.select, spec.params.bitmap, spec.params.replace)
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
        instance, edge = _first_distinct(x, entries["instance"], spec.params.neighbor_size, int(ends[-1]),
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
    want = _wanted(x, spec, streams, COUNT_STEP + INSTANCE_NEIGHBOR_STEP + level, offsets[1:] - offsets[:-1])
    _, picks, iterations = select(bias, offsets, want, streams, spec.key, INSTANCE_NEIGHBOR_STEP + level,
                                  spec.params.select, spec.params.bitmap, spec.params.replace)
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


def _row_picks(spec: StepSpec) -> bool:
    """Whether each entry picks straight off its vertex's CSR row (``_fused.sample``, one depth): a built-in edge
    bias and a fixed count, the same picks as SELECT over its candidate table, which is not made (at a hub, a row
    of its degree per instance that reaches it)."""
    return spec.params.edge_bias in ("uniform", "weight") and isinstance(spec.params.neighbor_size, int)


def _races(spec: StepSpec) -> bool:
    """Whether a selection over the whole frontier's neighbors runs as exponential races (see _race_entries)."""
    return not callable(spec.params.edge_bias) and not spec.params.replace and spec.params.neighbor_size is not None


def _race_entries(x, part, table: _Table, instance, vertex, key, offsets, edge, level: int, spec: StepSpec):
    """At the frontier's owner: this partition's share of each instance's picks from its frontier's neighbors.

    Every candidate edge runs an exponential race (``kernels/race.cu``); an
    instance's picks are its ``k`` fastest over all partitions, in order —
    updated sampling's distribution — so each partition sends the home only
    its own ``k`` fastest per instance instead of the whole pool.
    """
    bias = _biases(x, "edge_bias", spec.params.edge_bias, table)
    step = INSTANCE_NEIGHBOR_STEP + level
    want = _wanted(x, spec, instance, COUNT_STEP + step, None)
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
    want = _wanted(x, spec, streams, COUNT_STEP + INSTANCE_NEIGHBOR_STEP + level, None)
    rank = x.arange(instance.shape[0])
    segment = x.searchsorted(offsets[1:], rank, side="right")
    return order[rank - offsets[segment] < want[segment]]


_STAGES = {POOL: _pool, FRONTIER: _frontier, EXPAND: _expand_stage, NEIGHBORS: _neighbors, RESOLVE: _resolve}


def _picked(x, spec: StepSpec, instance, level: int, src, dst, iterations, count_picks: bool = True):
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
    return store().partitions.array(spec.params.graph_id, name)


def _visited(x, part, run: Run, add=None):
    """The (instance, vertex) keys this run has expanded on this partition, after adding ``add``."""
    state = run.state
    key = part.part
    seen = state.get(key, x.zeros(0, x.int64))
    if add is not None:
        seen = state[key] = unique(x, x.concatenate([seen, add]))
    return seen


def _frontier_keys(x, part, entries: dict, rows, spec: StepSpec, run: Run):
    """The (instance, vertex) keys of the frontier of this home's instances, for ``in_frontier``."""
    if spec.params.frontier_size is not None:
        return run.state.pop((part.part, "frontier"))
    return entries["instance"][~rows] * spec.params.num_vertices + entries["frontier"][~rows]


def _implicit_vertices(x, instances, spec: StepSpec):
    """Each instance's frontier drawn from every vertex: uniformly, or in proportion to degree via uniform edges."""
    if spec.params.vertex_bias == "uniform":
        return _first_distinct(x, instances, spec.params.frontier_size, spec.params.num_vertices, FRONTIER_STEP, spec)
    degrees = _graph_array(spec, "degrees")
    ends = x.cumsum(degrees)
    return _first_distinct(x, instances, spec.params.frontier_size, int(ends[-1]), FRONTIER_STEP, spec,
                           source=lambda e: x.searchsorted(ends, e, side="right"), distinct=int((degrees > 0).sum()))


def _first_distinct(x, instances, want: int, size: int, step: int, spec: StepSpec, source=None,
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


def _wanted(x, spec: StepSpec, streams, step: int, degree):
    """Neighbors to pick per segment: a constant, all, or (forest fire) geometric with mean p / (1 - p)."""
    size = spec.params.neighbor_size
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
