"""SNAP edge lists: whitespace-separated ``src dst [weight]`` lines, '#' and '%' comments."""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Iterator

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from ...errors import GpipeFileError
from ...runtime.workers import worker_device, worker_xp
from .._parse import parse_edges
from . import _common
from ._bytes import read_to_device
from ._common import Piece, TablePlan


def _snap_lines(piece: Piece, line: int) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of the data lines of a snap ``piece`` whose first line is ``line``, each of
    valid UTF-8 and 2 or 3 fields."""
    with _common._open_text(piece) as lines:
        for lineno, text in enumerate(lines, line):
            fields = text.split()
            if not fields or fields[0].startswith(_common._COMMENT):
                continue
            if not _common._is_utf8(text):
                raise GpipeFileError(piece.path, lineno, "line is not valid UTF-8")
            if len(fields) not in (2, 3):
                raise GpipeFileError(piece.path, lineno,
                                     f"expected 2 or 3 whitespace-separated fields, got {len(fields)}")
            yield lineno, fields


def _first_data_line(path: str) -> tuple[int, int]:
    """(fields, line number) of the first data line of a snap file."""
    for lineno, fields in _snap_lines(Piece(path), 1):
        return len(fields), lineno
    raise GpipeFileError(path, None, "no edges")


def _read_snap(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame:
    table = _snap_arrow(plan, piece, strings)
    if table is None:
        table = _snap_fast(plan, piece, strings)
    if table is None:  # the third column, unless dropped, is checked line by line
        table = _scan_snap(plan, piece, _common._first_line(piece), strings)
    return table


def _snap_arrow(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame | None:
    """Integer ids one tab or one space apart: a piece of an uncompressed file without comments parsed on a GPU
    worker's device (:func:`_snap_device`: the same edges), or by pyarrow read whole, in blocks parsed on every core
    the worker has (a GPU worker runs its tasks one at a time, so one parser would use one core); other pieces (a
    compressed file, a piece with comments) by pyarrow too, its blocks parsed on every core as they stream in,
    comment lines emptied.
    None where the piece is not read that way (strings, other separators, quotes, an empty or bad field): the
    caller goes on to pandas' C parser."""
    if strings:
        return None
    names = [str(i) for i in range(plan.width)]
    keep = names[:3 if plan.width == 3 and plan.keep_weight else 2]
    options = {"convert_options": pacsv.ConvertOptions(column_types={name: pa.float64() if name == "2" else pa.int64()
                                                                     for name in keep}, include_columns=keep)}
    where = _common._byte_range(piece)
    if where is not None and worker_device() != "cpu":  # a comment is outside the device parser's rule: no scan first
        edges = _snap_device(piece.path, *where, plan.width, len(keep) == 3)
        if edges is not None:
            return edges
    whole = None if where is None else _common._uncompressed_bytes(piece.path, *where)
    try:
        if whole is not None and not whole[1]:
            whole = whole[0]
            block_size = max(1 << 20, min(1 << 24, whole.size // (4 * pa.cpu_count()) + 1))  # blocks for every core
            table = pacsv.read_csv(pa.BufferReader(whole), **options, **_snap_options(
                whole.slice(0, min(4096, whole.size)).to_pybytes(), names, block_size))
        else:
            # comment lines emptied: pyarrow skips them
            with io.BufferedReader(_common._Uncommented(piece), _common._BLOCK) as lines:
                # read_csv parses its blocks on every core while this thread decompresses the next (open_csv parsed
                # them in turn: 1.0 s of a 4 M-edge .gz piece on 2 cores, against 0.7 s)
                table = pacsv.read_csv(pa.PythonFile(lines, mode="r"), **options,
                                       **_snap_options(lines.peek(_common._BLOCK), names, 1 << 24))
    except pa.ArrowException:  # quote_char=False: quoting is off, as in the C parser
        return None
    if not table.num_rows or any(column.null_count for column in table.columns):
        return None
    weight = pd.Series(table.column("2").to_numpy()) if "2" in keep else None
    return _common._fast_frame(table.column("0").to_numpy(), table.column("1").to_numpy(), weight)


def _delimiter(start: bytes) -> str:
    """What separates the fields of SNAP text that begins with ``start``: its first line's tab, else a space."""
    first = start.removeprefix(codecs.BOM_UTF8).lstrip(b"\r\n")[:4096].split(b"\n", 1)[0]
    return "\t" if b"\t" in first else " "


def _snap_device(path: str, start: int, end: int, width: int, keep_weight: bool) -> dict | None:
    """:func:`_snap_arrow`'s edges of bytes ``start..end`` of the file at ``path`` (without comments), parsed on the
    worker's GPU (:mod:`._parse`) and left there: a dict of its device arrays ``src``, ``dst`` (int64) and maybe
    ``weight`` (float64). None where a line is outside the parser's rule or a weight is not one gpipe takes (the
    host's readers name it)."""
    if end <= start:
        return None
    x = worker_xp()
    text = read_to_device(x, path, start, end)
    delimiter = _delimiter(text[:4096].get().tobytes())
    parsed = parse_edges(x, text, width, keep_weight, ord(delimiter))
    if parsed is None or not parsed[0].shape[0]:
        return None
    src, dst, weight = parsed
    # float32_misfits runs on the device: numpy's ufuncs take cupy's arrays
    if weight is not None and bool((_common.float32_misfits(weight) | (weight < 0)).any()):
        return None
    return {"src": src, "dst": dst} if weight is None else {"src": src, "dst": dst, "weight": weight}


def _snap_options(start: bytes, names: list[str], block_size: int) -> dict:
    """pyarrow's read and parse options for SNAP text that begins with ``start``."""
    return {"read_options": pacsv.ReadOptions(column_names=names, block_size=block_size),
            "parse_options": pacsv.ParseOptions(delimiter=_delimiter(start), quote_char=False)}


def _snap_fast(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame | None:
    def read(**dtype) -> pd.DataFrame:
        with _common._Uncommented(piece) as lines:
            return pd.read_csv(lines, sep=r"\s+", header=None, engine="c", na_filter=False,
                               quoting=csv.QUOTE_NONE, **dtype)

    try:
        with _common._pandas_warnings():
            table = read(**({"dtype": {0: str, 1: str}} if strings else {}))
            if table.shape[1] != plan.width:
                return None
            if not strings and not _common._both_int(table[0], table[1]):
                table = read(dtype={0: str, 1: str})
            # A comment after a lone '\r' is parsed as data here; a short line leaves its missing field empty.
            if not _common._both_int(table[0], table[1]) and (table[0].str.startswith(_common._COMMENT).any()
                                                               or table[1].eq("").any()):
                return None
    except _common._FAST_FAILURES:
        return None
    weight = table[2] if table.shape[1] == 3 and plan.keep_weight else None
    return _common._fast_frame(table[0], table[1], weight)


def _scan_snap(plan: TablePlan, piece: Piece, line: int, strings: bool) -> pd.DataFrame:
    path, width, first, keep_weight = plan.path, plan.width, plan.first, plan.keep_weight
    srcs, dsts, weights = [], [], []
    for lineno, fields in _snap_lines(piece, line):
        if len(fields) != width:
            raise GpipeFileError(
                path, lineno, f"expected {width} fields like the first data line (line {first}), got {len(fields)}")
        srcs.append(fields[0])
        dsts.append(fields[1])
        if width == 3 and keep_weight:
            weights.append(_common._parse_weight(path, lineno, fields[2]))
    return _common._scanned_frame(srcs, dsts, strings, weights if width == 3 and keep_weight else None)
