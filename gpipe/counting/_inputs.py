"""Labeled data graphs and query graphs: the ``t/v/e`` text format, networkx graphs, edge lists with labels."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validate import check_integers, check_text, is_ascii_digits
from ..errors import GpipeFileError, GpipeValueError
from ..graph import Graph, from_edges

MAX_QUERY_VERTICES = 32  # a sample's partial match lives in registers: one slot per query vertex (GP_COUNT_MAX_QUERY)


def _parse(path) -> tuple[np.ndarray, np.ndarray]:
    """The labels (by vertex id) and the edges ``(m, 2)`` of a ``t N M`` / ``v id label degree`` / ``e u v`` file.

    Ids are ``0..N-1``; each vertex is listed once; the degrees and ``M`` are
    checked against the edges, so a truncated file does not pass for a smaller graph.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise GpipeFileError(path, None, f"cannot be read: {exc.strerror}") from None
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:  # the text before the bad byte decodes: its lines say where it is
        line_no = len((data[:exc.start].decode() + "x").splitlines())
        raise GpipeFileError(path, line_no, f"is not UTF-8 text (byte {data[exc.start]:#04x})") from None
    header = [(i, line.split()) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not header or header[0][1][:1] != ["t"] or len(header[0][1]) != 3:
        raise GpipeFileError(path, header[0][0] if header else None, "must start with 't N M' (vertex and edge counts)")
    line_no, (_, n_text, m_text) = header[0]
    n, m = (_number(path, line_no, text, "a count") for text in (n_text, m_text))
    listed = sum(words[0] == "v" for _, words in header)
    if n > listed:  # checked before the per-vertex arrays are made: the file bounds what they take
        raise GpipeFileError(path, line_no, f"announces {n} vertices, but the file has {listed} 'v' lines")
    labels = np.full(n, -1, np.int64)
    degrees = np.zeros(n, np.int64)
    edges = []
    for line_no, words in header[1:]:
        if words[0] == "v" and len(words) >= 3:
            v = _number(path, line_no, words[1], "a vertex id")
            if v >= n:
                raise GpipeFileError(path, line_no, f"vertex {v} is not below the vertex count {n}")
            if labels[v] >= 0:
                raise GpipeFileError(path, line_no, f"vertex {v} is listed twice")
            labels[v] = _number(path, line_no, words[2], "a label")
            degrees[v] = _number(path, line_no, words[3], "a degree") if len(words) > 3 else -1
        elif words[0] == "e" and len(words) >= 3:
            u, v = (_number(path, line_no, w, "a vertex id") for w in words[1:3])
            if max(u, v) >= n or labels[u] < 0 or labels[v] < 0:
                raise GpipeFileError(path, line_no, f"edge ({u}, {v}) has an end not listed by a 'v' line before it")
            if u == v:
                raise GpipeFileError(path, line_no, f"edge ({u}, {v}) is a self-loop")
            edges.append((u, v))
        else:
            raise GpipeFileError(path, line_no, f"expected 'v id label degree' or 'e u v', got {' '.join(words)!r}")
    if (labels < 0).any():
        raise GpipeFileError(path, None, f"vertex {int(np.argmin(labels))} has no 'v' line ({n} are announced)")
    pairs = np.array(edges, np.int64).reshape(-1, 2)
    if len(pairs) != m:
        raise GpipeFileError(path, None, f"holds {len(pairs)} edges, its 't' line announces {m}")
    counted = np.bincount(pairs.ravel(), minlength=n)
    wrong = np.flatnonzero((degrees >= 0) & (degrees != counted))
    if wrong.size:
        v = int(wrong[0])
        raise GpipeFileError(path, None, f"vertex {v} has {counted[v]} edges, its 'v' line says degree {degrees[v]}")
    return labels, pairs


def _number(path, line_no: int, text: str, what: str) -> int:
    if not is_ascii_digits(text):
        raise GpipeFileError(path, line_no, f"expected {what} (a non-negative integer), got {text!r}")
    value = int(text)
    if value >= 2**63:
        raise GpipeFileError(path, line_no, f"expected {what} below 2**63, got {text}")
    return value


def read_graph(path, partitions: int | None = None, *, mode: str | None = None) -> Graph:
    """Read a labeled data graph in the ``t/v/e`` text format onto the workers.

    The format of G-CARE, gSWORD and the subgraph-matching studies: a line
    ``t N M`` (vertex and edge counts), one ``v id label degree`` line per
    vertex (ids ``0..N-1``), then one ``e u v`` line per undirected edge.

    Parameters
    ----------
    path : str or path-like
        The file.
    partitions : int, optional
        Number of partitions (see :func:`gpipe.read_edges`).
    mode : {'auto', 'partitioned', 'replicated'}, optional
        How the graph is held (see :func:`gpipe.read_edges`).

    Returns
    -------
    Graph
        Undirected, with the file's ids as vertex ids (isolated vertices kept)
        and its labels as :attr:`Graph.labels`.

    Raises
    ------
    GpipeFileError
        The file is malformed: the message names the file and the line.

    Examples
    --------
    >>> import gpipe, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "triangle.graph")
    >>> _ = open(path, "w").write("t 3 3\\nv 0 1 2\\nv 1 1 2\\nv 2 0 2\\ne 0 1\\ne 1 2\\ne 0 2\\n")
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.counting.read_graph(path)
    ...     g.num_vertices, g.num_edges, g.labels.tolist()
    (3, 3, [1, 1, 0])
    """
    labels, pairs = _parse(path)
    frame = pd.DataFrame({"src": pairs[:, 0], "dst": pairs[:, 1]})
    g = from_edges(frame, partitions=partitions, mode=mode, renumber=False, num_vertices=len(labels))
    g.set_labels(labels)
    return g


@dataclass(frozen=True, eq=False)
class Query:
    """A connected, labeled, undirected query graph of at most 32 vertices.

    ``labels[i]`` is vertex ``i``'s label; ``edges`` holds each edge once as
    ``(u, v)`` with ``u < v``, sorted. Build one with :meth:`from_file`,
    :meth:`from_networkx` or :meth:`from_edges`; the constructors check it.

    Examples
    --------
    >>> import gpipe
    >>> q = gpipe.counting.Query.from_edges([(0, 1), (1, 2)], labels=[5, 7, 5])
    >>> q.num_vertices, q.edges.tolist()
    (3, [[0, 1], [1, 2]])
    """

    labels: np.ndarray
    edges: np.ndarray

    @property
    def num_vertices(self) -> int:
        """The query's vertices ``0..n-1``, one a label."""
        return len(self.labels)

    @property
    def num_edges(self) -> int:
        """The query's edges, each once."""
        return len(self.edges)

    def neighbors(self) -> list[list[int]]:
        """Each vertex's neighbors, sorted."""
        out: list[list[int]] = [[] for _ in range(self.num_vertices)]
        for u, v in self.edges.tolist():
            out[u].append(v)
            out[v].append(u)
        return [sorted(n) for n in out]

    @classmethod
    def from_edges(cls, edges, labels, name: str = "query") -> Query:
        """A query from its edges (pairs of vertex ids ``0..n-1``) and each vertex's integer label.

        Raises
        ------
        GpipeValueError
            The query is empty, too large, disconnected, has a self-loop, an
            edge to a vertex without a label, edges that are not a sequence of
            integer pairs, or labels that are not non-negative integers below
            2**63; the message names ``name``.
        """
        labels = check_integers(f"{name} labels", labels)
        if labels.ndim != 1 or labels.size == 0:
            raise GpipeValueError(f"'{name}' must have at least one vertex, got labels of shape {labels.shape}")
        if labels.size > MAX_QUERY_VERTICES:
            raise GpipeValueError(f"'{name}' must have at most {MAX_QUERY_VERTICES} vertices, got {labels.size}")
        if not hasattr(edges, "__len__"):  # an iterator would be used up by a first look at it
            raise GpipeValueError(f"'{name} edges' must be a sequence of vertex pairs (a list, an array or a "
                                  f"DataFrame), got a {type(edges).__name__}")
        pairs = check_integers(f"{name} edges", edges)
        if pairs.size == 0:
            pairs = pairs.reshape(0, 2)
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise GpipeValueError(f"'{name}' edges must be pairs of vertex ids, got an array of shape {pairs.shape}")
        if pairs.size and pairs.max() >= labels.size:
            raise GpipeValueError(f"'{name}' edges must join vertices 0..{labels.size - 1}, got "
                                  f"{pairs[(pairs >= labels.size).any(1)][:3].tolist()}")
        loops = pairs[pairs[:, 0] == pairs[:, 1]]
        if loops.size:
            raise GpipeValueError(f"'{name}' must have no self-loops, got edge {loops[0].tolist()}")
        pairs = np.unique(np.sort(pairs, axis=1), axis=0)
        query = cls(labels, pairs)
        apart = query._unreached()
        if apart:
            raise GpipeValueError(f"'{name}' must be connected, got vertices {apart[:8]} unreachable from vertex 0")
        return query

    def _unreached(self) -> list[int]:
        neighbors = self.neighbors()
        seen, todo = {0}, [0]
        while todo:
            for w in neighbors[todo.pop()]:
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        return [v for v in range(self.num_vertices) if v not in seen]

    @classmethod
    def from_networkx(cls, graph, label: str = "label", name: str = "query") -> Query:
        """A query from an undirected networkx graph whose nodes carry an integer attribute ``label``.

        Nodes are numbered in ``graph.nodes`` order.

        Raises
        ------
        GpipeValueError
            ``graph`` is not an undirected simple graph (a ``networkx.Graph``),
            a node has no ``label``, or the query is not one :meth:`from_edges`
            takes; the message names ``name``.
        """
        check_text("label", label)
        if not hasattr(graph, "is_multigraph") or graph.is_directed() or graph.is_multigraph():
            raise GpipeValueError(f"'{name}' must be an undirected simple networkx graph (networkx.Graph), got a "
                                  f"{type(graph).__name__}: convert it with networkx.Graph(graph), which keeps one "
                                  "undirected edge per pair of nodes")
        nodes = list(graph.nodes)
        missing = [v for v in nodes if label not in graph.nodes[v]]
        if missing:
            raise GpipeValueError(f"'{name}' nodes must all have the attribute {label!r}; {missing[:5]} do not")
        index = {v: i for i, v in enumerate(nodes)}
        edges = [(index[u], index[v]) for u, v in graph.edges]
        return cls.from_edges(edges, [graph.nodes[v][label] for v in nodes], name)

    @classmethod
    def from_file(cls, path) -> Query:
        """A query in the ``t/v/e`` text format (see :func:`read_graph`); a bad query names the file."""
        labels, pairs = _parse(path)
        return cls.from_edges(pairs, labels, name=os.fspath(path))

    def check_against(self, g: Graph, name: str = "query") -> np.ndarray:
        """The data graph's labels, once this query is known to fit ``g``: undirected, no larger, with labels ``g``
        has."""
        if g.directed:  # the candidate graph follows both directions of undirected edges only: it would find nothing
            raise GpipeValueError("'g' must be an undirected graph to count subgraphs, got a directed one: build it "
                                  "with directed=False (gpipe.from_edges, gpipe.read_edges) or read it with "
                                  "gpipe.counting.read_graph")
        labels = g.labels
        if labels is None:
            raise GpipeValueError("'g' must have vertex labels (gpipe.counting.read_graph or Graph.set_labels), "
                                  "got a graph without")
        if self.num_vertices > g.num_vertices:
            raise GpipeValueError(f"'{name}' must have at most as many vertices as the data graph "
                                  f"({g.num_vertices}), got {self.num_vertices}")
        unknown = np.setdiff1d(self.labels, g.label_values)
        if unknown.size:
            raise GpipeValueError(f"'{name}' labels must occur in the data graph, got labels {unknown.tolist()[:8]} "
                                  f"that no data vertex has")
        return labels


def check_query(query) -> Query:
    if not isinstance(query, Query):
        raise GpipeValueError(f"'query' must be a gpipe.counting.Query (Query.from_file, from_networkx or "
                              f"from_edges), got {type(query).__name__}")
    return query
