"""The blocks of a walk-shaped run's output, and the id type of a result's original ids."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ... import config
from .. import _advance
from .._kept import block_key, kept_blocks
from .._spec import OutputBlocks


def output_blocks(num_walks: int, width: int, block_rows: int, dtype) -> OutputBlocks:
    """``num_walks`` walks of ``width`` vertex ids of ``dtype``, cut into blocks of ``block_rows``."""
    return OutputBlocks(block_rows, max(1, -(-num_walks // block_rows)), np.dtype(dtype).name, num_walks, width)


def assemble_blocks(client, run_id: str, partitions: dict[int, str], blocks: OutputBlocks, gathered: bool) -> list:
    """Futures of a walk-shaped run's output blocks, ``(rows, width)`` arrays of dense ids padded with -1, made
    and kept on the workers by direct calls (:func:`~._kept.kept_blocks`, no task's round trips): block ``b`` on
    the ``b % W``-th of the ``W`` workers holding pieces, each taking its pieces from them (so the run's pieces go
    as the blocks are made); where the run ``gathered`` them there (``run_supersteps``' ``blocks``), a worker
    makes all of its blocks at once."""
    workers = sorted(set(partitions.values()))
    limit = config.get("memory.output-limit")
    held = {w: p for p, w in partitions.items()}  # gathered: each worker's one partition, its blocks' pieces
    rank = {w: r for r, w in enumerate(workers)}
    keys = {block_key(run_id, b): (workers[b % len(workers)], b) for b in range(blocks.count)}
    made: tuple[Callable, Callable] = (
        (_advance.assemble_owned, lambda w: (run_id, held[w], blocks, len(workers), rank[w], limit)) if gathered
        else (_advance.assemble, lambda w: (run_id, partitions, blocks, limit)))
    futures = kept_blocks(client, keys, *made, partitions, "assembly")
    return [futures[key] for key in keys]


def id_dtype(id_map) -> np.dtype | None:
    """The dtype of an id column in original ids: that of a non-empty one, so that every block's is the same."""
    return None if id_map is None or id_map.size == 0 else pd.Series(id_map[:1]).dtype
