"""SELECT: pick k candidates per segment without replacement, in proportion to their biases.

CUDA in ``kernels/select.cu``, CPU twin here (same random stream, same picks).
Every method gives the distribution of *updated sampling*: each successive pick
is proportional to the bias among the candidates not yet picked.

- ``"bipartite"`` (default): C-SAW's bipartite region search over the cumulative
  bias array (CTPS), built once per segment; a draw landing on a picked region
  is followed by a fresh draw mapped onto the rest of the CTPS.
- ``"updated"``: rebuild the CTPS without the picked candidates for every pick.
- ``"repeated"``: draw again until an unpicked candidate comes up.
- ``"alias"``: draws through the segment's alias table (Walker's, built in
  O(its length) as the CTPS is: :mod:`gpipe._alias`), each in O(1) whatever
  its length; a draw landing on a picked candidate is drawn again, as
  ``"repeated"``, and a segment whose every candidate is picked gives them in
  order, with no draw. The fused neighbor sampler keeps every row's table with the
  partition, as it keeps the rows' CTPS for the other methods.

With ``replace=True`` every pick is an independent draw in proportion to the
biases (duplicates allowed; the method does not matter).

The CTPS of a segment is summed in the order a CUDA warp sums it (``LANES``
chunks summed from 0, then their totals left to right), so both devices get the
same bits. Collisions are detected with a strided bitmap (``bitmap=True``) or by scanning
the picks so far. A pick still not made after ``ROUNDS`` rounds (extremely
skewed biases) is made by one updated-sampling pass, which keeps it exact. Candidates with zero bias are never picked; a segment with
fewer positive candidates than asked gives all of them.
"""

from __future__ import annotations

import numpy as np

from . import _alias, _rng
from ._search import first_above
from .backend import cpu_kernel, device_of, prange, xp
from .kernels import Arg, Kernel

METHODS = {"bipartite": 0, "updated": 1, "repeated": 2, "alias": 2}  # the kernels' collision rule (alias: repeated's)
_WITH_REPLACEMENT = 3
_BIPARTITE, _UPDATED = METHODS["bipartite"], METHODS["updated"]
ROUNDS = 1024  # rounds before a pick is made by an updated-sampling pass
LANES = 32  # the chunks of the CTPS's summation order (a CUDA warp per segment)


