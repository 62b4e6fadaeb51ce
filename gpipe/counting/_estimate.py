"""Random-walk estimates of subgraph counts (gSWORD): WanderJoin, Alley and PartialRefine, with sample inheritance.

CUDA in ``kernels/count.cu``, CPU twin here; the same random stream and the same sums.
"""

from __future__ import annotations

import math
import time
import uuid
import weakref
from dataclasses import dataclass

import numpy as np

from .. import _rng
from .._validate import check_bool, check_choice, check_int, check_picklable, check_probability, check_seed
from ..backend import cpu_kernel, prange, to_host
from ..errors import GpipeValueError
from ..graph import check_graph
from ..kernels import Arg, Kernel
from ..runtime import check_memory
from ..runtime.calls import end_run, spread
from ..runtime.workers import worker_xp
from . import _rsv
from ._candidates import hold, kept
from ._common import LANES, extends, local_candidates
from ._inputs import MAX_QUERY_VERTICES, check_query

STREAM = 32  # local candidate lists this long are refined by the whole warp on the GPU (the same pick as one lane's)
METHODS = {"wanderjoin": 0.0, "alley": 1.0, "partial_refine": None}  # each method's refinement probability alpha
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
MIN_EFFECTIVE_GROUPS = 30  # the textbook sample size for a normal mean: fewer effective groups, unreliable
COCHRAN = 25  # Cochran's rule: a mean of n draws is near normal once n >= 25 x their skewness squared


@dataclass(frozen=True)
class Estimate:
    """An estimated subgraph count and how it was obtained.

    ``estimate`` is the mean of the per-sample Horvitz-Thompson values;
    ``std_error`` is the standard deviation of the per-group means (groups of
    32 samples are independent; the samples of a group are not, once they
    inherit) over the square root of the group count (NaN for a single
    group). ``confidence_interval`` is a 95% interval for the count:
    the normal one corrected for the skewness of the group means (Hall's
    transformation of the Student statistic, Hall 1992, "On the removal of
    skewness by transformation"), which reaches further above the estimate
    than below it when rare large values make the group means skewed.

    ``reliable`` says whether the interval can be trusted at all. The
    per-sample values are mostly 0 with rare large ones; once a few groups
    carry the estimate, the sample has likely not seen the rarer, larger
    values yet, so the estimate and ``std_error`` both tend to fall short
    and no interval from the sample alone holds its level (on a power-law
    clustered graph with a diamond query, WanderJoin's normal interval
    from 8,192 samples covered the count in 54% of 200 seeds, this one in
    77%: 97% of them were flagged). It is true when ``effective_groups``
    (Kish's effective sample size of the group sums,
    ``sum(s) ** 2 / sum(s ** 2)``; 0 when no sample found an embedding) is
    at least 30 and the groups number at least 25 x ``skewness`` squared
    (Cochran's rule for the normal approximation of a mean; ``skewness``
    is the sample skewness of the group means); so never below 30 groups
    (960 samples). An unreliable estimate wants more samples, or a method
    that refines (Alley), before its interval is used; the flag errs on the
    side of firing, and a sample that missed the tail entirely can still
    look reliable: ``benchmarks/interval_coverage.py`` measures both
    (``benchmarks/results/interval_coverage_cpu2.json``).
    ``valid_fraction`` is the share of samples that ended as a full embedding.
    ``seconds`` is the whole call and ``samples_per_second`` is ``samples``
    over it; ``candidate_seconds``, a part of it, went to building the
    candidate graph (:func:`candidates`), so the sampling alone ran at
    ``samples / (seconds - candidate_seconds)``. ``method`` and ``alpha``
    are as asked (a Python refine's function name, and None).
    """

    estimate: float
    std_error: float
    confidence_interval: tuple[float, float]
    samples: int
    valid_fraction: float
    samples_per_second: float
    seconds: float
    candidate_seconds: float
    method: str
    alpha: float | None
    inheritance: bool
    reliable: bool
    effective_groups: float
    skewness: float

    @property
    def stats(self) -> dict:
        """How the estimate was made, as every result of gpipe says it (``.stats``): the method, the samples, the
        whole call's seconds and its part building the candidate graph, the samples per second."""
        return {"algorithm": "estimate", "method": self.method, "alpha": self.alpha, "inheritance": self.inheritance,
                "samples": self.samples, "valid_fraction": self.valid_fraction, "seconds": self.seconds,
                "candidate_seconds": self.candidate_seconds, "samples_per_second": self.samples_per_second}


