"""Graph generators that run on the workers, in parallel, with counter-based randomness."""

from __future__ import annotations

import numpy as np

from .. import _rng, config
from .._validate import check_bool, check_int, check_probability, check_seed, check_vertex_order
from ..backend import cpu_kernel, prange
from ..errors import GpipeValueError
from ..kernels import Arg, Kernel
from ..runtime import current
from ..runtime.calls import submit
from ..runtime.workers import worker_xp
from ._graph import Graph, build, check_graph_memory, check_mode

__all__ = ["rmat"]

_ODD1 = np.uint64(0x9E3779B97F4A7C15)
_ODD2 = np.uint64(0xBF58476D1CE4E5B9)
_LOW32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def rmat(scale: int, edge_factor: int = 16, a: float = 0.57, b: float = 0.19, c: float = 0.19, seed: int = 0,
         *, directed: bool = False, weighted: bool = False, scramble: bool = True,
         partitions: int | None = None, mode: str | None = None, vertex_order: str | None = None) -> Graph:
    """Generate a Graph500-style R-MAT graph on the workers.

    ``edge_factor * 2**scale`` edges are drawn: each picks, level by level, one
    quadrant of the adjacency matrix with probabilities ``a, b, c, 1-a-b-c``.
    Vertex ids are scrambled by a seeded bijection (as Graph500 does) so the
    high-degree vertices are spread over the id range. Edge ``e`` depends only
    on ``(seed, e)``: the graph is the same for any number of workers.

    Parameters
    ----------
    scale : int
        log2 of the number of vertices (1..40).
    edge_factor : int
        Edges drawn per vertex.
    a, b, c : float
        Quadrant probabilities; ``a + b + c <= 1``.
    seed : int
        Seed of the edge stream.
    directed : bool
        Keep edges directed; by default both directions are stored.
    weighted : bool
        Give every edge a weight uniform in (0, 1].
    scramble : bool
        Permute vertex ids with a seeded bijection.
    partitions : int, optional
        Number of partitions (default: workers x ``gpipe.partitions-per-worker``).
    mode : {'auto', 'partitioned', 'replicated'}, optional
        How the graph is held (see :func:`gpipe.read_edges`).
    vertex_order : {None, 'rcmk', 'metis'}, optional
        Renumber the vertices by the graph's structure before the partitions'
        ranges are cut (see :func:`gpipe.read_edges`); the graph's ids stay
        the generated ones. On R-MAT no order cuts crossings much.

    Returns
    -------
    Graph
        Self-loops and duplicate edges dropped; isolated vertices kept, so
        ``num_vertices == 2**scale``.

    Raises
    ------
    GpipeValueError
        A parameter is out of range, or the graph could not fit in the workers' memory (its drawn edges
        alone: 16 bytes each, 20 weighted).

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(scale=10, edge_factor=8, seed=1)
    ...     g.num_vertices, g.num_edges
    (1024, 6026)
    """
    scale = check_int("scale", scale, minimum=1, maximum=40)
    edge_factor = check_int("edge_factor", edge_factor, minimum=1)
    a, b, c = (check_probability(name, v) for name, v in (("a", a), ("b", b), ("c", c)))
    if a + b + c > 1:
        raise GpipeValueError(f"'a + b + c' must be at most 1, got {a + b + c}")
    seed = check_seed("seed", seed)
    weighted = check_bool("weighted", weighted)
    directed = check_bool("directed", directed)
    scramble = check_bool("scramble", scramble)
    mode = check_mode(mode)
    vertex_order = check_vertex_order("vertex_order", vertex_order)
    session = current()
    n, m = 1 << scale, edge_factor << scale
    # the drawn edges (int64 ends, float32 weights), held until the partitions are built, and the rows' offsets
    check_graph_memory(session, m * (16 + 4 * weighted) + 8 * n,
                       f"'scale' and 'edge_factor' ({n} vertices, {m} edges)")
    step = config.get("graph.chunk-edges")
    thresholds = (a, a + b, a + b + c)
    chunks = [
        submit(session.client, _rmat_chunk, scale, thresholds, seed, start, min(step, m - start), scramble, weighted)
        for start in range(0, m, step)
    ]
    return build(session, chunks, n, directed=directed, weighted=weighted, id_map=None, partitions=partitions,
                 mode=mode, vertex_order=vertex_order)


def _rmat_chunk(scale: int, thresholds: tuple, seed: int, start: int, count: int, scramble: bool,
                weighted: bool) -> dict:
    x = worker_xp()
    src, dst = x.empty(count, x.int64), x.empty(count, x.int64)
    weight = x.empty(count if weighted else 0, x.float32)
    t1, t2, t3 = (float(t) for t in thresholds)
    RMAT.launch(scale=scale, t1=t1, t2=t2, t3=t3, seed=seed, start=start, count=count, scramble=scramble,
                weighted=weighted, src=src, dst=dst, weight=weight)
    out = {"src": src, "dst": dst}
    if weighted:
        out["weight"] = weight
    return out


@cpu_kernel()
def _scramble(v, scale, k):
    mask = (np.uint64(1) << np.uint64(scale)) - np.uint64(1)
    half = np.uint64((scale + 1) // 2)
    v = (v * _ODD1 + (k & mask)) & mask
    v ^= v >> half
    v = (v * _ODD2 + ((k >> _S32) & mask)) & mask
    v ^= v >> half
    return v


@cpu_kernel(parallel=True)
def _rmat_cpu(scale, t1, t2, t3, seed, start, count, scramble, weighted, src, dst, weight):
    k = _rng.key(seed)
    for i in prange(count):
        u = np.uint64(0)
        v = np.uint64(0)
        for level in range(scale):
            r = _rng.unit(_rng.bits(k, start + i, level, 0))
            bit = np.uint64(1) << np.uint64(scale - 1 - level)
            if r >= t3:
                u |= bit
                v |= bit
            elif r >= t2:
                u |= bit
            elif r >= t1:
                v |= bit
        if scramble:
            u = _scramble(u, scale, k)
            v = _scramble(v, scale, k)
        src[i] = np.int64(u)
        dst[i] = np.int64(v)
        if weighted:
            weight[i] = np.float32(1.0 - _rng.unit(_rng.bits(k, start + i, scale, 1)))


RMAT = Kernel("rmat.cu", "gp_rmat", twin=_rmat_cpu, items="count", args=(
    Arg("scale", "i32"), Arg("t1", "f64", note="a"), Arg("t2", "f64", note="a + b"), Arg("t3", "f64", note="a + b + c"),
    Arg("seed", "u64"), Arg("start", "i64"), Arg("count", "i64"), Arg("scramble", "i32"), Arg("weighted", "i32"),
    Arg("src", "i64[count]", out=True), Arg("dst", "i64[count]", out=True),
    Arg("weight", "f32[count or 0]", out=True)))
