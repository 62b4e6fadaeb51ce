"""The graphs a walk is written over, the twins of ``kernels/walk_graphs.cuh``.

Each walk's body is written once, for a static partition (:data:`Csr`) and a
dynamic graph's snapshot (:data:`Space`, its sampling space) alike. What differs
between them is asked of the graph through the functions here: where a
vertex's edges are (:func:`start`, :func:`degree`), how one is drawn
(:func:`pick`), its head and weight (:func:`head`, :func:`weight`), where the
sorted lists are (:func:`sorted_of`) and how a node2vec trial lays out its draws
(:func:`trial_draws`). numba resolves each for the graph's type as it compiles
a walk, as the CUDA template does for ``GpCsr`` and ``GpSpace``: a body costs
no branch on the kind of graph.

Vertex ids are local (``v - lo``). A static partition's rows are sorted, its
weights per-vertex prefix sums ``cdf``; a snapshot's vertices past
``space_vertices`` are only named as destinations so far and have no edges,
its pool ``dst`` is in insertion order and ``adjacency`` holds the same rows
sorted.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba.extending import overload

from .. import _rng
from .._alias import draw
from .._search import pick_edge
from .._space_pick import PICK_DEFINES, pick_in_space

Csr = namedtuple("Csr", "indices cdf weighted indptr table")
# How a static partition's edge is picked (Csr.weighted; GpCsrEdges' `weighted`): uniformly, by inverse transform
# over ``cdf``, or through ``table``, the vertices' packed alias tables (gpipe/_alias.py: one word a draw).
PICK_UNIFORM, PICK_CDF, PICK_ALIAS = 0, 1, 2
NO_CDF, NO_TABLE = np.zeros(1, np.float64), np.zeros(1, np.uint64)  # a Csr's where it picks otherwise
Space = namedtuple("Space", "dst units frac weighted edge_start degree member_start members group_row group_count "
                            "group_kind group_bit group_start group_size alias_prob alias_other adjacency "
                            "space_vertices")

# The draws of one node2vec trial on a snapshot: 2**20, room for pick_in_space's (at most 2 TRIES + 3: its exact draw
# after TRIES tries in a group), and 2**12 trials before the draw index (32 bits) wraps (with tame p, q each is
# accepted with probability at least 1/16; otherwise the exact draw comes at _node2vec.TRIALS = 256).
TRIAL_DRAWS = 2**20
# A trial's draws, its candidate's first and its acceptance's (GpCsr's and GpSpace's TRIAL_DRAWS, CANDIDATE, ACCEPT).
_TRIALS = {Csr: (2, 0, 1), Space: (TRIAL_DRAWS, 1, 0)}
# what walk_graphs.cuh takes from the loader
DEFINES = {**PICK_DEFINES, "GP_TRIAL_DRAWS": f"{TRIAL_DRAWS}ULL", "GP_PICK_ALIAS": PICK_ALIAS}


def start(graph, v):
    """Where vertex ``v``'s edges start."""


def degree(graph, v):
    """How many edges vertex ``v`` has."""


def pick(graph, at, first, v, a, d):
    """The edge drawn from vertex ``v`` (edges ``a..a+d-1``, ``d > 0``) with the draws ``first..`` of a walker's
    step ``at = (key, stream, step)``: one (uniform, by inverse transform over ``cdf`` or through ``table``; -1 if
    every weight is 0),
    or by weight from the sampling space."""


def head(graph, e):
    """The vertex edge ``e`` leads to."""


def weight(graph, a, e):
    """The weight of edge ``e`` among its vertex's edges ``a..`` (1 unweighted)."""


def sorted_of(graph):
    """The array holding each vertex's neighbors sorted, at ``start(v)..start(v) + degree(v) - 1``."""


def trial_draws(graph):
    """A node2vec trial's draws ``(per trial, the candidate's first, the acceptance's)``."""


def _kind(graph):
    kind = getattr(graph, "instance_class", None)
    if kind not in (Csr, Space):
        raise TypeError(f"not a walk's graph: {graph}")
    return kind


@overload(start)
def _start(graph, v):
    if _kind(graph) is Csr:
        return lambda graph, v: graph.indptr[v]
    return lambda graph, v: graph.edge_start[v] if v < graph.space_vertices else np.int64(0)


@overload(degree)
def _degree(graph, v):
    if _kind(graph) is Csr:
        return lambda graph, v: graph.indptr[v + 1] - graph.indptr[v]
    return lambda graph, v: graph.degree[v] if v < graph.space_vertices else np.int64(0)


@overload(pick)
def _pick(graph, at, first, v, a, d):
    if _kind(graph) is Csr:
        def csr(graph, at, first, v, a, d):
            r = _rng.bits(at[0], at[1], at[2], first)
            if graph.weighted == PICK_ALIAS:
                j = draw(graph.table, a, d, _rng.unit(r))
                return a + j if j < d else np.int64(-1)
            return pick_edge(graph.cdf, graph.weighted, a, d, r)
        return csr

    def space(graph, at, first, v, a, d):
        key, stream, step = at
        if not graph.weighted:
            return a + _rng.below(_rng.bits(key, stream, step, first), d)
        g = graph
        return pick_in_space(g.edge_start, g.degree, g.units, g.frac, g.member_start, g.members, g.group_row,
                             g.group_count, g.group_kind, g.group_bit, g.group_start, g.group_size, g.alias_prob,
                             g.alias_other, key, stream, step, first, v)
    return space


@overload(head)
def _head(graph, e):
    if _kind(graph) is Csr:
        return lambda graph, e: np.int64(graph.indices[e])
    return lambda graph, e: graph.dst[e]


@overload(weight)
def _weight(graph, a, e):
    if _kind(graph) is Csr:
        def csr(graph, a, e):
            if not graph.weighted:
                return 1.0
            return graph.cdf[e] - graph.cdf[e - 1] if e > a else graph.cdf[e]
        return csr
    return lambda graph, a, e: np.float64(graph.units[e]) + graph.frac[e] if graph.weighted else 1.0


@overload(sorted_of)
def _sorted_of(graph):
    if _kind(graph) is Csr:
        return lambda graph: graph.indices
    return lambda graph: graph.adjacency


@overload(trial_draws)
def _trial_draws(graph):
    draws, candidate, accept = (np.int64(n) for n in _TRIALS[_kind(graph)])
    return lambda graph: (draws, candidate, accept)
