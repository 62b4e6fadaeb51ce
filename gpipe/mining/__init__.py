"""Pattern mining beyond device memory (GAMMA): embedding tables extended, filtered and compressed in chunks
held on the device, in host memory or on disk."""

from ._cliques import MiningResult, count_cliques, list_cliques

__all__ = ["MiningResult", "count_cliques", "list_cliques"]
