"""Random walks on the partitioned runtime: one step kernel pair (CUDA + CPU twin) and one function each."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import _rng
from .._validate import check_int, check_seed
from ..errors import GpipeValueError
from ..runtime import WalkResult, run_walks
from ._uniform import advance_uniform

__all__ = ["deepwalk"]


def deepwalk(g, length: int = 80, walks_per_vertex: int = 1, start=None, weighted: bool = False, seed: int = 0,
             *, progress: Callable | None = None) -> WalkResult:
    """Uniform random walks (DeepWalk) from every vertex, or from ``start``.

    Each step moves to an out-neighbor chosen uniformly at random; a walk that
    reaches a vertex with no out-edge ends there (the rest of its row is
    padding). The walk with id ``r * len(start) + i`` is the ``r``-th walk from
    ``start[i]``; its draws depend only on ``(seed, walk id, step)``, so the
    walks are the same for any number of partitions, workers or GPUs.

    Parameters
    ----------
    g : Graph
    length : int
        Steps per walk (each row holds ``length + 1`` vertices).
    walks_per_vertex : int
        Walks started from each start vertex.
    start : array-like, optional
        Start vertices (original ids); default every vertex of ``g``.
    weighted : bool
        Reserved for edge-weight-biased walks; must be False for now.
    seed : int
        Seed of the random stream.
    progress : callable, optional
        Called after every superstep with ``superstep, active, steps, total``.

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
    >>> with gpipe.connect(n_workers=1, device="cpu"):   # doctest: +SKIP
    ...     g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 0]}))
    ...     gpipe.walks.deepwalk(g, length=4, seed=7).compute().shape
    (3, 5)
    """
    length = check_int("length", length, minimum=1, maximum=2**30)
    walks_per_vertex = check_int("walks_per_vertex", walks_per_vertex, minimum=1)
    seed = check_seed(seed)
    if weighted:
        raise GpipeValueError("'weighted' must be False: edge-weight-biased DeepWalk is not available yet, got True")
    starts = None if start is None else g.to_internal(start, "start")
    if starts is not None and starts.size == 0:
        raise GpipeValueError("'start' must hold at least one vertex, got an empty array")
    num_walks = (g.num_vertices if starts is None else starts.size) * walks_per_vertex
    params = {"key": np.uint64(_rng.key(seed))}
    return run_walks(g, advance_uniform, params, length=length, num_walks=num_walks,
                     walks_per_vertex=walks_per_vertex, starts=starts, algorithm="deepwalk", progress=progress)
