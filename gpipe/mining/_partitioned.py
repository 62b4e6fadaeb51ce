"""Mining a partitioned graph: tables grown level by level, each embedding extended on the worker holding the
partition that owns the vertex it extends (as walkers move between partitions).

Level 0 puts each partition's first vertices in a table on its own worker. At
level ``c`` every worker pulls, one chunk at a time, the embeddings of column
``c`` routed to its partitions, from every worker (its own table's without a
message), and extends them: the candidates are the neighbors of the vertex
being extended, held here; the other matched vertices they are tested against
(cliques: every earlier one; matches: the pattern neighbors and, induced, the
non-neighbors) have their rows fetched from their partitions' workers. Each
new embedding goes into this worker's table for the partition owning the
vertex that extends it next, on the device, in host memory or on disk by the
budgets. The client's call per level is its barrier. An embedding leaves the
worker of its parent, so it travels as a whole row (a column per pattern
position), not as GAMMA's parent index. A listing run's last column is routed
by the partition owning its first vertex instead; at collection each worker
pulls its partitions' rows from every worker and keeps them, sorted, a block
per partition: the blocks in partition order are the embeddings in
lexicographic order, with no sort on the client. A multigraph is mined as the
simple graph underneath: the rows read and fetched keep each neighbor once,
and the degrees the extension tests and routes by are the simple graph's
(where a partition repeats an edge, each worker gathers them once per run from
the partitions' workers).
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass

import numpy as np

from .._csr import Rows, simple_rows
from ..backend import device_of, to_device, to_host, unique, xp
from ..runtime import neighbor_lists
from ..runtime.calls import end_run, on_holders
from ..runtime.workers import (
    call_peer,
    graph_array,
    held_partition,
    run_state,
    worker_address,
    worker_device,
    worker_xp,
)
from ._extend import compress, extend_match
from ._result import MiningState, keep_rows
from ._table import EmbeddingTable, Stats, merged, worker_budgets


@dataclass(frozen=True)
class Routing:
    """Where a partitioned mining run sends each embedding: the partition owning a vertex, and its worker."""

    run_id: str
    placement: tuple  # partition -> worker
    bounds: np.ndarray  # partition p owns vertices bounds[p] .. bounds[p + 1] - 1


@dataclass(frozen=True)
class Checks:
    """What extends column ``c`` of a plan: the earlier positions a new vertex must be adjacent to (one of them,
    the least of degree, is extended), those it must not be, the least degree it needs, whether it must follow
    the previous column's vertex (cliques: each found once, in increasing order), and the earlier positions
    whose vertices it must exceed (a match count's symmetry conditions)."""

    back: tuple
    apart: tuple
    min_degree: int
    increasing: bool
    above: tuple = ()


class WorkerTables:
    """One worker's part of a partitioned run: its tables (one per partition the embeddings go to), budgets and
    stats, and the count of what it found."""

    def __init__(self, spec, device: str, x):
        self.stats = Stats(synchronize=None if device == "cpu" else x.cuda.get_current_stream().synchronize)
        self.device = device
        self.budgets = worker_budgets(spec.device_budget, spec.host_budget, device, x)
        self.folder = tempfile.TemporaryDirectory(prefix="gpipe-mining-", dir=spec.spill_directory)
        self.tables: dict[int, EmbeddingTable] = {}
        self.lock = threading.Lock()  # a peer takes chunks while this worker's run adds them
        self.count = 0
        self.degree = None  # a multigraph's: every vertex's degree in the simple graph underneath

    def put(self, part: int, column: int, rows) -> None:
        with self.lock:
            if part not in self.tables:
                folder = os.path.join(self.folder.name, f"to-{part}")
                os.makedirs(folder)
                self.tables[part] = EmbeddingTable(self.device, *self.budgets, folder, self.stats)
            self.tables[part].add(column, -1, rows, None)

    def take(self, part: int, column: int):
        """The next chunk of ``column`` routed to ``part`` (rows, on the device), or None."""
        with self.lock:
            table = self.tables.get(part)
            taken = None if table is None else table.take(column)
        return None if taken is None else taken[0]

    def close(self) -> None:
        with self.lock:
            for table in self.tables.values():
                table.close()
            self.tables.clear()
        self.folder.cleanup()


def grow_partitioned(g, spec) -> tuple[int, list, dict]:
    """``spec.plan``'s tables grown on the workers of the partitioned graph ``g``: the count, the blocks a
    listing run keeps in run ``spec.run_id`` (``(worker, partition, rows)`` in partition order; else none) and
    the stats. A listing run lives on: its caller ends it."""
    g.put_on_workers(["degrees"])
    routing = Routing(spec.run_id, tuple(g.placement), np.asarray(g.bounds))
    try:
        if any(on_holders(g, "mining: first vertices", _start, spec, routing)):  # edges repeat
            on_holders(g, "mining: degrees", _simple_degrees, spec, routing)
        for column in range(spec.plan.columns - 1):
            on_holders(g, f"mining: extension of column {column}", _level, spec, routing, column)
        replies = on_holders(g, "mining: collection", _finish, spec, routing)
        if spec.listing:  # once every worker has pulled its partitions' rows from the others
            on_holders(g, "mining: tables freed", _close, routing)
    finally:
        if not spec.listing:
            end_run(g, routing.run_id)
    stats = merged([summary for _, _, summary in replies])
    stats["primitive_seconds"] = stats.pop("seconds")
    stats.update(ranges=g.num_partitions, partitions=g.num_partitions, workers=len(replies), device=g.device)
    blocks = sorted((block for _, kept, _ in replies for block in kept), key=lambda block: block[1])
    return sum(count for count, _, _ in replies), blocks, stats


def _kept(part: int) -> int:
    """The table key of a listing run's embeddings whose first vertex partition ``part`` owns."""
    return -1 - part


def _mine(routing: Routing, address: str) -> list[int]:
    return [p for p, w in enumerate(routing.placement) if w == address]


def _start(spec, routing: Routing) -> bool:
    """On a worker: its partitions' first vertices (of the least degree the plan needs), each partition's in its
    own table (the first vertex is the one extended to column 1); whether any of its partitions repeats an edge."""
    address, device, x = worker_address(), worker_device(), worker_xp()
    held = run_state(routing.run_id, MiningState).kept = WorkerTables(spec, device, x)
    held.stats.count(0, 0)
    repeats = False
    for p in _mine(routing, address):
        part = held_partition(spec.graph_id, p)
        with held.stats.timer("filtering"):
            first = x.arange(part.lo, part.hi, dtype=part.indices.dtype)
            degree = to_device(_degrees_of(spec.graph_id, p), device)  # an out-of-memory one's is staged
            repeats |= int(degree.sum()) < part.num_edges
            first, _ = compress(x, first, first, degree >= spec.plan.first_degree)
        for at in range(0, first.shape[0], spec.capacity):
            held.put(p, 0, first[at:at + spec.capacity, None])
    return repeats


def _degrees_of(graph_id: str, part: int) -> np.ndarray:
    """On the worker holding partition ``part``: its vertices' degrees in the simple graph (each neighbor once),
    counted where the partition is (an out-of-memory one's staged in host memory)."""
    held = held_partition(graph_id, part)
    rows = simple_rows(xp(device_of(held.indices)), held.indptr, held.indices)
    return to_host(rows.indptr[1:] - rows.indptr[:-1])


def _simple_degrees(spec, routing: Routing) -> None:
    """On a worker of a multigraph: every vertex's degree in the simple graph underneath, each partition's from
    its worker, for the extension's degree tests and routing in place of the graph's degrees (which count every
    repeat)."""
    device, x = worker_device(), worker_xp()
    held: WorkerTables = run_state(routing.run_id, MiningState).kept
    with held.stats.timer("exchange"):
        held.degree = x.concatenate([to_device(call_peer(worker, _degrees_of, spec.graph_id, p), device)
                                     for p, worker in enumerate(routing.placement)])


def _take(run_id: str, part: int, column: int, to_host_memory: bool):
    """On the worker holding them: the next chunk of ``column`` routed to ``part`` (rows), or None."""
    rows = run_state(run_id, MiningState).kept.take(part, column)
    return to_host(rows) if to_host_memory and rows is not None else rows


def _level(spec, routing: Routing, column: int) -> None:
    """On a worker: extend every embedding of ``column`` routed to its partitions, from every worker."""
    address, device, x = worker_address(), worker_device(), worker_xp()
    held: WorkerTables = run_state(routing.run_id, MiningState).kept
    degree = graph_array(spec.graph_id, "degrees") if held.degree is None else held.degree
    held.stats.count(column + 1, 0)
    for p in _mine(routing, address):
        for source in sorted(set(routing.placement), key=lambda w: (w != address, w)):  # its own first
            while True:
                with held.stats.timer("exchange"):
                    rows = call_peer(source, _take, routing.run_id, p, column, source != address)
                if rows is None:
                    break
                if source != address:
                    held.stats.exchanged_bytes["embeddings"] += int(rows.nbytes)
                    rows = to_device(rows, device)
                _extend(x, spec, routing, held, degree, rows, column=column + 1, address=address)


def _extend(x, spec, routing: Routing, held: WorkerTables, degree, rows, *, column: int, address: str) -> None:
    """Grow ``rows`` (embeddings of ``column - 1`` columns) to ``column`` and route what grew."""
    checks = spec.plan.checks(column)
    last = column == spec.plan.columns - 1
    graph = _rows_of(x, spec, routing, held, rows[:, list(checks.back + checks.apart)], address)
    for vertex, parent in extend_match(x, graph, rows, back=checks.back, apart=checks.apart, min_degree=0,
                                       capacity=spec.capacity, timer=held.stats.timer, above=checks.above):
        with held.stats.timer("filtering"):  # what the kernel cannot test on rows of the tested vertices only
            keep = degree[vertex] >= checks.min_degree
            if checks.increasing:
                keep &= vertex > rows[parent, column - 1]
            vertex, parent = compress(x, vertex, parent, keep)
        if last and not spec.listing:  # counted: the rows are not made
            held.stats.count(column, int(vertex.shape[0]))
            held.count += int(vertex.shape[0])
            continue
        grown = x.concatenate([rows[parent], vertex[:, None]], axis=1)
        if last and grown.shape[0]:
            held.count += int(grown.shape[0])
            with held.stats.timer("placement"):
                owner = x.searchsorted(x.asarray(routing.bounds), grown[:, 0], side="right") - 1
                parts = to_host(unique(x, owner))
            for p in parts.tolist():
                held.put(_kept(p), column, grown[owner == p])
        elif grown.shape[0]:
            with held.stats.timer("placement"):
                owner = x.searchsorted(x.asarray(routing.bounds), _extended(x, degree, grown,
                                                                             spec.plan.checks(column + 1).back),
                                       side="right") - 1
                parts = to_host(unique(x, owner))
            for p in parts.tolist():
                held.put(p, column, grown[owner == p])


def _extended(x, degree, rows, back: tuple):
    """The vertex each embedding extends by: its least-degree vertex at a ``back`` position (the first of the
    least, as the extension kernel picks it)."""
    tested = rows[:, list(back)]
    return tested[x.arange(rows.shape[0]), degree[tested].argmin(axis=1)]


def _rows_of(x, spec, routing: Routing, held: WorkerTables, tested, address: str) -> Rows:
    """The adjacency rows of the ``tested`` vertices (read here or fetched from their partitions' workers), each
    neighbor once, as a CSR over every vertex id (the others' rows empty), which the extension kernel reads as the
    whole graph's."""
    with held.stats.timer("adjacency"):
        vertices = unique(x, tested)
        indptr, indices = neighbor_lists((spec.graph_id, list(routing.placement)), routing.bounds, vertices)
        owner = np.searchsorted(routing.bounds, to_host(vertices), side="right") - 1
        remote = to_device(np.array([routing.placement[p] != address for p in owner.tolist()], bool), held.device)
        held.stats.exchanged_bytes["adjacency"] += int((indptr[1:] - indptr[:-1])[remote].sum()) * indices.itemsize
        rows = simple_rows(x, indptr, indices)
        counts = x.zeros(int(routing.bounds[-1]), x.int64)
        counts[vertices.astype(x.int64)] = rows.indptr[1:] - rows.indptr[:-1]
        whole = x.zeros(counts.shape[0] + 1, x.int64)
        x.cumsum(counts, out=whole[1:])
    return Rows(whole, rows.indices)


def _finish(spec, routing: Routing) -> tuple:
    """On a worker: what it found (the count; a listing run's blocks here: its partitions' rows, pulled from
    every worker, sorted and kept) and its stats; a counting run's tables go."""
    address = worker_address()
    held: WorkerTables = run_state(routing.run_id, MiningState).kept
    if not spec.listing:
        held.close()
        return held.count, [], held.stats.summary()
    kept, last = [], spec.plan.columns - 1
    for p in _mine(routing, address):
        chunks = [np.empty((0, spec.plan.columns), np.int64)]
        for source in sorted(set(routing.placement)):
            while True:
                with held.stats.timer("exchange"):
                    rows = call_peer(source, _take, routing.run_id, _kept(p), last, True)
                if rows is None:
                    break
                if source != address:
                    held.stats.exchanged_bytes["embeddings"] += int(rows.nbytes)
                chunks.append(rows.astype(np.int64))
        with held.stats.timer("listing"):
            rows = np.concatenate(chunks)
            keep_rows(routing.run_id, p, spec.plan.listed(rows[np.lexsort(rows.T[::-1])]))
        kept.append((address, p, int(rows.shape[0])))
    return held.count, kept, held.stats.summary()


def _close(routing: Routing) -> None:
    """On a worker: a listing run's tables go (their rows are kept, or were pulled by their partitions' workers)."""
    state = run_state(routing.run_id, MiningState)
    state.kept, held = None, state.kept
    held.close()
