"""DynamicGraph: a graph's partitions as sampling spaces on the workers, updated in batches that apply completely
or not at all, whatever fails (two phases: every partition the batch touches replays its part, then all commit; a
failure in either, an allocation's as much as a missing edge's, takes the batch back everywhere; a batch that touches
one partition, as a streaming update does, is staged and committed there in one round trip); a Snapshot: one
committed version of it, pinned on the workers, which runs read while later batches apply."""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
import uuid
import weakref
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from dask.utils import format_bytes

from .._validate import check_int
from ..backend import to_host
from ..errors import GpipeError, GpipeValueError, TaskError, WorkerLostError
from ..graph import Graph, check_graph
from ..runtime.calls import WATCH_SECONDS, call_workers, check_held, end_graph, end_graph_later
from ..runtime.workers import holds_partition, keep_partition, partition, worker_device, worker_memory
from ._batches import Batch, absent, check_batch
from ._kernels import VERTEX_BYTES
from ._space import SamplingSpace

if TYPE_CHECKING:
    from distributed import Client


class DynamicGraph:
    """A graph whose edges are inserted, deleted and re-weighted while it stays partitioned over the workers.

    Each partition of the graph it starts from becomes a :class:`SamplingSpace` on the worker holding it; an
    update goes to the partition owning its source (an undirected graph's to both ends' owners), a source past
    the last vertex to the last partition, which grows, as far as the memory of its worker (a GPU worker's device
    memory) holds the tables of its vertices (a larger id is refused, naming it). A graph whose worker was lost has
    lost those partitions: every later call raises a :class:`~gpipe.WorkerLostError` naming them (a batch reaching
    only other workers, once the scheduler has seen the loss: it is asked at most once a second, so a streaming
    update costs one round trip).

    Examples
    --------
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 0]}), directed=True,
    ...                          mode="partitioned")
    ...     dg = gpipe.dynamic.DynamicGraph.from_graph(g)
    ...     dg.insert_edges([0, 3], [2, 0], weight=[2.5, 1]).version
    ...     dg.delete_edges([1], [2]).num_edges
    ...     dg.update_weights([0], [1], [4]).stats["updates"]
    ...     dg.edges()
    1
    4
    1
       src  dst  weight
    0    0    1     4.0
    1    0    2     2.5
    2    2    0     1.0
    3    3    0     1.0
    """

    def __init__(self, g, graph_id: str, scale: float):
        self._graph = g
        self.graph_id = graph_id
        self.directed = g.directed
        self.scale = scale
        self.num_vertices = g.num_vertices  # grows with updates naming larger ids (at either end)
        self.num_edges = 0  # stored edges (an undirected edge twice), as of the last committed batch
        self.version = 0  # committed batches
        self._part_edges: dict[int, int] = {}  # each partition's stored edges, as of the last committed batch
        held, _ = g.holders
        self._held = held
        self._lock = threading.Lock()  # a batch's stage and commit on every partition, or a snapshot's pins
        self._batches = 0  # batches tried: the last one's token
        self._lost: WorkerLostError | None = None  # the loss of partitions seen, after which nothing is done
        self._asked = -np.inf  # when the scheduler last said that the graph's workers were all there
        self._room: int | None = None  # the memory of the last partition's worker, asked at the first growth
        # run snapshots whose pins their runs make (see run_snapshot)
        self._deferred: weakref.WeakSet = weakref.WeakSet()
        self._finalizer = weakref.finalize(self, end_graph_later, g.client, graph_id)

    @classmethod
    def from_graph(cls, g, scale: float = 1.0) -> DynamicGraph:
        """The graph ``g`` (partitioned, with dense vertex ids), its edge weights (or 1) as the biases.

        Parameters
        ----------
        g : gpipe.Graph
        scale : float, default 1.0
            The amortization factor of floating-point biases (see :class:`SamplingSpace`).
        """
        check_graph("g", g)
        if g.mode != "partitioned" or g.device_partitions is not None or g.id_map is not None:
            raise GpipeValueError("'g' must be a partitioned graph, held on its workers' devices, with dense vertex "
                                  f"ids (for now), got mode {g.mode!r}, device-partitions {g.device_partitions}, "
                                  f"{'an' if g.id_map is not None else 'no'} id map")
        SamplingSpace(0, scale=scale)  # checks scale here, not on the workers
        dg = cls(g, uuid.uuid4().hex, float(scale))
        edges = dg._call(_from_partition, "dynamic graph", lambda part: (g.graph_id, part, dg.graph_id, dg.scale))
        dg._part_edges = dict(zip(dg._held, edges, strict=True))
        dg.num_edges = sum(edges)
        return dg

    def _call(self, function, phase: str, args, parts=None) -> list:
        """``function(*args(part))`` on the worker of each partition of ``parts`` (default: all), in that order; a
        lost worker is remembered (:meth:`_usable`)."""
        calls: list[tuple] = [(self._held[part], function, args(part), {})
                              for part in (self._held if parts is None else parts)]
        try:
            return call_workers(self._graph.client, calls, self._held, phase)
        except WorkerLostError as lost:
            self._lost = lost
            raise

    def _call_all_ending(self, function, phase: str, args, parts) -> list:
        """:meth:`_call` of a function that returns its error (:func:`_returning_errors`): the results, once every
        call has ended, or the error of the first partition that failed."""
        results = self._call(function, phase, args, parts)
        failure = next((r for r in results if isinstance(r, Exception)), None)
        if failure is not None:
            raise failure
        return results

    def _usable(self, phase: str, ask: bool = False) -> None:
        """Raise a WorkerLostError naming the partitions lost, if a call saw a worker leave, or with ``ask`` (a
        batch, which may reach only some of the graph's workers, or take seconds before its first call) if the
        scheduler knows one has left (:meth:`_ask_holders`)."""
        if ask:
            self._ask_holders(phase)
        if self._lost is not None:
            lost = self._lost
            raise WorkerLostError(phase, lost.workers, lost.partitions, lost.unit, lost.out_of_memory)

    def _ask_holders(self, phase: str) -> None:
        """Remember the loss of partitions if the scheduler knows of one, asking it (one round trip) at most once a
        ``WATCH_SECONDS``, as a watched wait does: a loss is then noticed within a second, and a stream of
        updates to some workers costs one round trip each, not two."""
        if self._lost is not None or time.monotonic() - self._asked < WATCH_SECONDS:
            return
        asked = time.monotonic()
        try:
            check_held(self._graph.client, self._held, phase)
        except WorkerLostError as lost:
            self._lost = lost
        self._asked = asked

    def insert_edges(self, src, dst, weight=None) -> Applied:
        """Insert the edges ``src[i] -> dst[i]`` with biases ``weight`` (default 1): see :meth:`apply`."""
        return self.apply(_every("insert", len(src)), src, dst, np.ones(len(src)) if weight is None else weight)

    def delete_edges(self, src, dst) -> Applied:
        """Delete the earliest copy of each edge ``src[i] -> dst[i]``: see :meth:`apply`."""
        return self.apply(_every("delete", len(src)), src, dst, np.ones(len(src)))

    def update_weights(self, src, dst, weight) -> Applied:
        """Give every copy of each edge ``src[i] -> dst[i]`` the bias ``weight[i]``: see :meth:`apply`."""
        return self.apply(_every("update", len(src)), src, dst, weight)

    def apply(self, op, src, dst, weight, *, first: int = 0) -> Applied:
        """Apply a batch of updates in log order (per source vertex), completely or not at all.

        Parameters
        ----------
        op, src, dst, weight
            As :meth:`SamplingSpace.apply`: ``"insert"``, ``"delete"`` (the earliest copy) or ``"update"`` (every
            copy), by vertex id, with a positive finite weight (ignored for a delete).
        first : int, default 0
            The position of the batch's first update in the log it is part of (a log applied in rounds), which
            errors count from.

        Returns
        -------
        Applied
            What was committed: the graph's version after the batch, its updates, and the graph's edges and
            vertices then; ``stats`` as every result of gpipe has (with the call's ``seconds``).

        Raises
        ------
        GpipeValueError
            Naming the first bad update's position in the log (``first`` + its position in the batch), or the id
            whose vertex tables would take more than the memory of the last partition's worker; the graph is then
            as it was before the batch, as it is after any failure but a lost worker's.
        TaskError
            A worker failed to apply its part (e.g. out of memory), naming the phase and the partition.
        WorkerLostError
            A worker holding partitions has left the cluster (during the batch or before it), naming them.
        """
        t0 = time.perf_counter()
        first = check_int("first", first, minimum=0)
        batch = check_batch(op, src, dst, weight, first)
        # here and between the next steps of the client's work (a second or more each for 10^7 updates): a worker
        # lost meanwhile is seen before any call, not once the parts were sent
        self._usable("dynamic apply", ask=True)
        bounds = self._graph.bounds
        if len(bounds) == 2:  # one partition holds every vertex, and those the updates add
            owner, touched = None, [0] if len(batch.src) else []
        else:  # the owner of each update (an undirected graph's: and of its reverse, after it)
            owner = _owners(bounds, batch.src) if self.directed else np.stack([_owners(bounds, batch.src),
                                                                               _owners(bounds, batch.dst)], 1).ravel()
            touched = np.flatnonzero(np.bincount(owner, minlength=len(bounds) - 1)).tolist()  # the others keep theirs
        with self._lock:
            self._usable("dynamic apply", ask=True)  # which a call that reaches only some workers would not see
            self._check_growth(batch, first)
            self._pin_deferred()
            self._batches += 1
            token = self._batches
            try:
                edges = self._apply_parts(batch, owner, touched, token, first)
            except WorkerLostError:  # the graph has lost partitions: nothing to take back
                raise
            except BaseException:  # a missing edge, a worker's error, an interrupt: no partition keeps the batch
                self._call(_take_back, "dynamic take-back", lambda part: (self.graph_id, part, token), touched)
                raise
            self._part_edges.update(zip(touched, edges, strict=True))
            self.num_edges = sum(self._part_edges.values())
            if len(batch.src):
                self.num_vertices = max(self.num_vertices, int(batch.src.max()) + 1, int(batch.dst.max()) + 1)
            self.version += 1
            return Applied(self.version, len(batch.src), self.num_edges, self.num_vertices, time.perf_counter() - t0)

    def _apply_parts(self, batch: Batch, owner: np.ndarray | None, touched: list, token: int, first: int) -> list:
        """Apply ``batch`` as batch ``token`` on the partitions ``touched`` (``owner``: of each update, as routed);
        their edges now. Raises on the first failure, which may leave it staged or committed on some of them
        (``apply`` takes it back)."""
        bounds = self._graph.bounds
        if len(touched) == 1:  # one partition: stage and commit in one round trip (a streaming update's)
            # the batch as given, without names; the worker makes the reverses of an undirected graph's
            whole = dataclasses.replace(batch, op=None, given=None)
            args = (self.graph_id, touched[0], token, whole, int(bounds[touched[0]]), not self.directed)
            [(failed, edges)] = self._call_all_ending(_apply, "dynamic apply", lambda part: args, touched)
            if failed >= 0:
                raise absent(batch, failed, first)
            return [edges]
        if not touched:
            return []
        parts = {}
        for part in touched:
            self._usable("dynamic stage", ask=True)
            parts[part] = (self.graph_id, part, token,
                           *batch.part(np.flatnonzero(owner == part), not self.directed, int(bounds[part])))
        self._usable("dynamic stage", ask=True)
        failed = [f for f in self._call_all_ending(_stage, "dynamic stage", parts.get, touched) if f >= 0]
        if failed:
            raise absent(batch, min(failed), first)
        return self._call_all_ending(_commit, "dynamic commit", lambda part: (self.graph_id, part, token), touched)

    def _check_growth(self, batch: Batch, first: int) -> None:
        """Refuse a batch naming a vertex id whose vertex tables (those of the last partition's vertices up to it)
        would take more than the memory of the worker holding the last partition, where they all go (its device's
        on a GPU), naming its first update, before anything is staged."""
        if not len(batch.src):
            return
        top = max(int(batch.src.max()), int(batch.dst.max()))
        if top < self.num_vertices:
            return
        last = len(self._graph.bounds) - 2
        if self._room is None:
            [(host, device, _)] = self._call(worker_memory, "dynamic memory check", lambda part: (), [last])
            self._room = host if device is None else device
        nbytes = (top + 1 - int(self._graph.bounds[last])) * VERTEX_BYTES
        if nbytes > self._room:
            at = int(np.flatnonzero((batch.src == top) | (batch.dst == top))[0])
            raise GpipeValueError(f"update {first + at}: vertex id {top}: the vertex tables up to it would take "
                                  f"{format_bytes(nbytes)}, more than the {format_bytes(self._room)} of "
                                  f"{'memory' if self._graph.device == 'cpu' else 'device memory'} of worker "
                                  f"{self._held[last]}, which holds the last partition (where new vertices go)")

    def snapshot(self) -> Snapshot:
        """The graph as of its last committed batch, read-only, for runs while updates go on.

        Each worker pins its partitions' sampling spaces as they are (a commit writes only blocks that no pinned
        version reads, so nothing is copied), under the lock that a batch holds from its first stage to
        its last commit: a snapshot holds every update of a batch or none. The pins go when the snapshot is
        garbage-collected or :meth:`Snapshot.release` d. A walk on a DynamicGraph takes one for its run
        (:meth:`run_snapshot`).

        Examples
        --------
        >>> with gpipe.connect(n_workers=1, device="cpu"):
        ...     g = gpipe.from_edges(pd.DataFrame({"src": [0, 1], "dst": [1, 0]}), directed=True, mode="partitioned")
        ...     dg = gpipe.dynamic.DynamicGraph.from_graph(g)
        ...     before = dg.snapshot()
        ...     applied = dg.insert_edges([1, 2], [2, 0])
        ...     after = dg.snapshot()
        ...     (before.num_vertices, before.num_edges, before.version), (after.num_vertices, after.num_edges)
        ((2, 2, 0), (3, 4))
        """
        with self._lock:
            self._usable("dynamic snapshot")
            snapshot = self._new_snapshot()
            self._call(_pin, "dynamic snapshot", lambda part: (self.graph_id, part, snapshot.graph_id, snapshot.bounds))
            return snapshot

    def run_snapshot(self) -> Snapshot:
        """The snapshot a run on this graph reads (what a walk on it takes): :meth:`snapshot`, except that where one
        worker holds every partition the pins go with the run's own message (its ``prelude``), one message fewer.

        Until its run pins it, a batch applied meanwhile pins it first (under the batch's lock), so it still holds
        the graph as of this call.
        """
        if len(set(self._held.values())) > 1:  # a peer may read a partition before its own run message arrives
            return self.snapshot()
        with self._lock:
            self._usable("dynamic snapshot")
            snapshot = self._new_snapshot()
            snapshot.prelude = (_pin_all, (self.graph_id, snapshot.graph_id, snapshot.bounds, tuple(self._held)))
            self._deferred.add(snapshot)
            return snapshot

    def _new_snapshot(self) -> Snapshot:
        bounds = self._graph.bounds.copy()
        bounds[-1] = max(int(bounds[-1]), self.num_vertices)  # the last partition holds the new vertices
        return Snapshot(self._graph, uuid.uuid4().hex, bounds, self.num_edges, self.version)

    def _pin_deferred(self) -> None:
        """Pin the run snapshots whose runs may not have pinned them yet (the lock held): a batch is about to apply."""
        for snapshot in list(self._deferred):
            self._call(_pin, "dynamic snapshot", lambda part, s=snapshot: (self.graph_id, part, s.graph_id, s.bounds))
        self._deferred.clear()

    def nbytes(self) -> int:
        """Bytes of the partitions' sampling spaces on the workers (:attr:`SamplingSpace.nbytes`, summed), as of the
        last committed batch; divided by :attr:`num_edges`, the memory per edge."""
        self._usable("dynamic nbytes")
        return sum(self._call(_nbytes, "dynamic nbytes", lambda part: (self.graph_id, part)))

    def edges(self) -> pd.DataFrame:
        """Every edge as ``src``, ``dst``, ``weight``, by source, each source's in log order."""
        self._usable("dynamic edges")
        frames = self._call(_edges, "dynamic edges", lambda part: (self.graph_id, part, int(self._graph.bounds[part])))
        return pd.concat(frames, ignore_index=True)


