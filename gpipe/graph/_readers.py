"""Read an edge table from disk: SNAP edge lists, CSV, parquet and CSR ``.npz`` files; and graph folders.

:func:`plan_table` checks an input and cuts it into pieces (byte ranges of a text file, row
groups of parquet files); :func:`read_piece`, run by a worker, returns a piece's edges in file
order as a frame with columns ``src``, ``dst`` and, when there is one, ``weight`` (float64) (a piece
parsed on a GPU worker's device: a dict of those columns as its device arrays, left there);
:func:`read_table` reads a whole input in this process. Text is parsed by pandas' C engine
(SNAP comment lines emptied on the way); only when that fast path fails or its result looks
wrong does a line-by-line scan run, which names the first bad line (1-based, comments and
blank lines included) or, for files the fast path cannot take (comments in a file whose
lines end in a lone '\r'), builds the table itself. On a GPU worker, a piece of an uncompressed SNAP file
without comments is parsed on the GPU first (:mod:`._parse`), the host's parsers taking it when a line is outside
that parser's rule.
:func:`plan_graph_folder` and :func:`read_graph_part` read a folder written by
``Graph.to_parquet``, a part file a task, checked against its ``_gpipe.json``.
"""

from __future__ import annotations

import bz2
import codecs
import concurrent.futures
import contextlib
import csv
import dataclasses
import errno
import glob
import gzip
import io
import json
import lzma
import math
import mmap
import os
import re
import stat
import warnings
import zipfile
from collections.abc import Iterator
from typing import NoReturn

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from .._files import GRAPH_PART
from .._validate import check_bool, check_choice, check_int
from ..backend import cpu_kernel, prange
from ..errors import GpipeFileError, GpipeValueError
from ..runtime import worker_device, worker_xp
from ._parse import parse_edges

FORMATS = ("snap", "csv", "parquet", "npz")
_EXTENSIONS = {".txt": "snap", ".el": "snap", ".edges": "snap", ".tsv": "snap", ".snap": "snap",
               ".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".npz": "npz"}
_COMMENT = ("#", "%")
# A comment line after a '\n' (a lone '\r' ends lines too rarely to slow every search down by looking for it).
_COMMENT_LINE = re.compile(rb"\n[ \t\f\v]*[#%][^\r\n]*")
_BLOCK = 1 << 22
_READ_THREADS = min(8, os.cpu_count() or 1)  # threads reading a piece into a GPU worker's pinned memory
GRAPH_META = "_gpipe.json"
_GRAPH_PART = re.compile(GRAPH_PART)
# The most bytes a _gpipe.json is read to: what gpipe writes for a graph of far more partitions than anyone uses (its
# keys, then a line of part_edges per part file), whatever part files the folder still holds.
_META_PARTITIONS = 1 << 20
_META_LIMIT = 4096 + 32 * _META_PARTITIONS
_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
_GRAPH_KEYS = ("num_vertices", "num_edges", "directed", "weighted", "partitions", "renumbered")
_INT = re.compile(r"\s*[+-]?[0-9]+\s*")
_INT64_MAX = np.iinfo(np.int64).max
_FLOAT32 = np.finfo(np.float32)
_TINY32, _MAX32 = np.float32(_FLOAT32.tiny), np.float32(_FLOAT32.max)
# gpipe keeps weights as float32: a larger one would become inf (never taken), a smaller one 0 (walks stop there).
FLOAT32_RANGE = f"0, or {_FLOAT32.tiny:.4g} to {_FLOAT32.max:.4g} in magnitude"


def _open_zstd(path: str, mode: str):
    import zstandard  # optional, as it is for pandas

    return zstandard.open(path, mode)


# The compressions pandas infers from these suffixes; the scans must read what pandas reads.
_DECOMPRESSORS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".zst": _open_zstd}


