"""SNAP edge lines parsed on the worker's device: a GPU worker reads a text piece's bytes into its GPU and parses
every line at once (CUDA in ``kernels/parse.cu``, CPU twin here), rather than on its host's cores.

The rule is pyarrow's for the lines it parses the same way (``_readers._snap_arrow``): fields one ``delimiter``
apart, a line ending in ``\\n`` or ``\\r\\n``, blank lines skipped; ids as decimal integers (an optional ``-``, at
most 2**63 - 1), a weight as a decimal number whose value is exact from its digits (at most 19 significant digits
whose integer is below 2**53, and a power of ten within 1e-22 .. 1e22: Clinger's fast path, one rounding, as
correctly rounded as pyarrow's). A line outside that rule is not an error here: the piece is read by the host's
readers instead, which give the same edges or name the bad line.
"""

from __future__ import annotations

import numpy as np

from ..backend import cpu_kernel, prange
from ..kernels import Arg, Kernel

OK, BLANK, OTHER = range(3)  # a line's status
_POWERS = np.array([10.0**k for k in range(23)])  # exact in float64
_MANTISSA = 1 << 53
_LIMIT = (1 << 63) - 1


@cpu_kernel()
def _integer(text, p, e, delimiter):
    """The id at ``text[p:e]`` up to the delimiter or the end: (value, the position after it, whether it is one)."""
    negative = p < e and text[p] == 45  # '-'
    if negative:
        p += 1
    start = p
    value = np.uint64(0)
    ok = True
    while p < e and text[p] != delimiter:
        c = text[p]
        if c < 48 or c > 57 or p - start == 19:  # 19 digits fit uint64
            ok = False
            break
        value = value * np.uint64(10) + np.uint64(c - 48)
        p += 1
    ok = ok and p > start and value <= np.uint64(_LIMIT)
    return -np.int64(value) if negative else np.int64(value), p, ok


@cpu_kernel()
def _decimal(text, p, e, powers):
    """The number at ``text[p:e]`` (the whole field) when its digits give it exactly; (value, whether it does)."""
    negative = p < e and text[p] == 45
    if negative:
        p += 1
    mantissa = np.int64(0)
    digits = 0  # significant digits kept
    seen = 0  # digits of the mantissa, zeros included
    shift = 0  # the decimal exponent the kept digits carry
    point = False
    while p < e and (48 <= text[p] <= 57 or text[p] == 46 and not point):
        c = text[p]
        p += 1
        if c == 46:
            point = True
            continue
        seen += 1
        if digits == 0 and c == 48:  # a leading zero
            if point:
                shift -= 1
            continue
        if digits == 19:
            return 0.0, False
        mantissa = mantissa * 10 + (c - 48)
        digits += 1
        if point:
            shift -= 1
    if seen == 0:
        return 0.0, False
    if p < e and (text[p] == 101 or text[p] == 69):  # 'e', 'E'
        p += 1
        sign = 1
        if p < e and (text[p] == 45 or text[p] == 43):
            sign = -1 if text[p] == 45 else 1
            p += 1
        start = p
        exponent = 0
        while p < e and 48 <= text[p] <= 57 and p - start < 4:
            exponent = exponent * 10 + (text[p] - 48)
            p += 1
        if p == start:
            return 0.0, False
        shift += sign * exponent
    if p != e or mantissa >= _MANTISSA:
        return 0.0, False
    if mantissa == 0:
        value = 0.0
    elif 0 <= shift <= 22:
        value = np.float64(mantissa) * powers[shift]
    elif -22 <= shift < 0:
        value = np.float64(mantissa) / powers[-shift]
    else:
        return 0.0, False
    return -value if negative else value, True


@cpu_kernel()
def parse_line(text, a, b, width, keep_weight, delimiter, powers, src, dst, weight, i):
    """Line ``text[a:b]`` (its ``\\n`` included, if any) into ``src[i]``, ``dst[i]``, ``weight[i]``; its status."""
    e = b
    if e > a and text[e - 1] == 10:
        e -= 1
    if e > a and text[e - 1] == 13:
        e -= 1
    if e == a:
        return BLANK
    for p in range(a, e):
        if text[p] == 13:  # a lone carriage return: a line end to pyarrow
            return OTHER
    src[i], p, ok = _integer(text, a, e, delimiter)
    if not ok or p >= e:
        return OTHER
    dst[i], p, ok = _integer(text, p + 1, e, delimiter)
    if not ok:
        return OTHER
    if width == 2:
        return OK if p == e else OTHER
    if p >= e:
        return OTHER
    q = p + 1
    while q < e and text[q] != delimiter:
        q += 1
    if q != e or q == p + 1:  # a fourth field, or an empty third one
        return OTHER
    if keep_weight:
        weight[i], ok = _decimal(text, p + 1, e, powers)
        if not ok:
            return OTHER
    return OK


@cpu_kernel(parallel=True)
def _parse_cpu(text, bounds, n, width, keep_weight, delimiter, powers, src, dst, weight, status):
    for i in prange(n):
        status[i] = parse_line(text, bounds[i], bounds[i + 1], width, keep_weight, delimiter, powers, src, dst,
                               weight, i)


PARSE = Kernel("parse.cu", "gp_parse_edges", twin=_parse_cpu, items="n", defines={
    "GP_PARSE_OK": OK, "GP_PARSE_BLANK": BLANK, "GP_PARSE_OTHER": OTHER}, args=(
    Arg("text", "u8[]"), Arg("bounds", "i64[n+1]", note="line i is text[bounds[i]:bounds[i+1]], its newline included"),
    Arg("n", "i64"), Arg("width", "i32", note="fields a line has, 2 or 3"), Arg("keep_weight", "i32"),
    Arg("delimiter", "i32", note="the byte between fields"), Arg("powers", "f64[23]", note="10**0 .. 10**22"),
    Arg("src", "i64[n]", out=True), Arg("dst", "i64[n]", out=True),
    Arg("weight", "f64[]", out=True, note="n with keep_weight, else one element"),
    Arg("status", "i8[n]", out=True, note="OK, BLANK, or OTHER: the host's readers take the piece")))


def parse_edges(x, text, width: int, keep_weight: bool, delimiter: int):
    """The edges of ``text`` (uint8 bytes of whole lines, on the device of ``x``): ``src``, ``dst`` and the weights
    (or None), arrays of that device; None where a line is outside the rule (the module's)."""
    keep_weight = keep_weight and width == 3
    size = int(text.shape[0])
    ends = x.flatnonzero(text == 10)
    bounds = x.concatenate([x.zeros(1, x.int64), ends + 1])
    if int(bounds[-1]) != size:  # a last line with no newline
        bounds = x.concatenate([bounds, x.full(1, size, x.int64)])
    n = int(bounds.shape[0]) - 1
    if n == 0:
        return x.zeros(0, x.int64), x.zeros(0, x.int64), x.zeros(0, x.float64) if keep_weight else None
    src, dst = x.empty(n, x.int64), x.empty(n, x.int64)
    weight = x.empty(n if keep_weight else 1, x.float64)
    status = x.empty(n, x.int8)
    PARSE.launch(text=text, bounds=bounds, n=n, width=width, keep_weight=keep_weight, delimiter=delimiter,
                 powers=x.asarray(_POWERS), src=src, dst=dst, weight=weight, status=status)
    if bool((status == OTHER).any()):
        return None
    rows = x.flatnonzero(status == OK)
    return src[rows], dst[rows], weight[rows] if keep_weight else None

