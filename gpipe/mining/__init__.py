"""Pattern mining beyond device memory (GAMMA): embedding tables extended, filtered and compressed in chunks
held on the device, in host memory or on disk."""

from ._cliques import count_cliques, list_cliques
from ._fpm import FrequentPatterns, frequent_patterns
from ._match import check_pattern, match
from ._patterns import MAX_EDGES as FPM_MAX_EDGES  # the most edges of a pattern frequent_patterns mines
from ._result import MiningResult

__all__ = ["FPM_MAX_EDGES", "FrequentPatterns", "MiningResult", "check_pattern", "count_cliques", "frequent_patterns",
           "list_cliques", "match"]