def read_table(path, *, src: str = "src", dst: str = "dst", weight=None,
               fmt: str | None = None) -> tuple[pd.DataFrame, int | None]:
    """Read the edges of ``path``; return ``(frame, num_vertices)``.

    ``fmt`` forces one of :data:`FORMATS`; by default the extension picks it. ``src``,
    ``dst`` and ``weight`` name the columns of csv and parquet input; there ``weight``
    is a column name, or None/False for no weight. For snap input ``weight`` is a flag:
    a third column is returned unless it is False, and a true value requires one. For
    npz input a true ``weight`` returns the ``weights`` (or ``data``) array.
    ``num_vertices`` is the row count of a CSR ``.npz`` (isolated vertices included),
    else None. Malformed input raises :class:`GpipeFileError` naming the file and line.
    This process reads the input as one piece per file (:func:`plan_table`); ``read_edges``
    has the workers read pieces.
    """
    plan = plan_table(path, src=src, dst=dst, weight=weight, fmt=fmt)
    if plan.fmt == "npz":
        return read_npz(plan.path, bool(weight))
    frames = [read_piece(plan, piece) for piece in plan.pieces]  # one piece per text file
    kinds = [id_kind(frame) for frame in frames]
    if "str" in kinds and "int" in kinds:  # parquet files, some with integer ids
        frames = [read_piece(plan, piece, strings=True) for piece in plan.pieces]
    if not any(len(frame) for frame in frames):
        raise GpipeFileError(plan.path, None, "no edges")
    return pd.concat(frames, ignore_index=True), None


@dataclasses.dataclass(frozen=True)
class Piece:
    """A part of an edge input one task parses: bytes ``start..end`` of a text file (``end`` None: all
    of it, through its decompressor), or row groups ``start..end-1`` of a parquet file."""

    path: str
    start: int = 0
    end: int | None = None


@dataclasses.dataclass(frozen=True)
class TablePlan:
    """What :func:`read_piece` needs to parse any piece of one input, checked once by :func:`plan_table`."""

    fmt: str
    path: str
    pieces: tuple[Piece, ...]
    columns: tuple[str, ...] = ()   # csv and parquet: the columns read (src, dst[, weight])
    header: tuple[str, ...] = ()    # csv: the header row
    width: int = 0                  # snap: the fields of the first data line ...
    first: int = 0                  # ... and its line number
    keep_weight: bool = False       # snap: return the third column


def plan_table(path, *, src: str = "src", dst: str = "dst", weight=None, fmt: str | None = None,
               piece_bytes: int | None = None) -> TablePlan:
    """Check ``path`` and the column arguments (see :func:`read_table`) and cut the input into pieces.

    An uncompressed text file is cut every ``piece_bytes`` bytes (default: one piece), each piece
    running from just after the first newline at or after its offset to the line crossing its end;
    a compressed one is one piece; parquet input (a file, a folder or a glob) is cut into runs of row
    groups of about ``piece_bytes`` bytes of data.
    Only the first lines of a text file and the footers of parquet files are read here.
    """
    path = os.fspath(path)
    for name, value in (("src", src), ("dst", dst)):
        if not isinstance(value, str) or not value:
            raise GpipeValueError(f"'{name}' must be a non-empty column name, got {value!r}")
    if fmt is not None:
        check_choice("fmt", fmt, FORMATS)
    files = None
    if not os.path.exists(path) and glob.has_magic(path) and (fmt or edge_format(path)) == "parquet":
        files = _parquet_files(path)
    if not files and not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    fmt = fmt or edge_format(path)
    if fmt == "npz":
        return TablePlan(fmt, path, ())
    if fmt == "snap":
        width, first = _first_data_line(path)
        if weight and width == 2:
            raise GpipeFileError(path, None, f"weight={weight!r} but the data lines have no third column")
        return TablePlan(fmt, path, _text_pieces(path, piece_bytes), width=width, first=first,
                         keep_weight=weight is not False)
    if not (weight is None or weight is False or isinstance(weight, str)):
        raise GpipeValueError(f"'weight' must be a column name, None or False for {fmt} input; got {weight!r}")
    columns = (src, dst) + ((weight,) if weight else ())
    if fmt == "csv":
        return TablePlan(fmt, path, _text_pieces(path, piece_bytes), columns=columns, header=_csv_header(path, columns))
    return TablePlan(fmt, path, _parquet_pieces(path, files, columns, piece_bytes), columns=columns)


def read_piece(plan: TablePlan, piece: Piece, *, strings: bool = False) -> pd.DataFrame | dict:
    """The edges of ``piece`` (columns ``src``, ``dst`` and maybe ``weight``; none is an empty frame), or, parsed
    on a GPU worker's device, a dict of those columns as its device arrays (integer ids), left there.

    ``strings`` reads the ids as strings, as they are when another piece holds ids that are not
    integers. Errors name the line in the whole file: a piece scanned line by line counts the
    lines before it first.
    """
    if plan.fmt == "snap":
        frame = _read_snap(plan, piece, strings)
    elif plan.fmt == "csv":
        frame = _read_csv(plan, piece, strings)
    else:
        frame = _read_parquet(piece, list(plan.columns), strings)
    return frame


