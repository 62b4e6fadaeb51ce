"""Helpers shared by the walk kernels' CPU twins; the CUDA side is ``kernels/walk.cuh``."""

from __future__ import annotations

import numpy as np

from .. import _rng
from ..backend import cpu_kernel


@cpu_kernel()
def uniform_vertex(r, n):
    v = np.int64(_rng.unit(r) * np.float64(n))
    return v if v < n else n - 1
