"""MatrixMarket ``.mtx`` files: a sparse matrix's entries ``i j [value]``, 1-based, after a header; read as SNAP lines
(:mod:`._snap`) from the byte after the header, the matrix's rows being the vertices."""

from __future__ import annotations

import pandas as pd

from ...backend import device_of, xp
from ...errors import GpipeFileError
from ._common import _INT, Piece, TablePlan, _first_line, _frame, _piece_bytes, _text_pieces
from ._snap import _read_snap, _snap_lines

_BANNER = "%%MatrixMarket matrix coordinate <real|integer|pattern> <general|symmetric>"
_FIELDS = {"real": 3, "double": 3, "integer": 3, "pattern": 2}  # double: an old name of real
_SYMMETRIES = ("general", "symmetric")


def _plan_mtx(path: str, weight, piece_bytes: int | None) -> TablePlan:
    """The plan of a MatrixMarket file: its header read and checked (banner, size line, the first entry's fields),
    its entries cut into pieces from the byte after the size line."""
    with _piece_bytes(Piece(path)) as text:
        lines = enumerate(text, 1)
        _, banner = next(lines, (1, b""))
        width, symmetric = _banner(path, banner.decode("utf-8-sig", "replace").split())
        start = len(banner)  # the byte after the size line: where the entries begin
        size = first = None
        for lineno, line in lines:
            start += len(line) if size is None else 0
            fields = line.decode("utf-8", "replace").split()
            if not fields or fields[0].startswith("%"):
                continue
            if size is None:
                size = _size(path, lineno, fields)
                continue
            if len(fields) != width:
                raise GpipeFileError(path, lineno, f"expected {width} fields per entry (the banner's "
                                                   f"{'pattern' if width == 2 else 'values'}), got {len(fields)}")
            first = lineno
            break
    if size is None:
        raise GpipeFileError(path, None, "no size line (rows, columns, entries) after the banner")
    if first is None:
        raise GpipeFileError(path, None, "no edges: no entry after the size line")
    if weight and width == 2:
        raise GpipeFileError(path, None, f"weight={weight!r} but a pattern matrix has no values")
    return TablePlan("mtx", path, _text_pieces(path, piece_bytes, start), width=width, first=first,
                     keep_weight=weight is not False, vertices=size, mirror=symmetric)


def _banner(path: str, tokens: list[str]) -> tuple[int, bool]:
    """(fields per entry, symmetric) of the banner's ``tokens``."""
    words = [t.lower() for t in tokens]
    if len(words) != 5 or words[0] != "%%matrixmarket" or words[1] != "matrix":
        raise GpipeFileError(path, 1, f"expected the MatrixMarket banner {_BANNER!r}, got {' '.join(tokens)!r}")
    if words[2] != "coordinate":
        raise GpipeFileError(path, 1, f"format {tokens[2]!r} is not read: an edge list is a sparse matrix's "
                                      "entries, the 'coordinate' format")
    if words[3] not in _FIELDS:
        raise GpipeFileError(path, 1, f"field {tokens[3]!r} is not read: gpipe's weights are real numbers "
                                      "('real', 'integer', or 'pattern' for none)")
    if words[4] not in _SYMMETRIES:
        raise GpipeFileError(path, 1, f"symmetry {tokens[4]!r} is not read: gpipe reads 'general' and 'symmetric' "
                                      "matrices (a mirrored entry of a skew-symmetric one is negative, not a weight)")
    return _FIELDS[words[3]], words[4] == "symmetric"


def _size(path: str, lineno: int, fields: list[str]) -> int:
    """The order of the square matrix of the size line's ``fields``: rows, columns, entries."""
    if len(fields) != 3 or not all(_INT.fullmatch(f) and int(f) >= 0 for f in fields):
        raise GpipeFileError(path, lineno, f"expected the size line: rows, columns and entries as 3 non-negative "
                                           f"integers, got {' '.join(fields)!r}")
    rows, columns, entries = map(int, fields)
    if rows != columns:
        raise GpipeFileError(path, lineno, f"the matrix is {rows} x {columns}: a graph's adjacency matrix is square "
                                           "(row i and column i are vertex i)")
    if entries == 0:
        raise GpipeFileError(path, None, "no edges")
    return rows


def _read_mtx(plan: TablePlan, piece: Piece, strings: bool) -> pd.DataFrame | dict:
    """The entries of a piece as edges between 0-based vertices (row ``i`` is vertex ``i - 1``), a symmetric
    matrix's off the diagonal both ways where ``plan.mirror``; an index that is not an integer from 1 to the
    matrix's order names its line. The ids are integers: ``strings`` (another piece's ids) never applies."""
    table = _read_snap(plan, piece, False)
    ends = [table[end] if isinstance(table, dict) else table[end].to_numpy() for end in ("src", "dst")]
    if not all(e.dtype.kind in "iu" and (not e.size or (int(e.min()) >= 1 and int(e.max()) <= plan.vertices))
               for e in ends):
        _name_bad_index(plan, piece)
    x = xp(device_of(ends[0]))
    src, dst = ends[0] - 1, ends[1] - 1
    weight = table.get("weight") if isinstance(table, dict) else (
        table["weight"].to_numpy() if "weight" in table else None)
    if plan.mirror:
        off = src != dst
        src, dst = x.concatenate([src, dst[off]]), x.concatenate([dst, src[off]])
        weight = None if weight is None else x.concatenate([weight, weight[off]])
    if isinstance(table, dict):
        return {"src": src, "dst": dst} | ({} if weight is None else {"weight": weight})
    return _frame(src, dst, weight)


def _name_bad_index(plan: TablePlan, piece: Piece) -> None:
    """Raise the error of the piece's first entry whose row or column is not an integer from 1 to the order."""
    for lineno, fields in _snap_lines(piece, _first_line(piece)):
        for what, token in zip(("row", "column"), fields, strict=False):
            if not (_INT.fullmatch(token) and 1 <= int(token) <= plan.vertices):
                raise GpipeFileError(plan.path, lineno, f"{what} {token!r} is not an integer from 1 to "
                                                        f"{plan.vertices}, the matrix's order")
    raise GpipeFileError(plan.path, None, f"an index is outside 1..{plan.vertices}")  # (the lines say otherwise)

