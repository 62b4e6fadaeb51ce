"""CSR ``.npz`` files (``indptr``, ``indices`` and maybe ``weights``/``data``), read in pieces of rows."""

from __future__ import annotations

import dataclasses
import os
import zipfile
from itertools import pairwise
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from ...backend import segments, to_host, xp
from ...errors import GpipeFileError
from ...runtime.workers import worker_device
from ._bytes import read_to_device
from ._common import FLOAT32_RANGE, _frame, float32_misfits

_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


@dataclasses.dataclass(frozen=True)
class NpzArray:
    """Where a 1-D array of a ``.npz`` lies: its member, dtype and length, and, for a member stored
    uncompressed, the byte offset of its data in the archive file (None: a compressed member)."""

    member: str
    dtype: str
    shape: tuple[int, ...]
    offset: int | None

    @property
    def length(self) -> int:
        return self.shape[0] if len(self.shape) == 1 else -1


@dataclasses.dataclass(frozen=True)
class NpzPlan:
    """A checked CSR ``.npz`` cut into row ranges, each read by one task (:func:`read_npz_piece`)."""

    path: str
    num_vertices: int
    indptr: NpzArray
    indices: NpzArray
    weights: NpzArray | None
    weight_key: str | None
    pieces: tuple[tuple[int, int], ...]  # rows lo..hi
    edges: tuple[int, ...]               # the indptr value at each piece's first row, and at the end


