"""Graphs from what other libraries hold: a networkx graph, a SciPy sparse matrix, PyG's ``edge_index``. Each is
made an edge frame and built by :func:`from_edges`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._validate import (
    check_bool,
    check_edge_index,
    check_optional_int,
    check_per_edge,
    check_sparse_square,
    check_text,
)
from ..backend import as_host
from ..errors import DeviceUnavailableError, GpipeValueError
from ._graph import Graph
from ._io import _check_weights, from_edges

__all__ = ["from_edge_index", "from_networkx", "from_scipy"]


def from_networkx(G, weight: str | None = None, directed: bool | None = None, partitions: int | None = None, *,
                  mode: str | None = None, keep_self_loops: bool = False, keep_duplicates: bool = False,
                  vertex_order: str | None = None) -> Graph:
    """Build a graph from a networkx graph.

    Its nodes are the graph's ids, as :func:`from_edges` takes them: integers
    ``0..n-1`` are the vertex numbers; other integers, and strings, are
    numbered in sorted order, outputs giving the nodes back (``Graph.id_map``).
    Nodes without an edge are vertices where the nodes are ``0..n-1`` (as
    networkx's generators and ``convert_node_labels_to_integers`` number them);
    otherwise the graph has the nodes that have an edge.

    Parameters
    ----------
    G : networkx.Graph, DiGraph, MultiGraph or MultiDiGraph
        Nodes all integers or all strings. A multigraph's parallel edges are
        duplicates (merged unless ``keep_duplicates``).
    weight : str, optional
        The edge attribute holding the weights, as networkx's own ``weight``
        arguments name it (``'weight'``); an edge without it weighs 1, as in
        ``networkx.to_scipy_sparse_array``. Default None: unweighted.
    directed : bool, optional
        Default ``G.is_directed()``. False on a directed ``G`` makes each arc an
        edge both ways.
    partitions, mode, keep_self_loops, keep_duplicates, vertex_order
        As :func:`from_edges` takes them.

    Returns
    -------
    Graph
        ``G``'s edges, its nodes the ids.

    Raises
    ------
    GpipeValueError
        ``G`` is not a networkx graph, has no edge, or nodes neither all
        integers nor all strings (relabel them with
        ``networkx.convert_node_labels_to_integers``); ``weight`` names an
        attribute no edge has, or a weight is not one gpipe takes; another
        parameter is wrong.

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a")])
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_networkx(G)
    ...     g.directed, g.num_vertices, g.degrees().to_dict()
    (True, 3, {'a': 1, 'b': 1, 'c': 1})
    """
    if not (hasattr(G, "is_directed") and hasattr(G, "edges") and hasattr(G, "nodes")):
        raise GpipeValueError(f"'G' must be a networkx graph, got {type(G).__name__}")
    directed = G.is_directed() if directed is None else check_bool("directed", directed)
    if weight is not None:
        check_text("weight", weight)
    edges = list(G.edges(data=weight or False, default=None))
    if not edges:
        raise GpipeValueError(f"'G' must have at least one edge, got a {type(G).__name__} of "
                              f"{G.number_of_nodes()} nodes and none")
    nodes = list(G.nodes)
    kind = pd.api.types.infer_dtype(nodes, skipna=False)
    if kind not in ("integer", "string"):
        raise GpipeValueError(f"'G' nodes must be all integers or all strings, got {kind} nodes such as {nodes[0]!r}:"
                              " relabel them with networkx.convert_node_labels_to_integers(G)")
    frame = pd.DataFrame({"src": [e[0] for e in edges], "dst": [e[1] for e in edges]})
    if weight is not None:
        if all(e[2] is None for e in edges):
            raise GpipeValueError(f"'weight' must name an edge attribute of 'G', got {weight!r}, which no edge has")
        frame["weight"] = [1.0 if e[2] is None else e[2] for e in edges]
        _check_weights(frame["weight"], f"'G' edge attribute {weight!r}", unit="edge")
    numbered = kind == "integer" and min(nodes) == 0 and max(nodes) == len(nodes) - 1  # nodes 0..n-1: all kept
    return from_edges(frame, weight=None if weight is None else "weight", directed=directed, partitions=partitions,
                      mode=mode, keep_self_loops=keep_self_loops, keep_duplicates=keep_duplicates,
                      num_vertices=len(nodes) if numbered else None, vertex_order=vertex_order)


def from_scipy(matrix, weighted: bool = False, directed: bool = False, partitions: int | None = None, *,
               mode: str | None = None, keep_self_loops: bool = False, keep_duplicates: bool = False,
               vertex_order: str | None = None) -> Graph:
    """Build a graph from a SciPy sparse adjacency matrix: each stored entry ``(i, j)`` is an edge from vertex
    ``i`` (its row) to vertex ``j`` (its column).

    The graph has ``matrix.shape[0]`` vertices, numbered as the rows (those
    with no entry are isolated vertices). Explicit zeros are entries, hence
    edges: ``matrix.eliminate_zeros()`` drops them.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array (CSR, CSC, COO, ...)
        Square.
    weighted : bool
        Take the entries' values as weights (non-negative, float32's range, as
        :func:`from_edges` takes them). Default False: unweighted.
    directed : bool
        Default False, as every gpipe builder: each entry is an edge stored
        both ways, so a symmetric matrix gives the same graph either way.
        True keeps ``(i, j)`` an arc from ``i`` to ``j`` only.
    partitions, mode, keep_self_loops, keep_duplicates, vertex_order
        As :func:`from_edges` takes them. Duplicate entries (a COO matrix may
        hold ``(i, j)`` twice) merge unless ``keep_duplicates``.

    Returns
    -------
    Graph
        The matrix's entries as edges: row ``i``, column ``j`` the edge ``(i, j)``.

    Raises
    ------
    GpipeValueError
        ``matrix`` is not a sparse matrix, not square, holds no entry, or (with
        ``weighted``) a value gpipe does not take as a weight; another
        parameter is wrong.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> a = sp.csr_array(([1.0, 2.0, 0.5], ([0, 1, 2], [1, 2, 0])), shape=(4, 4))
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_scipy(a, weighted=True, directed=True)
    ...     g.num_vertices, g.num_edges, g.weighted, g.degrees().tolist()
    (4, 3, True, [1, 1, 1, 0])
    """
    check_sparse_square("matrix", matrix)
    weighted = check_bool("weighted", weighted)
    coo = matrix.tocoo()
    frame = pd.DataFrame({"src": as_host(coo.row).astype(np.int64), "dst": as_host(coo.col).astype(np.int64)})
    if weighted:
        frame["weight"] = as_host(coo.data)
        _check_weights(frame["weight"], "'matrix' values", unit="stored entry")
    return from_edges(frame, weight="weight" if weighted else None, directed=directed, partitions=partitions,
                      mode=mode, keep_self_loops=keep_self_loops, keep_duplicates=keep_duplicates,
                      num_vertices=int(matrix.shape[0]), vertex_order=vertex_order)


def from_edge_index(edge_index, num_vertices: int | None = None, weight=None, directed: bool = False,
                    partitions: int | None = None, *, mode: str | None = None, keep_self_loops: bool = False,
                    keep_duplicates: bool = False, vertex_order: str | None = None) -> Graph:
    """Build a graph from PyG's ``edge_index``: a 2 x E array whose column ``k`` is an edge from vertex
    ``edge_index[0, k]`` to ``edge_index[1, k]``.

    The ids are the vertex numbers (a feature matrix's rows), never renumbered:
    the graph has ``num_vertices`` vertices, those without an edge isolated.

    Parameters
    ----------
    edge_index : array of shape (2, E)
        Non-negative integer ids: a NumPy or CuPy array, a torch tensor (on the
        CPU or a GPU; read through DLPack, so torch is never imported), or a
        nested list.
    num_vertices : int, optional
        PyG's ``num_nodes``. Default: the largest id + 1.
    weight : array of shape (E,), optional
        One non-negative weight per edge (PyG's ``edge_weight``), of any kind
        ``edge_index`` may be. Default None: unweighted.
    directed : bool
        Default False, as every gpipe builder: each column is an edge stored
        both ways (a PyG graph made undirected holds both already, merged as
        duplicates). True keeps each column an arc from row 0 to row 1, as PyG
        stores it.
    partitions, mode, keep_self_loops, keep_duplicates, vertex_order
        As :func:`from_edges` takes them.

    Returns
    -------
    Graph
        Each column an edge, from its row 0 to its row 1.

    Raises
    ------
    GpipeValueError
        ``edge_index`` is not a 2 x E array of non-negative integers with at
        least one edge, ``num_vertices`` is not above its largest id, or
        ``weight`` is not one weight gpipe takes per edge; another parameter
        is wrong.

    Examples
    --------
    >>> edge_index = np.array([[0, 1, 1, 2], [1, 0, 2, 1]])
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edge_index(edge_index, num_vertices=4, directed=True)
    ...     g.num_vertices, g.num_edges, g.degrees().tolist()
    (4, 4, [1, 2, 1, 0])
    """
    ids = check_edge_index("edge_index", _host("edge_index", edge_index))
    num_vertices = check_optional_int("num_vertices", num_vertices, minimum=1)
    frame = pd.DataFrame({"src": ids[0], "dst": ids[1]})
    if weight is not None:
        frame["weight"] = check_per_edge("weight", _host("weight", weight), ids.shape[1])
        _check_weights(frame["weight"], "'weight'", unit="edge")
    return from_edges(frame, weight=None if weight is None else "weight", directed=directed, partitions=partitions,
                      mode=mode, renumber=False, keep_self_loops=keep_self_loops, keep_duplicates=keep_duplicates,
                      num_vertices=num_vertices, vertex_order=vertex_order)


def _host(name: str, value) -> np.ndarray:
    """``value`` on the host (:func:`gpipe.backend.as_host`); one DLPack cannot export is refused by ``name``."""
    try:
        return as_host(value)
    except DeviceUnavailableError as exc:  # on a GPU, with no cupy here to read it
        raise GpipeValueError(f"'{name}' must be on the host where this process has no GPU to read it from: pass "
                              f"{name}.cpu() ({exc})") from None
    except (TypeError, ValueError, BufferError, RuntimeError) as exc:  # what DLPack's producers raise
        raise GpipeValueError(f"'{name}' must be an array NumPy, CuPy or DLPack can read, got "
                              f"{type(value).__name__}: {exc}") from None
