"""The bias-centric Sampler (C-SAW's MAIN loop) on the partitioned runtime.

Frontier entries ``(instance, vertex, depth)`` of many instances share one
queue per partition; a superstep expands one depth: on the partition owning
each frontier vertex, its out-edges become a candidate table, ``edge_bias``
gives every candidate a bias, SELECT picks ``neighbor_size`` of them without
replacement, the picked edges are kept on the worker, and ``update`` decides
which picked neighbors join the next depth's frontier — delivered, like
walkers, to the partition that owns them. An entry's random stream is a hash
of ``(instance, vertex, depth)``, so the samples do not depend on the
partitioning or the device.
"""

from __future__ import annotations

import uuid
from typing import Callable

import numpy as np
import pandas as pd

from .. import _rng
from .._validate import check_choice, check_int, check_probability, check_seed
from ..errors import GpipeValueError
from ..runtime import EdgeSample, run_supersteps, take_outputs, worker_xp
from ..runtime._store import on_store, store
from ._select import METHODS, select

EDGE_BIASES = ("uniform", "weight")
COUNT_STEP = 1 << 31  # draw counters of the forest-fire counts, apart from SELECT's (step = depth)
UPDATES = ("all", "unvisited")


class Sampler:
    """A traversal sampler defined by its biases and its update rule (C-SAW's API).

    Parameters
    ----------
    edge_bias : {'uniform', 'weight'} or callable
        The bias of each candidate edge. A callable receives the candidate
        table — a dict of arrays (numpy on the CPU, cupy on the GPU) with
        ``instance, frontier, candidate, weight, depth`` — and returns one
        non-negative bias per row, vectorized, so it runs unchanged on both.
    update : {'all', 'unvisited'}
        Which picked neighbors join the next frontier: all of them (a vertex
        once per instance and depth), or only those the instance has not
        visited yet.
    neighbor_size : int, None or ('geometric', p)
        Neighbors picked per frontier vertex (all of them if it has fewer);
        None: all of them; ``('geometric', p)``: a count drawn per frontier
        vertex, geometric with mean ``p / (1 - p)`` (forest fire's burning).
    depth : int
        Frontier expansions.
    select : {'bipartite', 'updated', 'repeated'}
        The SELECT method (same distribution; for the ablation).

    Examples
    --------
    The three functions that define neighbor sampling::

        Sampler(edge_bias="uniform", update="all", neighbor_size=fanout, depth=depth)

    >>> with gpipe.connect(n_workers=1, device="cpu"):   # doctest: +SKIP
    ...     g = gpipe.generators.rmat(10)
    ...     s = Sampler(neighbor_size=2, depth=2).run(g, seeds=[0, 1, 2])
    ...     s.compute().columns.tolist()
    ['instance', 'depth', 'src', 'dst']
    """

    def __init__(self, edge_bias: str | Callable = "uniform", update: str = "all",
                 neighbor_size: int | None | tuple = 2, depth: int = 2, select: str = "bipartite"):
        if not callable(edge_bias):
            check_choice("edge_bias", edge_bias, EDGE_BIASES)
        self.edge_bias = edge_bias
        self.update = check_choice("update", update, UPDATES)
        if isinstance(neighbor_size, tuple):
            if len(neighbor_size) != 2 or neighbor_size[0] != "geometric":
                raise GpipeValueError(f"'neighbor_size' must be an int, None or ('geometric', p), got {neighbor_size!r}")
            neighbor_size = ("geometric", check_probability("p", neighbor_size[1], open_high=True))
        elif neighbor_size is not None:
            neighbor_size = check_int("neighbor_size", neighbor_size, minimum=1)
        self.neighbor_size = neighbor_size
        self.depth = check_int("depth", depth, minimum=1)
        self.select = check_choice("select", select, tuple(METHODS))

    def run(self, g, seeds, seed: int = 0) -> EdgeSample:
        """Sample from ``seeds``: a 1-D array (one instance per seed) or 2-D (a row of seeds per instance).

        Returns an :class:`EdgeSample` whose ``compute()`` is a frame ``instance, depth, src, dst``.
        """
        seed = check_seed(seed)
        seeds = np.asarray(seeds)
        if seeds.ndim not in (1, 2) or seeds.size == 0:
            raise GpipeValueError(f"'seeds' must be a non-empty 1-D or 2-D array of vertices, got shape {seeds.shape}")
        if self.edge_bias == "weight" and not g.weighted:
            raise GpipeValueError("'edge_bias' = 'weight' needs a graph with edge weights; this graph has none")
        dense = g.to_internal(seeds, "seeds").reshape(seeds.shape if seeds.ndim == 2 else (-1, 1))
        instance = np.repeat(np.arange(dense.shape[0], dtype=np.int64), dense.shape[1])
        entries = {"instance": instance, "vertex": dense.ravel(), "depth": np.zeros(instance.size, np.int32)}
        params = {"key": np.uint64(_rng.key(seed)), "edge_bias": self.edge_bias, "update": self.update,
                  "neighbor_size": self.neighbor_size, "depth": self.depth, "select": self.select,
                  "num_vertices": g.num_vertices, "run_token": uuid.uuid4().hex}
        client = g.client
        try:
            run_id, partitions, stats = run_supersteps(g, _expand, params, entries, num_walks=int(instance.size))
        finally:
            client.run(on_store, "drop_run", params["run_token"])
        outputs = client.gather([client.submit(take_outputs, run_id, part=p, workers=[w], allow_other_workers=False,
                                               pure=False) for p, w in partitions.items()])
        edges = [o for per_part in outputs for o in per_part]
        frame = pd.DataFrame({k: np.concatenate([e[k] for e in edges]) if edges else np.zeros(0, np.int64)
                              for k in ("instance", "depth", "src", "dst")})
        frame = frame.sort_values(["instance", "depth", "src", "dst"], ignore_index=True)
        stats.update(algorithm="sampler", instances=int(dense.shape[0]), edges=len(frame),
                     edges_per_second=len(frame) / stats["seconds"] if stats["seconds"] > 0 else 0.0)
        return EdgeSample(frame, g.id_map, stats)