class Snapshot:
    """A :class:`DynamicGraph` as of one committed batch (``version``), read-only: what a walk runs on.

    Its partitions are the sampling spaces of that version, pinned on the workers (see
    :meth:`DynamicGraph.snapshot`); the vertices are ``0 .. num_vertices - 1``, dense ids, the last partition holding
    those added by updates; the biases are the edge weights.
    """

    replicas = None  # partitioned, held on the workers' devices, with dense ids (as DynamicGraph.from_graph asks)
    # (function, args) pinning it on its worker, run before its run (see DynamicGraph.run_snapshot)
    prelude: tuple | None = None
    device_partitions = None
    id_map = None
    weighted = True
    mode = "partitioned"

    def __init__(self, g, graph_id: str, bounds: np.ndarray, num_edges: int, version: int):
        self._graph = g
        self.graph_id = graph_id
        self.bounds = bounds
        self.placement = list(g.placement)
        self.directed = g.directed
        self.num_edges = num_edges
        self.version = version
        self._finalizer = weakref.finalize(self, end_graph_later, g.client, graph_id)

    num_vertices = Graph.num_vertices  # a graph's shape and id checks, of these bounds and no id map
    vertex_dtype = Graph.vertex_dtype
    num_partitions = Graph.num_partitions
    holders = Graph.holders
    to_internal = Graph.to_internal
    to_original = Graph.to_original

    @property
    def device(self) -> str:
        return self._graph.device

    @property
    def client(self) -> Client:
        return self._graph.client

    def release(self) -> None:
        """Unpin the spaces on the workers now (they are also unpinned when the snapshot is garbage-collected)."""
        if self._finalizer.detach() is not None and self._graph.client.status == "running":
            end_graph(self._graph.client, self.graph_id)

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        return (f"<gpipe.dynamic.Snapshot {kind} version {self.version}: {self.num_vertices} vertices, "  # type: ignore[misc]
                f"{self.num_edges} edges, {self.num_partitions} partitions on {self.device}>")  # type: ignore[misc]


