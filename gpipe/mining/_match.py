"""Subgraph matching: every injective map of a small connected pattern into the graph (edge-preserving, or
induced), grown one pattern vertex at a time in an order chosen from the pattern's degrees."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import check_bool
from ..errors import GpipeValueError
from ._extend import extend_match
from ._grow import ColumnPlan, check_mined_graph, mine
from ._partitioned import Checks
from ._result import MiningResult

MAX_PATTERN_VERTICES = 16
MAX_AUTOMORPHISMS = 10_000  # a pattern with more (a star of 8 leaves has 40,320) is counted with no symmetry broken


@dataclass(frozen=True)
class MatchPlan(ColumnPlan):
    order: tuple  # pattern vertices (0..m-1) in matching order
    back: tuple  # per position: the earlier positions adjacent in the pattern
    apart: tuple  # per position: the earlier positions not adjacent (checked for induced matches)
    degree: tuple  # per position: its pattern degree, which a matched vertex must reach
    above: tuple = ()  # per position: the earlier positions whose vertices it must exceed (symmetry broken)
    automorphisms: int = 1  # the maps each copy found under those conditions stands for
    reads_ancestors = True  # a chunk extends by its embeddings' rows: every column is kept

    @property
    def columns(self) -> int:
        return len(self.order)

    @property
    def first_degree(self) -> int:
        return self.degree[0]

    def listed(self, rows: np.ndarray) -> np.ndarray:
        """Rows in matching order with their columns in the pattern's vertex order."""
        return rows[:, np.argsort(self.order)]

    def checks(self, column: int) -> Checks:
        """A partitioned graph's extension of ``column``: what the kernel tests, as :meth:`extend` passes it."""
        return Checks(self.back[column], self.apart[column], self.degree[column], False,
                      self.above[column] if self.above else ())

    @property
    def counted_columns(self) -> int:  # type: ignore[override]
        """A count's columns counted, not stored: the last, and the one before when the last pattern vertex is a
        leaf (one neighbor, not induced), whose matches are counted from its neighbor's list (2 from 3 columns)."""
        return 2 if self.columns >= 3 and len(self.back[-1]) == 1 and not self.apart[-1] else 1

    def extend(self, x, graph, table, chunk, capacity: int, timer, counting: bool = False):
        column = chunk.column + 1
        broken = {"above": self.above[column]} if self.above else {}
        if counting and column < self.columns - 1:  # the leaf's matches are counted with this column
            broken["leaf"] = (self.back[-1][0], self.above[-1] if self.above else ())
        yield from extend_match(x, graph, table.rows(x, chunk), back=self.back[column], apart=self.apart[column],
                                min_degree=self.degree[column], capacity=capacity, timer=timer, counting=counting,
                                **broken)


def match(g, pattern, induced: bool = False, *, embeddings: bool = False, device_budget=None,
          host_budget=None) -> MiningResult:
    """Count (and list) the matches of a small unlabeled pattern in an undirected graph.

    A match maps the pattern's vertices to distinct graph vertices so that
    every pattern edge is a graph edge (and, when ``induced``, every pattern
    non-edge a non-edge). The pattern is matched one vertex at a time, in an
    order starting at its highest-degree vertex and then taking the vertex
    with the most pattern neighbors already matched; each embedding extends
    by the neighbors of its least-degree matched pattern neighbor that pass
    the others' adjacency (and induced) tests, as in :func:`count_cliques`.
    Every map is counted: a subgraph shaped like the pattern is found once
    per automorphism of the pattern (as networkx's ``GraphMatcher`` finds it).
    Without ``embeddings`` the last pattern vertex's matches are counted as
    they are found (on a replicated graph, never stored; when it is a leaf of
    a non-induced pattern, from its neighbor's sorted list by binary search,
    so the vertex before it is counted, not stored, too), and one map of each
    copy is grown (symmetry breaking: conditions ``v_a < v_b`` on the
    pattern's vertices, one map of each coset of its automorphism group; up
    to 10,000 automorphisms), counted as ``stats['automorphisms']`` maps.

    Parameters
    ----------
    g : Graph
        An undirected graph, replicated on the workers (``mode="replicated"``)
        or partitioned (see :func:`count_cliques`); a multigraph is matched as
        the simple graph underneath (a match maps onto an edge once, however
        often it repeats; a self-loop matches no pattern edge).
    pattern : networkx.Graph or list of (u, v) pairs
        A connected undirected pattern of 2 to 16 vertices, without self-loops.
    induced : bool
        Match induced subgraphs (pattern non-edges must be graph non-edges).
    embeddings : bool
        Also list every match, a row each (kept on the workers).
    device_budget, host_budget : int or str, optional
        As for :func:`count_cliques`.

    Returns
    -------
    MiningResult
        ``count``; ``stats`` as for :func:`count_cliques`, with the
        ``matching_order``; with ``embeddings``, the matches, kept on the
        workers until asked for (``compute()`` or ``embeddings``,
        ``to_dask()``, ``to_parquet()``): one row per match, the graph
        vertices (original ids) matched to the pattern's vertices in their
        sorted order (``stats['pattern_vertices']``), the same rows for any
        number of workers; on a partitioned graph the same rows in another
        order (lexicographic in matching order), the same for any number of
        workers and partitions.

    Raises
    ------
    GpipeValueError
        A pattern that is not connected, too large, directed or has
        self-loops, or whose vertices are floats, booleans or of kinds that
        do not sort together (see :func:`check_pattern`); a directed graph; a
        bad budget.

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> edges = pd.DataFrame({"src": [0, 0, 1, 2], "dst": [1, 2, 2, 3]})  # a triangle and a tail
    >>> path = [("a", "b"), ("b", "c")]
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges, mode="replicated")
    ...     gpipe.mining.match(g, path).count, gpipe.mining.match(g, path, induced=True).count
    (10, 4)
    """
    g = check_mined_graph(g)
    induced = check_bool("induced", induced)
    embeddings = check_bool("embeddings", embeddings)
    nodes, edges = _pattern(pattern)
    plan = matching_plan(len(nodes), edges, induced, broken=not embeddings)
    result = mine(g, plan, embeddings, device_budget, host_budget)
    result.count *= plan.automorphisms
    result.stats.update(pattern_vertices=nodes, matching_order=[nodes[u] for u in plan.order], induced=induced,
                        automorphisms=plan.automorphisms)
    return result