def _expand(part, entries: dict, params: dict):
    """Step function for the runtime: expand this partition's frontier entries by one depth."""
    x = worker_xp()
    n = params["num_vertices"]
    key = entries["instance"] * n + entries["vertex"]  # one entry per (instance, vertex) at a depth
    key, first = x.unique(key, return_index=True)
    instance, vertex, depth = entries["instance"][first], entries["vertex"][first], entries["depth"][first]
    if params["update"] == "unvisited":
        instance, vertex, depth = _unvisited(x, part, params, instance, vertex, depth, key)
        key = instance * n + vertex
    local = vertex - part.lo
    start, end = part.indptr[local], part.indptr[local + 1]
    offsets = x.zeros(vertex.shape[0] + 1, dtype=x.int64)
    x.cumsum(end - start, out=offsets[1:])
    total = int(offsets[-1])
    segment = x.searchsorted(offsets[1:], x.arange(total), side="right")
    edge = start[segment] + x.arange(total) - offsets[segment]
    candidate = part.indices[edge].astype(x.int64)
    weight = part.weights[edge] if part.weights is not None else x.ones(total, x.float32)
    bias = _biases(x, params["edge_bias"], {"instance": instance[segment], "frontier": vertex[segment],
                                            "candidate": candidate, "weight": weight, "depth": depth[segment]})
    level = int(depth[0]) if depth.size else 0  # every entry here is at the same depth
    want = _wanted(x, params, key, level, end - start)
    pick_offsets, picks, _ = select(bias, offsets, want, key, params["key"], level, params["select"])
    owner = x.searchsorted(pick_offsets[1:], x.arange(picks.shape[0]), side="right")
    out = {"instance": instance[owner], "depth": depth[owner], "src": vertex[owner], "dst": candidate[picks]}
    more = level + 1 < params["depth"]
    movers = ({"instance": out["instance"], "vertex": out["dst"], "depth": out["depth"] + 1} if more
              else {"instance": x.zeros(0, x.int64), "vertex": x.zeros(0, x.int64), "depth": x.zeros(0, x.int32)})
    return out, movers, int(picks.shape[0])


def _wanted(x, params: dict, key, level: int, degree):
    """Neighbors to pick per entry: a constant, all, or (forest fire) geometric with mean p / (1 - p)."""
    size = params["neighbor_size"]
    if size is None:
        return degree.astype(x.int64)
    if isinstance(size, int):
        return x.full(key.shape[0], size, dtype=x.int64)
    # geometric: count trials of probability p until one fails, one draw per trial, at a step of their own
    p = size[1]
    streams = _rng.stream_array(x, params["key"], key)
    count = x.zeros(key.shape[0], dtype=x.int64)
    burning = x.ones(key.shape[0], dtype=bool)
    trial = 0
    while bool(burning.any()):
        burning &= _rng.unit_array(_rng.bits_array(x, streams, COUNT_STEP + level, trial)) < p
        count += burning
        trial += 1
    return count


def _biases(x, edge_bias, table: dict):
    if edge_bias == "uniform":
        return x.ones(table["candidate"].shape[0], dtype=x.float64)
    if edge_bias == "weight":
        return table["weight"].astype(x.float64)
    bias = x.asarray(edge_bias(table), dtype=x.float64).reshape(-1)
    if bias.shape[0] != table["candidate"].shape[0]:
        raise GpipeValueError(f"'edge_bias' must return one bias per candidate ({table['candidate'].shape[0]}), "
                              f"got {bias.shape[0]}")
    if not bool(x.all(x.isfinite(bias) & (bias >= 0))):
        raise GpipeValueError("'edge_bias' must return finite, non-negative biases")
    return bias


def _unvisited(x, part, params: dict, instance, vertex, depth, key):
    """The entries whose (instance, vertex) this run has not expanded before (remembered in the store)."""
    st = store()
    state = (params["run_token"], part.part)
    seen = st.state.get(state)
    if seen is not None:
        fresh = ~x.isin(key, seen)
        instance, vertex, depth, key = instance[fresh], vertex[fresh], depth[fresh], key[fresh]
        key = x.concatenate([seen, key])
    st.state[state] = x.sort(key)
    return instance, vertex, depth
