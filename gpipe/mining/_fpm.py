"""Frequent pattern mining: edge-induced labeled patterns grown one edge at a time, each kept when its MNI support
reaches the threshold, the support decided by existence checks (GraMi's) rather than by listing embeddings.

A level's candidates are the frequent patterns of the level before, each
extended by one edge whose labels make a frequent one-edge pattern (a new
vertex, or an edge between two of its vertices), kept when every connected
pattern one edge smaller is frequent (MNI is anti-monotone). A candidate's
support is the least, over the orbits of its vertices, of the data vertices
some embedding maps that vertex to: one existence check per (orbit, data
vertex of its domain), on the workers (:mod:`._mni`), the orbits in rounds
from the smallest domain up, so a candidate stops at the first orbit that
leaves it below the threshold. A vertex's domain is the smallest of its
label's vertices and the vertices valid for it in a frequent pattern one edge
smaller: an embedding of the candidate holds one of that pattern. The work is
bounded by the patterns and the vertices, not by the embeddings, which around
a hub grow with the fourth power of its degree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from .._validate import check_int
from ..backend import cpu_kernel
from ..errors import GpipeValueError
from ..runtime.calls import holder_workers
from ._grow import check_mined_graph, write_parquet
from ._mni import Round, check, task_fields
from ._patterns import (
    MAX_EDGES,
    MAX_LABELS,
    MAX_VERTICES,
    _COUNT_SHIFT,
    canonical_forms,
    grown,
    label_of,
    pack,
    smaller,
    unpack,
)


@dataclass(frozen=True)
class FrequentPatterns:
    """What :func:`frequent_patterns` found: ``patterns`` (a pandas DataFrame, a row per frequent pattern) and
    ``stats``."""

    patterns: pd.DataFrame
    stats: dict

    def __len__(self) -> int:
        return len(self.patterns)

    def to_parquet(self, path) -> str:
        """Write ``patterns`` to one Parquet file (complete or not at all; labels and edges as lists); return
        ``path``."""
        return write_parquet(self.patterns.assign(labels=self.patterns["labels"].map(list),
                                                  edges=self.patterns["edges"].map(lambda e: [list(p) for p in e])),
                             path)

    def __repr__(self) -> str:
        return f"<gpipe.mining.FrequentPatterns: {len(self)} patterns in {self.stats['seconds']:.3f} s>"


def frequent_patterns(g, max_edges: int, min_support: int, labels=None) -> FrequentPatterns:
    """Find the frequent edge-induced labeled patterns of an undirected graph.

    Patterns are connected, of 1 to ``max_edges`` edges, with the labels of
    their vertices. A pattern's support is its MNI (minimum image-based
    support): the least, over its vertices, of the number of distinct graph
    vertices that vertex is mapped to by some embedding (an injective map of
    its vertices onto graph vertices of the same labels taking its edges onto
    edges). MNI never grows when a pattern does, so only frequent patterns grow
    further, one edge at a time. Supports are decided as GraMi decides them:
    an existence check per (pattern vertex, graph vertex) — a search that stops
    at its first embedding — on the workers' GPUs or CPU cores, never listing
    embeddings, whose number around a hub grows with a power of its degree. A
    frequent pattern's support is exact; the search for one that is not stops
    as soon as a vertex of it leaves it below ``min_support``. To count a
    pattern's embeddings, :func:`match` it.

    Parameters
    ----------
    g : Graph
        An undirected graph replicated on the workers (``mode="replicated"``):
        every check may search any vertex's neighbors. A multigraph is mined
        as the simple graph underneath: an edge repeated is one edge of a
        pattern; self-loops are none.
    max_edges : int
        The largest patterns' edge count, 1 to 4.
    min_support : int
        The least MNI support of a pattern reported (and extended), >= 1.
    labels : sequence or pandas.Series, optional
        Each vertex's non-negative integer label (below 2**63; floats are
        refused, not truncated), as :meth:`Graph.set_labels` takes them (at
        most 1024 distinct values); default ``g.labels``.

    Returns
    -------
    FrequentPatterns
        ``patterns``: a DataFrame, a row per frequent pattern ordered by size
        and code, with ``code`` (int64, the canonical code: the least packing
        of its labeled adjacency over every order of its vertices), ``size``
        (edges), ``labels`` (the label of each pattern vertex), ``edges``
        (pairs of pattern vertices) and ``support`` (MNI); ``stats``: per level
        the ``candidates`` checked, the existence ``checks`` made, the
        ``rounds`` (a call to the workers each), the ``frequent`` patterns
        found and the workers' ``check_seconds``; the call's ``seconds``,
        ``workers`` and ``device``.

    Raises
    ------
    GpipeValueError
        ``max_edges`` not in 1..4, ``min_support`` below 1, no labels or labels
        of the wrong length, type or count, a directed or partitioned graph.

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> edges = pd.DataFrame({"src": [0, 1, 2, 3], "dst": [1, 2, 3, 0]})  # a 4-cycle
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges, mode="replicated")
    ...     found = gpipe.mining.frequent_patterns(g, 2, 2, labels=[0, 1, 0, 1])
    >>> found.patterns[["size", "labels", "edges", "support"]].to_dict("records")
    [{'size': 1, 'labels': (0, 1), 'edges': ((0, 1),), 'support': 2}, \
{'size': 2, 'labels': (0, 1, 1), 'edges': ((0, 1), (0, 2)), 'support': 2}, \
{'size': 2, 'labels': (1, 0, 0), 'edges': ((0, 1), (0, 2)), 'support': 2}]
    """
    start = time.perf_counter()
    g = check_mined_graph(g, replicated="frequent_patterns")
    max_edges = check_int("max_edges", max_edges, minimum=1, maximum=MAX_EDGES)
    min_support = check_int("min_support", min_support, minimum=1)
    if labels is None and g.labels is None:
        raise GpipeValueError("'labels' must be given when 'g' has none (Graph.set_labels), got None")
    values = g.labels if labels is None else g.label_array(labels)
    names, ranks = np.unique(values, return_inverse=True)
    if names.size > MAX_LABELS:
        raise GpipeValueError(f"'labels' must take at most {MAX_LABELS} distinct values, got {names.size}")
    mining = _Mining(g, ranks.astype(np.int32).reshape(-1), min_support)
    found, levels = [], []
    candidates = mining.single_edges()
    for size in range(1, max_edges + 1):
        level, stats = mining.supports(candidates)
        levels.append(stats)
        found.append(level)
        if level.empty or size == max_edges:
            break
        candidates = mining.extensions(level)
    return FrequentPatterns(_readable(pd.concat(found, ignore_index=True), names),
                            _fpm_stats(levels, max_edges, min_support, g, time.perf_counter() - start))


@dataclass(frozen=True)
class _Candidates:
    """A level's candidate patterns (distinct canonical codes, ascending) and, per candidate, the positions
    standing for its orbits (``root``, -1 past the last) with the domain each is checked over (``domain``: an
    index into ``_Mining.lists``) and its size, the smallest domain first."""

    codes: np.ndarray  # int64 (C,)
    root: np.ndarray  # int64 (C, MAX_VERTICES)
    domain: np.ndarray  # int64 (C, MAX_VERTICES)
    size: np.ndarray  # int64 (C, MAX_VERTICES): past the orbits, the int64 maximum


class _Mining:
    """One call's state on the client: the vertices of each label, and the vertices valid for each orbit of the
    last level's frequent patterns (``code``, ascending; by position, at the orbit's least one), which are the
    next level's domains; and the label pairs of the frequent one-edge patterns."""

    def __init__(self, g, ranks: np.ndarray, min_support: int):
        self.g, self.ranks, self.min_support = g, ranks, min_support
        order = np.argsort(ranks, kind="stable")
        bounds = np.searchsorted(ranks[order], np.arange(MAX_LABELS + 1))
        ids = np.int32 if ranks.size <= np.iinfo(np.int32).max else np.int64  # what crosses to the workers
        self.lists = [order[lo:hi].astype(ids) for lo, hi in pairwise(bounds)]  # labels', then valid
        self.code = np.empty(0, np.int64)  # the last level's frequent patterns
        self.valid = np.empty((0, MAX_VERTICES), np.int64)  # their valid lists' indices in self.lists, -1 none
        self.pairs = np.empty((0, 2), np.int64)

    def single_edges(self) -> _Candidates:
        """Level 1: an edge between each two labels that each have ``min_support`` vertices."""
        enough = [a for a in range(MAX_LABELS) if self.lists[a].size >= self.min_support]
        return self._candidates([pack((a, b), frozenset({(0, 1)})) for i, a in enumerate(enough) for b in enough[i:]])

    def extensions(self, level: pd.DataFrame) -> _Candidates:
        """The next level's candidates: each of ``level``'s patterns extended by one frequent one-edge pattern,
        kept when each connected pattern one edge smaller is in ``level``."""
        codes = level.code.to_numpy(np.int64)
        if not self.pairs.size:  # level 1's patterns, the frequent one-edge ones
            a, b = (np.array([label_of(k, p) for k in codes.tolist()], np.int64) for p in (0, 1))
            self.pairs = np.concatenate([np.stack([a, b], 1), np.stack([b, a], 1)])
        return self._candidates(grown(codes, self.pairs))

    def _candidates(self, raw) -> _Candidates:
        """The distinct canonical patterns of the raw codes ``raw`` whose connected patterns one edge smaller are
        all frequent, each orbit's domain the smallest of its label's vertices and the vertices valid for a
        position of it in those smaller patterns (an embedding holds one of each)."""
        codes = np.unique(canonical_forms(np, np.asarray(raw, np.int64).reshape(-1))[0])
        _, orbits = canonical_forms(np, codes)
        subs, kept = smaller(codes)
        sub_codes, sub_orbits = np.full(subs.shape, -1, np.int64), np.full(kept.shape, -1, np.int64)
        there = subs >= 0
        sub_codes[there], sub_orbits[there] = canonical_forms(np, subs[there])
        sizes = np.array([a.size for a in self.lists], np.int64)
        ok = np.empty(codes.size, np.bool_)
        domain, size = np.empty((codes.size, MAX_VERTICES), np.int64), np.empty((codes.size, MAX_VERTICES), np.int64)
        _domains_cpu(codes, orbits, sub_codes, sub_orbits, kept, self.code, self.valid, sizes, ok, domain, size)
        order = np.argsort(size, axis=1, kind="stable")
        root = np.where(np.take_along_axis(size, order, 1) < _NONE, order, -1)
        return _Candidates(codes[ok], root[ok], np.take_along_axis(domain, order, 1)[ok],
                           np.take_along_axis(size, order, 1)[ok])

    def supports(self, c: _Candidates) -> tuple[pd.DataFrame, dict]:
        """The frequent ones of the candidates ``c`` (``code``, ``support``), in rounds of existence checks, an
        orbit of each surviving candidate a round, the one of smallest domain first; their valid vertices become
        the next level's domains."""
        started = time.perf_counter()
        alive = np.where(c.root >= 0, c.size >= self.min_support, True).all(axis=1)
        support = np.full(c.codes.size, _NONE, np.int64)
        valid = np.full((c.codes.size, MAX_VERTICES), -1, np.int64)
        lists: list = []
        checks, rounds, seconds = 0, 0, 0.0
        for r in range(MAX_VERTICES):
            tasks = np.flatnonzero(alive & (c.root[:, r] >= 0))
            if not tasks.size:
                break
            used, which = np.unique(c.domain[tasks, r], return_inverse=True)
            domains = np.concatenate([self.lists[d] for d in used])
            at = np.cumsum([0] + [self.lists[d].size for d in used])[:-1]
            start = np.concatenate([[0], np.cumsum(c.size[tasks, r])])
            round_ = Round(self.g.graph_id, task_fields(c.codes[tasks], c.root[tasks, r]), start, at[which],
                           domains, self.ranks)
            found, took = check(self.g, round_)
            checks, rounds, seconds = checks + found.size, rounds + 1, seconds + took
            images = np.add.reduceat(found, start[:-1], dtype=np.int64)
            alive[tasks[images < self.min_support]] = False  # type: ignore[index]
            support[tasks] = np.minimum(support[tasks], images)
            for t in np.flatnonzero(images >= self.min_support).tolist():
                first = at[which[t]]
                valid[tasks[t], c.root[tasks[t], r]] = MAX_LABELS + len(lists)  # its index in the next self.lists
                lists.append(domains[first:first + start[t + 1] - start[t]][found[start[t]:start[t + 1]]])
        self.lists = self.lists[:MAX_LABELS] + lists
        self.code, self.valid = c.codes[alive], valid[alive]
        level = pd.DataFrame({"code": self.code, "support": support[alive]})
        return level, {"candidates": int(c.codes.size), "checks": checks, "rounds": rounds,
                       "frequent": int(alive.sum()), "check_seconds": seconds,
                       "seconds": time.perf_counter() - started}


