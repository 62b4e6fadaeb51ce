"""What a mining run found: its count and stats on the client, the embeddings it listed kept on the workers."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._files import EMBEDDING_FILES
from .._validate import check_bool
from ..errors import GpipeError, GpipeValueError
from ..runtime.results import HeldResult, id_dtype, kept_blocks
from ..runtime.workers import run_state, worker_address, worker_xp

if TYPE_CHECKING:
    import dask.dataframe as dd


@dataclass
class MiningState:
    """A mining run's state on a worker, held until the run is let go: a listing run's rows by block key (dense
    ids, host int64), and the tables a partitioned run keeps between its steps."""

    listed: dict = field(default_factory=dict)
    kept: Any = None


@dataclass(frozen=True)
class Listed:
    """Where a run's listed embeddings are: in the state of run ``run_id``, a block of rows per ``(worker, key,
    rows)`` of ``blocks``, in order (``width`` columns, dense ids that ``id_map`` maps to the original ones), on
    the workers of ``holders`` (the graph's, for a wait to name one that leaves)."""

    client: Any
    run_id: str
    blocks: tuple
    width: int
    id_map: np.ndarray | None
    holders: tuple


class MiningResult(HeldResult):
    """What a mining run found: ``count`` embeddings and ``stats`` (embeddings per column, peak table bytes per
    tier, spilled bytes, seconds of the call and per primitive); the embeddings themselves, when they were
    listed, stay on the workers until asked for.

    A listing run keeps its rows where it found them, in dense ids: a block
    per range of first vertices on a replicated graph (in range order), a
    block per partition on a partitioned one (the embeddings whose first
    vertex the partition owns, sorted on its worker); ranges or partitions
    that found none hold no block. Only counts come back to the client.
    ``compute()`` gives the embeddings as one array of original ids, a row
    each, in the order the listing function documents (``embeddings``: the
    same, computed once and kept); ``to_frame()`` as a pandas DataFrame, a
    column per pattern vertex (``stats['pattern_vertices']``, else ``v0, v1,
    ...``); ``to_dask()`` as a dask DataFrame made on the workers, a partition
    per block; ``to_parquet()`` writes a file per block from the workers. The
    workers let the rows go when the result is let go.

    Examples
    --------
    >>> import os, tempfile, pandas as pd, gpipe
    >>> edges = pd.DataFrame({"src": ["a", "a", "b", "c", "c"], "dst": ["b", "c", "c", "d", "e"]})
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges, mode="replicated")
    ...     found = gpipe.mining.match(g, [("x", "y"), ("y", "z"), ("z", "x")], embeddings=True)
    ...     frame, lazy = found.to_frame(), found.to_dask().compute()
    ...     folder = found.to_parquet(os.path.join(tempfile.mkdtemp(), "triangles"))
    >>> found
    <gpipe.mining.MiningResult: 6 embeddings in ... s>
    >>> found.embeddings[:2].tolist()
    [['a', 'b', 'c'], ['a', 'c', 'b']]
    >>> frame.columns.tolist(), lazy.equals(frame), pd.read_parquet(folder).equals(frame)
    (['x', 'y', 'z'], True, True)
    """

    KEEPS_RUNS = True  # the blocks are the listing run's rows, kept in its state until the result goes

    def __init__(self, count: int, stats: dict, listed: Listed | None = None):
        held, unit = listed.holders if listed is not None else ({}, "partition")
        super().__init__(None if listed is None else listed.client, held, None if listed is None else listed.id_map,
                         stats, () if listed is None else (listed.run_id,), unit)
        self.count = count
        self._listed = listed

    def __int__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"<gpipe.mining.MiningResult: {self.count} embeddings in {self.stats['seconds']:.3f} s>"

    @property
    def columns(self) -> list[str]:
        """The embeddings' column names: the pattern's vertices (``stats['pattern_vertices']``), else ``v0, v1,
        ...``."""
        listed = self._listing()
        return [str(u) for u in self.stats.get("pattern_vertices") or [f"v{i}" for i in range(listed.width)]]

    def _listing(self) -> Listed:
        if self._listed is None:
            raise GpipeValueError("the embeddings were not listed: ask for them (list_cliques, match(..., "
                                  "embeddings=True))")
        return self._listed

    def _assemble(self) -> list:
        """Futures of the blocks: each the rows the run keeps on a worker, read there (by direct calls, kept
        there: no task's round trips)."""
        listed = self._listing()
        keys = tuple(key for _, key, _ in listed.blocks)
        blocks = {f"gpipe-mining-{listed.run_id}-{number}": (worker, number)
                  for number, (worker, _, _) in enumerate(listed.blocks)}
        futures = kept_blocks(self._client, blocks, _dense, lambda w: (listed.run_id, keys), self._held,
                              "mining: embeddings", self._unit)
        return [futures[key] for key in blocks]

    def compute(self) -> np.ndarray:
        """The embeddings as one array of original vertex ids, a row each (a ``GpipeValueError`` when they were
        not listed)."""
        listed = self._listing()
        dense = np.concatenate([np.empty((0, listed.width), np.int64), *self._fetch("mining: embeddings")])
        return dense if listed.id_map is None else listed.id_map[dense]

    @functools.cached_property
    def embeddings(self) -> np.ndarray | None:
        """:meth:`compute`'s array, computed on first use and kept; None when the embeddings were not listed."""
        return None if self._listed is None else self.compute()

    def map_blocks(self, fn, *args, **kwargs) -> list:
        """Futures of ``fn(block, *args, **kwargs)``, each run on the worker that holds ``block``, block by block.

        ``block`` is a block's embeddings, a row each, as the dense vertex ids
        (:meth:`Graph.to_original` maps them back) of an array on that worker's
        device (CuPy on a GPU worker, NumPy on a CPU one); ``fn`` must not
        modify it. A ``GpipeValueError`` when the embeddings were not listed.

        Examples
        --------
        >>> import gpipe, pandas as pd
        >>> edges = pd.DataFrame({"src": [0, 0, 0, 1, 1, 2], "dst": [1, 2, 3, 2, 3, 3]})  # a complete graph
        >>> with gpipe.connect(n_workers=1, device="cpu") as client:
        ...     found = gpipe.mining.list_cliques(gpipe.from_edges(edges, mode="replicated"), 3)
        ...     client.gather(found.map_blocks(len))  # the 4 triangles, in a block per range of first vertices
        [3, 1]
        """
        self._listing()
        return self._map(_on_device, fn, args, kwargs)

    def to_frame(self) -> pd.DataFrame:
        """The embeddings (:attr:`embeddings`) as a pandas DataFrame, a row each, a column per pattern vertex
        (:attr:`columns`); a ``GpipeValueError`` when they were not listed."""
        listed = self._listing()
        return _frame_of(self.embeddings, 0, id_dtype(listed.id_map), self.columns)

    def to_dask(self) -> dd.DataFrame:
        """The embeddings as a dask DataFrame of original ids, a partition per block, each made on the worker
        holding it; its index is the row's in :meth:`compute` (and :meth:`to_frame`)."""
        import dask.dataframe as dd

        listed = self._listing()
        bases = np.concatenate([[0], np.cumsum([rows for _, _, rows in listed.blocks], dtype=np.int64)]).tolist()
        ids, dtype, columns = self._ids(), id_dtype(listed.id_map), self.columns
        parts = self._on_blocks(_frame, lambda b: (bases[b], ids, dtype, columns))
        meta = _frame_of(np.empty((0, listed.width), np.int64), 0, dtype, columns)
        divisions = (*bases[:-1], bases[-1] - 1) if all(np.diff(bases) > 0) else None
        return dd.from_delayed(parts, meta=meta, divisions=divisions, verify_meta=False)

    def to_parquet(self, path, overwrite: bool = False) -> str:
        """Write the embeddings into folder ``path``, a Parquet file per block (``embeddings-000000.parquet``,
        ...) written by the worker holding it, columns as :meth:`to_frame` names them; return ``path``.

        ``path`` must be a new or empty folder; ``overwrite=True`` also replaces a
        folder that holds only embeddings gpipe wrote. Anything else there (another
        file, a link, an empty folder; a file at ``path``) is refused with a
        ``GpipeValueError`` before any work, and kept. A symbolic link at ``path``
        is written through, to the folder it leads to. The folder appears complete or not at all;
        ``pandas.read_parquet(path)`` reads it back as :meth:`to_frame` gives it.
        """
        overwrite = check_bool("overwrite", overwrite)
        listed = self._listing()
        ids, dtype, columns = self._ids(), id_dtype(listed.id_map), self.columns
        return self._write(path, overwrite, EMBEDDING_FILES, _write, lambda b: (b, ids, dtype, columns))


def keep_rows(run_id: str, key: int, rows: np.ndarray) -> None:
    """On a worker: keep block ``key`` of a listing run's rows (dense ids) here until the run is let go (an error
    once it has been: the client gave up on it)."""
    run_state(run_id, MiningState).listed[key] = rows


def _dense(run_id: str, keys: tuple, *, part: int) -> np.ndarray:
    """On a worker: block ``part``'s rows, kept here by :func:`keep_rows` under ``keys[part]``."""
    rows = run_state(run_id, MiningState).listed.get(keys[part])
    if rows is None:
        raise GpipeError(f"mining run {run_id} holds no block {part} (key {keys[part]}) on worker "
                         f"{worker_address()} any more")
    return rows


def _frame_of(rows: np.ndarray, base: int, dtype, columns: list) -> pd.DataFrame:
    """Rows of ids as a frame, a column each of ``dtype`` (None: as they are), numbered from ``base``: the same
    dtypes for every block, empty or not."""
    return pd.DataFrame({name: rows[:, i] if dtype is None else pd.array(rows[:, i], dtype=dtype)
                         for i, name in enumerate(columns)}, index=pd.RangeIndex(base, base + len(rows)))


def _on_device(rows: np.ndarray):
    """A block's rows on this worker's device."""
    return worker_xp().asarray(rows)


def _frame(rows: np.ndarray, base: int, id_map, dtype, columns: list) -> pd.DataFrame:
    """On a worker: a block as a frame of original ids, its rows numbered from the block's first (``base``)."""
    return _frame_of(rows if id_map is None else id_map[rows], base, dtype, columns)


def _write(rows: np.ndarray, number: int, id_map, dtype, columns: list, folder: str) -> str:
    name = os.path.join(folder, f"embeddings-{number:06d}.parquet")
    _frame_of(rows if id_map is None else id_map[rows], 0, dtype, columns).to_parquet(name, index=False)
    return name