def estimate(g, query, method="partial_refine", samples: int = 1_000_000, alpha: float | None = None,
             seed: int = 0, inheritance: bool = True) -> Estimate:
    """Estimate the number of embeddings of ``query`` in ``g`` from random walks over the candidate graph.

    Each sample matches the query's vertices in the candidate graph's order
    (:func:`candidates`), picking at each position one of the local candidates
    (those adjacent to its parent's match) uniformly after *refining* them:
    a refined candidate is kept only if it extends the partial match
    (injective, adjacent to every earlier neighbor's match), an unrefined one
    is kept and checked once picked (*validate*). Refining each local
    candidate with probability ``alpha`` is PartialRefine; WanderJoin refines
    none, Alley all. A sample's Horvitz-Thompson value is the product of the
    kept-candidate counts along a full match, 0 for a sample that dies; its
    mean is an unbiased estimate of the count, for every ``alpha``. Refining
    methods pick the kept candidate with the largest random key in one pass
    (an A-Res reservoir); on the GPU a list of 32 local candidates or more is
    refined by the whole warp (gSWORD's warp streaming), with the same pick.

    With ``inheritance`` (gSWORD's Algorithm 2), samples run in groups of 32
    (a warp on the GPU): when samples of a group die before the last position,
    each takes over the lowest live sample of the group, whose value is split
    evenly among its copies first — the push-down of the recursive estimator,
    so the estimate stays unbiased while no lane idles.

    The draws of sample ``i`` come from the counter-based stream keyed by
    ``(seed, i, position, draw)`` and the groups are split over the graph's
    workers, so the estimate depends on ``seed`` and ``samples`` only: not on
    the number of workers, nor on CPU or GPU.

    The candidate graph stays on the workers for the call: built where ``g``
    is held (as :func:`candidates` builds it) and kept in the gpipe store of
    each worker that samples, under the call's run, with only its candidate
    counts and matching order sent to the client; it goes when the call ends
    or fails.

    Parameters
    ----------
    g : Graph
        As :func:`count_exact` takes it (a multigraph counted as the simple
        graph underneath); its candidate graph is the simple graph's, so its
        estimate for a seed is too.
    query : Query
        The query graph.
    method : {'partial_refine', 'alley', 'wanderjoin'} or callable
        The estimator; or a *refine* step ``refine(table) -> bool array``
        keeping rows of each position's table of local candidates (see
        :class:`CandidateTable`), for an estimator written in Python: vectorized
        numpy or cupy code run on the workers over the same samples, groups and
        random stream as the kernel, picklable by cloudpickle. The estimate
        stays unbiased as long as every row whose ``extends`` is true is kept.
        ``lambda t: t["extends"]`` is Alley; ``lambda t: (t["coin"] >= 0.1) |
        t["extends"]`` PartialRefine with alpha 0.1 (the same estimates as
        those methods).
    samples : int
        Samples to draw, rounded up to whole groups of 32.
    alpha : float, optional
        PartialRefine's refinement probability in (0, 1] (default 0.1; 1 is
        Alley). Only for ``method='partial_refine'``.
    seed : int
        Seed of the random stream.
    inheritance : bool
        Let dead samples inherit live partial samples of their group.

    Returns
    -------
    Estimate
        With ``estimate`` exactly 0 and no samples drawn when a query vertex
        has no candidate (``reliable``: that 0 is exact). Its
        ``confidence_interval`` is corrected for the skewness of the sample
        values, and ``reliable`` says whether to trust it: false when a few
        groups of samples carry the estimate (``effective_groups`` < 30) or
        their means are too skewed for a normal approximation (groups <
        25 x ``skewness`` squared), where the sample has likely missed rare
        large values and the interval falls short (see :class:`Estimate`).

    Raises
    ------
    GpipeValueError
        A parameter is out of range, or ``query`` cannot occur in ``g`` (see
        :func:`candidates`).

    Examples
    --------
    >>> import gpipe, pandas as pd
    >>> edges = pd.DataFrame({"src": [0, 0, 0, 1, 1, 2], "dst": [1, 2, 3, 2, 3, 3]})  # K4
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges)
    ...     g.set_labels([0, 0, 0, 0])
    ...     triangle = gpipe.counting.Query.from_edges([(0, 1), (1, 2), (0, 2)], [0, 0, 0])
    ...     result = gpipe.counting.estimate(g, triangle, method="alley", samples=1000, seed=0)
    >>> result.estimate, result.std_error, result.samples   # 4 triangles x 6 automorphisms, found by every sample
    (24.0, 0.0, 1024)
    >>> result.confidence_interval, result.reliable   # 32 groups of 32 samples, all alike
    ((24.0, 24.0), True)
    """
    started = time.perf_counter()
    check_graph("g", g)
    check_query(query)
    asked = _asked(method, samples, alpha, seed, inheritance)
    _check_sample_memory(g, samples, query.num_vertices, callable(method))
    with PreparedQuery(g, query) as prepared:  # g and query checked above
        return prepared._estimate(asked, started, prepared.candidate_seconds)