_NONE = np.iinfo(np.int64).max  # no domain: past a pattern's orbits


@cpu_kernel()
def _domains_cpu(codes, orbits, sub_codes, sub_orbits, kept, frequent, valid, sizes, ok, domain, size):
    """Per candidate whether its connected patterns one edge smaller (``sub_codes``, -1 none) are all
    ``frequent``, and for each position standing for an orbit the smallest domain: its label's vertices (list
    ``label``) or the vertices valid for a position of the orbit in a smaller pattern (list ``valid[f, orbit]``);
    ``size`` ``_NONE`` at the other positions."""
    for i in range(codes.shape[0]):
        n = codes[i] >> _COUNT_SHIFT
        ok[i] = True
        for p in range(MAX_VERTICES):
            domain[i, p], size[i, p] = -1, _NONE
        for p in range(n):
            label, o = label_of(codes[i], p), orbits[i, p]
            if sizes[label] < size[i, o]:
                domain[i, o], size[i, o] = label, sizes[label]
        for s in range(MAX_EDGES):
            if sub_codes[i, s] < 0:
                continue
            f = np.searchsorted(frequent, sub_codes[i, s])
            if f == frequent.shape[0] or frequent[f] != sub_codes[i, s]:
                ok[i] = False
                break
            for q in range(MAX_VERTICES):
                p = kept[i, s, q]
                if p < 0:
                    break
                d = valid[f, sub_orbits[i, s, q]]
                if sizes[d] < size[i, orbits[i, p]]:
                    domain[i, orbits[i, p]], size[i, orbits[i, p]] = d, sizes[d]


def _readable(patterns: pd.DataFrame, names: np.ndarray) -> pd.DataFrame:
    """Each pattern's size, labels and edges (pairs of its vertices in canonical order) beside its code."""
    forms = [unpack(int(code)) for code in patterns.code]
    out = pd.DataFrame({
        "code": patterns.code.to_numpy(np.int64),
        "size": np.array([len(edges) for _, edges in forms], np.int64),
        "labels": [tuple(int(names[r]) for r in ranks) for ranks, _ in forms],
        "edges": [tuple(sorted(edges)) for _, edges in forms],
        "support": patterns.support.to_numpy(np.int64)})
    return out.sort_values(["size", "code"], ignore_index=True)


def _fpm_stats(levels: list[dict], max_edges: int, min_support: int, g, seconds: float) -> dict:
    """The levels' stats in one: per level what was checked and found."""
    return {"max_edges": max_edges, "min_support": min_support,
            **{key: [s[key] for s in levels] for key in ("candidates", "checks", "rounds", "frequent",
                                                         "check_seconds")},
            "workers": len(holder_workers(g)), "device": g.device, "seconds": seconds}