def select(bias, offsets, want, streams, key, step: int, *, method: str = "bipartite", bitmap: bool = True,
           replace: bool = False):
    """Picks per segment: ``(pick_offsets, picks, iterations)``.

    ``bias`` (float64) holds the candidates of segment ``s`` at
    ``offsets[s]:offsets[s+1]``; ``want[s]`` of them are picked with the random
    stream ``streams[s]`` at draw counter ``step``. ``picks`` are candidate
    indices, in pick order, segment after segment (``pick_offsets``);
    ``iterations[s]`` counts the draws it took (for the ablation).
    """
    x = xp(device_of(bias))
    nseg = offsets.shape[0] - 1
    positives = positive_counts(x, bias, offsets)
    count = x.where(positives > 0, want, 0) if replace else x.minimum(positives, want)
    pick_offsets = x.zeros(nseg + 1, dtype=x.int64)
    x.cumsum(count, out=pick_offsets[1:])
    byte_offsets = x.zeros(nseg + 1, dtype=x.int64)
    x.cumsum((offsets[1:] - offsets[:-1] + 7) // 8, out=byte_offsets[1:])
    picks = x.empty(int(pick_offsets[-1]), dtype=x.int64)
    iterations = x.zeros(nseg, dtype=x.int64)
    alias = method == "alias"
    cdf = x.empty(1 if alias else bias.shape[0], dtype=x.float64)
    bits = x.empty(int(byte_offsets[-1]), dtype=x.uint8)
    SELECT.launch(nseg=nseg, offsets=offsets, bias=bias, out_offsets=pick_offsets, key=key, streams=streams, step=step,
                  method=_WITH_REPLACEMENT if replace else METHODS[method], use_bitmap=bitmap, cdf=cdf, bitmap=bits,
                  byte_offsets=byte_offsets, out=picks, iterations=iterations, use_table=alias,
                  table=_alias.tables(offsets, bias) if alias else x.zeros(1, x.uint64))
    return pick_offsets, picks, iterations


def positive_counts(x, bias, offsets):
    """Each segment's count of positive biases (segment ``i`` at ``offsets[i]:offsets[i+1]``)."""
    positive = x.zeros(bias.shape[0] + 1, dtype=x.int64)
    x.cumsum(bias > 0, out=positive[1:])
    return positive[offsets[1:]] - positive[offsets[:-1]]


@cpu_kernel()
def _taken(bits, base, width, j, use_bitmap, out, o, picked, e):
    if use_bitmap:
        return (bits[base + j % width] >> (j // width)) & 1 == 1
    for i in range(picked):
        if out[o + i] == e:
            return True
    return False


@cpu_kernel()
def _chunk(a, d, lane):
    """Lane ``lane``'s chunk of the segment at ``a`` of ``d`` candidates: the CTPS's fixed summation order."""
    size = (d + LANES - 1) // LANES
    return a + min(lane * size, d), a + min((lane + 1) * size, d)


@cpu_kernel()
def _updated_pick(bias, a, d, r, bitmap, base, width, use_bitmap, out, o, picked):
    """One updated-sampling pass over the unpicked candidates, chunk by chunk as the CUDA warp does it."""
    rest = np.zeros(LANES)
    for lane in range(LANES):
        lo, hi = _chunk(a, d, lane)
        for e in range(lo, hi):
            if not _taken(bitmap, base, width, e - a, use_bitmap, out, o, picked, e):
                rest[lane] += bias[e]
    offset = np.zeros(LANES)
    total = 0.0
    for lane in range(LANES):
        offset[lane] = total
        total += rest[lane]
    target = r * total
    for lane in range(LANES):
        lo, hi = _chunk(a, d, lane)
        run = 0.0
        for e in range(lo, hi):
            if _taken(bitmap, base, width, e - a, use_bitmap, out, o, picked, e) or not bias[e] > 0.0:
                continue
            run += bias[e]
            if offset[lane] + run > target:
                return e
    for e in range(a + d - 1, a - 1, -1):  # rounding at the very end: the last positive unpicked candidate
        if bias[e] > 0.0 and not _taken(bitmap, base, width, e - a, use_bitmap, out, o, picked, e):
            return e
    return -1


@cpu_kernel()
def segment_cdf(bias, a, d, cdf, c):
    """The CDF of candidates ``a..a+d-1`` of ``bias`` into ``cdf[c:c+d]`` as SELECT's warp sums it (each lane a
    chunk, then the chunk totals before it added left to right); returns the total (== ``cdf[c+d-1]``)."""
    total = 0.0
    for lane in range(LANES):
        lo, hi = _chunk(0, d, lane)
        run = 0.0
        for j in range(lo, hi):
            run += bias[a + j]
            cdf[c + j] = run
        for j in range(lo, hi):
            cdf[c + j] = total + cdf[c + j]
        total += run
    return total


@cpu_kernel()
def select_segment(bias, a, d, k, key, stream, step, method, use_bitmap, cdf, c, cdf_ready, bitmap, base, width,
                   out, o, table, t, use_table):
    """SELECT of one segment: ``k`` picks of candidates ``a..a+d-1`` of ``bias`` into ``out[o:o+k]``, drawn from
    ``stream`` at ``step``; ``cdf[c:c+d]`` (holding :func:`segment_cdf`'s already when ``cdf_ready``) and
    ``bitmap[base:base+width]`` are its scratch. With ``use_table`` the draws read the segment's packed alias table
    ``table[t:t+d]`` instead of a CDF (``method`` is then repeated sampling's, or with replacement), and ``k = d`` picks
    without replacement are every candidate in order, with no draw. Returns the draws taken.

    The one rule of every SELECT: ``_select_cpu`` runs it per segment, the fused neighbor sampler per task.
    """
    for b in range(width):
        bitmap[base + b] = 0
    if use_table:
        total = 0.0  # the draws need no CDF
    elif cdf_ready:
        total = cdf[c + d - 1] if d > 0 else 0.0
    else:
        total = segment_cdf(bias, a, d, cdf, c)
    draw = 0
    iters = 0
    if use_table and k == d and method != _WITH_REPLACEMENT:  # every candidate, in order: no draw
        for i in range(k):
            out[o + i] = a + i
        return 0
    for i in range(k):
        pick = -1
        rounds = 0
        while pick < 0:
            iters += 1
            r = _rng.unit(_rng.bits(key, stream, step, draw))
            draw += 1
            rounds += 1
            if method == _UPDATED or rounds == ROUNDS + 1:
                pick = _updated_pick(bias, a, d, r, bitmap, base, width, use_bitmap, out, o, i)
                break
            e = a + (_alias.draw(table, t, d, r) if use_table else first_above(cdf, c, d, r * total) - c)
            positive = use_table or bias[e] > 0.0  # a table leads to no zero bias (gpipe._alias.vose)
            if method == _WITH_REPLACEMENT:
                if positive:
                    pick = e
                continue
            if positive and not _taken(bitmap, base, width, e - a, use_bitmap, out, o, i, e):
                pick = e
                break
            if method == _BIPARTITE and bias[e] > 0.0:  # bipartite region search around the picked region
                low = cdf[c + e - a - 1] if e > a else 0.0
                delta = cdf[c + e - a] - low
                v = _rng.unit(_rng.bits(key, stream, step, draw)) * (total - delta)
                draw += 1
                if v >= low:
                    v += delta
                e = a + first_above(cdf, c, d, v) - c
                if bias[e] > 0.0 and not _taken(bitmap, base, width, e - a, use_bitmap, out, o, i, e):
                    pick = e
        out[o + i] = pick
        if use_bitmap and method != _WITH_REPLACEMENT:
            j = pick - a
            bitmap[base + j % width] |= np.uint8(1 << (j // width))
    return iters


@cpu_kernel(parallel=True)
def _select_cpu(nseg, offsets, bias, out_offsets, key, streams, step, method, use_bitmap, cdf, bitmap, byte_offsets,
                out, iterations, use_table, table):
    for s in prange(nseg):
        a = offsets[s]
        base = byte_offsets[s]
        iterations[s] = select_segment(bias, a, offsets[s + 1] - a, out_offsets[s + 1] - out_offsets[s], key,
                                       streams[s], step, method, use_bitmap, cdf, a, False, bitmap, base,
                                       byte_offsets[s + 1] - base, out, out_offsets[s], table, a, use_table)


SELECT = Kernel("select.cu", "gp_select", twin=_select_cpu, items="nseg", lanes=LANES, defines={
    "GP_SELECT_ROUNDS": ROUNDS, "GP_LANES": LANES, "GP_SELECT_BIPARTITE": _BIPARTITE, "GP_SELECT_UPDATED": _UPDATED,
    "GP_SELECT_WITH_REPLACEMENT": _WITH_REPLACEMENT}, args=(
    Arg("nseg", "i64"), Arg("offsets", "i64[nseg+1]"), Arg("bias", "f64[]"), Arg("out_offsets", "i64[nseg+1]"),
    Arg("key", "u64"), Arg("streams", "i64[nseg]"), Arg("step", "i64"), Arg("method", "i32"),
    Arg("use_bitmap", "i32"), Arg("cdf", "f64[]", out=True, note="as bias; one element with use_table"),
    Arg("bitmap", "u8[]", out=True), Arg("byte_offsets", "i64[nseg+1]"), Arg("out", "i64[]", out=True),
    Arg("iterations", "i64[nseg]", out=True), Arg("use_table", "i32", note="draw through the alias tables"),
    Arg("table", "u64[]", note="with use_table: each segment's packed alias table (gpipe/_alias.py), as bias")))
