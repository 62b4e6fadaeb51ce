"""The client-side handle of a partitioned graph, and the pipeline that builds one."""

from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import uuid
import weakref
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import psutil
from dask.utils import format_bytes

from .. import config
from .._files import GRAPH_FILES, atomic_dir
from .._validate import check_choice, check_edge_dir, check_int, check_integers
from ..backend import device_of, to_host, unique, xp
from ..errors import GpipeError, GpipeValueError
from ..runtime import Session, workers_info
from ..runtime.calls import (
    Future,
    call_workers,
    check_held,
    end_graph,
    end_graph_later,
    gather,
    gather_in_background,
    gather_pinned,
    run,
    submit,
)
from ..runtime.workers import keep_arrays, partition
from . import _build, _order

if TYPE_CHECKING:
    from distributed import Client


class Graph:
    """A graph whose CSR partitions live on the Dask workers.

    Vertices are dense ids ``0..n-1`` inside gpipe; when the input ids were not,
    ``id_map`` holds the original id of each dense id and every output is
    translated back. Build one with :func:`gpipe.read_edges`,
    :func:`gpipe.from_edges` or :func:`gpipe.generators.rmat`.

    Examples
    --------
    >>> import os, tempfile, pandas as pd, gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(pd.DataFrame({"src": ["a", "b", "c", "c"], "dst": ["b", "c", "a", "d"]}))
    ...     degrees = g.degrees()
    ...     folder = g.to_parquet(os.path.join(tempfile.mkdtemp(), "graph"))
    ...     again = gpipe.read_edges(folder)   # a graph folder reads back as the same graph
    ...     (again.num_vertices, again.num_edges, again.degrees().equals(degrees))
    (4, 4, True)
    >>> degrees.to_dict()
    {'a': 2, 'b': 2, 'c': 3, 'd': 1}
    """

    def __init__(self, session: Session, graph_id: str, bounds: np.ndarray, placement: list[str], *,
                 num_edges: int, directed: bool, weighted: bool, id_map: np.ndarray | None,
                 partition_info: list[dict], replicas: list[str] | None = None,
                 device_partitions: int | None = None):
        self._session = session
        self.graph_id = graph_id
        self.bounds = bounds
        self.placement = placement
        self.directed = directed
        self.weighted = weighted
        self.id_map = id_map
        self.partition_info = partition_info
        self.num_edges = num_edges
        self.replicas = replicas  # replicated mode: the workers that each hold the whole graph (as partition 0)
        self.device_partitions = device_partitions  # out-of-memory: partitions on each worker's device at once
        self._vertex_arrays: dict[str, np.ndarray] = {}  # per-vertex arrays gathered from the partitions
        self._on_workers: set[str] = set()  # those of them put into the stores of the graph's workers
        self._label_values: np.ndarray | None = None  # the distinct labels, sorted, once asked for
        self._reversed: Graph | None = None  # a directed graph's transpose, once asked for (:meth:`reverse`)
        self._finalizer = weakref.finalize(self, end_graph_later, session.client, graph_id)

    def release(self) -> None:
        """Free the partitions on the workers now (they are also freed when the graph is garbage-collected)."""
        client = self._session.client  # not ``self.client``: a closed cluster took the partitions, nothing to free
        if self._finalizer.detach() is not None and client.status == "running":
            end_graph(client, self.graph_id)
        if self._reversed is not None:
            self._reversed.release()
            self._reversed = None

    def reverse(self) -> Graph:
        """The graph of this one's edges reversed, each ``u -> v`` as ``v -> u``: its out-edges are this graph's
        in-edges (``edge_dir='in'`` of the samplers, walks and loaders reads them).

        Built on the workers at the first call, from the partitions (the same number of them, edge-balanced by
        in-degree, or replicated as this graph is), and kept with this graph: released with it. An undirected
        graph is its own reverse (no copy). Vertex ids, weights, self-loops and parallel edges are as here.

        Examples
        --------
        >>> import pandas as pd, gpipe
        >>> with gpipe.connect(n_workers=1, device="cpu"):
        ...     g = gpipe.from_edges(pd.DataFrame({"src": [0, 0, 1], "dst": [1, 2, 2]}), directed=True)
        ...     g.reverse().degrees().tolist()   # the in-degrees of g
        [0, 1, 2]
        """
        if not self.directed:
            return self
        if self._reversed is None:
            client = self.client
            chunks = [submit(client, _reversed_edges, self.graph_id, p, workers=[w])
                      for p, w in enumerate(self.placement)]
            self._reversed = build(self._session, chunks, self.num_vertices, directed=True, weighted=self.weighted,
                                   id_map=self.id_map, partitions=self.num_partitions, mode=self.mode,
                                   keep_self_loops=True, keep_duplicates=True)
        return self._reversed

    # -- shape -------------------------------------------------------------------
    @property
    def num_vertices(self) -> int:
        return int(self.bounds[-1])

    @property
    def vertex_dtype(self) -> np.dtype:
        """The smallest integer type of a dense vertex id here (int32 below 2**31 vertices, else int64), as the
        partitions' ``indices`` hold them."""
        return np.dtype(np.int32 if self.num_vertices < 2**31 else np.int64)

    @property
    def mode(self) -> str:
        """'partitioned' (partitions spread over the workers) or 'replicated' (the whole graph on every worker)."""
        return "partitioned" if self.replicas is None else "replicated"

    @property
    def num_partitions(self) -> int:
        return len(self.bounds) - 1

    @property
    def holders(self) -> tuple[dict[int, str], str]:
        """The workers holding the graph, for a wait on them to name what a lost one held: partition -> worker
        and 'partition', or (replicated) replica -> worker and 'replica'."""
        if self.replicas is None:
            return dict(enumerate(self.placement)), "partition"
        return dict(enumerate(self.replicas)), "replica"

    @property
    def device(self) -> str:
        return self._session.device

    @property
    def client(self) -> Client:
        """The graph's Dask client; a :class:`GpipeError` once it is closed, since the partitions went with it."""
        client = self._session.client
        if client.status in ("closing", "closed"):
            raise GpipeError("this graph's cluster is closed (its client was closed, and its partitions with it): "
                             "read or build the graph again on an open cluster")
        return client

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        return (f"<gpipe.Graph {kind}{' weighted' if self.weighted else ''}: {self.num_vertices} vertices, "
                f"{self.num_edges} edges, " + (f"{self.num_partitions} partitions" if self.replicas is None else
                                                f"replicated on {len(self.replicas)} workers") + f" on {self.device}>")

    # -- ids ---------------------------------------------------------------------
    def to_internal(self, vertices, name: str = "vertices") -> np.ndarray:
        """Dense ids of original vertex ids; unknown ids raise naming ``name``."""
        values = np.asarray(vertices).ravel()
        if self.id_map is None:
            if values.size and not np.issubdtype(values.dtype, np.integer):
                raise GpipeValueError(f"'{name}' must hold integer vertex ids of this graph, got dtype {values.dtype}")
            dense = values.astype(np.int64)
            bad = (dense < 0) | (dense >= self.num_vertices)
        elif self._id_table is not None and values.dtype.kind == "i":  # one load each
            lo, table = self._id_table
            at = values.astype(np.int64) - lo
            inside = (at >= 0) & (at < table.size)
            dense = np.where(inside, table[np.where(inside, at, 0)], -1).astype(np.int64)
            bad = dense < 0
        elif self._sorted_ids and values.dtype.kind == "i":  # a binary search of each: no hash table of every id
            ids, values = self.id_map, values.astype(np.int64)
            at = np.minimum(np.searchsorted(ids, values), ids.size - 1)
            dense = np.where(ids[at] == values, at, -1).astype(np.int64)
            bad = dense < 0
        else:
            dense = self._id_index.get_indexer(values).astype(np.int64)
            bad = dense < 0
        if bad.any():
            raise GpipeValueError(
                f"'{name}' must hold vertices of the graph; {int(bad.sum())} do not, e.g. {values[bad][:3].tolist()}"
            )
        return dense

    @functools.cached_property
    def _sorted_ids(self) -> bool:
        """Whether the id map is of int64 ids in increasing order, as renumbering leaves it."""
        ids = self.id_map
        return ids.dtype == np.int64 and ids.size > 0 and bool((ids[1:] > ids[:-1]).all())

    @functools.cached_property
    def _id_table(self) -> tuple[int, np.ndarray] | None:
        """``(least id, the dense id of each id over the range, -1 where none)`` of an int64 id map whose range is
        small (:func:`._build.small_range`), sorted as renumbering leaves it or in a vertex order: made at the first
        lookup, of int32 dense ids (about twice the id map's bytes at most). A binary search of 16,000 seeds in
        R-MAT 22's 4 M ids took 3-10 ms, as long as a neighbor sample's supersteps."""
        ids = self.id_map
        if ids.dtype != np.int64 or ids.size == 0 or ids.size >= 2**31:
            return None
        return _build.id_table(np, self.id_map, np.int32)

    @functools.cached_property
    def _id_index(self) -> pd.Index:
        """The id map as a pandas Index, whose hash table of every id is built once, at its first lookup."""
        return pd.Index(self.id_map)

    def to_original(self, dense) -> np.ndarray:
        """Original ids of dense ids (the identity when the graph was not renumbered)."""
        dense = np.asarray(dense)
        return dense if self.id_map is None else self.id_map[dense]

    def owner(self, v) -> int | np.ndarray:
        """Partition holding vertex ``v`` (an original id, or an array of them)."""
        dense = self.to_internal(v, "v")
        parts = np.searchsorted(self.bounds, dense, side="right") - 1
        return int(parts[0]) if np.ndim(v) == 0 else parts

    # -- data --------------------------------------------------------------------
    def _on_partitions(self, phase: str, func, *args) -> list:
        """``func(graph_id, part, *args)`` on the worker of every partition, watched; the results in order."""
        client = self.client
        futures = [submit(client, func, self.graph_id, p, *args, workers=[w]) for p, w in enumerate(self.placement)]
        return gather_pinned(client, futures, dict(enumerate(self.placement)), phase)

    def degrees(self) -> pd.Series:
        """Out-degree of every vertex, indexed by original id.

        A :class:`WorkerLostError` once a worker holding the graph has left, as every call on the graph gives,
        though the degrees are gathered once and kept here.
        """
        held, unit = self.holders
        check_held(self.client, held, "graph degrees", unit)
        return pd.Series(self._vertex_array("degrees"), index=self._index(), name="degree")

    @functools.cached_property
    def max_degree(self) -> int:
        """The largest out-degree (the degrees are gathered from the partitions once per graph, and their largest
        found once: 4 ms at 4 M vertices, which a 10 ms sample notices)."""
        return int(self._vertex_array("degrees").max(initial=0))

    def _vertex_array(self, name: str) -> np.ndarray:
        """A per-vertex array of dense ids, gathered from the partitions once: one of ``VERTEX_ARRAYS``."""
        if name not in self._vertex_arrays:
            self._vertex_arrays[name] = np.concatenate(self._on_partitions(f"graph {name}", VERTEX_ARRAYS[name]))
        return self._vertex_arrays[name]

    @property
    def labels(self) -> np.ndarray | None:
        """Each vertex's integer label, by dense id (pattern mining and counting), or None: see :meth:`set_labels`."""
        return self._vertex_arrays.get("labels")

    @property
    def label_values(self) -> np.ndarray | None:
        """The distinct vertex labels, sorted (found once per :meth:`set_labels`), or None without labels."""
        if self._label_values is None and self.labels is not None:
            self._label_values = np.unique(self.labels)
        return self._label_values

    def set_labels(self, labels) -> None:
        """Give every vertex a non-negative integer label.

        ``labels`` is a sequence in dense-id order (``0..n-1``), or a pandas
        Series indexed by original vertex id holding every vertex once. Runs on
        the workers read them as the per-vertex array ``"labels"``.
        """
        self._vertex_arrays["labels"] = self.label_array(labels)
        self._label_values = None
        self._on_workers.discard("labels")

    def label_array(self, labels) -> np.ndarray:
        """``labels`` as :meth:`set_labels` takes them, checked: one int64 label per vertex, by dense id."""
        if isinstance(labels, pd.Series):
            dense = self.to_internal(labels.index.to_numpy(), "labels' index")
            distinct = len(unique(np, dense))
            if distinct != self.num_vertices or len(dense) != self.num_vertices:
                raise GpipeValueError(f"'labels' must label each of the {self.num_vertices} vertices once, got "
                                      f"{len(labels)} labels for {distinct} distinct vertices")
            values = np.empty(self.num_vertices, np.int64)
            values[dense] = check_integers("labels", labels)
        else:
            values = check_integers("labels", labels).copy()  # not the caller's array, which may change later
            if values.shape != (self.num_vertices,):
                raise GpipeValueError(f"'labels' must hold one label per vertex ({self.num_vertices}), got shape "
                                      f"{values.shape}")
        return values

    def put_on_workers(self, names) -> None:
        """Put per-vertex arrays (``"degrees"``, ``"upper_degrees"``, ``"labels"``) into the stores of the graph's workers, once.

        Runs there read them by name (``gpipe.runtime.workers.graph_array``); they go with the graph.
        """
        missing = sorted(set(names) - self._on_workers)
        if not missing:
            return
        arrays = {name: self._vertex_array(name) for name in missing}
        held, unit = self.holders
        call_workers(self.client, [(w, keep_arrays, (self.graph_id, arrays), {}) for w in sorted(set(held.values()))],
                     held, "graph arrays", unit)
        self._on_workers.update(missing)

    def _index(self):
        return pd.RangeIndex(self.num_vertices, name="vertex") if self.id_map is None else pd.Index(self.id_map, name="vertex")

    def to_parquet(self, path, overwrite: bool = False) -> str:
        """Write the graph to a folder: one Parquet file per partition, ``_gpipe.json`` and ``ids.parquet``.

        ``ids.parquet`` (the original ids) is written when the graph was renumbered;
        ``_gpipe.json`` records the shape and each partition's edge count, which
        :func:`gpipe.read_edges` checks when it reads the folder back. The folder
        appears complete or not at all.

        Parameters
        ----------
        path : str or path-like
            A new or empty folder (like pyarrow's dataset writer, gpipe writes
            into nothing else unless asked), or a symbolic link to one, written
            through.
        overwrite : bool
            Replace a folder that holds a graph gpipe wrote. A folder holding
            anything else (another file, a link, an empty folder), or a file at
            ``path``, is refused even then.

        Returns
        -------
        str
            ``path``.

        Raises
        ------
        GpipeValueError
            ``path`` holds something this call may not replace; nothing was written.
        """
        path = os.fspath(path)
        with atomic_dir(path, owned=GRAPH_FILES, overwrite=overwrite) as tmp:
            part_edges = self._on_partitions("graph writing", _write_partition, tmp)
            if self.id_map is not None:
                pd.DataFrame({"id": self.id_map}).to_parquet(os.path.join(tmp, "ids.parquet"))
            meta = {"format": "gpipe-graph", "version": 2, "num_vertices": self.num_vertices,
                    "num_edges": self.num_edges, "directed": self.directed, "weighted": self.weighted,
                    "partitions": self.num_partitions, "part_edges": part_edges,
                    "renumbered": self.id_map is not None}
            with open(os.path.join(tmp, "_gpipe.json"), "w") as f:
                json.dump(meta, f, indent=2)
        return path


