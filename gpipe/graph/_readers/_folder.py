"""Graph folders written by ``Graph.to_parquet``: ``_gpipe.json`` and a part file per partition."""

from __future__ import annotations

import json
import os
import re
import stat

import numpy as np
import pandas as pd
import pyarrow as pa

from ..._files import GRAPH_PART
from ..._validate import check_bool, check_int
from ...errors import GpipeFileError, GpipeValueError
from ._parquet import _parquet_table, _parquet_weights

GRAPH_META = "_gpipe.json"
_GRAPH_PART = re.compile(GRAPH_PART)
# The most bytes a _gpipe.json is read to: what gpipe writes for a graph of far more partitions than anyone uses (its
# keys, then a line of part_edges per part file), whatever part files the folder still holds.
_META_PARTITIONS = 1 << 20
_META_LIMIT = 4096 + 32 * _META_PARTITIONS
_GRAPH_KEYS = ("num_vertices", "num_edges", "directed", "weighted", "partitions", "renumbered")


def is_graph_folder(path: str) -> bool:
    """Whether ``path`` is a folder ``Graph.to_parquet`` wrote, whole or damaged: it holds ``_gpipe.json`` (whatever
    that is) or a part file of gpipe's name. A folder that cannot be listed raises :class:`GpipeFileError`."""
    if not os.path.isdir(path):
        return False
    return any(name == GRAPH_META or _GRAPH_PART.fullmatch(name) for name in _listed(path))


def _listed(folder: str) -> list[str]:
    """The names in ``folder``; one that cannot be listed (no read permission) is a :class:`GpipeFileError`."""
    try:
        return os.listdir(folder)
    except OSError as exc:
        raise GpipeFileError(folder, None, f"cannot be listed: {exc.strerror}") from None


def plan_graph_folder(path: str) -> tuple[dict, list[str]]:
    """The checked metadata and the part files of a ``Graph.to_parquet`` folder (only ``_gpipe.json`` is read).

    Every part ``_gpipe.json`` lists must be there and no other, and ``ids.parquet`` when the graph was renumbered;
    :func:`read_graph_part` reads each part, :func:`check_graph_parts` checks them against the metadata,
    :func:`graph_folder_ids` reads the id map. A damaged folder raises :class:`GpipeFileError` naming the file.
    What the manifest claims costs little: it is read up to a bound (what gpipe writes for 2**20 partitions), and
    the listed parts are looked for only until one is missing, the first of them named.
    """
    names = sorted(_listed(path))
    parts = [name for name in names if _GRAPH_PART.fullmatch(name)]
    meta = _graph_meta(os.path.join(path, GRAPH_META), parts)
    count = meta["partitions"]
    listed = []
    for p in range(count):  # ends at the first part missing: at most one past the part files here
        name = f"part-{p:05d}.parquet"
        if not os.path.isfile(os.path.join(path, name)):
            raise GpipeFileError(os.path.join(path, name), None, f"missing: {GRAPH_META} lists {count} partitions")
        listed.append(name)
    for name in sorted(set(names) - set(listed)):
        if name.startswith("part-"):
            raise GpipeFileError(os.path.join(path, name), None,
                                 f"not one of the {count} partitions {GRAPH_META} lists")
    ids_path = os.path.join(path, "ids.parquet")
    if meta["renumbered"] and not os.path.isfile(ids_path):
        raise GpipeFileError(ids_path, None, f"missing: {GRAPH_META} says the graph was renumbered, so its original "
                                             "ids must be here")
    return meta, [os.path.join(path, name) for name in listed]


def read_graph_part(path: str, meta: dict) -> tuple[dict, dict]:
    """One part file's ``src``, ``dst`` (int64) and ``weight`` arrays, checked, and its edge and self-loop counts."""
    columns = ["src", "dst"] + (["weight"] if meta["weighted"] else [])
    part = _graph_part(path, columns, meta["num_vertices"])
    return part, {"edges": len(part["dst"]), "self_loops": int((part["src"] == part["dst"]).sum())}


def check_graph_parts(meta: dict, paths: list[str], counts) -> None:
    """Check the parts' ``counts`` (from :func:`read_graph_part`, an iterable taken in order) against ``meta``:
    each part's edges (format version 2 on), and their sum."""
    rows, loops = 0, 0
    for p, (path, count) in enumerate(zip(paths, counts, strict=True)):
        if "part_edges" in meta and count["edges"] != meta["part_edges"][p]:
            raise GpipeFileError(path, None, f"holds {count['edges']} edges; {GRAPH_META} says "
                                             f"{meta['part_edges'][p]}")
        rows, loops = rows + count["edges"], loops + count["self_loops"]
    # An undirected graph stores both directions of each edge but a self-loop once.
    if (rows if meta["directed"] else (rows + loops) / 2) != meta["num_edges"]:
        meta_path = os.path.join(os.path.dirname(paths[0]), GRAPH_META)
        raise GpipeFileError(meta_path, None, f"'num_edges' is {meta['num_edges']} but the part files hold {rows} "
                                              f"edges ({'directed' if meta['directed'] else 'undirected'}, "
                                              f"{loops} self-loops)")


