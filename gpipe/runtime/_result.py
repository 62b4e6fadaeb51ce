"""The blocks of a walk-shaped run's output, and the id type of a result's original ids."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import _advance
from ._spec import OutputBlocks
from ._store import output_limit_setting


def output_blocks(num_walks: int, width: int, block_rows: int, dtype) -> OutputBlocks:
    """``num_walks`` walks of ``width`` vertex ids of ``dtype``, cut into blocks of ``block_rows``."""
    return OutputBlocks(block_rows, max(1, -(-num_walks // block_rows)), np.dtype(dtype).name, num_walks, width)


def assemble_blocks(client, run_id: str, partitions: dict[int, str], blocks: OutputBlocks, gathered: bool) -> list:
    """Futures of a walk-shaped run's output blocks, ``(rows, width)`` arrays of dense ids padded with -1: one
    task per block, block ``b`` on the ``b % W``-th of the ``W`` workers holding pieces, each taking its pieces
    from them (so the run's pieces go as the blocks are made); where the run ``gathered`` them there
    (``run_supersteps``' ``blocks``), the first task on a worker makes all of its blocks at once."""
    workers = sorted(set(partitions.values()))
    limit = output_limit_setting()
    held = {w: p for p, w in partitions.items()}  # gathered: each worker's one partition, its blocks' pieces

    def call(rank: int) -> tuple:
        if gathered:
            return _advance.assemble_owned, run_id, held[workers[rank]], blocks, len(workers), rank, limit
        return _advance.assemble, run_id, partitions, blocks, limit

    return [client.submit(*call(b % len(workers)), part=b, workers=[workers[b % len(workers)]],
                          allow_other_workers=False, pure=False, key=f"gpipe-assemble-{run_id}-{b}")
            for b in range(blocks.count)]


def id_dtype(id_map):
    """The dtype of an id column in original ids: that of a non-empty one, so that every block's is the same."""
    return None if id_map is None or id_map.size == 0 else pd.Series(id_map[:1]).dtype
