"""A walk run: its walk-id layout, its first walkers, and the run to its result.

Walk ``r * k + i`` is the ``r``-th walk from the ``i``-th of ``k`` start
vertices (from every vertex by default: walk ``r * n + v`` is the ``r``-th
from ``v``). A walk's random stream is keyed by its id, so its path depends on
its start and repetition only, not on where or with what other walks it runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import _rng, config
from ..runtime import StartSet, StepSpec, check_memory, run_supersteps
from ..runtime.results import output_blocks
from ._result import WalkResult


def walk_spec(step: Callable, seed: int, length: int, walk, fields: tuple = (), rows: str = "alone", *,
              lends: str | None = None, spans: tuple = (), routed_room: int | None = None) -> StepSpec:
    """A walk's spec: walks of ``length`` steps, whose paths depend on no other walker's (order-free); ``rows``:
    where its step writes straight to the rows of a walk's block (``StepSpec.rows``); ``lends``: the field of a
    vertex whose neighbor list a walker takes along when it leaves a worker (``StepSpec.lends``); ``spans``: the
    values of its own ``fields`` (``StepSpec.spans``); ``routed_room``: see ``StepSpec.routed_room``."""
    return StepSpec(step, np.uint64(_rng.key(seed)), walk, fields, length=length, order_free=True,
                    start=first_walkers, rows=rows, lends=lends, spans=spans, routed_room=routed_room)


def run_walks(g, algorithm: str, spec: StepSpec, walks_per_vertex: int, starts: np.ndarray | None,
              progress: Callable | None, result_type: type = WalkResult, **result_kwargs) -> WalkResult:
    """Run ``walks_per_vertex`` walks of ``spec`` from each of ``starts`` (dense ids; None: every vertex) until
    every one has ended; their paths are the result, a ``result_type`` (a :class:`WalkResult`) given
    ``result_kwargs`` too."""
    num_walks = (g.num_vertices if starts is None else starts.size) * walks_per_vertex
    length = spec.length
    dtype = g.vertex_dtype
    walker = 20 + sum(np.dtype(t).itemsize for _, t, _ in spec.fields)  # walk_id, vertex, step, its own fields
    check_memory(g, num_walks * ((length + 1) * dtype.itemsize + walker),
                 f"'length' x the number of walks ({num_walks} walks of {length} steps)", "walks")
    if starts is None:
        initial: int | StartSet = walks_per_vertex  # made where they start (first_walkers)
    else:
        initial = StartSet.of(starts, walks_per_vertex, dtype)
    blocks = output_blocks(num_walks, length + 1, config.get("walks.block-size"), dtype)
    ran = run_supersteps(g, spec, initial, num_walks=num_walks, progress=progress, blocks=blocks)
    stats = {"algorithm": algorithm, "walks": num_walks, "length": length, **ran.stats}
    return result_type(g.client, ran.run_id, ran.partitions, blocks=blocks, id_map=g.id_map, stats=stats,
                       made=ran.made, **result_kwargs)


def first_walkers(x, spec: StepSpec, lo: int, hi: int, n: int, initial: int | StartSet) -> dict:
    """The walks from the vertices ``lo..hi-1`` of ``n``, made on the worker (``StepSpec.start``): ``initial`` from
    each, or those of a :class:`StartSet` whose start vertex is there."""
    if isinstance(initial, StartSet):
        item, vertices = initial.within(x, lo, hi, n)
        walk_id = x.concatenate([item + r * initial.total for r in range(initial.count)])
        return _new_walkers(x, walk_id, x.tile(vertices, initial.count), spec.fields)
    vertices = x.arange(lo, hi, dtype=x.int64)
    walk_id = vertices if initial == 1 else x.concatenate([vertices + r * n for r in range(initial)])
    return _new_walkers(x, walk_id, x.tile(vertices, initial), spec.fields)


def _new_walkers(x, walk_id, vertex, fields: tuple) -> dict:
    """Walkers at step 0 with the walk's own ``fields``: ``(name, dtype, init)``, init a number or 'vertex'."""
    walkers = {"walk_id": walk_id, "vertex": vertex, "step": x.zeros(walk_id.shape[0], dtype=x.int32)}
    for name, dtype, init in fields:
        walkers[name] = vertex.astype(dtype) if init == "vertex" else x.full(walk_id.shape[0], init, dtype=dtype)
    return walkers
