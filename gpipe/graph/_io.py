"""Graphs from frames and files: validation, renumbering, chunking onto the workers."""

from __future__ import annotations

import dataclasses
import operator
import os

import numpy as np
import pandas as pd

from .. import config
from .._validate import check_bool, check_vertex_order
from ..backend import cpu_kernel, device_of, prange, to_host, unique, xp
from ..errors import GpipeFileError, GpipeValueError
from ..runtime import current
from ..runtime.calls import compute, gather, gather_in_background, scatter, submit
from ..runtime.workers import worker_device
from ._build import id_table, small_range
from ._graph import Graph, build, check_mode
from ._readers import (
    FLOAT32_RANGE,
    NpzPlan,
    TablePlan,
    check_graph_parts,
    float32_misfits,
    graph_folder_ids,
    id_kind,
    is_graph_folder,
    npz_frame,
    npz_problem,
    plan_graph_folder,
    plan_npz,
    plan_table,
    read_graph_part,
    read_npz_piece,
    read_piece,
    weights_fit,
)
from ._remote import is_url, local_copy

__all__ = ["from_edges", "read_edges"]


def read_edges(path, src: str = "src", dst: str = "dst", weight: str | bool | None = None, directed: bool = False,
               partitions: int | None = None, *, mode: str | None = None, fmt: str | None = None,
               renumber: bool | None = None, keep_self_loops: bool = False, keep_duplicates: bool = False,
               vertex_order: str | None = None) -> Graph:
    """Read a graph from an edge file, or from a folder written by ``Graph.to_parquet``.

    The workers read the input: an uncompressed text file in byte ranges of
    ``gpipe.graph.read-bytes`` (by default 512 MB on GPU workers, 64 MB on CPU ones), a compressed one whole (one
    worker per file), parquet by runs of row groups of about as many bytes of data, a CSR
    ``.npz`` by ranges of rows of about as many bytes of ``indices`` and weights (a task reads its slices of them,
    a GPU worker straight to its device; when they are stored compressed, as ``np.savez_compressed``
    and scipy's ``save_npz`` write them, one task reads each member once). The
    edges never pass through the client, which reads an ``.npz``'s ``indptr``
    (one integer per vertex) to cut it, and holds the ids (one per vertex) only
    when they are renumbered.

    Parameters
    ----------
    path : str or path-like
        ``.txt``/``.el``/``.edges``/``.tsv`` (SNAP: whitespace-separated, ``#`` or
        ``%`` comments, 2 or 3 columns), ``.csv`` (with a header), ``.parquet``
        (a file, a folder or a glob such as ``"edges/*.parquet"``), ``.npz`` (CSR:
        scipy ``save_npz`` or ``indptr``, ``indices``, ``weights``), ``.mtx``
        (MatrixMarket: a square matrix's entries in the coordinate format,
        real, integer or pattern, general or symmetric; row ``i`` is vertex
        ``i - 1``, as ``scipy.io.mmread`` numbers them), or a gpipe graph
        folder. Text files may end in ``.gz``, ``.bz2``, ``.xz`` or ``.zst``.
        Any of these may be a URL that fsspec opens (``s3://``, ``gs://``,
        ``https://``, ``memory://``, ...; its package installed: ``s3fs``,
        ``gcsfs``, ...): it is copied once to each host of the cluster (into
        its temporary folder; a local cluster's host copies it once) and
        read there as a local file, the copies removed when the graph is
        built. Errors name the URL.
    src, dst, weight : str
        Column names (CSV and Parquet). For SNAP files a third column is the
        weight unless ``weight=False``; so are a MatrixMarket file's values.
    directed : bool
        Keep edges directed; by default both directions are stored.
    partitions : int, optional
        Number of partitions (default: workers x ``gpipe.partitions-per-worker``).
    mode : {'auto', 'partitioned', 'replicated'}, optional
        How the graph is held (default ``gpipe.graph.mode``, 'auto'): spread
        over the workers as partitions that walkers travel between, or whole on
        every worker, each running its share of the walks or instances with no
        communication. 'auto' replicates when no ``partitions`` are asked for
        and the graph takes at most ``gpipe.graph.replicate-fraction`` of each
        worker's (GPU) memory. Results are the same in every mode.
    fmt : {'snap', 'csv', 'parquet', 'npz', 'mtx'}, optional
        Force a format instead of guessing it from the extension.
    renumber : bool, optional
        Map ids to ``0..n-1`` (default: unless the ids are exactly ``0..n-1``, or
        the input gives the vertex count: the rows of a CSR ``.npz`` or of a
        ``.mtx`` matrix, whose isolated vertices are kept). Renumbered, the
        graph has exactly the vertices in the input. ``False`` keeps non-negative integer ids as
        vertex numbers, adding a vertex for every missing id below the largest.
        Outputs always use the original ids.
    keep_self_loops, keep_duplicates : bool
        Keep what is dropped by default.
    vertex_order : {None, 'rcmk', 'metis'}, optional
        Renumber the vertices by the graph's structure before the partitions'
        ranges are cut, so that fewer arcs join two partitions and fewer
        walker steps cross to another worker: 'rcmk', reverse Cuthill-McKee
        (breadth first; computed on the workers, on a GPU worker's device),
        or 'metis', METIS's recursive bisection (needs ``pip install
        pymetis``). The names are DGL's (``dgl.reorder_graph``). The order
        depends on the graph alone, so results are the same for any number
        of workers and partitions; they differ from the unordered graph's
        (other draws, the same law). Outputs keep the original ids. It pays
        on graphs with communities or locality (meshes, road and web
        graphs), not on R-MAT. Default None: the input's order.

    Returns
    -------
    Graph

    Raises
    ------
    GpipeFileError
        ``path`` is missing, a symbolic link that leads to no file or in a
        loop, not a regular file or folder (a FIFO, a device), or a folder
        whose name is a text format's (``x.el``). The file is malformed: the
        message names the file and the first bad
        line, whichever worker parsed it; a compressed file that cannot be
        decompressed (cut short, not of its suffix's format), naming the line
        its readable text ends in. For a graph folder (one holding
        ``_gpipe.json`` or gpipe's part files, ``part-00000.parquet``, ...):
        its ``_gpipe.json`` is missing, not a regular file, larger than gpipe
        writes for the part files there, or malformed; a part file is missing,
        extra, unreadable, or does not hold the edges ``_gpipe.json`` records;
        or a renumbered graph's ``ids.parquet`` is missing, unreadable, or not
        a map: ids neither integers nor strings, or an id held twice.
    GpipeValueError
        A parameter is wrong.

    Examples
    --------
    >>> import os, tempfile, gpipe
    >>> path = os.path.join(tempfile.mkdtemp(), "edges.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("# a SNAP edge list: src dst\\n1 2\\n2 3\\n3 1\\n3 4\\n")
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.read_edges(path)
    ...     g.num_vertices, g.num_edges, g.degrees().tolist()
    (4, 4, [2, 2, 3, 1])

    A MatrixMarket file at a URL (``memory://``, fsspec's in-memory store, as
    ``s3://`` or ``gs://`` would be read):

    >>> import fsspec
    >>> with fsspec.open("memory://bucket/edges.mtx", "w") as f:
    ...     _ = f.write("%%MatrixMarket matrix coordinate pattern general\\n4 4 3\\n1 2\\n2 3\\n3 1\\n")
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.read_edges("memory://bucket/edges.mtx", directed=True)
    ...     g.num_vertices, g.degrees().tolist()
    (4, [1, 1, 1, 0])
    """
    mode = check_mode(mode)
    vertex_order = check_vertex_order("vertex_order", vertex_order)
    if is_url(path):
        with local_copy(current(), path) as local:
            return read_edges(local, src, dst, weight, directed, partitions, mode=mode, fmt=fmt, renumber=renumber,
                              keep_self_loops=keep_self_loops, keep_duplicates=keep_duplicates,
                              vertex_order=vertex_order)
    path = os.path.abspath(os.fspath(path))  # the workers open it: their working directory may not be this one's
    if is_graph_folder(path):  # whole or damaged: never read as a plain parquet folder
        return _read_graph_folder(path, partitions, mode, vertex_order)
    session = current()
    piece_bytes = _read_bytes(session.device)
    plan = plan_table(path, src=src, dst=dst, weight=weight, fmt=fmt, piece_bytes=piece_bytes)
    directed, keep_self_loops, keep_duplicates = _check_flags(directed, keep_self_loops, keep_duplicates)
    renumber = None if renumber is None else check_bool("renumber", renumber)
    if plan.fmt == "npz":
        npz = plan_npz(path, bool(weight), piece_bytes)
        if npz.edges[-1] == 0:
            raise GpipeFileError(path, None, "no edges")
        arrays = _read_npz_on_workers(session.client, npz)
        weighted = npz.weights is not None
        if renumber:  # only the ids that occur, numbered: the general path
            frames = [submit(session.client, npz_frame, a) for a in arrays]
            return _build_from_chunks(session, frames, src="src", dst="dst", weight="weight" if weighted else None,
                                      directed=directed, partitions=partitions, mode=mode, renumber=renumber,
                                      keep_self_loops=keep_self_loops, keep_duplicates=keep_duplicates,
                                      num_vertices=npz.num_vertices, vertex_order=vertex_order)
        # the ids are the rows, checked by the readers: no pass over them to number them
        return build(session, arrays, npz.num_vertices, directed=directed, weighted=weighted, id_map=None,
                     partitions=partitions, mode=mode, keep_self_loops=keep_self_loops,
                     keep_duplicates=keep_duplicates, vertex_order=vertex_order)
    weighted = plan.keep_weight and plan.width == 3 if plan.fmt in ("snap", "mtx") else len(plan.columns) == 3
    if plan.mirror and not directed:  # a symmetric matrix's other triangle: the reverse edges build adds anyway
        plan = dataclasses.replace(plan, mirror=False)
    frames, uniques = _read_on_workers(session.client, plan)
    return _build_from_chunks(session, frames, src="src", dst="dst", weight="weight" if weighted else None,
                              directed=directed, partitions=partitions, mode=mode, renumber=renumber,
                              keep_self_loops=keep_self_loops, keep_duplicates=keep_duplicates,
                              num_vertices=plan.vertices or None, uniques=uniques, vertex_order=vertex_order)