def check_pattern(pattern) -> Any:
    """Check a pattern for :func:`match` without a graph: what ``match`` refuses of it, refused before any work.

    A command line checks its ``--pattern`` with it before it starts a cluster
    or reads the graph.

    Parameters
    ----------
    pattern : networkx.Graph or list of (u, v) pairs
        As for :func:`match`: a connected undirected pattern of 2 to 16
        vertices, without self-loops, its vertices integers or strings (or
        other values of one kind that sort).

    Returns
    -------
    networkx.Graph or list of (u, v) pairs
        ``pattern``, as it was given.

    Raises
    ------
    GpipeValueError
        Naming what is wrong with ``pattern``.

    Examples
    --------
    >>> import gpipe
    >>> gpipe.mining.check_pattern([(0, 1), (1, 2), (2, 0)])
    [(0, 1), (1, 2), (2, 0)]
    >>> gpipe.mining.check_pattern([(0, 0)])
    Traceback (most recent call last):
    ...
    gpipe.errors.GpipeValueError: 'pattern' must have no self-loops, got [(0, 0)]
    """
    nodes, edges = _pattern(pattern)
    matching_plan(len(nodes), edges, False)  # which refuses a pattern in pieces
    return pattern


def _pattern(pattern) -> tuple[list, list[tuple[int, int]]]:
    """The pattern's vertices (sorted) and its edges between their positions, checked."""
    if hasattr(pattern, "edges") and hasattr(pattern, "nodes"):
        if pattern.is_directed() or pattern.is_multigraph():
            raise GpipeValueError(f"'pattern' must be an undirected simple graph, got a {type(pattern).__name__}")
        nodes, pairs = pattern.nodes(), list(pattern.edges())
    else:
        try:
            pairs = [tuple(pair) for pair in pattern]
        except TypeError:
            raise GpipeValueError(f"'pattern' must be a networkx graph or a list of (u, v) edges, got "
                                  f"{type(pattern).__name__}") from None
        if any(len(pair) != 2 for pair in pairs):
            raise GpipeValueError(f"'pattern' must be a list of (u, v) edges, got {pattern!r}")
        nodes = dict.fromkeys(u for pair in pairs for u in pair)  # in order of appearance, for the messages
    nodes = _sorted_vertices(nodes)
    if any(u == v for u, v in pairs):
        raise GpipeValueError(f"'pattern' must have no self-loops, got {[p for p in pairs if p[0] == p[1]]}")
    if not 2 <= len(nodes) <= MAX_PATTERN_VERTICES:
        raise GpipeValueError(f"'pattern' must have 2 to {MAX_PATTERN_VERTICES} vertices, got {len(nodes)}")
    position = {u: i for i, u in enumerate(nodes)}
    return nodes, [(position[u], position[v]) for u, v in pairs]


