"""GNN mini-batch sampling (PGSampler): fused multi-hop neighbor sampling into per-layer blocks, in the trainer's
process, or on every worker for data-parallel training (:func:`run_on_workers`); :mod:`.pyg` and :mod:`.dgl` take
those libraries' argument names for the same loader.

The loader is a ``torch.utils.data`` dataset where torch is installed, so the names built on it are imported on
first use: ``import gpipe`` does not import torch (2 s and 180 MB more in every process, Dask's workers included).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._blocks import Block, Blocks
from ._sample import sample_blocks

if TYPE_CHECKING:
    from . import dgl, pyg
    from ._loader import NeighborLoader
    from ._workers import run_on_workers

__all__ = ["Block", "Blocks", "NeighborLoader", "dgl", "pyg", "run_on_workers", "sample_blocks"]

_MODULES = ("dgl", "pyg")
_NAMES = {"NeighborLoader": "._loader", "run_on_workers": "._workers"}  # name -> the module defining it


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)  # which makes it this package's attribute
    if name in _NAMES:
        value = globals()[name] = getattr(importlib.import_module(_NAMES[name], __name__), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
