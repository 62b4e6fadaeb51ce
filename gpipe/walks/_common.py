"""Helpers shared by the walk kernels' CPU twins; the CUDA side is ``kernels/walk.cuh``."""

from __future__ import annotations

import numpy as np

from .. import _rng
from ..backend import cpu_kernel


@cpu_kernel()
def lower_bound(sorted_values, a, d, x):
    """The first index in a..a+d-1 whose sorted value is >= ``x``; a + d if none is."""
    lo = a
    hi = a + d
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if np.int64(sorted_values[mid]) < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@cpu_kernel()
def has_edge(indices, a, d, x):
    """Whether ``x`` is among the sorted neighbors ``indices[a:a+d]``."""
    e = lower_bound(indices, a, d, x)
    return e < a + d and np.int64(indices[e]) == x


@cpu_kernel()
def uniform_vertex(r, n):
    v = np.int64(_rng.unit(r) * np.float64(n))
    return v if v < n else n - 1
