"""Built-in traversal samplers, each a Sampler defined by its bias, update rule and neighbor size."""

from __future__ import annotations

from .._validate import check_bool, check_fanouts, check_int, check_optional_int, check_probability, renamed
from ..errors import GpipeValueError
from ._result import EdgeSample
from ._sampler import Sampler


@renamed("fanout", "fanouts")
def neighbor(g, seeds, fanouts: int | list[int] = 2, depth: int | None = None, weighted: bool = False,
             replace: bool = False, seed: int = 0, *, edge_dir: str = "out") -> EdgeSample:
    """Neighbor sampling: every frontier vertex at depth ``d`` picks ``fanouts[d]`` out-neighbors (all of them for
    -1), without replacement unless ``replace``.

    ``fanouts`` is a list, one a depth from the seeds outwards (as :func:`gpipe.gnn.sample_blocks` takes it), or one
    int for each of ``depth`` depths (2 by default); ``fanout``, its old name, is taken until the next release.
    ``edge_dir='in'`` picks in-neighbors instead (see :class:`Sampler`): a sampled ``src, dst`` is then the edge
    ``dst -> src`` of the graph.

    Uniformly, or in proportion to the edge weights when ``weighted``: then each draw reads the vertex's alias
    table (SELECT's ``"alias"`` method; every row's is built at the graph's first weighted sample and kept with
    it, 8 bytes an edge). Its three functions::

        VERTEXBIAS: none (the whole pool is the frontier)
        EDGEBIAS:   1, or the edge's weight
        UPDATE:     every picked neighbor joins the next frontier
        Sampler(edge_bias="weight" if weighted else "uniform", update="all", neighbor_size=fanouts,
                replace=replace, select="alias" if weighted else "bipartite")   # -1 as None

    Returns an :class:`EdgeSample`: ``compute()`` the sampled edges ``instance, depth, src, dst`` (one instance
    per seed, or per row of a 2-D ``seeds``), ``nodes()`` each instance's vertices ``instance, vertex`` (its
    seeds and its edges' ends).

    On a graph whole on each worker (replicated mode, or one partition) every depth of every instance runs in
    one launch per worker (a queue of (instance, vertex, depth) tasks; ``stats['supersteps']`` is 1), each
    worker taking a share of the instances; on a partitioned graph, or with ``gpipe.sampling.fused`` set to
    false, the depths run as supersteps. The sample is the same either way, for the same ``seed``.

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=0)
    ...     gpipe.sampling.neighbor(g, seeds=[0, 1], fanouts=[2, 2], seed=4).compute()
        instance  depth  src  dst
    0          0      0    0  314
    1          0      0    0  348
    2          0      1  314   71
    3          0      1  314  605
    4          0      1  348  378
    5          0      1  348  834
    6          1      0    1   25
    7          1      0    1  620
    8          1      1   25  281
    9          1      1   25  698
    10         1      1  620   53
    11         1      1  620  367
    """
    fanouts = check_fanouts("fanouts", fanouts, 2 if depth is None and not isinstance(fanouts, (list, tuple))
                            else depth)
    weighted = check_bool("weighted", weighted)
    if check_bool("replace", replace) and -1 in fanouts:
        raise GpipeValueError(f"'replace' = True needs a number of picks at every depth, not -1 (every neighbor, "
                              f"each taken once), got fanouts={fanouts}")
    sampler = Sampler(edge_bias="weight" if weighted else "uniform", update="all",
                      neighbor_size=[None if f == -1 else f for f in fanouts], replace=replace,
                      select="alias" if weighted else "bipartite", edge_dir=edge_dir)
    return sampler.run(g, seeds, seed=seed)


def snowball(g, seeds, depth: int = 2, max_per_vertex: int | None = None, seed: int = 0, *,
             edge_dir: str = "out") -> EdgeSample:
    """Snowball sampling: every frontier vertex adds its out-neighbors (at most ``max_per_vertex``,
    picked uniformly), and each vertex is expanded once per instance; an :class:`EdgeSample`, as :func:`neighbor`
    gives (``edge_dir='in'`` reads in-neighbors instead, see :class:`Sampler`). Its three functions::

        VERTEXBIAS: none (the whole pool is the frontier)
        EDGEBIAS:   1
        UPDATE:     picked neighbors the instance has not expanded yet
        Sampler(edge_bias="uniform", update="unvisited", neighbor_size=max_per_vertex, depth=depth)

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=0)
    ...     edges = gpipe.sampling.snowball(g, seeds=[0, 1], depth=2, max_per_vertex=3, seed=1).compute()
    >>> edges.groupby(["instance", "depth"]).size().tolist()
    [3, 9, 3, 9]
    """
    max_per_vertex = check_optional_int("max_per_vertex", max_per_vertex, minimum=1)
    sampler = Sampler(edge_bias="uniform", update="unvisited", neighbor_size=max_per_vertex, depth=depth,
                      edge_dir=edge_dir)
    return sampler.run(g, seeds, seed=seed)