def _first_line(piece: Piece) -> int:
    """The number of a text piece's first line: 1 + the line ends (newlines) of the file before it."""
    if not piece.start:
        return 1
    with open(piece.path, "rb") as f:
        left, ends = piece.start, 0
        while left:
            block = f.read(min(left, _BLOCK))
            ends += block.count(b"\n")
            left -= len(block)
    return ends + 1


def id_kind(frame: pd.DataFrame | dict) -> str | None:
    """'int' or 'str', the ids of a frame :func:`read_piece` returned; None when it holds no edge."""
    if isinstance(frame, dict):  # on the device: integer ids
        return "int" if frame["src"].shape[0] else None
    if frame.empty:
        return None
    return "int" if frame["src"].dtype.kind in "iu" else "str"


def _text_pieces(path: str, piece_bytes: int | None) -> tuple[Piece, ...]:
    size = os.path.getsize(path)
    if piece_bytes is None or os.path.splitext(path)[1].lower() in _DECOMPRESSORS or size <= piece_bytes:
        return (Piece(path),)
    starts = [0]
    with open(path, "rb") as f:
        for offset in range(piece_bytes, size, piece_bytes):
            if offset < starts[-1]:
                continue  # a line longer than a piece: the piece before holds it
            f.seek(offset)
            while (block := f.read(1 << 16)) and (cut := block.find(b"\n")) < 0:
                offset += len(block)
            start = offset + cut + 1 if block else size
            if start < size and start > starts[-1]:
                starts.append(start)
    return tuple(Piece(path, a, b) for a, b in zip(starts, starts[1:] + [size]))


class _Decompressed(io.RawIOBase):
    """A compressed file's text through its decompressor. Data that cannot be decompressed (cut short, corrupt, or
    not of the suffix's format) is a :class:`GpipeFileError` naming the file and the line the readable text ends in
    (none when nothing was readable)."""

    def __init__(self, path: str, decompressor):
        self._path = path
        self._stream = decompressor(path, "rb")
        self._read, self._ends = 0, 0  # bytes and newlines read so far

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            count = self._stream.readinto1(buffer)  # (readinto fills the buffer: a failure drops what it read)
        except Exception as exc:  # what each decompressor raises: EOFError, BadGzipFile, zlib.error, LZMAError, ...
            suffix = os.path.splitext(self._path)[1]
            raise GpipeFileError(self._path, self._ends + 1 if self._read else None,
                                 f"not readable as {suffix} data: {exc}") from None
        self._read += count
        self._ends += memoryview(buffer)[:count].tobytes().count(b"\n")  # (a tenth of gzip's time)
        return count

    def close(self) -> None:
        self._stream.close()
        super().close()


def _piece_bytes(piece: Piece):
    if piece.end is None:
        decompressor = _DECOMPRESSORS.get(os.path.splitext(piece.path)[1].lower())
        return open(piece.path, "rb") if decompressor is None else io.BufferedReader(
            _Decompressed(piece.path, decompressor), _BLOCK)
    with open(piece.path, "rb") as f:
        f.seek(piece.start)
        return io.BytesIO(f.read(piece.end - piece.start))


