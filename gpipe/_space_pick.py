"""How a step draws an edge from a vertex's sampling space (Bingo's radix-factorized groups, :mod:`gpipe.dynamic`):
the layout's constants, :func:`pick_in_space` (numba; CUDA: ``gp_space_pick`` in ``kernels/dynamic.cuh``, defined
with :data:`PICK_DEFINES`) and the arrays a kernel reading a space takes (:data:`SPACE_ARGS`). Shared by
``gpipe.dynamic``, which builds and updates the spaces, and ``gpipe.walks``, which walks a snapshot of them."""

from __future__ import annotations

import numpy as np

from . import _rng
from .backend import cpu_kernel
from .kernels import Arg

DECIMAL = -1  # the decimal group's bit


# Tries in a group before its draw is exact: a try keeps an edge with probability at least dense-fraction in a dense
# radix group, the mean of its members' decimal parts in the decimal group (a group of tiny parts beside an integer
# part elsewhere: 0.999 ** 256 ~ 0.77 for parts of 0.001). As node2vec's TRIALS.
TRIES = 256


KINDS = {"one": 0, "dense": 1, "listed": 2}  # group_kind (the kernel's GROUP_ONE, GROUP_DENSE, GROUP_LISTED)


_ONE, _DENSE, _LISTED = KINDS["one"], KINDS["dense"], KINDS["listed"]


@cpu_kernel()
def _weight_in_group(units, frac, e, bit):
    """Edge ``e``'s weight within a group of bit ``bit``: 1 if its bit is set, its decimal part in the decimal group."""
    if bit == DECIMAL:
        return frac[e]
    return 1.0 if (units[e] >> bit) & 1 else 0.0


@cpu_kernel()
def _drawn_exactly(edge_start, degree, units, frac, member_start, members, v, kind, bit, start, size, u):
    """The edge of vertex ``v``'s group (``kind``, ``bit``, ``start``, ``size``) drawn exactly by ``u`` uniform in
    [0, 1): the inverse transform of the weights (:func:`_weight_in_group`) of the edges a try takes from (a listed
    group's members, a dense group's vertex's edges), in their order."""
    a = edge_start[v]
    n = size if kind == _LISTED else degree[v]
    total = 0.0
    for j in range(n):
        total += _weight_in_group(units, frac, a + (members[member_start[v] + start + j] if kind == _LISTED else j),
                                  bit)
    target = u * total
    below = 0.0
    last = np.int64(-1)
    for j in range(n):
        e = a + (members[member_start[v] + start + j] if kind == _LISTED else j)
        w = _weight_in_group(units, frac, e, bit)
        if w > 0.0:
            below += w
            last = e
            if target < below:
                return e
    return last  # (target below total: never reached)


@cpu_kernel()
def pick_in_space(edge_start, degree, units, frac, member_start, members, group_row, group_count, group_kind,
                  group_bit, group_start, group_size, alias_prob, alias_other, key, stream, step, first,
                  v) -> int | np.int64:
    """The edge (its slot in the edge pool) drawn from vertex ``v`` of a space's arrays (-1 if it has none), with the
    draws ``first ..`` of ``(key, stream, step)``: draws ``first`` and ``first + 1`` pick the group through the alias
    table; draws ``first + 2t + 2`` and ``first + 2t + 3`` are the t-th try within it (the edge: a member, or in a
    dense group any edge, kept if in the group; then, in the decimal group, its acceptance with probability
    ``frac``); after ``TRIES`` tries rejected, draw ``first + 2 TRIES + 2`` draws the edge exactly
    (:func:`_drawn_exactly`), by the same law. CUDA: ``gp_space_pick`` in ``kernels/dynamic.cuh``, defined with
    ``PICK_DEFINES``."""
    row = group_row[v]
    count = group_count[v]
    if count == 0:
        return np.int64(-1)
    slot = _rng.below(_rng.bits(key, stream, step, first), count)
    g = slot if _rng.unit(_rng.bits(key, stream, step, first + 1)) < alias_prob[row + slot] \
        else np.int64(alias_other[row + slot])
    kind = group_kind[row + g]
    bit = group_bit[row + g]
    if kind == _ONE:
        return edge_start[v] + group_start[row + g]
    for t in range(TRIES):
        r = _rng.bits(key, stream, step, first + 2 * t + 2)
        if kind == _LISTED:
            e = edge_start[v] + members[member_start[v] + group_start[row + g] + _rng.below(r, group_size[row + g])]
        else:
            e = edge_start[v] + _rng.below(r, degree[v])
            if bit != DECIMAL and not (units[e] >> bit) & 1:
                continue
        if bit != DECIMAL or _rng.unit(_rng.bits(key, stream, step, first + 2 * t + 3)) < frac[e]:
            return e
    return _drawn_exactly(edge_start, degree, units, frac, member_start, members, v, kind, bit, group_start[row + g],
                          group_size[row + g], _rng.unit(_rng.bits(key, stream, step, first + 2 * TRIES + 2)))


PICK_DEFINES = {"DECIMAL_GROUP": DECIMAL, "SPACE_TRIES": TRIES,
                **{f"GROUP_{k.upper()}": v for k, v in KINDS.items()}}  # of gp_space_pick


SPACE_ARGS = (  # what a SpaceView's arrays hold, in the order every kernel that reads a space takes them
    Arg("edge_start", "i64[]", note="each vertex's first slot in the edge pool"), Arg("degree", "i64[]"),
    Arg("dst", "i64[]"), Arg("units", "i64[]", note="integer parts of the scaled biases"), Arg("frac", "f64[]"),
    Arg("member_start", "i64[]"), Arg("members", "i64[]", note="local edge offsets"),
    Arg("group_row", "i64[]", note="each vertex's first row in the group pool"), Arg("group_count", "i64[]"),
    Arg("group_kind", "i8[]"), Arg("group_bit", "i32[]"), Arg("group_start", "i64[]"), Arg("group_size", "i64[]"),
    Arg("alias_prob", "f64[]"), Arg("alias_other", "i32[]"))
