"""A partition: the out-edges of one contiguous vertex range, as CSR on one worker's device."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Partition:
    """Vertices ``lo..hi-1`` with every out-edge, sorted by (src, dst).

    ``indptr`` is local (``indptr[v - lo]``), ``indices`` hold global vertex ids
    (int32 when the graph has fewer than 2**31 vertices), ``weights`` float32 or
    None. ``bounds`` are the P+1 partition bounds of the whole graph (host), so
    a task can tell which partition owns any vertex.
    """

    part: int
    lo: int
    hi: int
    bounds: np.ndarray
    indptr: object
    indices: object
    weights: object | None

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    @property
    def nbytes(self) -> int:
        arrays = (self.indptr, self.indices, self.weights)
        return int(sum(a.nbytes for a in arrays if a is not None))