def _snap_lines(piece: Piece, line: int) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of the data lines of a snap ``piece`` whose first line is ``line``, each of
    valid UTF-8 and 2 or 3 fields."""
    with _open_text(piece) as lines:
        for lineno, text in enumerate(lines, line):
            fields = text.split()
            if not fields or fields[0].startswith(_COMMENT):
                continue
            if not _is_utf8(text):
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


def edge_format(path: str, *, name: str = "path", force: str = "fmt=") -> str:
    """The format of :data:`FORMATS` that ``path``'s extension names (a folder: parquet).

    An extension that names none raises :class:`GpipeValueError` naming ``name``, the parameter that gave
    ``path``, and ``force``, the way to force a format: ``fmt=`` for the API, ``--fmt`` for the command line.
    """
    if os.path.isdir(path):
        return "parquet"
    stem, ext = os.path.splitext(path.lower())
    compressed = ext in _DECOMPRESSORS
    fmt = _EXTENSIONS.get(os.path.splitext(stem)[1] if compressed else ext)
    if fmt is None or (compressed and fmt not in ("snap", "csv")):
        raise GpipeValueError(
            f"'{name}' must end in one of {', '.join(_EXTENSIONS)} (snap and csv files may add "
            f"{', '.join(_DECOMPRESSORS)}) or be a directory of parquet files; pass {force} one of "
            f"{', '.join(map(repr, FORMATS))} to force a format; got {path!r}")
    return fmt


def _open_text(piece: Piece, newline: str | None = None) -> io.TextIOWrapper:
    # surrogateescape defers a decoding error to the line that holds it, so it can be named.
    return io.TextIOWrapper(_piece_bytes(piece), encoding="utf-8-sig", errors="surrogateescape", newline=newline)


@contextlib.contextmanager
def _pandas_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        # Mixed types across chunks are handled by re-reading the ids as strings.
        warnings.simplefilter("ignore", pd.errors.DtypeWarning)
        # pandas only warns when it drops a row's extra fields; that row is malformed.
        warnings.simplefilter("error", pd.errors.ParserWarning)
        yield


_FAST_FAILURES = (ValueError, OverflowError, pd.errors.ParserWarning)


def _frame(src, dst, weight) -> pd.DataFrame:
    columns = {"src": src, "dst": dst}
    if weight is not None:
        columns["weight"] = np.asarray(weight, dtype=np.float64)
    return pd.DataFrame(columns, copy=False)  # by default pandas copies the columns into one block


def _both_int(a: pd.Series, b: pd.Series) -> bool:
    return a.dtype == np.int64 and b.dtype == np.int64


def float32_misfits(values: np.ndarray) -> np.ndarray:
    """Where ``values`` are not finite, or float32 would make them inf, or 0 or subnormal from nonzero."""
    with np.errstate(over="ignore"):
        single = np.abs(values).astype(np.float32)
    return ~np.isfinite(values) | ~np.isfinite(single) | ((values != 0) & (single < _FLOAT32.tiny))


@cpu_kernel(parallel=True)
def weights_fit(values):
    """Whether every value of the float64 array is a weight gpipe takes (0, or positive with a finite float32
    that is not subnormal: :func:`float32_misfits` and the sign), in one pass on every core."""
    bad = 0
    for i in prange(values.shape[0]):
        v = values[i]
        single = np.float32(v)
        if not (v == 0.0 or (v > 0.0 and single >= _TINY32 and single <= _MAX32)):
            bad += 1
    return bad == 0


def _weights_taken(values: pd.Series) -> bool:
    """Whether the fast path's weights are all ones gpipe takes; if not, the scan names the first bad line."""
    if values.dtype.kind not in "iuf":
        return False
    return weights_fit(np.ascontiguousarray(values.to_numpy(dtype=np.float64)))


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _ids(srcs: list[str], dsts: list[str], strings: bool = False) -> tuple:
    if not strings and all(_INT.fullmatch(t) for t in srcs) and all(_INT.fullmatch(t) for t in dsts):
        with contextlib.suppress(OverflowError):  # beyond int64: keep them as strings
            return np.array([int(t) for t in srcs], np.int64), np.array([int(t) for t in dsts], np.int64)
    return pd.Series(srcs, dtype=str), pd.Series(dsts, dtype=str)


