"""Personalized PageRank estimated from walks with restart, by their restart cycles (renewal-reward)."""

from __future__ import annotations

import itertools
import operator
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .. import _rng
from .._files import SCORE_FILES, atomic_dir
from .._validate import check_bool, check_path
from ..backend import cpu_kernel, prange, to_host
from ..runtime.calls import gather_pinned, replicate, scatter, submit, wait_pinned
from ._result import WalkResult

if TYPE_CHECKING:
    import dask.dataframe as dd


class PPRResult(WalkResult):
    """The walks of :func:`gpipe.walks.ppr` and, with :meth:`scores` (or :meth:`scores_to_dask`, which leaves
    them on the workers, and :meth:`scores_to_parquet`, which writes them from there), the PageRank they
    estimate."""

    def __init__(self, *args, sources: np.ndarray, restart: float, walk_seed: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.sources = sources
        self.restart = restart
        self._key = np.uint64(_rng.key(walk_seed))
        self._score_futures: list | None = None

    def scores(self) -> pd.DataFrame:
        """``source, vertex, score``: per source, its personalized PageRank estimated from its walks.

        The score of ``v`` for source ``s`` estimates ``pi_s(v)``, the
        stationary distribution of the walk that at every step returns to
        ``s`` with probability ``restart`` and otherwise moves to an
        out-neighbor (uniformly, or by weight when ``weighted``), and that
        returns to ``s`` from a dead end (a vertex without out-edges, or whose
        out-edges all weigh 0): ``networkx.pagerank(G, alpha=1 - restart,
        personalization={s: 1})``, whose dead ends follow the personalization.
        The scores of a source sum to 1; vertices never visited are left out.

        The estimator: restarts, and the ends of walks at dead ends, cut each
        walk into cycles that start at the source, and ``pi_s(v)`` is the
        expected number of visits to ``v`` in one cycle over the expected
        length of one (renewal-reward). A cycle that starts at step ``S`` is
        seen for ``length - S`` steps only, so each visit made ``k`` steps into
        its cycle counts ``1 / M_k``, ``M_k`` being the cycles of that source
        that start early enough to be seen ``k`` steps in: the mean visits at
        each cycle age, unbiased whatever the truncation (counting complete
        cycles only would not do: the truncation keeps the short ones, which
        stay near the source). The estimate then converges to ``pi_s`` as
        the walks grow (error ~ 1/sqrt(walks)), except for the visits that
        cycles longer than ``length`` would make, a share of at most
        ``(1 - restart) ** (length + 1)`` (2e-6 at the defaults) that more
        walks do not recover and a longer walk does. The restarts are the walk
        kernel's own draws, recomputed where the blocks are. The share of
        visits over fixed-length walks is not offered: it is biased toward the
        source by O(1 / (restart * length)) however many walks are run
        (``compute()`` gives those walks).
        """
        frames = gather_pinned(self._client, self._score_ranges(), self._held, "scores")
        return pd.concat(frames, ignore_index=True)

    def scores_to_dask(self) -> dd.DataFrame:
        """:meth:`scores` as a dask DataFrame, a partition per range of sources, made and kept on the workers.

        Its rows, columns and index are those of ``scores()``, which gathers
        the same partitions; ``.to_parquet(folder)`` writes them from the
        workers. No (source, vertex) pair passes through the client.
        """
        import dask.dataframe as dd

        ranges = self._score_ranges()
        sizes = gather_pinned(self._client, [submit(self._client, len, r) for r in ranges],
                              self._held, "scores sizing")
        bases = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
        parts = [submit(self._client, _numbered, r, base) for r, base in zip(ranges, bases[:-1], strict=True)]
        one = (np.zeros(1, np.int64), np.ones(1))  # a row, for the dtypes pandas infers from ids (str, not object)
        meta = _numbered(_range_scores([one], self.sources, self._id_map, 1).iloc[:0], 0)
        return dd.from_delayed(parts, meta=meta, divisions=(*bases[:-1], bases[-1] - 1), verify_meta=False)

    def scores_to_parquet(self, path, overwrite: bool = False) -> str:
        """Write :meth:`scores` into folder ``path``, a Parquet file per range of sources
        (``scores-000000.parquet``, ...) written by the worker that reduced it; ``pandas.read_parquet(path)``
        reads back ``scores()``. The folder appears complete or not at all; ``overwrite`` as for
        :meth:`WalkResult.to_parquet`."""
        path, overwrite = check_path("path", path), check_bool("overwrite", overwrite)
        with atomic_dir(path, owned=SCORE_FILES, overwrite=overwrite) as tmp:
            written = [submit(self._client, _write_scores, r, i, tmp)
                       for i, r in enumerate(self._score_ranges())]
            gather_pinned(self._client, written, self._held, "scores writing")
        return path

    def _score_ranges(self) -> list:
        """Futures of the score frames of the ranges of sources (in the order of their ids), reduced on the
        workers: each block's visits are summed by (source, vertex) where the block is and cut by range, and
        each range's worker adds its pieces in block order, so the sums, and the scores, are those of one pass
        over the blocks in order, whatever the workers and partitions."""
        if self._score_futures is not None:
            return self._score_futures
        client, n, n_sources = self._client, int(self.stats["num_vertices"]), len(self.sources)
        starts = self._map_blocks(_cycle_starts, n_sources, self._key, self.restart)
        while len(starts) > 1:  # integer sums: any order gives the same
            starts = [submit(client, np.add, a, b) for a, b in zip(starts[::2], starts[1::2], strict=False)] + \
                starts[len(starts) // 2 * 2:]
        weights = submit(client, _visit_weights, starts[0])
        wait_pinned(client, [weights], self._held, "scores")
        replicate(client, [weights])
        rank: Any = np.empty(n_sources, np.int64)  # then its future
        rank[pd.Series(self.sources).sort_values(kind="stable").index.to_numpy()] = np.arange(n_sources)
        cuts = np.linspace(0, n_sources, min(n_sources, len(self._blocks())) + 1).round().astype(np.int64)
        rank, sources = scatter(client, [rank, self.sources], broadcast=True)
        blocks = self._map_blocks(_visits_by_range, n_sources, walk_key=self._key, restart=self.restart, n=n,
                                  weights=weights, rank=rank, cuts=cuts)
        workers = sorted(set(self._held.values()))
        self._score_futures = [
            submit(client, _range_scores, [submit(client, operator.getitem, b, r) for b in blocks], sources,
                   self._ids(), n, workers=[workers[r % len(workers)]])
            for r in range(len(cuts) - 1)]
        return self._score_futures


@cpu_kernel()
def _restarted(key, walk_id, step, restart):
    """Whether walk ``walk_id`` returned to its source after ``step``: draw 0 of ``advance_first_order``."""
    return _rng.unit(_rng.bits(key, walk_id, step, 0)) < restart


@cpu_kernel(parallel=True)
def _cycle_ages(dense, first_walk, key, restart):
    """Per vertex of the walks ``first_walk + row``, the steps since its cycle started at the source; -1 on padding."""
    ages = np.full(dense.shape, -1, np.int32)
    for i in prange(dense.shape[0]):
        age = 0
        for t in range(dense.shape[1]):
            if dense[i, t] < 0:
                break
            ages[i, t] = age
            age = 0 if _restarted(key, first_walk + i, t, restart) else age + 1
    return ages


def _source_index(base: int, rows: int, n_sources: int) -> np.ndarray:
    """Walk ``r * n_sources + i`` is from source ``i``."""
    return np.arange(base, base + rows, dtype=np.int64) % n_sources


def _cycle_starts(block, id_map, base: int, n_sources: int, key, restart: float) -> np.ndarray:
    """``(n_sources, width)``: in one block, the cycles of each source that start at each step."""
    ages = _cycle_ages(to_host(block), base, key, restart)
    row, step = np.nonzero(ages == 0)
    width = ages.shape[1]
    flat = _source_index(base, ages.shape[0], n_sources)[row] * width + step
    return np.bincount(flat, minlength=n_sources * width).reshape(n_sources, width)


def _visit_weights(starts: np.ndarray) -> np.ndarray:
    """``1 / M_k`` per source and cycle age ``k``: ``M_k``, the cycles of a source started at step <= length - k."""
    return 1.0 / np.cumsum(starts, axis=1)[:, ::-1]


def _visits_by_range(block, id_map, base: int, n_sources: int, *, walk_key, restart: float, n: int,
                     weights: np.ndarray, rank: np.ndarray, cuts: np.ndarray) -> list:
    """One block's ``(source index * n + vertex, visits weighted by weights[source index, cycle age])``, summed
    by key, cut by the rank of the source: ``[cuts[r], cuts[r + 1])`` in piece ``r``, keys in order in each."""
    dense = to_host(block)
    ages = _cycle_ages(dense, base, walk_key, restart)
    row, step = np.nonzero(ages >= 0)
    source_index = _source_index(base, dense.shape[0], n_sources)[row]
    keys, inverse = np.unique(source_index * n + dense[row, step], return_inverse=True)
    visits = np.bincount(inverse, weights=weights[source_index, ages[row, step]])
    piece = np.searchsorted(cuts, rank[keys // n], "right") - 1
    order = np.argsort(piece, kind="stable")
    ends = np.searchsorted(piece[order], np.arange(len(cuts)))
    return [(keys[order[lo:hi]], visits[order[lo:hi]]) for lo, hi in itertools.pairwise(ends)]


def _range_scores(pieces: list, sources: np.ndarray, id_map, n: int) -> pd.DataFrame:
    """The scores of one range of sources from its pieces of every block, added in block order, normalized per
    source and sorted as :meth:`PPRResult.scores` gives them."""
    keys, inverse = np.unique(np.concatenate([k for k, _ in pieces]), return_inverse=True)
    visits = np.bincount(inverse, weights=np.concatenate([w for _, w in pieces]))
    source_index, vertex = keys // n, keys % n
    _, local = np.unique(source_index, return_inverse=True)
    totals = np.bincount(local, weights=visits)
    frame = pd.DataFrame({
        "source": sources[source_index],
        "vertex": vertex if id_map is None else id_map[vertex],
        "score": visits / totals[local],
    })
    return frame.sort_values(["source", "score"], ascending=[True, False], kind="stable", ignore_index=True)


def _write_scores(frame: pd.DataFrame, number: int, folder: str) -> str:
    name = os.path.join(folder, f"scores-{number:06d}.parquet")
    frame.to_parquet(name, index=False)
    return name


def _numbered(frame: pd.DataFrame, base: int) -> pd.DataFrame:
    """The frame indexed by its rows' numbers in the whole, from ``base``."""
    return frame.set_axis(pd.RangeIndex(base, base + len(frame)))
