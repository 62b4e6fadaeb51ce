"""Personalized PageRank estimated from walks with restart, by their restart cycles (renewal-reward)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import _rng
from ..backend import cpu_kernel, prange, to_host
from ._result import WalkResult


class PPRResult(WalkResult):
    """The walks of :func:`gpipe.walks.ppr` and, with :meth:`scores`, the PageRank they estimate."""

    def __init__(self, *args, sources: np.ndarray, restart: float, walk_seed: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.sources = sources
        self.restart = restart
        self._key = np.uint64(_rng.key(walk_seed))

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
        n = int(self.stats["num_vertices"])
        n_sources = len(self.sources)
        starts = sum(self._gather_blocks("scores", _cycle_starts, n_sources, self._key, self.restart))
        seen = np.cumsum(starts, axis=1)[:, ::-1]  # seen[i, k]: cycles of source i started at step <= length - k
        [weights] = self._client.scatter([1.0 / seen], broadcast=True, hash=False)
        parts = self._gather_blocks("scores", _weighted_visits, n_sources, self._key, self.restart, n, weights)
        keys, inverse = np.unique(np.concatenate([k for k, _ in parts]), return_inverse=True)
        visits = np.bincount(inverse, weights=np.concatenate([w for _, w in parts]))
        source_index, vertex = keys // n, keys % n
        totals = np.bincount(source_index, weights=visits, minlength=n_sources)
        frame = pd.DataFrame({
            "source": self.sources[source_index],
            "vertex": vertex if self._id_map is None else self._id_map[vertex],
            "score": visits / totals[source_index],
        })
        return frame.sort_values(["source", "score"], ascending=[True, False], kind="stable", ignore_index=True)


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


def _weighted_visits(block, id_map, base: int, n_sources: int, key, restart: float, n: int, weights: np.ndarray):
    """(source index * n + vertex, visits weighted by ``weights[source index, cycle age]``) in one block."""
    dense = to_host(block)
    ages = _cycle_ages(dense, base, key, restart)
    row, step = np.nonzero(ages >= 0)
    source_index = _source_index(base, dense.shape[0], n_sources)[row]
    keys, inverse = np.unique(source_index * n + dense[row, step], return_inverse=True)
    return keys, np.bincount(inverse, weights=weights[source_index, ages[row, step]])
