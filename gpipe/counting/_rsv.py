"""gSWORD's Refine / Sample / Validate steps as vectorized array code over a table of partial samples, for
estimators written in Python: the same samples, groups, inheritance and random stream as ``kernels/count.cu``.

At each position, every live partial sample's local candidates form the rows of a table; a user's *refine*
keeps some rows; *sample* picks, per partial sample, the kept row with the largest reservoir key (the second
word of the row's Philox block) and multiplies the sample's weight by its kept count; *validate* keeps the
sample alive if the picked candidate extends it. With Alley's or PartialRefine's refine written this way, the
estimate is the kernel's, bit for bit.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .. import _rng
from ..backend import to_host
from ..errors import GpipeValueError, TaskError
from ..runtime.workers import worker_xp
from ._common import LANES


class CandidateTable:
    """The rows ``(partial sample, local candidate)`` at one position, as columns (numpy or cupy arrays):

    ``sample`` (the sample's id), ``local`` (the candidate's index among its
    sample's local candidates), ``candidate`` (its index among the position's
    candidates), ``vertex`` (its data vertex), ``coin`` (uniform in [0, 1),
    the row's own draw) and ``extends`` (bool: it extends the partial sample
    — Alley's refinement check, computed when first read), plus ``position``
    and ``query_vertex`` (ints). A *refine* given to :func:`estimate` as its
    ``method`` reads it and returns which rows to keep.

    Examples
    --------
    >>> import gpipe, pandas as pd
    >>> edges = pd.DataFrame({"src": [0, 0, 0, 1, 1, 2], "dst": [1, 2, 3, 2, 3, 3]})  # K4
    >>> def alley(table):   # keep exactly the candidates that extend their partial sample
    ...     return table["extends"]
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges)
    ...     g.set_labels([0, 0, 0, 0])
    ...     triangle = gpipe.counting.Query.from_edges([(0, 1), (1, 2), (0, 2)], [0, 0, 0])
    ...     result = gpipe.counting.estimate(g, triangle, method=alley, samples=1000, seed=0)
    >>> result.method, result.estimate
    ('alley', 24.0)
    """

    def __init__(self, columns: dict, extends):
        self._columns = columns
        self._extends = extends

    def __getitem__(self, name: str):
        if name == "extends" and name not in self._columns:
            self._columns[name] = self._extends()
        return self._columns[name]

    def __len__(self) -> int:
        return len(self._columns["sample"])


def run_groups(first_group: int, groups: int, arrays: dict, order: np.ndarray, key: int, refine,
               inherit: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each group's sum of sample values and count of valid samples (on a worker, with its array module)."""
    x = worker_xp()
    a = {name: x.asarray(v) for name, v in arrays.items()}
    k = len(order)
    n = groups * LANES
    sample = first_group * LANES + x.arange(n, dtype=x.int64)
    roots = int(arrays["cand_offsets"][1])
    match = x.zeros((n, k), x.int64)
    matched = x.zeros((n, k), x.int64)
    match[:, 0] = _rng.below_array(_rng.draws(x, key, sample, 0, 0), x.full(n, roots, x.uint64))
    matched[:, 0] = a["cand_vertices"][match[:, 0]]
    weight = x.full(n, float(roots))
    alive = x.ones(n, bool)
    entries = _owners(x, x.diff(a["edge_indptr"]))
    stride = int(arrays["cand_vertices"].shape[0]) + 1
    entry_keys = entries * stride + a["edge_indices"]  # sorted: by row, then by candidate within the row
    for d in range(1, k):
        live = x.flatnonzero(alive)
        if len(live) == 0:
            break
        first = int(arrays["back_offsets"][d])
        rows = a["back_rows"][first] + match[live, int(arrays["back_pos"][first])]
        lo = a["edge_indptr"][rows]
        counts = a["edge_indptr"][rows + 1] - lo
        owner = _owners(x, counts)
        local = x.arange(len(owner)) - (x.cumsum(counts) - counts)[owner]
        candidate = a["edge_indices"][lo[owner] + local]

        def extends(rows_owner, rows_candidate, *, live=live, d=d, first=first):  # bound: a refine may read it later
            """Whether each candidate extends its partial sample (``_common.extends``, vectorized)."""
            at = live[rows_owner]
            vertex = a["cand_vertices"][a["cand_offsets"][d] + rows_candidate]
            ok = (matched[at, :d] != vertex[:, None]).all(axis=1)
            for t in range(first + 1, int(arrays["back_offsets"][d + 1])):
                wanted = (a["back_rows"][t] + match[at, int(arrays["back_pos"][t])]) * stride + rows_candidate
                found = x.searchsorted(entry_keys, wanted).clip(max=len(entry_keys) - 1)
                ok &= entry_keys[found] == wanted
            return ok

        blocks = _rng.draws(x, key, sample[live][owner], d, 1 + local)
        table = CandidateTable({"sample": sample[live][owner], "local": local, "candidate": candidate,
                                "vertex": a["cand_vertices"][a["cand_offsets"][d] + candidate],
                                "coin": _rng.unit_array(blocks), "position": d, "query_vertex": int(order[d])},
                               partial(extends, owner, candidate))
        keep = x.flatnonzero(x.asarray(_kept_rows(refine, table, d)))  # a refine in numpy, on a GPU worker too
        kept = x.bincount(owner[keep], minlength=len(live))
        # rows come by owner, then local index: two stable sorts leave each owner's largest key (lowest local
        # index on a tie) first
        ranked = keep[x.argsort(~blocks[keep, 1], kind="stable")]
        ranked = ranked[x.argsort(owner[ranked], kind="stable")]
        firsts = ranked[x.flatnonzero(x.diff(owner[ranked], prepend=-1) != 0)]
        best = owner[firsts]
        chosen = candidate[firsts]
        valid = extends(best, chosen)
        ok, chosen = best[valid], chosen[valid]
        died = x.ones(len(live), bool)
        died[ok] = False
        alive[live[died]] = False
        at = live[ok]
        match[at, d] = chosen
        matched[at, d] = a["cand_vertices"][a["cand_offsets"][d] + chosen]
        weight[at] *= kept[ok].astype(x.float64)
        if inherit and d < k - 1:
            lanes = alive.reshape(groups, LANES)
            live_lanes = lanes.sum(axis=1)
            heirs = (live_lanes > 0) & (live_lanes < LANES)
            parent = x.arange(groups) * LANES + lanes.argmax(axis=1)  # the lowest live lane
            weight[parent[heirs]] /= (LANES - live_lanes[heirs] + 1).astype(x.float64)
            dead = x.flatnonzero(~alive & x.repeat(heirs, LANES))
            source = parent[dead // LANES]
            match[dead, :d + 1] = match[source, :d + 1]
            matched[dead, :d + 1] = matched[source, :d + 1]
            weight[dead] = weight[source]
            alive[dead] = True
    values = (weight * alive).reshape(groups, LANES)
    sums = x.zeros(groups, x.float64)
    for lane in range(LANES):  # in lane order, as the kernel adds
        sums += values[:, lane]
    return to_host(sums), to_host(alive.reshape(groups, LANES).sum(axis=1).astype(x.int32))


def _kept_rows(refine, table: CandidateTable, d: int):
    """What ``refine`` keeps of position ``d``'s table: a bool array, one entry per row, or an error saying what
    came back instead (a wrong shape would silently keep other rows, or none)."""
    try:
        keep = refine(table)
    except Exception as exc:  # the user's code: its failure named as theirs, with where it happened
        raise TaskError("counting: the refine given as 'method'", d, None, repr(exc), unit="position") from exc
    dtype, shape = getattr(keep, "dtype", None), getattr(keep, "shape", None)
    if dtype != bool or shape != (len(table),):
        got = f"a {dtype} array of shape {shape}" if dtype is not None else (
            "None" if keep is None else f"a {type(keep).__name__}")
        raise GpipeValueError(f"'method' (a refine) must return a bool array with one entry per row of its table, "
                              f"shape ({len(table)},); got {got}")
    return keep


def _owners(x, counts):
    """For ``counts.sum()`` rows laid out as ``counts[0]`` rows of owner 0, then of owner 1 ...: each row's owner."""
    return x.searchsorted(x.cumsum(counts), x.arange(int(counts.sum())), side="right")