def _sorted_vertices(nodes) -> list:
    """The pattern's vertices in sorted order, if they are of one kind that sorts; floats and booleans are
    refused, as they equal integers (1.0 and True are vertex 1) and NaN equals nothing."""
    odd = next((u for u in nodes if isinstance(u, (bool, np.bool_))
                or (isinstance(u, numbers.Number) and not isinstance(u, numbers.Integral))), None)
    if odd is not None:
        raise GpipeValueError(f"'pattern' vertices must be integers or strings (or other values that sort "
                              f"together), got {odd!r}")
    try:
        return sorted(nodes)
    except TypeError:
        kinds: dict = {}
        for u in nodes:  # a vertex of each kind, for the message
            kinds.setdefault(type(u), u)
        shown = sorted(kinds.values(), key=lambda u: type(u).__name__)[:2] if len(kinds) > 1 else list(nodes)[:2]
        raise GpipeValueError(f"'pattern' vertices must be of one kind that sorts (all integers or all strings), "
                              f"got {shown[0]!r} and {shown[1]!r}") from None


def matching_plan(m: int, edges: list[tuple[int, int]], induced: bool, broken: bool = False) -> MatchPlan:
    """The matching order (the highest degree first, then the most neighbors already matched, then the higher
    degree, then the lower position) and, per position, what a candidate is checked against; ``broken``: with
    the pattern's symmetries broken (:func:`symmetry_conditions`), each checked at the later of its positions."""
    adjacent: list[set] = [set() for _ in range(m)]
    for u, v in edges:
        adjacent[u].add(v)
        adjacent[v].add(u)
    order = [max(range(m), key=lambda u: (len(adjacent[u]), -u))]
    while len(order) < m:
        placed = set(order)
        best = max((u for u in range(m) if u not in placed),
                   key=lambda u: (len(adjacent[u] & placed), len(adjacent[u]), -u))
        if not adjacent[best] & placed:
            raise GpipeValueError(f"'pattern' must be connected, got vertices {sorted(placed)} (by position) apart "
                                  f"from the rest")
        order.append(best)
    back = tuple(tuple(j for j in range(i) if order[j] in adjacent[order[i]]) for i in range(m))
    apart = tuple(tuple(j for j in range(i) if order[j] not in adjacent[order[i]]) if induced else ()
                  for i in range(m))
    degree = tuple(len(adjacent[u]) for u in order)
    conditions, automorphisms = symmetry_conditions(adjacent, order) if broken else ([], 1)
    if not conditions:
        return MatchPlan(tuple(order), back, apart, degree)
    at = {u: i for i, u in enumerate(order)}
    above = tuple(tuple(at[a] for a, b in conditions if at[b] == i) for i in range(m))  # v_b > v_a, a earlier
    return MatchPlan(tuple(order), back, apart, degree, above, automorphisms)


def symmetry_conditions(adjacent: list[set], order: list[int]) -> tuple[list[tuple[int, int]], int]:
    """Conditions ``v_a < v_b`` (pairs ``(a, b)`` of pattern vertices, ``a`` before ``b`` in ``order``) that hold
    for exactly one map of each copy of the pattern, and its automorphisms' number (Grochow and Kellis): the
    earliest vertex of ``order`` that some automorphism of those left moves is put below the rest of its orbit
    (which comes later: its vertices are moved too), and only the automorphisms fixing it are left, until none
    moves a vertex. No conditions (and 1) past :data:`MAX_AUTOMORPHISMS` of them."""
    group = _automorphisms(adjacent)
    if group is None:
        return [], 1
    count, conditions = len(group), []
    for v in order:
        orbit = sorted({g[v] for g in group} - {v})
        conditions += [(v, u) for u in orbit]
        group = [g for g in group if g[v] == v]
    return conditions, count


def _automorphisms(adjacent: list[set]) -> list[tuple[int, ...]] | None:
    """Every automorphism of the pattern (a tuple: vertex -> image), by backtracking over images of equal degree
    that keep adjacency with the vertices mapped so far; None past :data:`MAX_AUTOMORPHISMS`."""
    m = len(adjacent)
    found, image = [], [-1] * m

    def place(v: int) -> bool:
        if v == m:
            found.append(tuple(image))
            return len(found) <= MAX_AUTOMORPHISMS
        for w in range(m):
            if w in image[:v] or len(adjacent[w]) != len(adjacent[v]):
                continue
            if all((image[u] in adjacent[w]) == (u in adjacent[v]) for u in range(v)):
                image[v] = w
                if not place(v + 1):
                    return False
        image[v] = -1
        return True

    return found if place(0) else None