def _partition_degrees(graph_id: str, part: int) -> np.ndarray:
    indptr = partition(graph_id, part).indptr
    return to_host(indptr[1:] - indptr[:-1])


def _partition_upper_degrees(graph_id: str, part: int) -> np.ndarray:
    """Out-edges (v, w) with w >= v of each vertex: an undirected graph's edges, each once (at its smaller end)."""
    p = partition(graph_id, part)
    x = xp(device_of(p.indptr))
    row = x.searchsorted(p.indptr[1:], x.arange(p.num_edges), side="right")
    return to_host(x.bincount(row[p.indices >= row + p.lo], minlength=p.hi - p.lo))


VERTEX_ARRAYS = {"degrees": _partition_degrees, "upper_degrees": _partition_upper_degrees}  # name -> per partition


def _reversed_edges(graph_id: str, part: int) -> dict:
    """Partition ``part``'s edges reversed, as a chunk of dense-id edges for :func:`build` (on the worker's
    device)."""
    p = partition(graph_id, part)
    x = xp(device_of(p.indptr))
    row = x.searchsorted(p.indptr[1:], x.arange(p.num_edges), side="right")  # each edge's row (as cupy has no
    chunk = {"src": p.indices.astype(x.int64), "dst": (row + p.lo).astype(x.int64)}  # repeat by an array)
    if p.weights is not None:
        chunk["weight"] = p.weights
    return chunk