@dataclasses.dataclass(frozen=True)
class Applied:
    """What :meth:`DynamicGraph.apply` committed: the graph's ``version`` after the batch, its ``updates``, and the
    graph's stored edges (an undirected edge twice) and vertices then."""

    version: int
    updates: int
    num_edges: int
    num_vertices: int
    seconds: float

    @property
    def stats(self) -> dict:
        return {"algorithm": "dynamic_apply", **dataclasses.asdict(self)}


def _from_partition(graph_id: str, part: int, dynamic_id: str, scale: float) -> int:
    p = partition(graph_id, part)
    indptr, dst = to_host(p.indptr), to_host(p.indices).astype(np.int64)
    weight = np.ones(len(dst)) if p.weights is None else to_host(p.weights).astype(np.float64)
    if not (np.isfinite(weight) & (weight > 0)).all():
        bad = weight[~(np.isfinite(weight) & (weight > 0))][0]
        raise GpipeValueError(f"'g': the biases of a dynamic graph are its edge weights, which must be positive and "
                              f"finite; partition {part} holds a weight of {bad}")
    space = SamplingSpace(p.hi - p.lo, device=worker_device(), scale=scale)
    space.apply_batch(Batch.inserts(np.repeat(np.arange(p.hi - p.lo, dtype=np.int64), np.diff(indptr)), dst, weight))
    keep_partition(dynamic_id, part, space)
    return len(dst)


