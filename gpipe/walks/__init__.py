"""Random walks on the partitioned runtime: a step kernel pair (CUDA + CPU twin) and one function each.

Every walk takes the graph first and the vertices its walks start at second:
``start``, by position or by name, as the random walks of cuGraph
(``start_vertices``), DGL (``nodes``) and torch_cluster (``start``) take them;
``seed`` is always the random stream. It starts ``walks_per_vertex`` walks
from every vertex or from the ``start`` vertices (walk ``r * len(start) + i``
is the ``r``-th from ``start[i]``), takes at most ``length`` steps, ends early
at a vertex with no out-edge, and draws its random numbers from
``(seed, walk id, step)`` only: the walks are the same for any number of
partitions, workers or GPUs, on the CPU and on the GPU. With ``edge_dir='in'``
a walk steps along in-edges instead, to an in-neighbor (it walks the graph's
reverse, :meth:`gpipe.Graph.reverse`, built at the first such walk and kept):
``u -> v`` in a walk is then the edge ``v -> u`` of the graph.

DeepWalk, walks with jump, PPR and node2vec also run on a graph that changes
(:class:`gpipe.dynamic.DynamicGraph`): a run reads the snapshot of its last
committed batch (:meth:`~gpipe.dynamic.DynamicGraph.snapshot`, taken when the
walk is called, so batches applied meanwhile are not seen) and draws each step
from the partition's sampling space on the worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._validate import check_bool, check_edge_dir, check_int, check_probability, check_seed, renamed
from ..dynamic import DynamicGraph, Snapshot
from ..errors import GpipeValueError
from ..graph import check_graph, oriented
from ..runtime import VERTEX, Span
from ..sampling import EdgeSample
from . import _frontier, _mh, _node2vec
from ._dynamic import N2V_FIELDS, N2V_SPANS, advance_dynamic, advance_node2vec_dynamic
from ._first_order import ROUTED_ROOM, FirstOrder, advance_first_order, sector_fields
from ._ppr import PPRResult
from ._result import WalkResult
from ._walkers import run_walks, walk_spec

__all__ = ["PPRResult", "WalkResult", "deepwalk", "metropolis_hastings", "multidimensional", "node2vec", "ppr",
           "with_jump"]


def deepwalk(g, start=None, length: int = 80, walks_per_vertex: int = 1, weighted: bool = False, seed: int = 0,
             *, progress: Callable | None = None, edge_dir: str = "out") -> WalkResult:
    """Uniform random walks (DeepWalk), or walks biased by edge weight.

    Each step moves to an out-neighbor chosen uniformly at random, or with
    probability proportional to the edge's weight when ``weighted`` (biased
    DeepWalk: inverse transform sampling over per-partition prefix sums of the
    weights, built once, O(log degree) per step). On a dynamic graph, the step
    is uniform over the out-edges (a duplicated edge counts once per copy), or
    drawn from the vertex's radix-factorized sampling space when ``weighted``
    (bias = weight; Bingo's: a group by the alias table over the groups, then a
    member uniformly, with rejection where the group needs it; O(1) expected).

    Parameters
    ----------
    g : Graph, gpipe.dynamic.DynamicGraph or gpipe.dynamic.Snapshot
        A dynamic graph is walked as its snapshot at the call (see the module's
        doc); the ids are its dense ids, with the vertices updates added.
    start : array-like, optional
        Start vertices (original ids), a list or an array, in walk order;
        default every vertex of ``g``.
    length : int
        Steps per walk (each row holds ``length + 1`` vertices).
    walks_per_vertex : int
        Walks started from each start vertex.
    weighted : bool
        Bias each step by the edge weights (``g`` must have them).
    seed : int
        Seed of the random stream.
    progress : callable, optional
        Called after every superstep with ``superstep, active, steps, total``.
    edge_dir : {'out', 'in'}
        Step to an out-neighbor (the edges as stored), or to an in-neighbor
        (a static graph only; see the module's doc).

    Returns
    -------
    WalkResult
        ``.compute()``, ``.to_corpus(path)``, ``.to_parquet(path)``, ``.stats``.

    Raises
    ------
    GpipeValueError
        A parameter is out of range or a start vertex is not in the graph.

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2, 2], "dst": [1, 2, 0, 3]}))
    ...     gpipe.walks.deepwalk(g, length=4, seed=7).compute()
    array([[0, 1, 0, 2, 1],
           [1, 2, 3, 2, 0],
           [2, 1, 2, 0, 2],
           [3, 2, 1, 2, 0]])
    """
    return _first_order(g, "deepwalk", length=length, walks_per_vertex=walks_per_vertex, start=start,
                        weighted=weighted, seed=seed, progress=progress, alpha=0.0, teleport="none",
                        edge_dir=edge_dir)


def with_jump(g, start=None, jump: float = 0.1, length: int = 80, walks_per_vertex: int = 1,
              weighted: bool = False, seed: int = 0, *, progress: Callable | None = None,
              edge_dir: str = "out") -> WalkResult:
    """Random walks that jump to a uniformly random vertex with probability ``jump`` at each step.

    Otherwise a step moves to an out-neighbor (uniformly, or by weight when
    ``weighted``); a walk at a vertex without out-edges ends unless it jumps.
    Parameters as :func:`deepwalk`, plus ``jump`` in [0, 1].

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     w = gpipe.walks.with_jump(gpipe.generators.rmat(8, seed=0), jump=0.2, length=10, seed=1)
    ...     walks = w.compute()
    >>> walks.shape, w.stats["steps"]
    ((256, 11), 2240)
    """
    jump = check_probability("jump", jump)
    return _first_order(g, "with_jump", length=length, walks_per_vertex=walks_per_vertex, start=start,
                        weighted=weighted, seed=seed, progress=progress, alpha=jump, teleport="uniform",
                        edge_dir=edge_dir)


@renamed("sources", "start")
def ppr(g, start, restart: float = 0.15, walks_per_source: int = 100, length: int = 80, weighted: bool = False,
        seed: int = 0, *, progress: Callable | None = None, edge_dir: str = "out") -> PPRResult:
    """Random walks with restart from each start vertex (its source), and the personalized PageRank they estimate.

    At each step a walk returns to its source with probability ``restart``,
    else moves to an out-neighbor (uniformly, or by weight when ``weighted``);
    a walk at a vertex without out-edges ends. ``result.scores()`` gives, per
    source, the personalized PageRank with teleport probability ``restart``
    (dead ends returning to the source) that the walks estimate, from the
    visits between restarts: :meth:`PPRResult.scores` says how, and how close
    (``length`` bounds the bias, ``walks_per_source`` the noise).

    ``restart`` is ``1 - alpha`` of :func:`networkx.pagerank`, whose ``alpha``
    is the probability of following an edge: the scores of source ``s``
    estimate ``networkx.pagerank(G, alpha=1 - restart, personalization={s: 1})``
    (``weight=None`` unless ``weighted``; networkx's dead ends, as these walks',
    go back to ``s``).

    Parameters
    ----------
    g : Graph, gpipe.dynamic.DynamicGraph or gpipe.dynamic.Snapshot
        As :func:`deepwalk`'s.
    start : array-like
        The sources (original ids), each once: for more walks from a source,
        raise ``walks_per_source``. Called ``sources`` before: that name is
        still taken, with a DeprecationWarning, until the next release.
    restart : float
        Restart probability, in [0, 1): networkx's ``1 - alpha``.
    walks_per_source : int
        Walks from each source.
    length : int
        Steps per walk.
    weighted : bool
        Bias the steps by the edge weights.
    seed : int
        Seed of the random stream.
    edge_dir : {'out', 'in'}
        As :func:`deepwalk`'s.

    Returns
    -------
    PPRResult
        A :class:`WalkResult` with ``scores()``: a frame ``source, vertex, score``
        reduced on the workers; ``scores_to_dask()`` keeps it there, ``scores_to_parquet(folder)`` writes it
        from there.

    Raises
    ------
    GpipeValueError
        A parameter is out of range, a start vertex is not in the graph or is
        repeated, or both ``start`` and ``sources`` are given.

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     r = gpipe.walks.ppr(gpipe.generators.rmat(8, seed=0), start=[0, 5], restart=0.2, seed=3)
    ...     scores = r.scores()
    >>> scores.head(3)
       source  vertex     score
    0       0       0  0.202189
    1       0      33  0.086394
    2       0     221  0.083014
    >>> scores.groupby("source").score.sum().round(9).tolist()
    [1.0, 1.0]
    """
    restart = check_probability("restart", restart, open_high=True)
    g = _walked(g, edge_dir)
    starts = _start_ids(g, start)
    if not (starts[1:] > starts[:-1]).all():  # not ascending (as every vertex in order is): counted
        vertices, counts = np.unique(starts, return_counts=True)
        if (counts > 1).any():
            repeated = np.argmax(counts > 1)
            raise GpipeValueError(f"'start' must hold each vertex once (for more walks, raise walks_per_source); "
                                  f"{g.to_original(vertices[[repeated]]).tolist()[0]!r} is there {counts[repeated]} "
                                  f"times")
    walks_per_source = check_int("walks_per_source", walks_per_source, minimum=1)
    return _first_order(g, "ppr", length=length, walks_per_vertex=walks_per_source, start=_Dense(starts),
                        weighted=weighted, seed=seed, progress=progress, alpha=restart, teleport="source",
                        fields=(("source", "int64", "vertex"),), spans=(Span("source", 0, VERTEX),),
                        result_type=PPRResult,
                        sources=np.asarray(start).ravel(), restart=restart, walk_seed=seed)


def node2vec(g, start=None, p: float = 1.0, q: float = 1.0, length: int = 80, walks_per_vertex: int = 1, *,
             weighted: bool = False, seed: int = 0, progress: Callable | None = None,
             edge_dir: str = "out") -> WalkResult:
    """node2vec's second-order random walks, exact, on a partitioned graph.

    At v, having come from t, the walk moves to a neighbor x with probability
    proportional to ``w(v, x) * a(t, x)`` (``w = 1`` unless ``weighted``),
    where ``a`` is ``1/p`` for x = t, 1 when x is a neighbor of t, ``1/q``
    otherwise; the first step is first-order. Sampling is by rejection
    (KnightKing's method): candidates drawn in proportion to ``w`` are accepted
    with probability ``a / max(1/p, 1, 1/q)``; when that needs to know whether
    x is a neighbor of t and t is in another partition, the partition that owns
    t answers as part of the walker exchange, so the walks are exact for any
    partitioning. Where ``p`` and ``q`` let a candidate be accepted with
    probability below 1/16, a step that rejects 256 candidates is drawn exactly
    instead, over all of v's neighbors, so extreme ``p`` and ``q`` (1e4 and
    1e-4, even 1e300 and 1e-300) cost at most that plus one pass over them, and
    the walks are the same. Other parameters as :func:`deepwalk`.

    On a dynamic graph (a :class:`~gpipe.dynamic.DynamicGraph`, walked as its
    snapshot at the call, or a :class:`~gpipe.dynamic.Snapshot`) the candidate
    is drawn as a dynamic DeepWalk step (uniform over the edges, or from the
    sampling space by weight), "x is a neighbor of t" is answered from t's
    sorted destinations, and a duplicated edge counts as in a static graph of
    the same edge multiset (``keep_duplicates=True``): once a copy in the
    draw, as one neighbor in the test. A walker whose t is in another
    partition borrows t's destinations from it rather than travel there.

    Parameters
    ----------
    g : Graph, gpipe.dynamic.DynamicGraph or gpipe.dynamic.Snapshot
    p, q : float
        Return and in-out parameters, both > 0.

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     w = gpipe.walks.node2vec(gpipe.generators.rmat(8, seed=0), p=0.5, q=2.0, length=20, seed=1)
    ...     walks = w.compute()
    >>> walks.shape, walks[0, :6].tolist()
    ((256, 21), [0, 221, 103, 205, 72, 139])
    """
    p, q = _positive_float("p", p), _positive_float("q", q)
    g = _walked(g, edge_dir)
    length, walks_per_vertex, starts, seed = _checked_starts(g, length, walks_per_vertex, start, weighted, seed,
                                                             dynamic=True)
    walk = _node2vec.Node2Vec(bool(weighted), p, q, (g.graph_id, tuple(g.placement)))
    step, fields, spans = ((advance_node2vec_dynamic, N2V_FIELDS, N2V_SPANS) if isinstance(g, Snapshot)
                           else (_node2vec.advance_node2vec, _node2vec.FIELDS, _node2vec.spans(walk)))
    return run_walks(g, "node2vec", walk_spec(step, seed, length, walk, fields, lends="prev", spans=spans),
                     walks_per_vertex, starts, progress)  # a walker takes the list of the vertex it came from along


def metropolis_hastings(g, start=None, length: int = 80, walks_per_vertex: int = 1, seed: int = 0, *,
                        progress: Callable | None = None, edge_dir: str = "out") -> WalkResult:
    """Metropolis-Hastings random walks, whose stationary distribution is uniform over the vertices.

    At v the walk proposes a uniform out-neighbor u and moves there with
    probability ``min(1, deg(v) / deg(u))``; otherwise it stays at v for that
    step. A proposal to another partition's vertex is decided by that
    partition (which knows ``deg(u)``); a rejected walker goes back. Other
    parameters as :func:`deepwalk`.

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     w = gpipe.walks.metropolis_hastings(gpipe.generators.rmat(8, seed=0), length=20, seed=1)
    ...     walks = w.compute()
    >>> walks.shape, walks[0, :6].tolist()
    ((256, 21), [0, 0, 33, 33, 24, 110])
    """
    length, walks_per_vertex, starts, seed = _checked_starts(g, length, walks_per_vertex, start, False, seed)
    g = oriented(g, edge_dir)
    spec = walk_spec(_mh.advance_mh, seed, length, None, _mh.FIELDS, spans=_mh.SPANS)
    return run_walks(g, "metropolis_hastings", spec, walks_per_vertex, starts, progress)


def multidimensional(g, start=None, frontier_size: int = 2000, budget: int | None = None, instances: int = 1,
                     seed: int = 0, *, progress: Callable | None = None, edge_dir: str = "out") -> EdgeSample:
    """Multi-dimensional random walk (frontier sampling), many independent instances at once.

    Each instance keeps a pool of ``frontier_size`` vertices (drawn uniformly
    among the vertices with out-edges), picks one with probability
    proportional to its degree, replaces it with a uniform neighbor and records
    that edge, until ``budget`` edges are sampled (fewer only if its pool
    reaches vertices without out-edges). The pool members run as independent
    continuous-time walkers (the same process), so all instances share one
    batch of walkers on the partitioned runtime.

    Parameters
    ----------
    g : Graph
    start : array-like, optional
        The starting pool (original ids): ``frontier_size`` vertices shared by
        every instance, or one row of them per instance.
    frontier_size : int
        Vertices in each instance's pool.
    budget : int, optional
        Edges sampled per instance (default ``frontier_size``).
    instances : int
        Independent samples.
    seed : int
        Seed of the random stream.
    edge_dir : {'out', 'in'}
        Replace a pool vertex with an out-neighbor, or with an in-neighbor (the
        recorded ``src, dst`` is then the edge ``dst -> src``; degrees are
        in-degrees).

    Returns
    -------
    EdgeSample
        ``.compute()``: a frame ``instance, step, src, dst, time`` (``step``:
        the edge's rank within its instance); ``.stats`` with
        ``edges_per_second`` (C-SAW's SEPS).

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=0)
    ...     s = gpipe.walks.multidimensional(g, frontier_size=50, budget=200, instances=4, seed=2)
    ...     edges = s.compute()
    >>> edges.groupby("instance").size().tolist()
    [200, 200, 200, 200]
    >>> edges.columns.tolist()
    ['instance', 'step', 'src', 'dst', 'time']
    """
    frontier_size = check_int("frontier_size", frontier_size, minimum=1)
    budget = frontier_size if budget is None else check_int("budget", budget, minimum=1, maximum=2**31 - 1)
    instances = check_int("instances", instances, minimum=1)
    seed = check_seed("seed", seed)
    g = oriented(check_graph("g", g), edge_dir)
    if g.num_edges == 0:
        raise GpipeValueError("'g' must have edges for frontier sampling, got a graph with none")
    pool = None
    if start is not None:
        ids, shape = _start_ids(g, start), np.shape(start)
        if shape not in ((frontier_size,), (instances, frontier_size)):
            raise GpipeValueError(f"'start' must have shape ({frontier_size},) or ({instances}, {frontier_size}) "
                                  f"(frontier_size, or instances x frontier_size), got {shape}")
        pool = np.broadcast_to(ids.reshape(shape), (instances, frontier_size))
    sample = _frontier.sample(g, frontier_size, budget, instances, seed, pool, progress)
    stats = sample.stats
    edges_per_second = len(sample) / stats["seconds"] if stats["seconds"] > 0 else 0.0
    stats.update(algorithm="multidimensional", walks=instances * frontier_size, frontier_size=frontier_size,
                 budget=budget, instances=instances,
                 edges=len(sample), edges_per_second=edges_per_second,
                 steps_per_second=stats["steps"] / stats["seconds"] if stats["seconds"] > 0 else 0.0)
    return sample


def _positive_float(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not np.isfinite(value) or value <= 0:
        raise GpipeValueError(f"'{name}' must be a positive finite number, got {value!r}")
    return float(value)


def _walked(g, edge_dir: str = "out"):
    """What a walk that takes a dynamic graph runs on: ``g`` (its reverse for ``edge_dir`` 'in'), or a DynamicGraph's
    snapshot, taken now for this run (the run holds it, so it reads one committed version however many batches apply
    meanwhile; its pins go with it)."""
    if isinstance(g, (DynamicGraph, Snapshot)):
        if check_edge_dir(edge_dir) == "in":
            raise GpipeValueError(f"'edge_dir' = 'in' needs a gpipe.Graph (a dynamic graph is walked along its "
                                  f"out-edges), got a {type(g).__name__}")
        return g.run_snapshot() if isinstance(g, DynamicGraph) else g
    return oriented(check_graph("g", g), edge_dir)


def _start_ids(g, start) -> np.ndarray:
    """The dense ids of the start vertices. A single value is refused, not read as one vertex: it is what a call
    that passed ``length`` (or ``p``, ``jump``, ``frontier_size``) second, where gpipe 0.1 took it, passes now."""
    if np.ndim(start) == 0:
        raise GpipeValueError(f"'start' must be a list or array of vertex ids (the second parameter of every walk; "
                              f"pass length and the others by name), got the single value {start!r}")
    return g.to_internal(start, "start")


@dataclass(frozen=True)
class _Dense:
    """Start vertices already in dense ids (checked by the caller): not mapped again."""

    ids: np.ndarray


def _checked_starts(g, length: int, walks_per_vertex: int, start, weighted: bool, seed: int,
                    dynamic: bool = False):
    """The checks every walk makes; returns (length, walks_per_vertex, dense starts or None, seed). ``dynamic``:
    the walk also runs on a dynamic graph's snapshot."""
    if isinstance(g, (DynamicGraph, Snapshot)) and not dynamic:
        raise GpipeValueError(f"'g' must be a gpipe.Graph for this walk (deepwalk, with_jump, ppr and node2vec "
                              f"also take dynamic graphs), got {type(g).__name__}")
    if not dynamic or not isinstance(g, Snapshot):
        check_graph("g", g)
    length = check_int("length", length, minimum=1, maximum=2**30)
    walks_per_vertex = check_int("walks_per_vertex", walks_per_vertex, minimum=1)
    seed = check_seed("seed", seed)
    if check_bool("weighted", weighted) and not g.weighted:
        raise GpipeValueError("'weighted' needs a graph with edge weights; this graph has none, got weighted=True")
    starts = start.ids if isinstance(start, _Dense) else None if start is None else _start_ids(g, start)
    if starts is not None and starts.size == 0:
        raise GpipeValueError("'start' must hold at least one vertex, got an empty array")
    return length, walks_per_vertex, starts, seed


def _first_order(g, algorithm: str, *, length, walks_per_vertex, start, weighted, seed, progress, alpha: float,
                 teleport: str, edge_dir: str = "out", fields: tuple = (), spans: tuple = (), **result):
    g = _walked(g, edge_dir)
    length, walks_per_vertex, starts, seed = _checked_starts(g, length, walks_per_vertex, start, weighted, seed,
                                                             dynamic=True)
    walk = FirstOrder(bool(weighted), alpha, teleport, g.num_vertices)
    first_order = not isinstance(g, Snapshot)
    step = advance_first_order if first_order else advance_dynamic
    if first_order:
        sectors, sector_spans = sector_fields(g)
        fields, spans = fields + sectors, spans + sector_spans
    spec = walk_spec(step, seed, length, walk, fields, rows="home" if first_order else "alone", spans=spans,
                     routed_room=ROUTED_ROOM if first_order else None)
    return run_walks(g, algorithm, spec, walks_per_vertex, starts, progress, **result)
