"""Graphs partitioned over the Dask workers: readers, writers, generators, renumbering."""

from . import generators
from ._convert import from_edge_index, from_networkx, from_scipy
from ._graph import Graph, check_graph, oriented
from ._io import from_edges, read_edges
from ._partition import Partition
from ._readers import FORMATS, edge_format

__all__ = ["FORMATS", "Graph", "Partition", "check_graph", "edge_format", "from_edge_index", "from_edges",
           "from_networkx", "from_scipy", "generators", "oriented", "read_edges"]
