"""Subgraph counting: labeled queries, candidate graphs, exact counts and gSWORD's random-walk estimators."""

from ._candidates import CandidateGraph, candidates
from ._estimate import Estimate, estimate
from ._exact import count_exact
from ._inputs import Query, read_graph
from ._rsv import CandidateTable

__all__ = ["CandidateGraph", "CandidateTable", "Estimate", "Query", "candidates", "count_exact", "estimate",
           "read_graph"]