def plan_npz(path: str, weight: bool, piece_bytes: int | None = None) -> NpzPlan:
    """Check a CSR ``.npz`` and cut its rows into pieces of about ``piece_bytes`` of ``indices`` and weights
    (default: one piece).

    This process reads the archive's directory, the arrays' ``.npy`` headers, the small ``format`` and
    ``shape`` arrays and ``indptr`` (one int64 per row); ``indices`` and the weights are read by
    :func:`read_npz_piece`, a piece's slice each when their members are stored uncompressed
    (``np.savez``), else (``np.savez_compressed``, scipy's ``save_npz``) by one piece of all rows,
    which decompresses each member once.
    """
    def fail(reason: str) -> NoReturn:
        raise GpipeFileError(path, None, reason)

    try:
        with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
            infos = {info.filename.removesuffix(".npy"): info for info in archive.infolist()}
            if "format" in infos:
                name = _npz_whole(archive, infos["format"]).item()
                name = name.decode() if isinstance(name, bytes) else str(name)
                if name != "csr":
                    fail(f"sparse format {name!r} is not supported; save a CSR matrix (format 'csr')")
            arrays = {}
            for key in ("indptr", "indices"):
                if key not in infos:
                    fail(f"no {key!r} array; arrays are {sorted(infos)}")
                arrays[key] = array = _npz_array(archive, raw, infos[key])
                if array.length < 0 or np.dtype(array.dtype).kind not in "iu":
                    fail(f"{key!r} must be a 1-D integer array, got {np.dtype(array.dtype)} of shape {array.shape}")
            indptr = _npz_read(path, arrays["indptr"]).astype(np.int64)
            if len(indptr) == 0 or indptr[0] != 0:
                fail("'indptr' must start at 0")
            n = len(indptr) - 1
            if "shape" in infos:
                shape = tuple(int(s) for s in _npz_whole(archive, infos["shape"]).ravel())
                if shape != (n, n):
                    fail(f"shape {shape} is not a square matrix of len(indptr) - 1 = {n} rows")
            degrees = np.diff(indptr)
            if (degrees < 0).any():
                fail(f"'indptr' must be non-decreasing; it drops after row {int(np.argmax(degrees < 0))}")
            indices = arrays["indices"]
            if indptr[-1] != indices.length:
                fail(f"'indptr' ends at {indptr[-1]} but there are {indices.length} indices")
            values, key = None, None
            if weight:
                key = "weights" if "weights" in infos else "data"
                if key not in infos:
                    fail(f"no 'weights' or 'data' array for the weights; arrays are {sorted(infos)}")
                values = _npz_array(archive, raw, infos[key])
                if values.length != indices.length or np.dtype(values.dtype).kind not in "iuf":
                    fail(f"{key!r} must be {indices.length} numbers, got {np.dtype(values.dtype)} of shape "
                         f"{values.shape}")
    except GpipeFileError:
        raise
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise GpipeFileError(path, None, f"not a readable .npz archive: {exc}") from exc
    split = piece_bytes is not None and indices.offset is not None and (values is None or values.offset is not None)
    cuts = [0, n]
    edge_bytes = np.dtype(indices.dtype).itemsize + (0 if values is None else np.dtype(values.dtype).itemsize)
    piece_edges = None if piece_bytes is None else max(1, piece_bytes // edge_bytes)
    if split and indices.length > piece_edges:
        targets = np.arange(piece_edges, indices.length, piece_edges)
        cuts = np.unique(np.concatenate([[0], np.searchsorted(indptr, targets, side="left"), [n]])).tolist()
    pieces = tuple(pairwise(cuts))
    return NpzPlan(path, n, arrays["indptr"], indices, values, key, pieces, tuple(int(indptr[c]) for c in cuts))


def _npz_array(archive: zipfile.ZipFile, raw, info: zipfile.ZipInfo) -> NpzArray:
    """The :class:`NpzArray` of a member from its ``.npy`` header (length -1: not 1-D)."""
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version not in _NPY_HEADERS:
            raise ValueError(f"{info.filename} is .npy format version {version}, not 1.0 or 2.0")
        shape, _, dtype = _NPY_HEADERS[version](member)
        header = member.tell()
    if dtype.hasobject:
        raise ValueError(f"{info.filename} holds Python objects, which gpipe does not load")
    offset = None
    if info.compress_type == zipfile.ZIP_STORED:
        raw.seek(info.header_offset + 26)  # the local header's name and extra field lengths
        name_length, extra_length = np.frombuffer(raw.read(4), "<u2").tolist()
        offset = info.header_offset + 30 + name_length + extra_length + header
    return NpzArray(info.filename, dtype.str, tuple(shape), offset)


def _npz_whole(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    with archive.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def _npz_read(path: str, array: NpzArray, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """Elements ``lo..hi`` of ``array``: only those bytes when it is stored uncompressed."""
    hi = array.length if hi is None else hi
    if array.offset is None:
        with zipfile.ZipFile(path) as archive:
            return _npz_whole(archive, archive.getinfo(array.member))[lo:hi]
    dtype = np.dtype(array.dtype)
    with open(path, "rb") as f:
        f.seek(array.offset + lo * dtype.itemsize)
        values = np.fromfile(f, dtype, hi - lo)
    if len(values) != hi - lo:
        raise GpipeFileError(path, None, f"not a readable .npz archive: {array.member} is cut short")
    return values


def _npz_slice(x, path: str, array: NpzArray, lo: int, hi: int):
    """Elements ``lo..hi`` of ``array`` as an array of ``x``: a GPU worker reads the bytes of a member stored
    uncompressed straight to its device (:func:`read_to_device`: through pinned stages, the disk and the copies at
    once; an R-MAT 22 ``.npz`` read into pageable memory and then copied was read and built in 1.0 s, against
    ``np.load``'s 0.68 s for its arrays alone)."""
    dtype = np.dtype(array.dtype)
    if x is np or array.offset is None or not dtype.isnative:
        return x.asarray(_npz_read(path, array, lo, hi))
    start, end = array.offset + lo * dtype.itemsize, array.offset + hi * dtype.itemsize
    if os.path.getsize(path) < end:
        raise GpipeFileError(path, None, f"not a readable .npz archive: {array.member} is cut short")
    return read_to_device(x, path, start, end).view(dtype)


def read_npz_piece(plan: NpzPlan, piece: int) -> tuple[dict, dict]:
    """The edges of rows ``plan.pieces[piece]`` of a CSR ``.npz`` as dense-id arrays (``src``, ``dst`` int64,
    ``weight`` float32 when read) of the worker's device, and what is wrong with them.

    The file's bytes are read into host memory as they are stored; a GPU worker takes them to its device
    as they are (``indices`` often int32: half the bytes of the int64 made of them) and lays out, checks and
    widens them there. The problems are counts and first offenders (by index in the whole file), which
    :func:`npz_problem` merges over the pieces into the message one whole read gives.
    """
    x = xp(worker_device())  # numpy in a process that is not a worker (read_npz)
    lo, hi = plan.pieces[piece]
    first, last = plan.edges[piece], plan.edges[piece + 1]
    indices = _npz_slice(x, plan.path, plan.indices, first, last).astype(x.int64)
    degrees = x.diff(x.asarray(_npz_read(plan.path, plan.indptr, lo, hi + 1).astype(np.int64)))
    bad = indices[(indices < 0) | (indices >= plan.num_vertices)]
    problems: dict[str, Any] = {"bad_index": int(bad[0]) if bad.shape[0] else None}
    arrays = {"src": segments(x, degrees)[0] + lo, "dst": indices}
    if plan.weights is not None:
        values = _npz_slice(x, plan.path, plan.weights, first, last)
        problems["non_finite"] = int((~x.isfinite(values)).sum())
        weight = values if values.dtype == np.float32 else values.astype(np.float64)  # float32: checked as it is
        for name, mask in (("misfit", float32_misfits(weight)), ("negative", weight < 0)):
            where = x.flatnonzero(mask)
            problems[name] = (len(where), first + int(where[0]), weight[where[0]].item()) if len(where) else (0,)
        arrays["weight"] = weight.astype(np.float32, copy=False)
    return arrays, problems


def npz_frame(arrays: dict) -> pd.DataFrame:
    """:func:`read_npz_piece`'s arrays as an edge frame (in host memory)."""
    return _frame(*(None if a is None else to_host(a) for a in (arrays["src"], arrays["dst"], arrays.get("weight"))))


def npz_problem(plan: NpzPlan, problems: list[dict]) -> GpipeFileError | None:
    """The error a whole read of the ``.npz`` raises, from the pieces' problems in order; None if none."""
    for p in problems:
        if p["bad_index"] is not None:
            return GpipeFileError(plan.path, None, f"'indices' must lie in [0, {plan.num_vertices}); "
                                                   f"found {p['bad_index']}")
    if plan.weights is None:
        return None
    key = repr(plan.weight_key)
    non_finite = sum(p["non_finite"] for p in problems)
    if non_finite:
        return GpipeFileError(plan.path, None, f"{key} has {non_finite} non-finite values")
    for name, rule in (("misfit", f"that do not fit float32, gpipe's weight type ({FLOAT32_RANGE})"),
                       ("negative", "that are negative; weights must be >= 0")):
        found = [p[name] for p in problems if p[name][0]]
        if found:
            count = sum(f[0] for f in found)
            return GpipeFileError(plan.path, None, f"{key} has {count} values {rule}; index {found[0][1]} is "
                                                   f"{found[0][2]}")
    return None


def read_npz(path: str, weight: bool) -> tuple[pd.DataFrame, int]:
    """The edges of a CSR ``.npz`` read in this process as one piece, and its number of rows."""
    plan = plan_npz(path, weight)
    arrays, problems = read_npz_piece(plan, 0)
    error = npz_problem(plan, [problems])
    if error is not None:
        raise error
    return npz_frame(arrays), plan.num_vertices