def _owners(bounds: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The partition owning each of ``ids`` (an id past the last vertex: the last partition, which grows)."""
    return np.minimum(np.searchsorted(bounds, ids, side="right") - 1, len(bounds) - 2)


def _every(op: str, n: int) -> pd.Categorical:
    """``n`` updates' ``op``, as a categorical column: checked through its codes, not a string each."""
    return pd.Categorical.from_codes(np.zeros(n, np.int8), [op])


def _returning_errors(phase: str):
    """A batch's worker function (``(dynamic_id, part, ...)``) that returns its error instead of raising it, a
    GpipeError as it is, any other as a TaskError naming ``phase`` and the partition: the client waits for every
    partition's call to end before it takes the batch back, so that none is still under way."""
    def wrap(function):
        @functools.wraps(function)
        def run(dynamic_id: str, part: int, *args):
            try:
                return function(dynamic_id, part, *args)
            except GpipeError as exc:
                return exc
            except Exception as exc:
                return TaskError(phase, part, None, repr(exc))
        return run
    return wrap


@_returning_errors("dynamic stage")
def _stage(dynamic_id: str, part: int, token: int, batch: Batch, position: np.ndarray) -> int:
    """Replay this partition's updates (local sources) as batch ``token``; the batch position of the first that
    failed, else -1."""
    failed = partition(dynamic_id, part)._stage_batch(token, batch)
    return int(position[failed]) if failed >= 0 else -1


@_returning_errors("dynamic apply")
def _apply(dynamic_id: str, part: int, token: int, batch: Batch, lo: int, both_ways: bool) -> tuple[int, int]:
    """Stage and commit the whole batch as batch ``token`` in this partition, its first vertex ``lo`` (each update
    then its reverse with ``both_ways``): (the batch position of the first update that failed, else -1; the
    partition's edges now)."""
    space = partition(dynamic_id, part)
    if both_ways:
        batch = batch.both_ways()
    failed = space._stage_batch(token, dataclasses.replace(batch, src=batch.src - lo))
    if failed >= 0:
        return int(failed // 2 if both_ways else failed), space.num_edges  # an update, then its reverse
    space._commit_batch(token)
    return -1, space.num_edges


@_returning_errors("dynamic commit")
def _commit(dynamic_id: str, part: int, token: int) -> int:
    """Apply batch ``token``, staged; the partition's edges now."""
    space = partition(dynamic_id, part)
    space._commit_batch(token)
    return space.num_edges


def _take_back(dynamic_id: str, part: int, token: int) -> None:
    partition(dynamic_id, part)._take_back(token)


_PINNING = threading.Lock()  # a pin made by a run's prelude and by a batch's _pin_deferred at once: one view


def _pin(dynamic_id: str, part: int, snapshot_id: str, bounds: np.ndarray) -> None:
    """Keep the partition's space as last committed as partition ``part`` of snapshot ``snapshot_id`` (if it is not
    kept already)."""
    with _PINNING:
        if not holds_partition(snapshot_id, part):
            view = partition(dynamic_id, part).view(part, int(bounds[part]), int(bounds[part + 1]), bounds)
            keep_partition(snapshot_id, part, view)


def _pin_all(dynamic_id: str, snapshot_id: str, bounds: np.ndarray, parts: tuple) -> None:
    """:func:`_pin` of each of ``parts`` (a run snapshot's prelude, on the one worker holding them)."""
    for part in parts:
        _pin(dynamic_id, part, snapshot_id, bounds)


def _nbytes(dynamic_id: str, part: int) -> int:
    return partition(dynamic_id, part).nbytes


def _edges(dynamic_id: str, part: int, lo: int) -> pd.DataFrame:
    src, dst, weight = partition(dynamic_id, part).all_edges()
    return pd.DataFrame({"src": src + lo, "dst": dst, "weight": weight})
