"""Read an edge table from disk: SNAP edge lists, CSV, parquet, CSR ``.npz`` and MatrixMarket ``.mtx`` files; and
graph folders.

A module per format (``_snap``, ``_csv``, ``_parquet``, ``_npz``, ``_mtx``; ``_folder`` for graph folders) behind one
protocol: a :class:`TablePlan` of the input, then :func:`read_piece` of each of its pieces, which hands the piece
to its format's reader (:data:`READERS`); ``_common`` holds what they share.


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

import glob
import os
import stat

import pandas as pd

from ..._validate import check_choice
from ...errors import GpipeFileError, GpipeValueError
from ._common import (
    FLOAT32_RANGE,
    _DECOMPRESSORS,
    Piece,
    TablePlan,
    _text_pieces,
    float32_misfits,
    input_status,
    weights_fit,
)
from ._csv import _csv_header, _read_csv
from ._folder import (
    GRAPH_META,
    check_graph_parts,
    graph_folder_ids,
    is_graph_folder,
    plan_graph_folder,
    read_graph_part,
)
from ._mtx import _plan_mtx, _read_mtx
from ._npz import NpzPlan, npz_frame, npz_problem, plan_npz, read_npz, read_npz_piece
from ._parquet import _parquet_files, _parquet_pieces, _read_parquet
from ._snap import _first_data_line, _read_snap

__all__ = ["FLOAT32_RANGE", "FORMATS", "GRAPH_META", "NpzPlan", "Piece", "READERS", "TablePlan", "check_graph_parts",
           "edge_format", "float32_misfits", "graph_folder_ids", "id_kind", "is_graph_folder", "npz_frame",
           "npz_problem", "plan_graph_folder", "plan_npz", "plan_table", "read_graph_part", "read_npz",
           "read_npz_piece", "read_piece", "read_table", "weights_fit"]

FORMATS = ("snap", "csv", "parquet", "npz", "mtx")
# each format's reader of a piece: (plan, piece, strings) -> its edges (npz is read by rows: see ``_npz``)
READERS = {"snap": _read_snap, "csv": _read_csv, "parquet": _read_parquet, "mtx": _read_mtx}
_EXTENSIONS = {".txt": "snap", ".el": "snap", ".edges": "snap", ".tsv": "snap", ".snap": "snap",
               ".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".npz": "npz", ".mtx": "mtx"}


def read_table(path, *, src: str = "src", dst: str = "dst", weight=None,
               fmt: str | None = None) -> tuple[pd.DataFrame, int | None]:
    """Read the edges of ``path``; return ``(frame, num_vertices)``.

    ``fmt`` forces one of :data:`FORMATS`; by default the extension picks it. ``src``,
    ``dst`` and ``weight`` name the columns of csv and parquet input; there ``weight``
    is a column name, or None/False for no weight. For snap input ``weight`` is a flag:
    a third column is returned unless it is False, and a true value requires one. For
    npz input a true ``weight`` returns the ``weights`` (or ``data``) array.
    ``num_vertices`` is the row count of a CSR ``.npz`` (isolated vertices included),
    else None; for mtx input ``weight`` is a flag as for snap, the vertices are the matrix's rows (0-based), its
    order ``num_vertices``. Malformed input raises :class:`GpipeFileError` naming the file and line.
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
    return pd.concat(frames, ignore_index=True), plan.vertices or None


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
    if not os.path.lexists(path) and glob.has_magic(path) and (fmt or edge_format(path)) == "parquet":
        files = _parquet_files(path)
    if not files and stat.S_ISDIR(input_status(path).st_mode):
        named = fmt or _EXTENSIONS.get(os.path.splitext(path.lower())[1], "parquet")
        if named != "parquet":  # read as parquet files, its name's format would say "no column 'src'"
            raise GpipeFileError(path, None, f"a folder, not a {named} edge file: a folder is read as the parquet "
                                             "files in it")
    fmt = fmt or edge_format(path)
    if fmt == "npz":
        return TablePlan(fmt, path, ())
    if fmt == "mtx":
        return _plan_mtx(path, weight, piece_bytes)
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
    return READERS[plan.fmt](plan, piece, strings)


def id_kind(frame: pd.DataFrame | dict) -> str | None:
    """'int' or 'str', the ids of a frame :func:`read_piece` returned; None when it holds no edge."""
    if isinstance(frame, dict):  # on the device: integer ids
        return "int" if frame["src"].shape[0] else None
    if frame.empty:
        return None
    return "int" if frame["src"].dtype.kind in "iu" else "str"


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
    if fmt is None or (compressed and fmt not in ("snap", "csv", "mtx")):
        raise GpipeValueError(
            f"'{name}' must end in one of {', '.join(_EXTENSIONS)} (snap, csv and mtx files may add "
            f"{', '.join(_DECOMPRESSORS)}) or be a directory of parquet files; pass {force} one of "
            f"{', '.join(map(repr, FORMATS))} to force a format; got {path!r}")
    return fmt
