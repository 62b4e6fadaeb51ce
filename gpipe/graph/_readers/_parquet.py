"""Parquet edge tables: a file, a folder or a glob, cut into runs of row groups."""

from __future__ import annotations

import glob
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from ...errors import GpipeFileError
from ._common import _INT64_MAX, Piece, TablePlan, _check_weights, _frame


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


def _read_parquet(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame:
    path, columns = piece.path, list(plan.columns)
    table = _parquet_table(path, columns, range(piece.start, piece.end))
    ids = [table.column(name) for name in columns[:2]]
    for name, col in zip(columns[:2], ids, strict=True):
        if not (pa.types.is_integer(col.type) or pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            raise GpipeFileError(path, None, f"column {name!r} has type {col.type}; ids must be integers or strings")
    if not strings and all(pa.types.is_integer(col.type) for col in ids):
        for name, col in zip(columns[:2], ids, strict=True):
            largest = pc.max(col).as_py()
            if largest > _INT64_MAX:
                raise GpipeFileError(path, None, f"column {name!r} holds id {largest}, above 2**63 - 1: integer ids "
                                                 "must fit int64 (store larger ones as strings)")
        src, dst = (col.cast(pa.int64()).to_numpy() for col in ids)
    else:
        src, dst = (pd.Series(col.to_numpy()).astype(str) for col in ids)
    weight = _parquet_weights(path, columns[2], table.column(columns[2])) if len(columns) == 3 else None
    return _frame(src, dst, weight)