def _read_bytes(device: str) -> int:
    """The bytes of text (of parquet data, of a CSR ``.npz``'s indices and weights) a task reads,
    ``gpipe.graph.read-bytes``: an integer or a string such as '256 MB'; auto: 512 MB where the workers are GPUs,
    64 MB where they are CPUs. (On one H200 an R-MAT 22 edge list, 1.7 GB, was read and built from the page cache
    in 0.65-0.73 s in pieces of 64 MB, 0.38 s of 256 MB, 0.33 s of 512 MB, and cold in 1.6-1.7, 1.3-1.4 and
    1.05-1.14 s: a GPU parses a piece in milliseconds, and smaller pieces spent their time in tasks.)"""
    value = config.get("graph.read-bytes")
    if value == "auto":
        return (512 if device == "gpu" else 64) << 20
    return value


def _read_on_workers(client, plan: TablePlan) -> tuple[list, list]:
    """Futures of the edge frames of ``plan``'s pieces, each parsed by a worker, and of each frame's distinct ids
    (:func:`_unique_ids`), found as soon as its piece is read rather than after every piece is (on one H200 the ids
    of an edge list's 25 pieces were found 60-100 ms after its last piece was read).

    Errors are raised in file order: the first bad line's (a piece that fails counts the lines
    before it for the line number).
    """
    frames, uniques, kinds = [], [], []
    for piece in plan.pieces:  # submitted in turn: a worker finds a piece's ids before it reads the next piece
        frames.append(submit(client, read_piece, plan, piece))
        kinds.append(submit(client, id_kind, frames[-1]))
        uniques.append(submit(client, _unique_ids, frames[-1], "src", "dst"))
    kinds = [kind.result() for kind in kinds]
    if "int" in kinds and "str" in kinds:  # as one file would be read: integer ids are strings beside strings
        for i, (piece, kind) in enumerate(zip(plan.pieces, kinds, strict=True)):
            if kind == "int":
                frames[i] = submit(client, read_piece, plan, piece, strings=True)
                uniques[i] = submit(client, _unique_ids, frames[i], "src", "dst")
    kept = [i for i, kind in enumerate(kinds) if kind is not None]
    if not kept:
        raise GpipeFileError(plan.path, None, "no edges")
    return [frames[i] for i in kept], [uniques[i] for i in kept]


