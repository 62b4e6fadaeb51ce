"""Subgraph counting: labeled queries, candidate graphs, exact counts and gSWORD's random-walk estimators."""

from ._candidates import CandidateGraph, candidates
from ._estimate import Estimate, PreparedQuery, estimate, prepare
from ._exact import Count, count_exact
from ._inputs import Query, read_graph
from ._rsv import CandidateTable

__all__ = ["CandidateGraph", "CandidateTable", "Count", "Estimate", "PreparedQuery", "Query", "candidates",
           "count_exact",
           "estimate", "prepare", "read_graph"]
