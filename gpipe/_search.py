"""Searches and picks within one segment of candidates, shared by the CPU twins of several packages: binary search
over sorted neighbors (an adjacency test) and over prefix sums (CUDA: ``gp_upper_groups``), the edge pick built on it
(``gp_pick_edge``, ``kernels/walk.cuh``) and exponential races (``gp_race_segment``, ``kernels/race.cuh``)."""

from __future__ import annotations

import math

import numpy as np

from . import _rng
from .backend import cpu_kernel


@cpu_kernel()
def range_of(bounds, parts, v):
    """The range of ``parts`` (cut at ``bounds``, ``parts + 1`` of them) holding ``v``: the last ``q`` with
    ``bounds[q] <= v``, as numpy's ``searchsorted(bounds[1:-1], v, side="right")`` finds it (an empty range holds
    nothing; ``kernels/bounds.cuh``'s ``gp_owner``). No slice of ``bounds``: a slice in a parallel loop counts
    references to its array, atomically, from every thread."""
    lo, hi = 0, parts - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if bounds[mid] <= v:
            lo = mid
        else:
            hi = mid - 1
    return lo


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


@cpu_kernel()
def pick_edge(cdf, weighted, a, d, r):
    """The edge taken from out-edges a..a+d-1: uniform, or by binary search over weight prefix sums; -1 if all zero."""
    if not weighted:
        return a + _rng.below(r, d)
    total = cdf[a + d - 1]
    if not total > 0.0:
        return np.int64(-1)
    return first_above(cdf, a, d, _rng.unit(r) * total)


@cpu_kernel()
def race_segment(bias, a, d, k, key, stream, step, out, out_race, o):
    """The (at most) ``k`` candidates ``a..a+d-1`` with the shortest races, shortest first, into ``out[o:o+k]``
    (candidate indices) and ``out_race[o:o+k]``; candidate ``j`` draws from ``stream`` at ``(step, j)``. Returns
    how many were written (CUDA: ``gp_race_segment``, ``kernels/race.cuh``)."""
    held = 0
    for j in range(d if k > 0 else 0):
        b = np.float64(bias[a + j])
        if not b > 0.0:
            continue
        r = -math.log1p(-_rng.unit(_rng.bits(key, stream, step, j))) / b
        if held == k and not r < out_race[o + k - 1]:
            continue
        if held < k:
            i = held
            held += 1
        else:
            i = k - 1
        while i > 0 and r < out_race[o + i - 1]:
            out_race[o + i] = out_race[o + i - 1]
            out[o + i] = out[o + i - 1]
            i -= 1
        out_race[o + i] = r
        out[o + i] = a + j
    return held


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
def arc_bit(t, x, size):
    """The bit of an arc filter of ``size`` bits that arc ``(t, x)`` sets (``walk.cuh``'s ``gp_arc_bit``; the filter:
    ``gpipe/graph/_partition.py``'s ``arc_filter``): a hash of the pair, times ``size``, over 2**64."""
    z = (np.uint64(t) * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64(x)
    z ^= z >> np.uint64(29)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(32)
    return _high_word(z, np.uint64(size))


@cpu_kernel()
def _high_word(a, b):
    """The high 64 bits of the 128-bit product of uint64 ``a`` and ``b`` (CUDA's ``__umul64hi``)."""
    low = np.uint64(0xFFFFFFFF)
    half = np.uint64(32)
    a0, a1, b0, b1 = a & low, a >> half, b & low, b >> half
    cross = ((a0 * b0) >> half) + ((a1 * b0) & low) + a0 * b1
    return ((a1 * b0) >> half) + (cross >> half) + a1 * b1


@cpu_kernel()
def arc_maybe(arcs, t, x):
    """Whether ``(t, x)`` may be an arc of the partition whose arc filter is ``arcs`` (a uint32 bit array): false
    only if it is not (``walk.cuh``'s ``gp_arc_maybe``)."""
    b = arc_bit(t, x, arcs.shape[0] * 32)
    return (arcs[b >> np.uint64(5)] >> np.uint32(b & np.uint64(31))) & np.uint32(1) != 0