def prepare(g, query) -> PreparedQuery:
    """The candidate graph of ``query`` in ``g``, built once and kept on the workers that sample, for many
    estimates: :meth:`PreparedQuery.estimate` draws from it as :func:`estimate` does (the same estimate for the
    same parameters) without building it again.

    A multigraph is read as the simple graph underneath, as :func:`estimate`
    reads it: an edge repeated is one edge, a self-loop none.

    It stays on the workers until :meth:`PreparedQuery.close`, the end of a
    ``with`` block, or until the object is let go.

    Raises
    ------
    GpipeValueError
        As :func:`estimate` does for ``g`` and ``query``.

    Examples
    --------
    >>> import gpipe, pandas as pd
    >>> with gpipe.connect(n_workers=1, device="cpu"):   # a 5-cycle and a path of 3 vertices: 10 maps
    ...     cycle = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2, 3, 4], "dst": [1, 2, 3, 4, 0]}))
    ...     cycle.set_labels([0] * 5)
    ...     path = gpipe.counting.Query.from_edges([(0, 1), (1, 2)], [0, 0, 0])
    ...     with gpipe.counting.prepare(cycle, path) as prepared:
    ...         drawn = [prepared.estimate(method="wanderjoin", samples=320, seed=s).estimate for s in (1, 2)]
    ...     once = gpipe.counting.estimate(cycle, path, method="wanderjoin", samples=320, seed=1).estimate
    >>> drawn, once == drawn[0]
    ([10.1875, 9.5], True)
    """
    check_graph("g", g)
    check_query(query)
    return PreparedQuery(g, query)


