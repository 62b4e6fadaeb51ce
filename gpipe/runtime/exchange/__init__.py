"""What the ranks of a run send one another beside their walkers: sums across the ranks (``summing``) and the
out-neighbor lists lent with walkers (``LentLists``); the walker exchange itself is the superstep engine's."""

from .._collective import Summing, summing
from .._lent import LentLists

__all__ = ["LentLists", "Summing", "summing"]
