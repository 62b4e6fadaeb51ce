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

from .. import _rng, config
from .._select import METHODS
from .._validate import (
    check_array,
    check_bool,
    check_choice,
    check_edge_dir,
    check_int,
    check_optional_int,
    check_picklable,
    check_probability,
    check_seed,
)
from ..errors import GpipeValueError
from ..graph import check_graph, oriented
from ..runtime import StartSet, StepSpec, check_memory, output_totals, run_supersteps
from ._result import EdgeSample, SampleLayout
from ._step import EDGE_COLUMNS, FRONTIER, NEIGHBORS, POOL, _seed_entries, _step, entry_spans

VERTEX_BIASES = ("uniform", "degree")


EDGE_BIASES = ("uniform", "weight", "degree")


UPDATES = ("all", "unvisited")


NEIGHBOR_POOLS = ("vertex", "frontier")


# the sampled edges' rows, in canonical order: by instance, depth, src, dst; an instance's expanded vertices beside
SAMPLE_LAYOUT = SampleLayout((("instance", "int64"), ("depth", "int32"), ("src", "int64"), ("dst", "int64")),
                             order=EDGE_COLUMNS, vertices=("node_instance", "node_vertex"))


EDGE_BYTES = 28  # a sampled edge on the workers: instance (int64), depth (int32), src, dst (int64)


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
    neighbor_sizes: tuple  # one a depth: an int, None or ('geometric', p)
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
    neighbor_size : int, None, ('geometric', p), or a list of them
        Neighbors picked per frontier vertex (``neighbor_pool='vertex'``) or per
        instance from all its frontier's neighbors (``'frontier'``); None: all;
        ``('geometric', p)``: a count drawn each time, geometric with mean
        ``p / (1 - p)`` (forest fire's burning). A list gives one a depth, from
        the seeds outwards (the fanouts of :func:`neighbor`).
    neighbor_pool : {'vertex', 'frontier'}
        Where ``neighbor_size`` applies.
    depth : int, optional
        Frontier expansions: the length of a list ``neighbor_size``, else 2 by default.
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
    edge_dir : {'out', 'in'}
        The neighbors a frontier vertex reads: its out-neighbors (the edges as
        stored), or its in-neighbors (the sample of the graph's reverse,
        :meth:`gpipe.Graph.reverse`, built at the first such run and kept:
        a sampled ``src, dst`` is then the edge ``dst -> src`` of the graph,
        and a ``'degree'`` bias the in-degree). On an undirected graph the two
        are the same.

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

    def __init__(self, vertex_bias: str | Callable = "uniform", edge_bias: str | Callable = "uniform", *,
                 update: str = "all", frontier_size: int | None = None,
                 neighbor_size: int | None | tuple | list = 2, neighbor_pool: str = "vertex", depth: int | None = None,
                 replace: bool = False, select: str = "bipartite", bitmap: bool = True, edge_dir: str = "out"):
        self.vertex_bias = (check_picklable("vertex_bias", vertex_bias) if callable(vertex_bias)
                            else check_choice("vertex_bias", vertex_bias, VERTEX_BIASES))
        self.edge_bias = (check_picklable("edge_bias", edge_bias) if callable(edge_bias)
                          else check_choice("edge_bias", edge_bias, EDGE_BIASES))
        self.update = check_choice("update", update, UPDATES)
        self.frontier_size = check_optional_int("frontier_size", frontier_size, minimum=1)
        if isinstance(neighbor_size, (list, tuple)) and (not neighbor_size or neighbor_size[0] != "geometric"):
            if not neighbor_size:
                raise GpipeValueError("'neighbor_size' must be an int, None, ('geometric', p) or a non-empty list of "
                                      "them (one a depth), got []")
            self.neighbor_sizes = tuple(_neighbor_size(size) for size in neighbor_size)
            if depth is not None and check_int("depth", depth, minimum=1) != len(neighbor_size):
                raise GpipeValueError(f"'depth' must be None or the length of 'neighbor_size' ({len(neighbor_size)}), "
                                      f"got {depth}")
            self.neighbor_size: int | None | tuple | list = list(self.neighbor_sizes)  # one a depth
        else:
            self.neighbor_sizes = (_neighbor_size(neighbor_size),) * check_int("depth", 2 if depth is None else depth,
                                                                               minimum=1)
            self.neighbor_size = self.neighbor_sizes[0]
        self.neighbor_pool = check_choice("neighbor_pool", neighbor_pool, NEIGHBOR_POOLS)
        self.depth = len(self.neighbor_sizes)
        replace = check_bool("replace", replace)
        if replace and None in self.neighbor_sizes:
            raise GpipeValueError("'replace' = True needs a 'neighbor_size' at every depth (all neighbors are taken "
                                  f"once), got {self.neighbor_size!r}")
        self.replace = replace
        self.select = check_choice("select", select, tuple(METHODS))
        self.bitmap = check_bool("bitmap", bitmap)
        self.edge_dir = check_edge_dir(edge_dir)

    def _most_edges(self, g, first_frontier: int) -> int | None:
        """The most edges one instance can sample from a first frontier of ``first_frontier`` vertices.

        None when ``neighbor_size`` is None (all neighbors: bounded by the
        graph alone) or random with replacement. Without replacement a vertex gives at most its degree
        and a level at most every edge, so a large ``neighbor_size`` or depth on a small graph is not refused.
        A random ``('geometric', p)`` count is taken at its mean, rounded up: its largest value, a hub's
        whole degree at every vertex, would refuse forest fire on any skewed graph (6.5 TiB for 2,000
        instances on R-MAT 22) for a sample that takes a few megabytes.
        """
        if None in self.neighbor_sizes:
            return None
        frontier, most = min(first_frontier, g.num_vertices), 0
        for size in self.neighbor_sizes:  # an instance's frontier holds each vertex once
            asked = math.ceil(size[1] / (1 - size[1])) if isinstance(size, tuple) else size  # ('geometric', p)
            most_degree = asked if self.replace else g.max_degree
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
        g = oriented(check_graph("g", g), self.edge_dir)
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
                entries = StartSet(dense.astype(g.vertex_dtype), 1, total=count)  # type: ignore[assignment]
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
            "vertex_bias", "edge_bias", "update", "frontier_size", "neighbor_sizes", "neighbor_pool", "depth",
            "replace", "select", "bitmap")}, num_vertices=g.num_vertices, implicit=seeds is None, graph_id=g.graph_id,
            edge_pool=edge_pool, fused=self._fuses(g, seeds is not None, count), max_degree=int(g.max_degree),
            candidate_budget=config.budget("sampling.candidate-budget"))
        arrays = {"degrees"} if self.edge_bias == "degree" or callable(self.edge_bias) else set()
        if seeds is None and self.frontier_size is not None and self.vertex_bias == "degree":
            arrays.add("degrees")
        if edge_pool is not None:
            arrays.add(edge_pool)
        g.put_on_workers(arrays)
        spec = StepSpec(_step, np.uint64(_rng.key(seed)), settings, start=_seed_entries,
                        spans=entry_spans(count, parts, self.depth))
        run_id, partitions, stats, _ = run_supersteps(g, spec, entries, num_walks=count, summarize=_TOTALS)
        totals = stats.pop("outputs")
        edges, picks, iterations = (sum(t[name] for t in totals) for name in ("rows", "picks", "iterations"))
        stats.update(algorithm="sampler", instances=count, edges=edges,
                     edges_per_second=edges / stats["seconds"] if stats["seconds"] > 0 else 0.0,
                     select=self.select, bitmap=self.bitmap, select_picks=picks,
                     iterations_per_pick=iterations / picks if picks else 0.0)
        return EdgeSample.of_runs(client, (run_id,), partitions, layout=SAMPLE_LAYOUT, instances=count, rows=edges,
                                  id_map=g.id_map, stats=stats)

    def _fuses(self, g, seeded: bool, instances: int) -> bool:
        """Whether the run takes the fused path: neighbor-style sampling (picks per vertex by a built-in edge bias
        of the vertex's own edges, every pick in the next frontier) on a graph whole on each worker, unless
        ``gpipe.sampling.fused`` is false. The sample is the same either way."""
        return (bool(config.get("sampling.fused")) and seeded and self.edge_bias in ("uniform", "weight")
                and self.update == "all" and self.frontier_size is None
                and all(isinstance(size, int) for size in self.neighbor_sizes)
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
            if self.edge_bias != "uniform" or not isinstance(self.neighbor_sizes[0], int):
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


def _neighbor_size(size):
    """One depth's ``neighbor_size``, checked: an int, None or ('geometric', p)."""
    if isinstance(size, (list, tuple)):
        if len(size) != 2 or size[0] != "geometric":
            raise GpipeValueError(f"'neighbor_size' must be an int, None or ('geometric', p) (or a list of them, one "
                                  f"a depth), got {size!r}")
        return "geometric", check_probability("p", size[1], open_high=True)
    return None if size is None else check_int("neighbor_size", size, minimum=1)
