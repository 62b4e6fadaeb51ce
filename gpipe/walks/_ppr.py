"""Personalized PageRank estimated from the visits of walks with restart."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..backend import to_host
from ..runtime import WalkResult


class PPRResult(WalkResult):
    """The walks of :func:`gpipe.walks.ppr` and, with :meth:`scores`, the PageRank they estimate."""

    def __init__(self, *args, sources: np.ndarray, **kwargs):
        super().__init__(*args, **kwargs)
        self.sources = sources

    def scores(self) -> pd.DataFrame:
        """``source, vertex, score``: per source, the share of its walks' visits on each visited vertex."""
        n = int(self.stats["num_vertices"])
        parts = self._client.gather(self._map_blocks(_visit_counts, len(self.sources), n))
        keys = np.concatenate([k for k, _ in parts])
        counts = np.concatenate([c for _, c in parts])
        keys, inverse = np.unique(keys, return_inverse=True)
        counts = np.bincount(inverse, weights=counts).astype(np.int64)
        source_index, vertex = keys // n, keys % n
        totals = np.bincount(source_index, weights=counts, minlength=len(self.sources))
        frame = pd.DataFrame({
            "source": self.sources[source_index],
            "vertex": vertex if self._id_map is None else self._id_map[vertex],
            "score": counts / totals[source_index],
        })
        return frame.sort_values(["source", "score"], ascending=[True, False], kind="stable", ignore_index=True)


def _visit_counts(block, id_map, base: int, n_sources: int, n: int):
    """(source index * n + vertex, visits) in one block of walks; walk ``r * n_sources + i`` is from source ``i``."""
    dense = to_host(block)
    source_index = (np.arange(base, base + dense.shape[0], dtype=np.int64) % n_sources)[:, None]
    keys = (source_index * n + dense)[dense >= 0]
    return np.unique(keys, return_counts=True)
