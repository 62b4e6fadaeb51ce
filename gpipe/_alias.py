"""Walker's alias tables (Vose's construction), shared by the CPU twins of two packages: the groups of a dynamic
graph's sampling space (``gpipe.dynamic``, a table over at most 64 groups) and SELECT's ``"alias"`` method (a table
per segment of candidates: a CSR row, kept with its partition). CUDA: ``kernels/alias.cuh`` (the same operations, so
the same bits) and ``kernels/alias.cu``.

A segment's table is packed for its draws, one 8-byte word per candidate ``j``: the high 32 bits the threshold
``floor(prob_j * 2**32)`` (at most ``2**32 - 1``), the low 32 bits the alias (a local index; ``j`` itself for a full
column). A draw of ``r`` in [0, 1) takes ``x = r * d``, column ``j = floor(x)`` and keeps it when ``(x - j) * 2**32``
is below the threshold, else its alias: one read, whatever the degree. A segment of no positive weight may instead
be made of :data:`NO_CANDIDATE` words (threshold 0, alias ``2**32 - 1``), from which a draw names no candidate (a
walk's end: ``tables(..., dead=True)``).
"""

from __future__ import annotations

import itertools

import numpy as np

from .backend import cpu_kernel, device_of, prange, to_host, xp
from .kernels import Arg, Kernel

_ONE = 4294967296.0  # 2**32: a column's threshold in units of 2**-32
CHUNK_CANDIDATES = 1 << 26  # candidates whose tables are built at once (tables())
_LOW = np.uint64(0xFFFFFFFF)
NO_CANDIDATE = np.uint64(0xFFFFFFFF)  # a word of a segment with no positive weight: a draw takes alias 2**32 - 1


@cpu_kernel()
def vose(weights, w, count, prob, other, base, small, large, s):
    """Vose's alias table of ``weights[w:w+count]`` into ``prob[base:base+count]`` and ``other`` (local indices),
    with ``small[s:s+count]`` and ``large[s:s+count]`` as its worklists; ``prob`` holds the scaled weights as it
    goes. A column of zero weight is always its alias's, unless rounding leaves it full (or no weight is positive)."""
    total = 0.0
    for g in range(count):
        total += np.float64(weights[w + g])
    ns = 0
    nl = 0
    for g in range(count):
        if not total > 0.0:  # no positive weight: every column full
            prob[base + g] = 1.0
            other[base + g] = g
            continue
        prob[base + g] = np.float64(weights[w + g]) * count / total
        if prob[base + g] < 1.0:
            small[s + ns] = g
            ns += 1
        else:
            large[s + nl] = g
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        j = small[s + ns]
        g = large[s + nl - 1]
        other[base + j] = g
        prob[base + g] = (prob[base + g] + prob[base + j]) - 1.0
        if prob[base + g] < 1.0:
            nl -= 1
            small[s + ns] = g
            ns += 1
    for i in range(nl):  # what rounding leaves: full columns
        prob[base + large[s + i]] = 1.0
        other[base + large[s + i]] = large[s + i]
    for i in range(ns):
        prob[base + small[s + i]] = 1.0
        other[base + small[s + i]] = small[s + i]


@cpu_kernel()
def draw(table, t, d, r):
    """The candidate (0..d-1) that draw ``r`` in [0, 1) takes from the packed table ``table[t:t+d]``."""
    x = r * d
    j = min(np.int64(np.floor(x)), d - 1)
    cell = table[t + j]
    if (x - j) * _ONE < np.float64(cell >> np.uint64(32)):
        return j
    return np.int64(cell & _LOW)


@cpu_kernel(parallel=True)
def _tables_cpu(offsets, bias, nseg, prob, other, small, large, dead, table):
    for i in prange(nseg):
        a = offsets[i]
        d = offsets[i + 1] - a
        vose(bias, a, d, prob, other, a, small, large, a)
        positive = False
        for e in range(a, a + d):
            positive = positive or bias[e] > 0.0
        if dead and not positive:
            for e in range(a, a + d):
                table[e] = NO_CANDIDATE
            continue
        for e in range(a, a + d):
            threshold = min(np.floor(prob[e] * _ONE), _ONE - 1.0)
            table[e] = (np.uint64(threshold) << np.uint64(32)) | np.uint64(other[e])


TABLES = Kernel("alias.cu", "gp_alias_tables", twin=_tables_cpu, items="nseg", args=(
    Arg("offsets", "i64[nseg+1]"), Arg("bias", "f64[]"), Arg("nseg", "i64"),
    Arg("prob", "f64[]", out=True, note="scratch, as bias"), Arg("other", "i32[]", out=True, note="scratch, as bias"),
    Arg("small", "i32[]", out=True, note="scratch, as bias"), Arg("large", "i32[]", out=True, note="scratch, as bias"),
    Arg("dead", "i32", note="a segment of no positive bias: NO_CANDIDATE words"),
    Arg("table", "u64[]", out=True, note="each segment's packed table, as bias")))


def tables(offsets, bias, chunk_candidates: int = CHUNK_CANDIDATES, *, dead: bool = False):
    """Each segment's packed alias table of ``bias`` (float64; segment ``i`` at ``offsets[i]:offsets[i+1]``), as
    ``bias`` (with ``dead``, a segment of no positive bias all :data:`NO_CANDIDATE`): a thread per segment builds it
    in O(its length), runs of segments of about ``chunk_candidates`` at a
    time (the construction's scratch, 20 bytes a candidate, is a run's: at R-MAT 26, 2**31 edges, 43 GB at once)."""
    x = xp(device_of(bias))
    n = int(bias.shape[0])
    table = x.empty(max(1, n), x.uint64)
    host = np.asarray(to_host(offsets))
    cuts = np.unique(np.searchsorted(host, np.arange(0, n, max(1, chunk_candidates)), side="right") - 1)
    bounds = [int(c) for c in cuts] + [len(host) - 1]
    width = max(1, max(int(host[b] - host[a]) for a, b in itertools.pairwise(bounds)))
    scratch = {"prob": x.empty(width, x.float64), "other": x.empty(width, x.int32), "small": x.empty(width, x.int32),
               "large": x.empty(width, x.int32)}
    for a, b in itertools.pairwise(bounds):
        if a == b:  # only empty segments left
            continue
        lo, hi = int(host[a]), int(host[b])
        TABLES.launch(offsets=offsets[a:b + 1] - lo, bias=bias[lo:hi], nseg=b - a, dead=dead,
                      table=table[lo:hi], **{name: array[:hi - lo] for name, array in scratch.items()})
    return table