def _write_partition(graph_id: str, part: int, folder: str) -> int:
    """Write partition ``part`` to ``folder``; return its number of edges (rows)."""
    p = partition(graph_id, part)
    indptr = to_host(p.indptr)
    frame = {"src": np.repeat(np.arange(p.lo, p.hi, dtype=np.int64), np.diff(indptr)),
             "dst": to_host(p.indices).astype(np.int64)}
    if p.weights is not None:
        frame["weight"] = to_host(p.weights)
    pd.DataFrame(frame).to_parquet(os.path.join(folder, f"part-{part:05d}.parquet"), index=False)
    return len(frame["dst"])


def default_partitions(session: Session) -> int:
    return len(session.workers()) * config.get("partitions-per-worker")


def check_mode(mode: str | None) -> str:
    """The graph mode asked for, or the configured default."""
    return config.get("graph.mode") if mode is None else check_choice("mode", mode, config.MODES)


def build(session: Session, chunks: list, n: int | Future, *, directed: bool, weighted: bool, id_map,
          partitions: int | None, mode: str = "partitioned", keep_self_loops: bool = False,
          keep_duplicates: bool = False, symmetrize: bool = True, vertex_order: str | None = None) -> Graph:
    """Partition and store a graph from futures of dense-id edge chunks; replicate it if ``mode`` says so. The
    vertex count ``n`` may be a future (the client asks for it only where partitions' bounds need it), and the
    ``id_map`` on its way to the client (``gather_in_background``) while the partitions are built. A ``vertex_order``
    (checked by the caller: :func:`gpipe._validate.check_vertex_order`) renumbers the dense ids by the graph's
    structure before the ranges are cut (:mod:`._order`); the id map then names the ids it had before."""
    client = session.client
    workers = session.workers()
    parts = default_partitions(session) if partitions is None else check_int("partitions", partitions, minimum=1)
    if not isinstance(n, Future):
        parts = _partition_count(parts, n, partitions)
    prepared = [
        submit(client, _build.prepare, c, n, directed or not symmetrize, keep_self_loops) for c in chunks
    ]
    order = None
    if vertex_order is not None:
        order = submit(client, _order.order_of, vertex_order, n, directed, *prepared)
        rank = submit(client, _order.ranks, order)
        prepared = [submit(client, _order.relabel, c, rank) for c in prepared]
        order = gather_in_background(client, order)  # type: ignore[assignment]  # while the partitions are built
    if parts == 1:  # the one partition holds every vertex: no bounds to find, no chunk to split (~50 tasks less)
        bounds = submit(client, _build.whole, n) if isinstance(n, Future) else _build.whole(n)
        splits = None
    else:
        hists = [submit(client, _build.histogram, c, n) for c in prepared]
        hist, n = gather(client, [submit(client, _build.total, hists) if hists else np.zeros(1, np.int64), n])
        parts = _partition_count(parts, n, partitions)  # type: ignore[arg-type]
        bounds = _build.balanced_bounds(hist, n, parts)  # type: ignore[arg-type]
        splits = [submit(client, _build.split, c, bounds) for c in prepared]
    placement = [workers[p * len(workers) // parts] for p in range(parts)]
    budget = config.get("memory.device-partitions")
    graph_id = uuid.uuid4().hex
    built = [
        submit(client, _build.assemble, graph_id, p, bounds, keep_duplicates, budget,
               *(prepared if splits is None else [submit(client, _build.pick, s, p) for s in splits]),
               workers=[placement[p]])
        for p in range(parts)
    ]
    info = gather_pinned(client, built + ([bounds] if isinstance(bounds, Future) else []), dict(enumerate(placement)),
                         "graph construction")
    if isinstance(bounds, Future):
        bounds = info.pop()
    del prepared, splits
    stored = sum(i["edges"] for i in info)
    loops = sum(i["self_loops"] for i in info)
    num_edges = stored if directed else (stored + loops) // 2
    if isinstance(id_map, concurrent.futures.Future):
        id_map = id_map.result()
    if order is not None:  # the user's id of each new dense id
        order = order.result()
        id_map = order if id_map is None else id_map[order]
    g = Graph(session, graph_id, bounds, placement, num_edges=num_edges, directed=directed, weighted=weighted,
              id_map=id_map, partition_info=info, device_partitions=budget)
    nbytes = sum(i["nbytes"] for i in info)
    if mode == "replicated" or (mode == "auto" and partitions is None and budget is None
                                and _fits_every_worker(session, nbytes)):
        g = _replicate(g, workers)
    return g


def _partition_count(parts: int, n: int, asked: int | None) -> int:
    """``parts`` partitions of ``n`` vertices, at most one per vertex: fewer where the user ``asked`` for none (the
    default, workers x ``gpipe.partitions-per-worker``, may exceed a small graph's vertices), else an error."""
    if parts <= max(n, 1):
        return parts
    if asked is None:
        return max(n, 1)
    raise GpipeValueError(f"'partitions' must be at most the number of vertices ({n}), got {parts}")


def _fits_every_worker(session: Session, nbytes: int) -> bool:
    """Whether ``nbytes`` is at most ``gpipe.graph.replicate-fraction`` of every worker's (GPU) memory."""
    memory = run(session.client, _gpu_memory).values() if session.device == "gpu" else _host_memory(session)
    return nbytes <= config.get("graph.replicate-fraction") * min(memory)


def check_graph_memory(session: Session, nbytes: int, names: str) -> None:
    """Refuse a graph of at least ``nbytes`` that the workers could not hold together (in their memory limits, and
    their GPUs' memory), before any task is submitted; ``names`` are the parameters that make it that large."""
    room = sum(_host_memory(session))
    if session.device == "gpu":
        room += sum(run(session.client, _gpu_memory).values())
    if nbytes > room:
        raise GpipeValueError(f"{names}: the graph would take at least {format_bytes(nbytes)}, more than the "
                              f"workers' {format_bytes(room)} of memory")


def _host_memory(session: Session) -> list[int]:
    """Each worker's memory limit (its host's memory where it has none)."""
    return [w.get("memory_limit") or psutil.virtual_memory().total for w in workers_info(session.client).values()]


def _gpu_memory() -> int:
    import cupy

    return cupy.cuda.Device().mem_info[1]


def _replicate(g: Graph, workers: list[str]) -> Graph:
    """The graph held whole on every worker (as partition 0 of a new graph id); the partitioned copy is freed. A
    graph of one partition on the cluster's one worker is whole there already: held as a replica as it is."""
    client = g.client
    if g.placement == workers == workers[:1] and g.device_partitions is None:  # one partition, one worker
        g._finalizer.detach()
        return Graph(g._session, g.graph_id, g.bounds, workers, num_edges=g.num_edges, directed=g.directed,
                     weighted=g.weighted, id_map=g.id_map, partition_info=g.partition_info, replicas=workers)
    replica_id = uuid.uuid4().hex
    copies = [submit(client, _build.replica, g.graph_id, replica_id, g.placement, g.bounds, workers=[w],
                     key=f"gpipe-replicate-{replica_id}-{i}")
              for i, w in enumerate(workers)]
    try:
        nbytes = gather_pinned(client, copies, dict(enumerate(g.placement)), "replication")[0]
    except BaseException:
        end_graph(client, replica_id)
        raise
    finally:
        g.release()
    info = [{"edges": sum(i["edges"] for i in g.partition_info),
             "self_loops": sum(i["self_loops"] for i in g.partition_info), "nbytes": nbytes}]
    return Graph(g._session, replica_id, np.array([0, g.num_vertices]), [workers[0]], num_edges=g.num_edges,
                 directed=g.directed, weighted=g.weighted, id_map=g.id_map, partition_info=info, replicas=workers)


def check_graph(name: str, value) -> Graph:
    """``value`` if it is a :class:`Graph` (the families' check of their ``g``)."""
    if not isinstance(value, Graph):
        raise GpipeValueError(f"'{name}' must be a gpipe.Graph (from gpipe.read_edges, gpipe.from_edges or "
                              f"gpipe.generators), got {type(value).__name__}")
    return value


def oriented(g: Graph, edge_dir: str) -> Graph:
    """The graph whose out-edges a run with ``edge_dir`` reads (the families' check of their ``edge_dir``): ``g``
    for 'out', its :meth:`~Graph.reverse` for 'in'."""
    return g if check_edge_dir(edge_dir) == "out" else g.reverse()