def _parse_weight(path: str, lineno: int, token: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise GpipeFileError(path, lineno, f"weight {token!r} is not a number") from None
    if not math.isfinite(value):
        raise GpipeFileError(path, lineno, f"weight {token!r} is not finite")
    if float32_misfits(np.float64(value)):
        raise GpipeFileError(path, lineno, f"weight {token!r} does not fit float32, gpipe's weight type "
                                           f"({FLOAT32_RANGE})")
    if value < 0:
        raise GpipeFileError(path, lineno, f"weight {token!r} is negative; weights must be >= 0")
    return value


def _read_snap(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame:
    table = _snap_arrow(plan, piece, strings)
    if table is None:
        table = _snap_fast(plan, piece, strings)
    if table is None:  # the third column, unless dropped, is checked line by line
        table = _scan_snap(plan, piece, _first_line(piece), strings)
    return table


class _Uncommented(io.RawIOBase):
    """The bytes of a text file with its comment lines emptied, streamed block by block to the C parser.

    pandas then skips them as blank lines, so a comment between data lines keeps the fast path.
    """

    def __init__(self, piece: Piece):
        self._raw = _piece_bytes(piece)
        self._blocks = self._uncommented()
        self._left = memoryview(b"")

    def _uncommented(self) -> Iterator[bytes]:
        # The first line is given a '\n' before it too, which pandas skips as a blank line.
        carry, block = b"\n", self._raw.read(_BLOCK).removeprefix(codecs.BOM_UTF8)
        while block:
            block = carry + block
            cut = max(block.rfind(b"\n"), block.rfind(b"\r"))
            if cut > 0:  # whole lines go on; the last line end starts the next block
                yield _blank_comments(block[:cut])
                block = block[cut:]
            carry, block = block, self._raw.read(_BLOCK)
        yield _blank_comments(carry)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._left:
            block = next(self._blocks, None)
            if block is None:
                return 0
            self._left = memoryview(block)
        count = min(len(buffer), len(self._left))
        buffer[:count], self._left = self._left[:count], self._left[count:]
        return count

    def close(self) -> None:
        self._raw.close()
        super().close()


def _blank_comments(lines: bytes) -> bytes:
    return _COMMENT_LINE.sub(b"\n", lines) if b"#" in lines or b"%" in lines else lines


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
    where = _byte_range(piece)
    if where is not None and worker_device() != "cpu":  # a comment is outside the device parser's rule: no scan first
        edges = _snap_device(piece.path, *where, plan.width, len(keep) == 3)
        if edges is not None:
            return edges
    whole = None if where is None else _uncompressed_bytes(piece.path, *where)
    try:
        if whole is not None and not whole[1]:
            whole = whole[0]
            block_size = max(1 << 20, min(1 << 24, whole.size // (4 * pa.cpu_count()) + 1))  # blocks for every core
            table = pacsv.read_csv(pa.BufferReader(whole), **options, **_snap_options(
                whole.slice(0, min(4096, whole.size)).to_pybytes(), names, block_size))
        else:
            with io.BufferedReader(_Uncommented(piece), _BLOCK) as lines:  # comment lines emptied: pyarrow skips them
                # read_csv parses its blocks on every core while this thread decompresses the next (open_csv parsed
                # them in turn: 1.0 s of a 4 M-edge .gz piece on 2 cores, against 0.7 s)
                table = pacsv.read_csv(pa.PythonFile(lines, mode="r"), **options,
                                       **_snap_options(lines.peek(_BLOCK), names, 1 << 24))
    except pa.ArrowException:  # quote_char=False: quoting is off, as in the C parser
        return None
    if not table.num_rows or any(column.null_count for column in table.columns):
        return None
    weight = pd.Series(table.column("2").to_numpy()) if "2" in keep else None
    if weight is not None and not _weights_taken(weight):
        return None
    return _frame(table.column("0").to_numpy(), table.column("1").to_numpy(), weight)


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
    text = _read_to_device(x, path, start, end)
    delimiter = _delimiter(text[:4096].get().tobytes())
    parsed = parse_edges(x, text, width, keep_weight, ord(delimiter))
    if parsed is None or not parsed[0].shape[0]:
        return None
    src, dst, weight = parsed
    if weight is not None and bool((float32_misfits(weight) | (weight < 0)).any()):  # (numpy's ufuncs take cupy's)
        return None
    return {"src": src, "dst": dst} if weight is None else {"src": src, "dst": dst, "weight": weight}


def _read_to_device(x, path: str, start: int, end: int):
    """Bytes ``start..end`` of a file as a device array of ``x`` (cupy): read by several threads at once into pinned
    host memory, then copied in one transfer. (One thread's copy out of a mapping of the page cache, then a copy
    from pageable memory, took 13 ms of a 68 MB piece's 23.)"""
    size = end - start
    host = np.frombuffer(x.cuda.alloc_pinned_memory(size), np.uint8, size)
    step = max(1 << 20, -(-size // _READ_THREADS))

    def read(offset: int) -> None:
        view = memoryview(host)[offset:min(offset + step, size)]
        while len(view):  # a read may return fewer bytes than asked
            got = os.preadv(fd, [view], start + offset)
            if not got:
                raise GpipeFileError(f"{path}: the file ended at byte {start + offset} while it was read")
            view, offset = view[got:], offset + got

    with open(path, "rb") as f, concurrent.futures.ThreadPoolExecutor(_READ_THREADS) as pool:
        fd = f.fileno()
        list(pool.map(read, range(0, size, step)))
    text = x.empty(size, x.uint8)
    text.data.copy_from_host(host.ctypes.data, size)  # (asarray would stage it through pinned memory of its own)
    return text


def _snap_options(start: bytes, names: list[str], block_size: int) -> dict:
    """pyarrow's read and parse options for SNAP text that begins with ``start``."""
    return {"read_options": pacsv.ReadOptions(column_names=names, block_size=block_size),
            "parse_options": pacsv.ParseOptions(delimiter=_delimiter(start), quote_char=False)}


def _byte_range(piece: Piece) -> tuple[int, int] | None:
    """Where a piece of an uncompressed file lies in it, a UTF-8 byte-order mark dropped: ``(start, end)``; None
    for a compressed file."""
    if piece.end is None and os.path.splitext(piece.path)[1].lower() in _DECOMPRESSORS:
        return None
    with open(piece.path, "rb") as f:
        end = os.fstat(f.fileno()).st_size if piece.end is None else piece.end
        start = piece.start + (len(codecs.BOM_UTF8) if piece.start == 0 and f.read(3) == codecs.BOM_UTF8 else 0)
    return start, max(start, end)


def _uncompressed_bytes(path: str, start: int, end: int) -> tuple[pa.Buffer, bool]:
    """Bytes ``start..end`` of a file, mapped from the page cache rather than copied, and whether they hold a
    comment character."""
    if end <= start:
        return pa.py_buffer(b""), False
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    comments = any(mapped.find(c, start, end) >= 0 for c in (b"#", b"%"))
    return pa.py_buffer(mapped).slice(start, end - start), comments


def _snap_fast(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame | None:
    def read(**dtype) -> pd.DataFrame:
        with _Uncommented(piece) as lines:
            return pd.read_csv(lines, sep=r"\s+", header=None, engine="c", na_filter=False,
                               quoting=csv.QUOTE_NONE, **dtype)

    try:
        with _pandas_warnings():
            table = read(**({"dtype": {0: str, 1: str}} if strings else {}))
            if table.shape[1] != plan.width:
                return None
            if not strings and not _both_int(table[0], table[1]):
                table = read(dtype={0: str, 1: str})
            # A comment after a lone '\r' is parsed as data here; a short line leaves its missing field empty.
            if not _both_int(table[0], table[1]) and (table[0].str.startswith(_COMMENT).any() or table[1].eq("").any()):
                return None
    except _FAST_FAILURES:
        return None
    weight = table[2] if table.shape[1] == 3 and plan.keep_weight else None
    if weight is not None and not _weights_taken(weight):
        return None
    return _frame(table[0], table[1], weight)


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
            weights.append(_parse_weight(path, lineno, fields[2]))
    return _frame(*_ids(srcs, dsts, strings), weights if width == 3 and keep_weight else None)


def _csv_header(path: str, columns: tuple[str, ...]) -> tuple[str, ...]:
    with _open_text(Piece(path), newline="") as lines:
        header = next(csv.reader(lines), None)
    if not header:
        raise GpipeFileError(path, 1, "expected a header row naming the columns")
    for name in columns:
        if name not in header:
            raise GpipeFileError(path, 1, f"no column {name!r} in the header; columns are {header}")
    return tuple(header)


def _read_csv(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame:
    table = _csv_fast(plan, piece, strings)
    return table if table is not None else _scan_csv(plan, piece, _first_line(piece), strings)


def _csv_fast(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame | None:
    columns, header = list(plan.columns), list(plan.header)
    src, dst = columns[:2]
    # A piece after the first starts on a data line.
    names = {} if piece.start == 0 else {"header": None, "names": header}

    def read(**dtype) -> pd.DataFrame:
        with _piece_bytes(piece) as raw:
            return pd.read_csv(raw, engine="c", index_col=False, keep_default_na=False, na_values=[""],
                               encoding="utf-8-sig", **names, **dtype)

    try:
        with _pandas_warnings():
            table = read(**({"dtype": {src: str, dst: str}} if strings else {}))
            if not strings and not _both_int(table[src], table[dst]):
                table = read(dtype={src: str, dst: str})
    except _FAST_FAILURES:
        return None
    # A short row leaves its trailing fields empty, so an empty last field may be malformed.
    if table.empty or list(table.columns) != header or table[list({*columns, header[-1]})].isna().any(axis=None):
        return None
    weight = table[columns[2]] if len(columns) == 3 else None
    if weight is not None and not _weights_taken(weight):
        return None
    return _frame(table[src], table[dst], weight)


def _scan_csv(plan: TablePlan, piece: Piece, line: int, strings: bool) -> pd.DataFrame:
    path, header, columns = plan.path, plan.header, plan.columns
    where = [header.index(name) for name in columns]
    picked: list[list] = [[] for _ in columns]
    with _open_text(piece, newline="") as lines:
        rows = csv.reader(lines)
        if piece.start == 0:
            next(rows, None)
        try:
            for row in rows:
                lineno = rows.line_num + line - 1
                if not row:
                    continue
                if len(row) != len(header):
                    raise GpipeFileError(path, lineno, f"expected {len(header)} fields like the header, got {len(row)}")
                if not _is_utf8(",".join(row)):
                    raise GpipeFileError(path, lineno, "line is not valid UTF-8")
                for k, (name, i) in enumerate(zip(columns, where)):
                    if k == 2:
                        picked[k].append(_parse_weight(path, lineno, row[i]))
                    elif row[i] == "":
                        raise GpipeFileError(path, lineno, f"column {name!r} is empty")
                    else:
                        picked[k].append(row[i])
        except csv.Error as exc:
            raise GpipeFileError(path, rows.line_num + line - 1, str(exc)) from None
    return _frame(*_ids(picked[0], picked[1], strings), picked[2] if len(columns) == 3 else None)


def _parquet_files(pattern: str) -> list[str]:
    return sorted(name for name in glob.glob(pattern) if os.path.isfile(name))


def _parquet_pieces(path: str, files: list[str] | None, columns: tuple[str, ...],
                    piece_bytes: int | None) -> tuple[Piece, ...]:
    """Pieces of the parquet files of ``path`` (or of ``files``, a glob's), after checking that they have
    ``columns`` and some rows: only their footers are read. A piece is a run of consecutive row groups of one
    file holding about ``piece_bytes`` bytes of data (a file, without ``piece_bytes``), so that a task decodes
    several row groups at once, on as many cores."""
    try:
        dataset = pads.dataset(files or path, format="parquet")
        names = dataset.schema.names
        footers = {name: pq.ParquetFile(name).metadata for name in dataset.files}
    except (pa.ArrowException, OSError) as exc:
        raise GpipeFileError(path, None, f"not readable as parquet: {exc}") from exc
    missing = [name for name in columns if name not in names]
    if missing:
        raise GpipeFileError(path, None, f"no column {missing[0]!r}; columns are {names}")
    if not any(meta.num_rows for meta in footers.values()):
        raise GpipeFileError(path, None, "no edges")
    pieces = []
    for name, meta in footers.items():
        start, held = 0, 0
        for group in range(meta.num_row_groups):
            held += meta.row_group(group).total_byte_size
            if piece_bytes is not None and held >= piece_bytes or group + 1 == meta.num_row_groups:
                pieces.append(Piece(name, start, group + 1))
                start, held = group + 1, 0
    return tuple(pieces)


def _parquet_table(path: str, columns: list[str], groups: range | None = None) -> pa.Table:
    """``columns`` of a parquet file or folder (or row ``groups`` of a file), checked to be there and to hold
    no nulls."""
    try:
        if groups is None:
            dataset = pads.dataset(path, format="parquet")
            names = dataset.schema.names
            missing = [name for name in columns if name not in names]
            table = None if missing else dataset.to_table(columns=columns)
        else:
            names, missing = columns, []
            table = pq.ParquetFile(path).read_row_groups(list(groups), columns=columns)
    except (pa.ArrowException, OSError) as exc:
        raise GpipeFileError(path, None, f"not readable as parquet: {exc}") from exc
    if missing:
        raise GpipeFileError(path, None, f"no column {missing[0]!r}; columns are {names}")
    for name in columns:
        if table.column(name).null_count:
            raise GpipeFileError(path, None, f"column {name!r} has {table.column(name).null_count} null values")
    return table


def _parquet_weights(path: str, name: str, col: pa.ChunkedArray) -> np.ndarray:
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise GpipeFileError(path, None, f"column {name!r} has type {col.type}; weights must be numbers")
    weight = col.to_numpy().astype(np.float64)
    if not np.isfinite(weight).all():
        bad = int((~np.isfinite(weight)).sum())
        raise GpipeFileError(path, None, f"column {name!r} has {bad} non-finite values")
    _check_weights(path, f"column {name!r}", "row", weight)
    return weight


def _check_weights(path: str, what: str, unit: str, weight: np.ndarray) -> None:
    if weights_fit(np.ascontiguousarray(weight)):
        return
    for bad, rule in ((float32_misfits(weight), f"that do not fit float32, gpipe's weight type ({FLOAT32_RANGE})"),
                      (weight < 0, "that are negative; weights must be >= 0")):
        if bad.any():
            first = int(np.argmax(bad))
            raise GpipeFileError(path, None, f"{what} has {int(bad.sum())} values {rule}; {unit} {first} is "
                                             f"{weight[first]}")


def _read_parquet(piece: Piece, columns: list[str], strings: bool) -> pd.DataFrame:
    path = piece.path
    table = _parquet_table(path, columns, range(piece.start, piece.end))
    ids = [table.column(name) for name in columns[:2]]
    for name, col in zip(columns, ids):
        if not (pa.types.is_integer(col.type) or pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            raise GpipeFileError(path, None, f"column {name!r} has type {col.type}; ids must be integers or strings")
    if not strings and all(pa.types.is_integer(col.type) for col in ids):
        for name, col in zip(columns, ids):
            largest = pc.max(col).as_py()
            if largest > _INT64_MAX:
                raise GpipeFileError(path, None, f"column {name!r} holds id {largest}, above 2**63 - 1: integer ids "
                                                 "must fit int64 (store larger ones as strings)")
        src, dst = (col.cast(pa.int64()).to_numpy() for col in ids)
    else:
        src, dst = (pd.Series(col.to_numpy()).astype(str) for col in ids)
    weight = _parquet_weights(path, columns[2], table.column(columns[2])) if len(columns) == 3 else None
    return _frame(src, dst, weight)


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


def plan_npz(path: str, weight: bool, piece_edges: int | None = None) -> NpzPlan:
    """Check a CSR ``.npz`` and cut its rows into pieces of about ``piece_edges`` edges (default: one piece).

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
    split = piece_edges is not None and indices.offset is not None and (values is None or values.offset is not None)
    cuts = [0, n]
    if split and indices.length > piece_edges:
        targets = np.arange(piece_edges, indices.length, piece_edges)
        cuts = np.unique(np.concatenate([[0], np.searchsorted(indptr, targets, side="left"), [n]])).tolist()
    pieces = tuple(zip(cuts[:-1], cuts[1:]))
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


def read_npz_piece(plan: NpzPlan, piece: int) -> tuple[dict, dict]:
    """The edges of rows ``plan.pieces[piece]`` of a CSR ``.npz`` as dense-id arrays (``src``, ``dst`` int64,
    ``weight`` float32 when read), and what is wrong with them.

    The problems are counts and first offenders (by index in the whole file), which
    :func:`npz_problem` merges over the pieces into the message one whole read gives.
    """
    lo, hi = plan.pieces[piece]
    first, last = plan.edges[piece], plan.edges[piece + 1]
    indices = _npz_read(plan.path, plan.indices, first, last).astype(np.int64)
    degrees = np.diff(_npz_read(plan.path, plan.indptr, lo, hi + 1).astype(np.int64))
    bad = indices[(indices < 0) | (indices >= plan.num_vertices)]
    problems = {"bad_index": bad[0].item() if len(bad) else None}
    arrays = {"src": np.repeat(np.arange(lo, hi, dtype=np.int64), degrees), "dst": indices}
    if plan.weights is not None:
        values = _npz_read(plan.path, plan.weights, first, last)
        problems["non_finite"] = int((~np.isfinite(values)).sum())
        weight = values if values.dtype == np.float32 else values.astype(np.float64)  # float32: checked as it is
        for name, mask in (("misfit", float32_misfits(weight)), ("negative", weight < 0)):
            where = np.flatnonzero(mask)
            problems[name] = (len(where), first + int(where[0]), weight[where[0]].item()) if len(where) else (0,)
        arrays["weight"] = weight.astype(np.float32, copy=False)
    return arrays, problems


def npz_frame(arrays: dict) -> pd.DataFrame:
    """:func:`read_npz_piece`'s arrays as an edge frame."""
    return _frame(arrays["src"], arrays["dst"], arrays.get("weight"))


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
    for p, (path, count) in enumerate(zip(paths, counts)):
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
    ids = _parquet_table(ids_path, ["id"]).column("id").to_numpy()
    if len(ids) != meta["num_vertices"]:
        raise GpipeFileError(ids_path, None, f"holds {len(ids)} ids; {GRAPH_META} says {meta['num_vertices']} vertices")
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
        found = f" ({', '.join(parts[:2])}{', ...' if len(parts) > 2 else ''})"
        raise GpipeFileError(meta_path, None, f"missing: the folder holds gpipe's part files{found} but no "
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
    if meta.get("version") not in (1, 2):
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