def graph_folder_ids(path: str, meta: dict) -> np.ndarray | None:
    """The id map of a graph folder (``ids.parquet``), or None when the graph was not renumbered."""
    if not meta["renumbered"]:
        return None
    ids_path = os.path.join(path, "ids.parquet")
    column = _parquet_table(ids_path, ["id"]).column("id")
    if not (pa.types.is_integer(column.type) or pa.types.is_string(column.type)
            or pa.types.is_large_string(column.type)):
        raise GpipeFileError(ids_path, None, f"column 'id' has type {column.type}; ids must be integers or strings")
    ids = column.to_numpy()
    if len(ids) != meta["num_vertices"]:
        raise GpipeFileError(ids_path, None, f"holds {len(ids)} ids; {GRAPH_META} says {meta['num_vertices']} vertices")
    repeated = pd.Index(ids).duplicated()
    if repeated.any():  # each vertex's original id: a repeated one would read as a wrong graph
        first = ids[repeated].tolist()[0]
        raise GpipeFileError(ids_path, None, f"holds id {first!r} {int((ids == first).sum())} times; an id map "
                                             "names each vertex once")
    return ids


def _graph_meta(meta_path: str, parts: list[str]) -> dict:
    """The checked ``_gpipe.json`` of a folder holding the part files ``parts`` (named when it is missing), read no
    further than :data:`_META_LIMIT` bytes."""
    try:
        found = os.stat(meta_path)
        if not stat.S_ISREG(found.st_mode):  # a FIFO would block, a device such as /dev/zero never end
            raise GpipeFileError(meta_path, None, "not a regular file: a graph folder's manifest is a JSON file")
        if found.st_size > _META_LIMIT:
            raise GpipeFileError(meta_path, None, f"is {found.st_size} bytes, larger than gpipe writes for a graph "
                                                  f"of {_META_PARTITIONS} partitions ({_META_LIMIT} bytes)")
        with open(meta_path, "rb") as f:
            text = f.read(found.st_size)  # its size, not the limit: read(n) sets n bytes aside first
    except FileNotFoundError:
        if os.path.islink(meta_path):
            raise GpipeFileError(meta_path, None, "a symbolic link that leads to no file") from None
        listed = f" ({', '.join(parts[:2])}{', ...' if len(parts) > 2 else ''})"
        raise GpipeFileError(meta_path, None, f"missing: the folder holds gpipe's part files{listed} but no "
                                              f"{GRAPH_META}, so it is a damaged graph folder; write it again with "
                                              "Graph.to_parquet") from None
    except OSError as exc:
        raise GpipeFileError(meta_path, None, f"unreadable: {exc.strerror}") from None
    try:
        meta = json.loads(text.decode("utf-8"))
    except RecursionError:
        raise GpipeFileError(meta_path, None, "not valid JSON: nested too deeply") from None
    except ValueError as exc:  # bad JSON or bad UTF-8
        raise GpipeFileError(meta_path, getattr(exc, "lineno", None), f"not valid JSON: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != "gpipe-graph":
        found = meta.get("format") if isinstance(meta, dict) else meta
        raise GpipeFileError(meta_path, None, f"not a gpipe graph folder (format {found!r})")
    if isinstance(meta.get("version"), bool) or meta.get("version") not in (1, 2):  # true == 1 in Python
        raise GpipeFileError(meta_path, None, f"format version {meta.get('version')!r} is not 1 or 2, the versions "
                                              "this gpipe reads")
    for key in _GRAPH_KEYS + (("part_edges",) if meta["version"] >= 2 else ()):
        if key not in meta:
            raise GpipeFileError(meta_path, None, f"no key {key!r}")
    try:
        check_int("num_vertices", meta["num_vertices"], minimum=1)
        check_int("num_edges", meta["num_edges"], minimum=0)
        check_int("partitions", meta["partitions"], minimum=1)
        for key in ("directed", "weighted", "renumbered"):
            check_bool(key, meta[key])
        if "part_edges" in meta:
            counts = meta["part_edges"]
            if not isinstance(counts, list) or len(counts) != meta["partitions"]:
                raise GpipeValueError(f"'part_edges' must list the edges of each of the {meta['partitions']} "
                                      f"partitions, got {counts!r}")
            for c in counts:
                check_int("part_edges", c, minimum=0)
    except GpipeValueError as exc:
        raise GpipeFileError(meta_path, None, str(exc)) from None
    return meta


def _graph_part(path: str, columns: list[str], n: int) -> dict:
    """The ``src``, ``dst`` (int64) and ``weight`` arrays of one part file, checked."""
    table = _parquet_table(path, columns)
    for name in columns[:2]:
        if not pa.types.is_integer(table.column(name).type):
            raise GpipeFileError(path, None, f"column {name!r} has type {table.column(name).type}; "
                                             "vertices must be integers")
    part = {name: table.column(name).to_numpy().astype(np.int64) for name in columns[:2]}
    for name, ids in part.items():
        outside = ids[(ids < 0) | (ids >= n)]
        if len(outside):
            raise GpipeFileError(path, None, f"column {name!r} holds vertex {outside[0]}, outside 0..{n - 1}")
    if len(columns) == 3:
        part["weight"] = _parquet_weights(path, "weight", table.column("weight"))
    return part
