"""Update logs in Bingo's evaluation setting (its section 6.1): a graph's edges split at random into the initial
graph A and a held-out set B; insertions drawn from B, deletions from A. And update logs read from files."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .._validate import check_choice, check_int, check_seed, is_ascii_digits
from ..errors import GpipeValueError
from ._batches import check_batch

KINDS = ("insertion", "deletion", "mixed")  # Bingo's three update situations


def update_log(edges: pd.DataFrame, count: int, kind: str = "mixed", seed: int = 0) -> tuple[pd.DataFrame,
                                                                                           pd.DataFrame]:
    """Split ``edges`` into an initial graph and a log of ``count`` updates, as Bingo's evaluation does.

    The insertions of the log (all ``count`` for ``"insertion"``, none for ``"deletion"``, half for ``"mixed"``)
    are distinct edges held out of the initial graph (Bingo's set B); its deletions are distinct edges of the
    initial graph (set A); a mixed log takes them in random order. Every update of the log is valid in turn, so
    the log applies in any number of rounds.

    Parameters
    ----------
    edges : pandas.DataFrame
        ``src``, ``dst`` and ``weight``, one row per edge (an undirected graph's edges once each).
    count : int
        Updates in the log, at most the number of edges.
    kind : {"insertion", "deletion", "mixed"}, default "mixed"
    seed : int, default 0

    Returns
    -------
    initial : pandas.DataFrame
        The edges of the initial graph (``src``, ``dst``, ``weight``), in the order of ``edges``.
    log : pandas.DataFrame
        ``op`` (``"insert"`` or ``"delete"``, a categorical column), ``src``, ``dst``, ``weight`` (NaN for a
        delete), in log order, as :meth:`DynamicGraph.apply` (its columns as they are) and ``gpipe walk --updates``
        take it.

    Raises
    ------
    GpipeValueError
        ``edges`` lacks a column, or ``count`` or ``kind`` is out of range.

    Examples
    --------
    >>> edges = pd.DataFrame({"src": [0, 0, 1, 2], "dst": [1, 2, 2, 3], "weight": [1.0, 2.0, 3.0, 4.0]})
    >>> initial, log = gpipe.dynamic.update_log(edges, 2, seed=1)
    >>> len(initial), log.op.tolist()
    (3, ['delete', 'insert'])
    """
    if not isinstance(edges, pd.DataFrame) or not {"src", "dst", "weight"} <= set(edges.columns):
        raise GpipeValueError(f"'edges' must be a pandas DataFrame with columns src, dst and weight, got "
                              f"{list(edges.columns) if isinstance(edges, pd.DataFrame) else type(edges).__name__}")
    count = check_int("count", count, minimum=0, maximum=len(edges))
    kind = check_choice("kind", kind, KINDS)
    seed = check_seed("seed", seed)
    rng = np.random.default_rng(seed)
    inserts = {"insertion": count, "deletion": 0, "mixed": count // 2}[kind]
    order = rng.permutation(len(edges))
    held_out, kept = order[:inserts], np.sort(order[inserts:])  # B, then A in the order of edges
    deleted = rng.choice(kept, count - inserts, replace=False)
    rows = np.concatenate([held_out, deleted])
    ops = np.array(["insert"] * inserts + ["delete"] * (count - inserts))
    shuffled = rng.permutation(count)
    rows, ops = rows[shuffled], ops[shuffled]
    taken = edges.iloc[rows]
    log = pd.DataFrame({"op": pd.Categorical(ops, categories=["insert", "delete"]), "src": taken["src"].to_numpy(),
                        "dst": taken["dst"].to_numpy(),
                        "weight": np.where(ops == "insert", taken["weight"].to_numpy(np.float64), np.nan)})
    return edges.iloc[kept][["src", "dst", "weight"]].reset_index(drop=True), log


UPDATE_COLUMNS = ("op", "src", "dst", "weight")


def read_updates(path) -> pd.DataFrame:
    """An update log from a Parquet or CSV file: a row per update, in log order, checked before any is applied.

    Parameters
    ----------
    path : str or path-like
        A ``.parquet`` or ``.csv`` file with the columns ``op`` (``insert``, ``delete`` or ``update``), ``src``,
        ``dst`` (vertex ids) and ``weight`` (positive and finite; empty, or anything, for a delete).

    Returns
    -------
    pandas.DataFrame
        Those four columns, as :meth:`DynamicGraph.apply` takes them (the ids as int64).

    Raises
    ------
    GpipeValueError
        The file is not there or not of those kinds, lacks a column, or holds a bad update: the message names the
        file, the update's row (0 the first row of data), as :meth:`DynamicGraph.apply` names it, and the bad
        value.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "log.csv")
    >>> _ = open(path, "w").write("op,src,dst,weight\\ninsert,0,3,2.5\\ndelete,0,1,\\n")
    >>> gpipe.dynamic.read_updates(path).op.tolist()
    ['insert', 'delete']
    >>> _ = open(path, "w").write("op,src,dst,weight\\ninsert,0,3,2.5\\ninsert,0,1,-1\\n")
    >>> gpipe.dynamic.read_updates(path)
    Traceback (most recent call last):
    ...
    gpipe.errors.GpipeValueError: .../log.csv: update 1: the weight of an insert must be a positive finite number, got -1.0
    """
    text = os.fspath(path)
    if not text.endswith((".parquet", ".csv")):
        raise GpipeValueError(f"'updates' must be a .parquet or .csv file, got {text!r}")
    if not os.path.isfile(text):
        raise GpipeValueError(f"'updates' must be an existing file, got {text!r}")
    frame = pd.read_parquet(text) if text.endswith(".parquet") else pd.read_csv(text, skipinitialspace=True)
    missing = [c for c in UPDATE_COLUMNS if c not in frame.columns]
    if missing:
        raise GpipeValueError(f"{text}: an update log must have the columns {', '.join(UPDATE_COLUMNS)}; "
                              f"{', '.join(missing)} missing, got {', '.join(map(str, frame.columns))}")
    frame = frame[list(UPDATE_COLUMNS)]
    columns = [frame["op"]] + [frame[c].to_numpy() if frame[c].dtype.kind in "iuf" else _cells(frame[c], parse)
                               for c, parse in (("src", _vertex_id), ("dst", _vertex_id), ("weight", float))]
    try:
        batch = check_batch(*columns)
    except GpipeValueError as exc:
        raise GpipeValueError(f"{text}: {exc}") from None
    return frame.assign(src=batch.src, dst=batch.dst)


def _cells(column: pd.Series, parse) -> np.ndarray:
    """A column read as text (a cell of it is not a number, so none was read as one): each cell as ``parse`` reads
    it, those it cannot as they are, for :func:`check_batch` to name the first of those, not the first cell."""
    def read(cell):
        try:
            return parse(cell)
        except (TypeError, ValueError):
            return cell

    return np.array([read(cell) for cell in column], dtype=object)


def _vertex_id(cell) -> int:
    """A cell of decimal digits (ASCII: ``int`` also takes signs, underscores and other scripts' digits) as an id."""
    text = cell.strip() if isinstance(cell, str) else cell  # ints as they are: a column of a few too large for int64
    if isinstance(text, str) and not is_ascii_digits(text):
        raise ValueError(text)
    return int(text)
