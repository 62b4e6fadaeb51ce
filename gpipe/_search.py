"""Binary search over a segment of prefix sums, shared by the CPU twins (CUDA: ``gp_pick_edge``, ``gp_upper``)."""

from __future__ import annotations

from .backend import cpu_kernel


@cpu_kernel()
def first_above(cdf, a, d, target):
    """The first index e in a..a+d-1 with cdf[e] > target; the last one if rounding reaches the end."""
    lo = a
    hi = a + d - 1
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if cdf[mid] > target:
            hi = mid
        else:
            lo = mid + 1
    return lo
