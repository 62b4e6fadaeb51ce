"""k-cliques: each found once, as vertices in increasing id order, by GAMMA's vertex extension."""

from __future__ import annotations

from dataclasses import dataclass

from .._validate import check_int
from ..errors import GpipeValueError
from ._extend import extend_cliques
from ._grow import ColumnPlan, check_mined_graph, mine
from ._partitioned import Checks
from ._result import MiningResult


@dataclass(frozen=True)
class CliquePlan(ColumnPlan):
    columns: int  # k
    degree_ordered: bool = False  # a count: grown on the degree-ordered orientation (each clique once all the same)
    reads_ancestors = False  # a chunk extends by its own column: the one before can go once it is extended

    @property
    def first_degree(self) -> int:
        return self.columns - 1

    def checks(self, column: int) -> Checks:
        """A partitioned graph's extension: adjacent to every earlier vertex, after the last."""
        return Checks(tuple(range(column)), (), 0, True)

    def extend(self, x, graph, table, chunk, capacity: int, timer, counting: bool = False):
        vertex, parent = table.arrays(chunk)
        yield from extend_cliques(x, graph, vertex, parent, capacity, timer, counting)


def count_cliques(g, k: int, *, device_budget=None, host_budget=None) -> MiningResult:
    """Count the k-cliques of an undirected graph (GAMMA's vertex extension of embedding tables).

    Each clique is found once, as vertices in increasing id order: the table
    of a range of first vertices is extended column by column, each
    embedding by the neighbors of its last vertex among its later siblings
    (the candidates its prefix already narrowed down). The first vertices are
    cut into ``gpipe.mining.ranges`` fixed ranges of similar work, spread over
    the workers, so the count does not depend on how many there are. On a
    partitioned graph the table grows level by level instead, each embedding
    extended on the worker of the partition owning its least-degree vertex,
    which tests the candidates against the rows of the others, fetched from
    their partitions. Table chunks beyond ``device_budget`` go to host memory,
    and beyond ``host_budget`` to files on the worker's disk. On a replicated
    graph the last column is counted as it is extended, never stored: the
    table holds k - 1 columns at most; and a count runs on the graph
    renumbered by (degree, id), each edge kept from its lower end only, so
    that a clique is grown from its least-degree vertex and a hub's row
    holds only the neighbors of higher degree (the count is the same).

    Parameters
    ----------
    g : Graph
        An undirected graph, replicated on the workers (``mode="replicated"``)
        or partitioned. A multigraph (``keep_duplicates=True``) is mined as
        the simple graph underneath: an edge repeated counts once, and
        self-loops are no part of any clique.
    k : int
        Clique size, at least 3 and at most the number of vertices.
    device_budget, host_budget : int or str, optional
        Bytes of the table each worker keeps on its device, then in host
        memory (``'2 GB'``); default ``gpipe.mining.device-budget`` and
        ``gpipe.mining.host-budget``.

    Returns
    -------
    MiningResult
        ``count`` and ``stats``: ``embeddings`` per column, peak ``bytes`` on
        device / host / disk and ``spilled_bytes`` (summed over the workers),
        ``primitive_seconds`` (filtering, extension, compression, placement,
        counting, listing; on a partitioned graph also exchange and adjacency),
        ``exchanged_bytes`` (embeddings and adjacency rows fetched from other
        workers) and the call's ``seconds``.

    Raises
    ------
    GpipeValueError
        ``k`` below 3 or above the number of vertices, a directed graph, or a
        bad budget.

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> edges = pd.DataFrame({"src": [0, 0, 0, 1, 1, 2], "dst": [1, 2, 3, 2, 3, 3]})  # K4
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges, mode="replicated")
    ...     [gpipe.mining.count_cliques(g, k).count for k in (3, 4)]
    [4, 1]
    """
    return _cliques(g, k, False, device_budget, host_budget)


def list_cliques(g, k: int, *, device_budget=None, host_budget=None) -> MiningResult:
    """List the k-cliques of an undirected graph: :func:`count_cliques`, with every clique.

    Parameters
    ----------
    g, k, device_budget, host_budget
        As for :func:`count_cliques`.

    Returns
    -------
    MiningResult
        ``count`` and ``stats`` as for :func:`count_cliques`; the cliques stay
        on the workers until asked for (``compute()`` or ``embeddings``,
        ``to_dask()``, ``to_parquet()``): one row per clique, its vertices
        (original ids) in increasing dense id, rows in lexicographic order of
        dense ids, the same for any number of workers and partitions.

    Raises
    ------
    GpipeValueError
        As for :func:`count_cliques`.

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> edges = pd.DataFrame({"src": [0, 0, 1, 2], "dst": [1, 2, 2, 3]})  # a triangle and a tail
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(edges, mode="replicated")
    ...     gpipe.mining.list_cliques(g, 3).embeddings.tolist()
    [[0, 1, 2]]
    """
    return _cliques(g, k, True, device_budget, host_budget)


def _cliques(g, k, listing: bool, device_budget, host_budget) -> MiningResult:
    g = check_mined_graph(g)
    k = check_int("k", k, minimum=3)
    if k > max(3, g.num_vertices):  # a table of k columns, a level each on a partitioned graph: none can fill
        raise GpipeValueError(f"'k' must be at most the number of vertices of 'g' ({g.num_vertices}), got {k}")
    result = mine(g, CliquePlan(k, degree_ordered=not listing), listing, device_budget, host_budget)
    result.stats["k"] = k
    return result