class PreparedQuery:
    """A query's candidate graph held on the workers that sample (see :func:`prepare`)."""

    def __init__(self, g, query):
        self._g = g
        self._run_id = f"count-{uuid.uuid4().hex}"
        building = time.perf_counter()
        try:
            self._held = hold(g, query, self._run_id)
        except BaseException:
            end_run(g, self._run_id)
            raise
        self.candidate_seconds = time.perf_counter() - building
        self._finalizer = weakref.finalize(self, end_run, g, self._run_id)

    def estimate(self, method="partial_refine", samples: int = 1_000_000, alpha: float | None = None, seed: int = 0,
                 inheritance: bool = True) -> Estimate:
        """:func:`estimate` of this query and graph, drawn from the candidate graph kept on the workers: the same
        estimate for the same parameters; ``seconds`` counts no candidate graph (``candidate_seconds`` 0)."""
        if not self._finalizer.alive:
            raise GpipeValueError("this prepared query is closed: its candidate graph has gone from the workers")
        asked = _asked(method, samples, alpha, seed, inheritance)
        _check_sample_memory(self._g, samples, len(self._held.order), callable(method))
        return self._estimate(asked, time.perf_counter(), 0.0)

    def close(self) -> None:
        """Let the candidate graph go from the workers now."""
        self._finalizer()

    def __enter__(self) -> PreparedQuery:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _estimate(self, asked: tuple, started: float, candidate_seconds: float) -> Estimate:
        refine, alpha, samples, key, inheritance, name = asked
        held, g = self._held, self._g
        if held.empty:
            seconds = time.perf_counter() - started
            return Estimate(0.0, 0.0, (0.0, 0.0), 0, 0.0, 0.0, seconds, candidate_seconds, name, alpha, inheritance,
                            True, 0.0, 0.0)
        groups = -(-samples // LANES)
        if refine is None:
            parts = spread(g, "counting", _estimate_held, groups, self._run_id, held.source, int(key), alpha,
                           inheritance)
        else:
            parts = spread(g, "counting", _refine_held, groups, self._run_id, held.source, int(key), refine,
                           inheritance)
        sums = np.concatenate([s for s, _ in parts])
        valid = np.concatenate([v for _, v in parts])
        drawn = groups * LANES
        mean = float(sums.sum() / drawn)
        error, interval, reliable, effective, skewness = _spread(sums, mean)
        seconds = time.perf_counter() - started
        return Estimate(mean, error, interval, drawn, float(valid.sum() / drawn), drawn / seconds, seconds,
                        candidate_seconds, name, alpha, inheritance, reliable, effective, skewness)


def _spread(sums: np.ndarray, mean: float) -> tuple[float, tuple[float, float], bool, float, float]:
    """From the groups' sums of sample values (independent) and their ``mean`` per sample: the standard error, the
    95% interval, whether it is reliable, the effective group count and the group means' skewness (see
    :class:`Estimate`)."""
    groups = len(sums)
    means = sums / LANES
    total = float(sums.sum())
    effective = total * total / float(np.square(sums).sum()) if total > 0 else 0.0
    skewness = 0.0
    if means.max() > means.min():  # equal values have no skewness (rounding would make one up)
        centred = means - means.mean()
        squared = centred * centred  # not ** 3: numpy's float power takes 70x as long (0.23 s for 3 M groups)
        skewness = float(np.mean(squared * centred) / np.mean(squared) ** 1.5)
    reliable = effective >= MIN_EFFECTIVE_GROUPS and groups >= COCHRAN * skewness ** 2
    if groups < 2:
        return math.nan, (math.nan, math.nan), reliable, effective, skewness
    sd = float(np.std(means, ddof=1))

    def hall(y: float) -> float:
        """Hall's transformation of the studentized mean over sqrt(groups), inverted at ``y``: the cube root of
        its closed form, written so that a skewness of 0 gives ``y`` (the normal interval) without 0 / 0."""
        shifted = y - skewness / (6 * groups)
        root = float(np.cbrt(1 + skewness * shifted))
        return 3 * shifted / (root * root + root + 1)

    half = Z95 / math.sqrt(groups)
    return sd / math.sqrt(groups), (mean - sd * hall(half), mean - sd * hall(-half)), reliable, effective, skewness


def _check_sample_memory(g, samples: int, positions: int, python: bool) -> None:
    """Refuse, before any work, an estimate whose per-sample arrays would not fit in the workers' memory, as walks
    refuse an oversize run: each group of samples' sum and valid count (12 bytes); with a refine written in Python
    (``python``), which holds a worker's share of the samples at once, each sample's partial match (16 bytes a
    position) and columns (about 64 bytes) too: a lower bound, its tables of local candidates come on top."""
    groups = -(-int(samples) // LANES)
    per_sample = 16 * positions + 64 if python else 0
    check_memory(g, groups * (12 + LANES * per_sample), f"'samples' ({samples})", "estimate's per-sample arrays")


def _asked(method, samples, alpha, seed, inheritance) -> tuple:
    """:func:`estimate`'s sampling parameters, checked: (refine, alpha, samples, key, inheritance, name)."""
    refine = check_picklable("method", method) if callable(method) else None
    if refine is None:
        check_choice("method", method, tuple(METHODS))
    if (refine is not None or METHODS[method] is not None) and alpha is not None:
        raise GpipeValueError(f"'alpha' applies to method='partial_refine' only, got alpha={alpha!r} with "
                              f"method={method!r}")
    if refine is None:
        alpha = METHODS[method] if METHODS[method] is not None else (
            0.1 if alpha is None else check_probability("alpha", alpha, open_low=True))
    samples = check_int("samples", samples, minimum=1)
    key = _rng.key(check_seed("seed", seed))
    inheritance = check_bool("inheritance", inheritance)
    name = getattr(refine, "__name__", "refine") if refine is not None else method
    return refine, alpha, samples, key, inheritance, name


def _estimate_held(first_group: int, groups: int, run_id: str, source: str | None, key: int, alpha: float,
                   inherit: bool) -> tuple:
    """:func:`_estimate_groups` over the candidate graph kept here for run ``run_id`` (see ``_candidates.kept``)."""
    cg = kept(run_id, source)
    return _estimate_groups(first_group, groups, cg.arrays(), cg.num_positions, key, alpha, inherit)


def _refine_held(first_group: int, groups: int, run_id: str, source: str | None, key: int, refine,
                 inherit: bool) -> tuple:
    """``_rsv.run_groups`` over the candidate graph kept here for run ``run_id`` (see ``_candidates.kept``)."""
    cg = kept(run_id, source)
    return _rsv.run_groups(first_group, groups, cg.arrays(), cg.order, key, refine, inherit)


def _estimate_groups(first_group: int, groups: int, arrays: dict, k: int, key: int, alpha: float,
                     inherit: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each group's sum of sample values and its count of valid samples, for groups ``first_group ..`` (on a
    worker, on its device)."""
    x = worker_xp()
    group_sum = x.zeros(groups, x.float64)
    group_valid = x.zeros(groups, x.int32)
    ESTIMATE.launch(**{name: x.asarray(a) for name, a in arrays.items()}, k=k, key=key, alpha=alpha,
                    inherit=inherit, first_group=first_group, groups=groups, group_sum=group_sum,
                    group_valid=group_valid)
    return to_host(group_sum), to_host(group_valid)


@cpu_kernel()
def _pick(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows, edge_indptr, edge_indices, key, sample, d,
          alpha, match, matched):
    """How many local candidates of position ``d`` are kept, which is picked (an index into ``edge_indices``, -1
    for none: the kept one with the largest reservoir key, or, for WanderJoin, a uniform one of them all) and
    whether it was refined (else it is still to be validated)."""
    lo, hi = local_candidates(back_offsets, back_pos, back_rows, edge_indptr, d, match)
    if alpha <= 0.0:
        if hi == lo:
            return 0, -1, False
        return hi - lo, lo + _rng.below(_rng.bits(key, sample, d, 0), hi - lo), False
    kept = 0
    best = -1
    best_key = np.uint64(0)
    best_refined = False
    for j in range(lo, hi):
        block = _rng.bits(key, sample, d, 1 + (j - lo))
        refined = alpha >= 1.0 or _rng.unit(block) < alpha
        if refined and not extends(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows, edge_indptr,
                                   edge_indices, d, edge_indices[j], match, matched):
            continue
        kept += 1
        if best < 0 or block[1] > best_key:  # ascending j: a tie keeps the lower one
            best_key = block[1]
            best = j
            best_refined = refined
    return kept, best, best_refined


@cpu_kernel(parallel=True)
def _estimate_cpu(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows, edge_indptr, edge_indices, k, key,
                  alpha, inherit, first_group, groups, group_sum, group_valid):
    roots = cand_offsets[1]
    for g in prange(groups):
        match = np.zeros((LANES, k), np.int64)
        matched = np.zeros((LANES, k), np.int64)
        weight = np.zeros(LANES, np.float64)
        alive = np.ones(LANES, np.bool_)
        for lane in range(LANES):
            sample = (first_group + g) * LANES + lane
            match[lane, 0] = _rng.below(_rng.bits(key, sample, 0, 0), roots)
            matched[lane, 0] = cand_vertices[match[lane, 0]]
            weight[lane] = np.float64(roots)
        for d in range(1, k):
            for lane in range(LANES):
                if not alive[lane]:
                    continue
                sample = (first_group + g) * LANES + lane
                kept, best, refined = _pick(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows, edge_indptr,
                                   edge_indices, key, sample, d, alpha, match[lane], matched[lane])
                if kept == 0:
                    alive[lane] = False
                    continue
                c = edge_indices[best]
                if refined or extends(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows, edge_indptr,
                                      edge_indices, d, c, match[lane], matched[lane]):
                    match[lane, d] = c
                    matched[lane, d] = cand_vertices[cand_offsets[d] + c]
                    weight[lane] *= np.float64(kept)
                else:
                    alive[lane] = False
            live = 0
            parent = -1  # the lowest live lane
            for lane in range(LANES - 1, -1, -1):
                if alive[lane]:
                    live += 1
                    parent = lane
            if live == 0:
                break
            if inherit and d < k - 1 and live < LANES:
                weight[parent] /= np.float64(LANES - live + 1)
                for lane in range(LANES):
                    if not alive[lane]:
                        match[lane, :d + 1] = match[parent, :d + 1]
                        matched[lane, :d + 1] = matched[parent, :d + 1]
                        weight[lane] = weight[parent]
                        alive[lane] = True
        total = 0.0
        valid = 0
        for lane in range(LANES):
            if alive[lane]:  # in lane order, as the CUDA kernel adds (a dead lane's 0 changes no sum)
                total += weight[lane]
                valid += 1
        group_sum[g] = total
        group_valid[g] = valid


ESTIMATE = Kernel("count.cu", "gp_count_estimate", twin=_estimate_cpu, items="groups", lanes=LANES,
                  defines={"GP_COUNT_LANES": LANES, "GP_COUNT_MAX_QUERY": MAX_QUERY_VERTICES,
                           "GP_COUNT_STREAM": STREAM}, args=(
    Arg("cand_offsets", "i64[k+1]"), Arg("cand_vertices", "i64[]"), Arg("back_offsets", "i64[k+1]"),
    Arg("back_pos", "i32[]"), Arg("back_rows", "i64[]"), Arg("edge_indptr", "i64[]"), Arg("edge_indices", "i32[]"),
    Arg("k", "i32", note="query vertices"), Arg("key", "u64"), Arg("alpha", "f64", note="0 WanderJoin, 1 Alley"),
    Arg("inherit", "i32"), Arg("first_group", "i64"), Arg("groups", "i64"),
    Arg("group_sum", "f64[groups]", out=True), Arg("group_valid", "i32[groups]", out=True)))
