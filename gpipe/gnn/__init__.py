"""GNN mini-batch sampling (PGSampler): fused multi-hop neighbor sampling into per-layer blocks, in the trainer's
process."""

from ._blocks import Block, Blocks
from ._loader import NeighborLoader
from ._sample import sample_blocks

__all__ = ["Block", "Blocks", "NeighborLoader", "sample_blocks"]
