"""What every edge reader shares: the pieces of an input and its plan, text through its decompressor, comment lines
emptied, ids and weights checked."""

from __future__ import annotations

import bz2
import codecs
import contextlib
import dataclasses
import errno
import gzip
import io
import lzma
import math
import mmap
import os
import re
import stat
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ...backend import cpu_kernel, prange
from ...errors import GpipeFileError

_COMMENT = ("#", "%")
# A comment line after a '\n' (a lone '\r' ends lines too rarely to slow every search down by looking for it).
_COMMENT_LINE = re.compile(rb"\n[ \t\f\v]*[#%][^\r\n]*")
_BLOCK = 1 << 22
_INT = re.compile(r"\s*[+-]?[0-9]+\s*")
_INT64_MAX = np.iinfo(np.int64).max
_FLOAT32 = np.finfo(np.float32)
_TINY32, _MAX32 = np.float32(_FLOAT32.tiny), np.float32(_FLOAT32.max)
# gpipe keeps weights as float32: a larger one would become inf (never taken), a smaller one 0 (walks stop there).
FLOAT32_RANGE = f"0, or {_FLOAT32.tiny:.4g} to {_FLOAT32.max:.4g} in magnitude"


def input_status(path: str) -> os.stat_result:
    """The status of the input ``path``, a regular file or a folder; anything else is a :class:`GpipeFileError`
    naming it and what is wrong: missing, a symbolic link that leads to no file or in a loop, or not a regular file
    (a FIFO with no writer would block the reader for ever, a device such as /dev/zero never end)."""
    try:
        found = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            reason = "a symbolic link in a loop (Too many levels of symbolic links)"
        elif exc.errno == errno.ENOENT and os.path.islink(path):
            reason = f"a symbolic link that leads to no file ({os.readlink(path)})"
        elif exc.errno == errno.ENOENT:
            reason = "missing: no such file or folder"
        else:
            reason = f"unreadable: {exc.strerror}"
        raise GpipeFileError(path, None, reason) from None
    if not (stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode)):
        raise GpipeFileError(path, None, "not a regular file (a FIFO, a device or a socket): edges are read from "
                                         "files and folders")
    return found


def _open_zstd(path: str, mode: str):
    import zstandard  # optional, as it is for pandas

    return zstandard.open(path, mode)


# The compressions pandas infers from these suffixes; the scans must read what pandas reads.
_DECOMPRESSORS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".zst": _open_zstd}


@dataclasses.dataclass(frozen=True)
class Piece:
    """A part of an edge input one task parses: bytes ``start..end`` of a text file (``end`` None: from
    ``start`` to its end, through its decompressor), or row groups ``start..end-1`` of a parquet file."""

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
    keep_weight: bool = False       # snap and mtx: return the third column
    vertices: int = 0               # mtx: the matrix's order, its rows' count
    mirror: bool = False            # mtx: an entry (i, j) off the diagonal is (j, i) too (a symmetric matrix's)


def _first_line(piece: Piece) -> int:
    """The number of a text piece's first line: 1 + the line ends (newlines) of the file's text before it."""
    if not piece.start:
        return 1
    with _piece_bytes(Piece(piece.path)) as f:
        left, ends = piece.start, 0
        while left:
            block = f.read(min(left, _BLOCK))
            ends += block.count(b"\n")
            left -= len(block)
    return ends + 1


def _text_pieces(path: str, piece_bytes: int | None, start: int = 0) -> tuple[Piece, ...]:
    """The pieces of a text file's lines from byte ``start`` of its text (a header before it is read by the plan)."""
    size = os.path.getsize(path)
    if piece_bytes is None or os.path.splitext(path)[1].lower() in _DECOMPRESSORS or size - start <= piece_bytes:
        return (Piece(path, start),)
    starts = [start]
    with open(path, "rb") as f:
        for offset in range(start + piece_bytes, size, piece_bytes):
            if offset < starts[-1]:
                continue  # a line longer than a piece: the piece before holds it
            f.seek(offset)
            while (block := f.read(1 << 16)) and (cut := block.find(b"\n")) < 0:
                offset += len(block)
            start = offset + cut + 1 if block else size
            if start < size and start > starts[-1]:
                starts.append(start)
    return tuple(Piece(path, a, b) for a, b in zip(starts, starts[1:] + [size], strict=True))


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
        if decompressor is None:
            f = open(piece.path, "rb")
            f.seek(piece.start)
            return f
        text = io.BufferedReader(_Decompressed(piece.path, decompressor), _BLOCK)
        text.read(piece.start)  # (a header's bytes, read by the plan)
        return text
    with open(piece.path, "rb") as f:
        f.seek(piece.start)
        return io.BytesIO(f.read(piece.end - piece.start))


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


def float32_misfits(values: np.ndarray | np.floating) -> np.ndarray:
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


def _fast_frame(src, dst, weight: pd.Series | None) -> pd.DataFrame | None:
    """The frame a fast path read, or None where its weights are not all ones gpipe takes: the scan then names the
    first bad line."""
    if weight is not None and (weight.dtype.kind not in "iuf"
                               or not weights_fit(np.ascontiguousarray(weight.to_numpy(dtype=np.float64)))):
        return None
    return _frame(src, dst, weight)


def _scanned_frame(srcs: list[str], dsts: list[str], strings: bool, weights: list[float] | None) -> pd.DataFrame:
    """The frame a line-by-line scan read: its ids typed as :func:`_ids` types them, its weights parsed already."""
    return _frame(*_ids(srcs, dsts, strings), weights)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _ids(srcs: list[str], dsts: list[str], strings: bool = False) -> tuple[Any, Any]:
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


def _check_weights(path: str, what: str, unit: str, weight: np.ndarray) -> None:
    if weights_fit(np.ascontiguousarray(weight)):
        return
    for bad, rule in ((float32_misfits(weight), f"that do not fit float32, gpipe's weight type ({FLOAT32_RANGE})"),
                      (weight < 0, "that are negative; weights must be >= 0")):
        if bad.any():
            first = int(np.argmax(bad))
            raise GpipeFileError(path, None, f"{what} has {int(bad.sum())} values {rule}; {unit} {first} is "
                                             f"{weight[first]}")