def _read_npz_on_workers(client, plan: NpzPlan) -> list:
    """Futures of the edge arrays of ``plan``'s row ranges, each read by a worker; only the pieces' problems
    (counts and first offenders) reach the client, which raises the error one whole read would."""
    read = [submit(client, read_npz_piece, plan, i) for i in range(len(plan.pieces))]
    error = npz_problem(plan, gather(client, [submit(client, operator.itemgetter(1), r) for r in read]))
    if error is not None:
        raise error
    return [submit(client, operator.itemgetter(0), r) for r in read]


def from_edges(frame, src: str = "src", dst: str = "dst", weight: str | None = None, directed: bool = False,
               partitions: int | None = None, *, mode: str | None = None, renumber: bool | None = None,
               keep_self_loops: bool = False, keep_duplicates: bool = False, num_vertices: int | None = None,
               vertex_order: str | None = None) -> Graph:
    """Build a graph from an edge frame (pandas, cudf or dask).

    Parameters
    ----------
    frame : pandas.DataFrame, cudf.DataFrame or dask.dataframe.DataFrame
        One row per edge.
    src, dst : str
        Columns of the endpoint ids (any hashable ids: ints, strings, ...).
    weight : str, optional
        Column of non-negative edge weights that float32 holds: 0, or 1.175e-38
        to 3.403e38 (gpipe keeps weights as float32; others are refused).
    directed : bool
        Keep edges directed; by default both directions are stored.
    partitions : int, optional
        Number of partitions (default: workers x ``gpipe.partitions-per-worker``).
    mode : {'auto', 'partitioned', 'replicated'}, optional
        How the graph is held (see :func:`read_edges`).
    renumber : bool, optional
        See :func:`read_edges`.
    keep_self_loops, keep_duplicates : bool
        Keep what is dropped by default. Duplicates are merged keeping the largest weight.
    num_vertices : int, optional
        For non-negative integer ids: the vertex count. The ids are then kept as
        vertex numbers ``0..num_vertices-1``, the ones missing from ``frame``
        being isolated vertices (unless ``renumber=True``).
    vertex_order : {None, 'rcmk', 'metis'}, optional
        See :func:`read_edges`.

    Returns
    -------
    Graph

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> edges = pd.DataFrame({"src": ["a", "b", "c"], "dst": ["b", "c", "a"]})
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges)
    ...     g.num_vertices, g.num_edges
    (3, 3)
    """
    mode = check_mode(mode)
    vertex_order = check_vertex_order("vertex_order", vertex_order)
    directed, keep_self_loops, keep_duplicates = _check_flags(directed, keep_self_loops, keep_duplicates)
    session = current()
    columns = [src, dst] + ([weight] if weight is not None else [])
    chunks = _chunks(session.client, frame, columns)
    return _build_from_chunks(session, chunks, src=src, dst=dst, weight=weight, directed=directed,
                              partitions=partitions, mode=mode, renumber=renumber, keep_self_loops=keep_self_loops,
                              keep_duplicates=keep_duplicates, num_vertices=num_vertices, vertex_order=vertex_order)