def forest_fire(g, seeds, p_forward: float = 0.7, depth: int = 2, seed: int = 0, *,
                edge_dir: str = "out") -> EdgeSample:
    """Forest fire sampling (Leskovec & Faloutsos): every burning vertex burns a number of its
    out-neighbors drawn geometric with mean ``p_forward / (1 - p_forward)``; a vertex burns (is expanded)
    once per instance; an :class:`EdgeSample`, as :func:`neighbor` gives (``edge_dir='in'`` reads in-neighbors
    instead, see :class:`Sampler`). Its three functions::

        VERTEXBIAS: none (the whole pool is the frontier)
        EDGEBIAS:   1, with NeighborSize geometric(p_forward) per burning vertex
        UPDATE:     burned neighbors not burning before
        Sampler(edge_bias="uniform", update="unvisited", neighbor_size=("geometric", p_forward), depth=depth)

    Examples
    --------
    On a ring of 8 vertices the fire from vertex 0 spreads both ways, a vertex a depth (it may burn back along
    an edge it came by; a vertex burns once):

    >>> import gpipe, pandas as pd
    >>> ring = pd.DataFrame({"src": range(8), "dst": [1, 2, 3, 4, 5, 6, 7, 0]})
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     edges = gpipe.sampling.forest_fire(gpipe.from_edges(ring), seeds=[0], p_forward=0.8, depth=3,
    ...                                        seed=0).compute()
    >>> edges.groupby("depth").size().tolist(), sorted(set(edges.dst))
    ([2, 4, 3], [0, 1, 2, 3, 6, 7])
    """
    p_forward = check_probability("p_forward", p_forward, open_high=True)
    sampler = Sampler(edge_bias="uniform", update="unvisited", neighbor_size=("geometric", p_forward), depth=depth,
                      edge_dir=edge_dir)
    return sampler.run(g, seeds, seed=seed)


def layer(g, seeds, layer_size: int = 8, depth: int = 2, seed: int = 0, *, edge_dir: str = "out") -> EdgeSample:
    """Layer sampling: each instance picks ``layer_size`` edges, uniformly without replacement, from all the
    out-edges of its whole frontier, per layer; an :class:`EdgeSample`, as :func:`neighbor` gives (``edge_dir='in'``
    reads in-neighbors instead, see :class:`Sampler`). Its three functions::

        VERTEXBIAS: none (the whole pool is the frontier)
        EDGEBIAS:   1, over the frontier's neighbor pool (NeighborSize for the whole frontier)
        UPDATE:     every picked neighbor joins the next frontier
        Sampler(edge_bias="uniform", update="all", neighbor_size=layer_size, neighbor_pool="frontier", depth=depth)

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=0)
    ...     edges = gpipe.sampling.layer(g, seeds=[[0, 1], [2, 3]], layer_size=4, depth=2, seed=1).compute()
    >>> edges.groupby(["instance", "depth"]).size().tolist()
    [4, 4, 4, 4]
    """
    layer_size = check_int("layer_size", layer_size, minimum=1)
    sampler = Sampler(edge_bias="uniform", update="all", neighbor_size=layer_size, neighbor_pool="frontier",
                      depth=depth, edge_dir=edge_dir)
    return sampler.run(g, seeds, seed=seed)


def random_node(g, n: int, instances: int = 1, by_degree: bool = False, seed: int = 0) -> EdgeSample:
    """Random node sampling: each instance picks ``n`` distinct vertices (uniformly, or in proportion to
    their out-degree) and keeps the subgraph they induce. One pass over every vertex as the pool::

        VERTEXBIAS: 1, or the degree (FrontierSize = n)
        EDGEBIAS:   1 if the neighbor is in the frontier, else 0 (all of them: the induced edges)
        UPDATE:     none (depth 1)
        Sampler(vertex_bias="degree" if by_degree else "uniform", frontier_size=n, neighbor_size=None,
                neighbor_pool="frontier", edge_bias=in_frontier, depth=1).run(g, seeds=None, instances=instances)

    Returns an :class:`EdgeSample`: ``nodes()`` the ``n`` picked vertices of each instance ``instance, vertex``
    (all of them, those that induce no edge too), ``compute()`` the edges they induce ``instance, depth, src, dst``
    (depth 0).

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=0)
    ...     s = gpipe.sampling.random_node(g, 100, instances=3, seed=1)
    ...     nodes, edges = s.nodes(), s.compute()
    >>> nodes.groupby("instance").size().tolist(), edges.groupby("instance").size().tolist()
    ([100, 100, 100], [276, 192, 310])
    """
    n = check_int("n", n, minimum=1)
    by_degree = check_bool("by_degree", by_degree)
    sampler = Sampler(vertex_bias="degree" if by_degree else "uniform", frontier_size=n, neighbor_size=None,
                      neighbor_pool="frontier", edge_bias=_in_frontier, depth=1)
    return sampler.run(g, None, instances=instances, seed=seed)


def _in_frontier(table):
    return table["in_frontier"]


def random_edge(g, m: int, instances: int = 1, seed: int = 0) -> EdgeSample:
    """Random edge sampling: each instance picks ``m`` distinct edges uniformly (all of them if fewer). One pass
    over every edge as the pool — layer sampling whose frontier is the whole graph::

        VERTEXBIAS: none (every vertex is the frontier)
        EDGEBIAS:   1, over all edges (NeighborSize = m for the whole frontier)
        UPDATE:     none (depth 1)
        Sampler(edge_bias="uniform", neighbor_size=m, neighbor_pool="frontier", depth=1).run(g, seeds=None,
                                                                                              instances=instances)

    An edge of an undirected graph is one edge, not its two stored directions: it is picked once at most, with the
    same probability as any other (a self-loop too), and reported in a direction drawn at random. Returns an
    :class:`EdgeSample`: ``compute()`` the edges ``instance, depth, src, dst`` (depth 0), ``nodes()`` their ends
    ``instance, vertex``.

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=0)
    ...     edges = gpipe.sampling.random_edge(g, 50, instances=3, seed=1).compute()
    >>> edges.groupby("instance").size().tolist(), edges.depth.unique().tolist()
    ([50, 50, 50], [0])
    """
    m = check_int("m", m, minimum=1)
    sampler = Sampler(edge_bias="uniform", neighbor_size=m, neighbor_pool="frontier", depth=1)
    return sampler.run(g, None, instances=instances, seed=seed)
