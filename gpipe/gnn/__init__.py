"""GNN mini-batch sampling (PGSampler): fused multi-hop neighbor sampling into per-layer blocks, in the trainer's
process, or on every worker for data-parallel training (:func:`run_on_workers`); :mod:`.pyg` and :mod:`.dgl` take
those libraries' argument names for the same loader."""

from . import dgl, pyg
from ._blocks import Block, Blocks
from ._loader import NeighborLoader
from ._sample import sample_blocks
from ._workers import run_on_workers

__all__ = ["Block", "Blocks", "NeighborLoader", "dgl", "pyg", "run_on_workers", "sample_blocks"]
