"""What a run is, as every worker receives it: frozen, typed, built once on the client and sent as it is.

A workload family builds a :class:`StepSpec` (its step function, its own
frozen parameters, what its walkers carry); the driver wraps it in a
:class:`RunSpec` with the run's id, its graph and how the runtime runs it
(as ``distributed.shuffle``'s ``ShuffleRunSpec`` wraps a ``ShuffleSpec``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

Field = tuple[str, str, Any]  # a walker field of a family's own: (name, dtype, init: a number or 'vertex')
VERTEX = "vertex"  # a span's ``hi``: the graph's last vertex


@dataclass(frozen=True)
class Span:
    """The values a walker field holds, ``lo`` to ``hi`` (both included; ``hi`` :data:`VERTEX`: the graph's last
    vertex): it travels in as few bits as they take (``_packing.Wire``)."""

    name: str
    lo: int
    hi: int | str


@dataclass(frozen=True)
class StepSpec:
    """What a step needs, the same for every partition and superstep of a run.

    ``step(part, walkers, spec, run)`` advances partition ``part``'s walkers
    (a dict of arrays on the worker's device; ``run`` is the run's
    :class:`Run` on this worker, whose ``state`` holds the family's own
    per-run state) and returns ``(pieces, movers, steps)``: see
    ``_superstep._advance_partition`` (pieces None where it wrote its walks' rows in place, ``rows``; movers a dict of
    arrays, or :class:`Grouped` by where they go).
    """

    step: Callable
    key: np.uint64  # of the random stream: every draw is a hash of (key, walk or instance, step, draw)
    params: Any = None  # the family's own frozen parameters (a dataclass), read by ``step``
    fields: tuple[Field, ...] = ()  # walker fields beyond walk_id, vertex and step, made at step 0
    length: int | None = None  # a walk's length: its steps lie in [0, length]
    room: int | None = None  # the most steps a walker takes in one advance (None: all it has left)
    routed_room: int | None = None  # on a partition of a graph cut in several (none whole), the room (in ids) of
    # what a walker writes outside its walk's row in one advance, where the step says (the first-order walk's routed
    # kernel: its pieces and their records; R-MAT 23 on one GPU in 2 partitions ran 3 batches of whole paths' room)
    order_free: bool = False  # no walker depends on another: one may go on across partitions within a superstep
    start: Callable | None = None  # start(x, spec, lo, hi, n, initial): the first walkers of lo..hi-1 (of n)
    rows: str | None = None  # where the step writes a walk's vertices straight to its row (``Run.rows``) rather
    # than in pieces: 'home', while its walker is on the worker making its block; 'alone', when that is the run's
    # only worker (every walk is at home: ``step_kernel`` steps); None, never
    lends: str | None = None  # a walker field holding a vertex whose out-neighbor list its next steps read
    # (node2vec's previous vertex): a walker leaving a worker takes that list along, to each peer once a run
    # (``_lent.Lending``)
    spans: tuple[Span, ...] = ()  # the values of the fields its walkers leave with, beyond those the run's sizes
    # bound (walk_id, vertex, step: a span of one of these replaces the run's); a field with none travels at its
    # dtype's full width


@dataclass(frozen=True)
class Grouped:
    """A step's movers already grouped by the partition each goes to (``by_part``: partition -> its walkers, none
    empty), as a kernel that knows the partitions' bounds writes them: the runtime sends each group where it goes,
    with no search or sort of its own (see ``_superstep._routes``)."""

    by_part: dict[int, dict]


@dataclass(frozen=True)
class StartSet:
    """``count`` walkers from each of ``vertices``, the items ``first ..`` of ``total`` start vertices, made on the
    workers by ``StepSpec.start`` (each partition's from those of its vertices) as walkers from every vertex are.

    Sent instead of the walkers themselves (one id each, not a walker's 28
    bytes or more): 4M PPR sources took 0.2 s to ship, ten times the walk.
    Consecutive vertices (PPR from every vertex) go as a ``range``: no ids at
    all (:meth:`of`).
    """

    vertices: np.ndarray | range  # an array of the smallest integer dtype that holds them, or consecutive ones
    count: int
    first: int = 0
    total: int = 0

    @classmethod
    def of(cls, starts: np.ndarray, count: int, dtype) -> StartSet:
        """``count`` walkers from each of ``starts`` (dense ids, as ``dtype``): a range where they are one."""
        lo = int(starts[0]) if starts.size else 0
        consecutive = starts.size > 0 and int(starts[-1]) - lo == starts.size - 1 and bool(
            (np.diff(starts) == 1).all())
        vertices = range(lo, lo + starts.size) if consecutive else starts.astype(dtype)
        return cls(vertices, count, total=starts.size)

    def per_partition(self, bounds: np.ndarray) -> np.ndarray:
        """The walkers that start in each partition of ``bounds``."""
        if isinstance(self.vertices, range):
            ends = np.clip(np.asarray(bounds, np.int64), self.vertices.start, self.vertices.stop)
            return np.diff(ends) * self.count
        owner = np.searchsorted(bounds, self.vertices, side="right") - 1
        return np.bincount(owner, minlength=len(bounds) - 1).astype(np.int64) * self.count

    def share(self, lo: int, hi: int) -> StartSet:
        """Items ``lo..hi-1`` of this set."""
        return StartSet(self.vertices[lo:hi], self.count, self.first + lo, self.total)

    def within(self, x, lo: int, hi: int, n: int) -> tuple:
        """The items whose vertex is in ``lo..hi-1`` (of ``n``), on ``x``'s device: their numbers in the whole set
        (``first`` + place) and their vertices, both int64."""
        if isinstance(self.vertices, range):
            start, stop = max(lo, self.vertices.start), min(hi, self.vertices.stop)
            vertices = x.arange(start, max(start, stop), dtype=x.int64)
            return vertices - self.vertices.start + self.first, vertices
        vertices = x.asarray(self.vertices).astype(x.int64)
        if lo == 0 and hi == n:  # the whole graph (a replica): every item
            return x.arange(self.first, self.first + vertices.shape[0], dtype=x.int64), vertices
        j = x.flatnonzero((vertices >= lo) & (vertices < hi))
        return j + self.first, vertices[j]


@dataclass(frozen=True)
class OutputBlocks:
    """A walk-shaped run's output, ``walks`` rows of ``width`` vertex ids of ``dtype``, and how it is cut into
    blocks: ``rows`` walks each, ``count`` of them. A partitioned run given them sends its pieces to the workers
    making their blocks as it ends (see ``_gather``)."""

    rows: int
    count: int
    dtype: str
    walks: int
    width: int

    def nbytes(self, b: int) -> int:
        """The bytes of block ``b``: its rows of ``width`` ids."""
        return min(self.rows, self.walks - b * self.rows) * self.width * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class RunSpec:
    """One run as the driver sends it to every worker: the step, the graph, and how the runtime runs it.

    ``policy`` orders an out-of-memory graph's partitions and one not on the
    device that fewer walkers than ``in_place_below`` x its vertices wait for
    is read in place (see ``Residency``); ``output_limit`` bounds the outputs
    kept on the device (see ``Run.add_pieces``); ``exchange`` is how the ends of
    supersteps go between workers (``nccl`` or ``comms``, see ``_exchange``), ``nccl`` the NCCL
    communicator's key and, where the workers make it with this run, its unique id; ``report`` logs each superstep's
    progress as the Dask event ``gpipe-progress-<run_id>``; with ``summarize``,
    each worker's summary carries ``summarize(piece sets)`` of the outputs of
    every partition it ran, made as its run ends (no second round trip to
    sum them up); with ``blocks`` (:class:`OutputBlocks`), the pieces go to the workers
    making their blocks as the run ends. ``prelude``, a ``(function, args)``, runs on each worker
    before its run reads a partition (a dynamic graph's snapshot pinned by the
    run's own message: see ``DynamicGraph.run_snapshot``). ``chunks``: how many chunks a superstep is taken in
    where each worker holds one partition, each chunk's leavers sent while the next chunk's kernel runs (an int,
    or ``"auto"``: see ``_superstep.chunk_count``).
    """

    run_id: str
    graph_id: str
    placement: tuple[str, ...]  # partition -> worker (replicated mode: replica -> worker)
    step: StepSpec
    policy: str = "workload"
    in_place_below: float = 0.0
    output_limit: int | str | None = None
    bounds: np.ndarray | None = None  # partition p holds vertices bounds[p]..bounds[p+1]-1 (partitioned mode)
    exchange: str = "comms"
    nccl: tuple[str, bytes | None] | None = None
    report: bool = False
    summarize: Callable[[list], object] | None = None
    blocks: OutputBlocks | None = None
    prelude: tuple | None = None
    chunks: int | str = 1  # partitioned mode: its supersteps' chunks (``gpipe.exchange-chunks``, see ``_advance``)
