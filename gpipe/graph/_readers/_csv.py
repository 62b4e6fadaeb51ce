"""CSV edge tables with a header row naming the columns."""

from __future__ import annotations

import csv

import pandas as pd

from ...errors import GpipeFileError
from . import _common
from ._common import Piece, TablePlan


def _csv_header(path: str, columns: tuple[str, ...]) -> tuple[str, ...]:
    with _common._open_text(Piece(path), newline="") as lines:
        header = next(csv.reader(lines), None)
    if not header:
        raise GpipeFileError(path, 1, "expected a header row naming the columns")
    for name in columns:
        if name not in header:
            raise GpipeFileError(path, 1, f"no column {name!r} in the header; columns are {header}")
    return tuple(header)


def _read_csv(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame:
    table = _csv_fast(plan, piece, strings)
    return table if table is not None else _scan_csv(plan, piece, _common._first_line(piece), strings)


def _csv_fast(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame | None:
    columns, header = list(plan.columns), list(plan.header)
    src, dst = columns[:2]
    # A piece after the first starts on a data line.
    names = {} if piece.start == 0 else {"header": None, "names": header}

    def read(**dtype) -> pd.DataFrame:
        with _common._piece_bytes(piece) as raw:
            return pd.read_csv(raw, engine="c", index_col=False, keep_default_na=False, na_values=[""],
                               encoding="utf-8-sig", **names, **dtype)

    try:
        with _common._pandas_warnings():
            table = read(**({"dtype": {src: str, dst: str}} if strings else {}))
            if not strings and not _common._both_int(table[src], table[dst]):
                table = read(dtype={src: str, dst: str})
    except _common._FAST_FAILURES:
        return None
    # A short row leaves its trailing fields empty, so an empty last field may be malformed.
    if table.empty or list(table.columns) != header or table[list({*columns, header[-1]})].isna().any(axis=None):
        return None
    weight = table[columns[2]] if len(columns) == 3 else None
    return _common._fast_frame(table[src], table[dst], weight)


def _scan_csv(plan: TablePlan, piece: Piece, line: int, strings: bool) -> pd.DataFrame:
    path, header, columns = plan.path, plan.header, plan.columns
    where = [header.index(name) for name in columns]
    picked: list[list] = [[] for _ in columns]
    with _common._open_text(piece, newline="") as lines:
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
                if not _common._is_utf8(",".join(row)):
                    raise GpipeFileError(path, lineno, "line is not valid UTF-8")
                for k, (name, i) in enumerate(zip(columns, where, strict=True)):
                    if k == 2:
                        picked[k].append(_common._parse_weight(path, lineno, row[i]))
                    elif row[i] == "":
                        raise GpipeFileError(path, lineno, f"column {name!r} is empty")
                    else:
                        picked[k].append(row[i])
        except csv.Error as exc:
            raise GpipeFileError(path, rows.line_num + line - 1, str(exc)) from None
    return _common._scanned_frame(picked[0], picked[1], strings, picked[2] if len(columns) == 3 else None)