def _check_flags(directed, keep_self_loops, keep_duplicates) -> tuple[bool, bool, bool]:
    return (check_bool("directed", directed), check_bool("keep_self_loops", keep_self_loops),
            check_bool("keep_duplicates", keep_duplicates))


def _build_from_chunks(session, chunks: list, *, src: str, dst: str, weight: str | None, directed: bool,
                       partitions: int | None, mode: str, renumber: bool | None, keep_self_loops: bool,
                       keep_duplicates: bool, num_vertices: int | None, uniques: list | None = None,
                       vertex_order: str | None = None) -> Graph:
    """The graph of the edge frames ``chunks`` (futures): ids gathered and numbered on the workers (``uniques``:
    futures of each chunk's distinct ids, where the caller has them already).

    Only the count, the type and the first and last of the sorted distinct ids reach the client,
    and the ids themselves (the id map: one per vertex) when they are renumbered.
    """
    client = session.client
    if uniques is None:
        uniques = [submit(client, _unique_ids, c, src, dst) for c in chunks]
    ids = _merged_on_workers(client, uniques)
    # decided where the ids are: the client submits the rest without waiting (a round trip of 11-22 ms on an H200
    # host, between the ids' range and the lookup)
    numbering = submit(client, _numbered, ids, renumber, num_vertices)
    lookup = submit(client, _lookup_of, ids, numbering)  # made once, shared by the chunks
    dense = [submit(client, _to_dense, c, src, dst, weight, lookup) for c in chunks]
    id_map = gather_in_background(client, submit(client, _id_map, ids, numbering))  # while the graph builds
    return build(session, dense, submit(client, operator.itemgetter(1), numbering), directed=directed,
                 weighted=weight is not None, id_map=id_map, partitions=partitions, mode=mode,
                 keep_self_loops=keep_self_loops, keep_duplicates=keep_duplicates, vertex_order=vertex_order)


