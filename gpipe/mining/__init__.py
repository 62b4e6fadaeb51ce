"""Pattern mining beyond device memory (GAMMA): embedding tables extended, filtered and compressed in chunks
held on the device, in host memory or on disk."""

from ._cliques import count_cliques, list_cliques
from ._fpm import FrequentPatterns, frequent_patterns
from ._grow import MiningResult
from ._match import match

__all__ = ["FrequentPatterns", "MiningResult", "count_cliques", "frequent_patterns", "list_cliques", "match"]
