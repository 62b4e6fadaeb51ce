"""Subgraph counting: labeled queries, candidate graphs, exact counts and gSWORD's random-walk estimators."""

from ._inputs import Query, read_graph

__all__ = ["Query", "read_graph"]