def _chunks(client, frame, columns: list[str]) -> list:
    """Futures of pandas chunks of ``frame`` on the workers, after checking its columns."""
    if hasattr(frame, "to_delayed") and hasattr(frame, "npartitions"):
        _check_columns(frame, columns)
        return compute(client, frame[columns].to_delayed())
    if hasattr(frame, "to_pandas") and not isinstance(frame, pd.DataFrame):
        frame = frame.to_pandas()
    if not isinstance(frame, pd.DataFrame):
        raise GpipeValueError(f"'frame' must be a pandas, cudf or dask DataFrame, got {type(frame).__name__}")
    _check_columns(frame, columns)
    if len(frame) == 0:
        raise GpipeValueError("'frame' must hold at least one edge, got an empty frame")
    if len(columns) == 3:
        _check_weights(frame[columns[2]], f"'weight' column {columns[2]!r}")
    step = config.get("graph.chunk-edges")
    pieces = [frame[columns].iloc[i:i + step] for i in range(0, len(frame), step)]
    return scatter(client, pieces)  # equal data scattered twice must not share a key


def _check_columns(frame, columns: list[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        names = ("src", "dst", "weight")
        which = names[columns.index(missing[0])]
        raise GpipeValueError(
            f"'{which}' must name a column of the frame, got {missing[0]!r}; columns are {list(frame.columns)}"
        )


def _check_weights(values: pd.Series, what: str, unit: str = "row") -> None:
    """Refuse weights gpipe does not take, naming ``what`` holds them (``"'weight' column 'w'"``) and the first bad
    one by its ``unit`` (row, edge, ...) and position."""
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        raise GpipeValueError(f"{what} must be numeric, got dtype {values.dtype}")
    arr = values.to_numpy(dtype=np.float64, na_value=np.nan)
    if weights_fit(np.ascontiguousarray(arr)):
        return
    bad = float32_misfits(arr) | (arr < 0)
    if bad.any():
        raise GpipeValueError(f"{what} must hold finite, non-negative numbers that fit float32 ({FLOAT32_RANGE}); "
                              f"{unit} {int(np.argmax(bad))} is {arr[bad][0]}")


def _unique_ids(chunk: pd.DataFrame | dict, src: str, dst: str) -> np.ndarray:
    if isinstance(chunk, dict):  # a piece parsed on its worker's device (integer ids): found and kept there
        ends = chunk[src], chunk[dst]
        marked = _marked(*ends)
        x = xp(device_of(ends[0]))
        return unique(x, x.concatenate(ends)) if marked is None else marked
    ends = chunk[src].to_numpy(), chunk[dst].to_numpy()
    for end, column, values in zip(("src", "dst"), (src, dst), ends, strict=True):
        if values.dtype.kind == "u" and values.size and values.max() > np.iinfo(np.int64).max:  # int64 would wrap it
            raise GpipeValueError(f"'{end}' column {column!r} must hold integer ids below 2**63, got "
                                  f"{int(values.max())}: store larger ones as strings")
    if all(e.dtype.kind in "iu" for e in ends):
        marked = _marked(*(e.astype(np.int64, copy=False) for e in ends))
        if marked is not None:
            return marked
    values = np.concatenate(ends)
    if values.dtype.kind not in "iu" and pd.isna(values).any():
        raise GpipeValueError(f"'src'/'dst' columns must not hold missing ids, got {int(pd.isna(values).sum())}")
    return pd.unique(values)


def _merged_on_workers(client, uniques: list):
    """The future of :func:`_merge_ids` of the ``uniques`` futures, merged by a tree of tasks: none holds more than
    a few pieces' distinct ids."""
    while True:
        uniques = [submit(client, _merge_ids, *uniques[i:i + 8]) for i in range(0, len(uniques), 8)]
        if len(uniques) == 1:
            return uniques[0]


def _merge_ids(*uniques: np.ndarray) -> np.ndarray:
    """Sorted unique ids of the whole graph: int64, or an object array of strings. Integer ids within a range a
    few times their count are marked in a bitmap of the range rather than sorted (8 M edges of R-MAT-like
    ids: 7.1 s of merging on 2 cores). Integer ids of a GPU worker's pieces are merged on its device (with any
    host piece's): copying a piece's ids to the host took longer than parsing it."""
    if all(u.dtype.kind in "iu" for u in uniques):
        x = xp("gpu" if any(device_of(u) == "gpu" for u in uniques) else "cpu")
        values = [x.asarray(u).astype(x.int64, copy=False) for u in uniques]
        marked = _marked(*values)
        return unique(x, x.concatenate(values)) if marked is None else marked
    merged = pd.unique(np.concatenate([u.astype(object) for u in uniques]))
    kind = pd.api.types.infer_dtype(merged, skipna=False)
    if kind != "string":
        raise GpipeValueError(f"'src'/'dst' ids must be all integers or all strings, got {kind} ids")
    return np.sort(merged)


def _marked(*values):
    """The sorted distinct values of the int64 arrays ``values`` (numpy, or one device's) marked in a bitmap of
    their range, or None when the range is too wide for one (see :func:`._build.small_range`)."""
    x = xp(device_of(values[0]))
    values = [v for v in values if v.size]
    if not values:
        return x.zeros(0, x.int64)
    lo, hi = min(int(v.min()) for v in values), max(int(v.max()) for v in values)
    if not small_range(lo, hi, sum(v.size for v in values)):
        return None
    seen = x.zeros(hi - lo + 1, x.bool_)
    for v in values:
        if x is np:
            _mark(v, lo, seen)  # on every core
        else:
            seen[v - lo] = True
    return x.flatnonzero(seen) + lo


@cpu_kernel(parallel=True)
def _mark(values, lo, seen):
    for i in prange(values.shape[0]):
        seen[values[i] - lo] = True


@cpu_kernel(parallel=True)
def _look_up(values, lo, table, out):
    for i in prange(values.shape[0]):
        out[i] = table[values[i] - lo]


def _numbered(ids: np.ndarray, renumber: bool | None, num_vertices: int | None) -> tuple[bool, int]:
    """:func:`_numbering` of the sorted unique ``ids`` (numpy or device)."""
    first, last = to_host(ids[[0, -1]]).tolist() if ids.size else (None, None)
    return _numbering(int(ids.size), ids.dtype.kind in "iu", first, last, renumber, num_vertices)


def _numbering(size: int, integer: bool, first, last, renumber: bool | None, num_vertices: int | None):
    """(renumbered, n) for ``size`` sorted unique ids from ``first`` to ``last``: a vertex for each id unless the
    input gives the count."""
    non_negative = integer and (size == 0 or first >= 0)
    if renumber is False and not non_negative:
        raise GpipeValueError("'renumber' must be True (or None) when ids are not non-negative integers")
    if renumber is None:
        dense = non_negative and (size == 0 or last == size - 1)
        renumber = not (dense or (non_negative and num_vertices is not None))
    if renumber:
        return True, size
    n = last + 1 if size else 0
    if n > np.iinfo(np.int64).max:
        raise GpipeValueError(f"'renumber' must be True (or None) when the largest id is {last}: kept as vertex "
                              f"numbers, ids 0..{last} are more vertices than int64 counts")
    if num_vertices is not None:
        if num_vertices < n:
            raise GpipeValueError(f"'num_vertices' must exceed the largest id ({n - 1}), got {num_vertices}")
        n = int(num_vertices)
    return False, n


def _to_dense(chunk: pd.DataFrame | dict, src: str, dst: str, weight: str | None, lookup) -> dict:
    """The chunk's edges in dense ids: the ids themselves without a ``lookup`` (see :func:`_lookup`). A chunk
    parsed on its worker's device is mapped there (its weights checked as it was parsed)."""
    if isinstance(chunk, dict):
        return _to_dense_device(chunk, src, dst, weight, lookup)
    if lookup is None:
        out = {"src": chunk[src].to_numpy(np.int64), "dst": chunk[dst].to_numpy(np.int64)}
    elif isinstance(lookup, tuple):
        lo, table = lookup
        x = xp(device_of(table))
        out = {}
        for end, column in (("src", src), ("dst", dst)):
            values = chunk[column].to_numpy(np.int64)
            if x is not np:  # the table is on this worker's device: the edges are mapped there, where they go
                out[end] = table[x.asarray(values) - lo]
                continue
            out[end] = np.empty(values.shape[0], np.int64)
            _look_up(values, lo, table, out[end])
    else:
        out = {"src": lookup.get_indexer(chunk[src].to_numpy()).astype(np.int64),
               "dst": lookup.get_indexer(chunk[dst].to_numpy()).astype(np.int64)}
    if weight is not None:
        _check_weights(chunk[weight], f"'weight' column {weight!r}")
        out["weight"] = chunk[weight].to_numpy(np.float32)
    return out


def _to_dense_device(chunk: dict, src: str, dst: str, weight: str | None, lookup) -> dict:
    x = xp(device_of(chunk[src]))
    if lookup is None:
        out = {"src": chunk[src], "dst": chunk[dst]}
    elif isinstance(lookup, tuple):
        lo, table = lookup[0], x.asarray(lookup[1])
        out = {"src": table[chunk[src] - lo], "dst": table[chunk[dst] - lo]}
    else:  # the sorted integer id map: each id's position in it
        ids = x.asarray(lookup.to_numpy(np.int64))
        out = {"src": x.searchsorted(ids, chunk[src]), "dst": x.searchsorted(ids, chunk[dst])}
    if weight is not None:
        out["weight"] = chunk[weight].astype(x.float32)
    return out


def _id_map(ids: np.ndarray, numbering: tuple[bool, int]) -> np.ndarray | None:
    """The graph's id map, on the host: the sorted unique ``ids`` where they are renumbered (``numbering``)."""
    return to_host(ids) if numbering[0] else None


def _lookup_of(ids: np.ndarray, numbering: tuple[bool, int]) -> tuple | pd.Index | None:
    """:func:`_lookup` of the sorted unique ``ids`` where they are renumbered (``numbering``), else None."""
    return _lookup(ids) if numbering[0] else None


def _lookup(id_map: np.ndarray) -> tuple | pd.Index:
    """How :func:`_to_dense` finds dense ids, made once for all the chunks of a graph: ``(first id, a table of
    dense ids over the range)`` of a sorted integer ``id_map`` whose range is small (a table per chunk, pages
    faulted in, took as long as the chunk's lookups), on the device of the worker that makes it, else the id map as
    a pandas Index, a hash table."""
    if id_map.dtype.kind in "iu" and id_map.size:
        found = id_table(xp(worker_device()), id_map, np.int64)  # a GPU worker's on its device, where chunks map
        if found is not None:
            return found
    return pd.Index(to_host(id_map))


def _read_graph_folder(path: str, partitions: int | None, mode: str | None, vertex_order: str | None) -> Graph:
    """A graph folder read by the workers, a part file each; the client reads ``_gpipe.json``, the parts' edge
    counts and the id map."""
    meta, paths = plan_graph_folder(path)
    session = current()
    client, workers = session.client, session.workers()
    read = [submit(client, read_graph_part, name, meta, workers=[workers[p * len(workers) // len(paths)]])
            for p, name in enumerate(paths)]
    check_graph_parts(meta, paths, (submit(client, operator.itemgetter(1), r).result() for r in read))
    id_map = graph_folder_ids(path, meta)
    chunks = [submit(client, operator.itemgetter(0), r) for r in read]
    return build(session, chunks, meta["num_vertices"], directed=meta["directed"], weighted=meta["weighted"],
                 id_map=id_map, partitions=partitions, mode=mode, keep_self_loops=True, keep_duplicates=True,
                 symmetrize=False, vertex_order=vertex_order)
