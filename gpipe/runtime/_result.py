"""The blocks of a walk-shaped run's output, and the id type of a result's original ids."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import _advance
from ._spec import OutputBlocks
from ._store import output_limit_setting


def output_blocks(num_walks: int, block_rows: int, dtype) -> OutputBlocks:
    """How ``num_walks`` walks of vertex ids of ``dtype`` are cut into blocks of ``block_rows``."""
    return OutputBlocks(block_rows, max(1, -(-num_walks // block_rows)), np.dtype(dtype).name)


def assemble_blocks(client, run_id: str, partitions: dict[int, str], num_walks: int, blocks: OutputBlocks,
                    width: int, gathered: bool) -> list:
    """Futures of a walk-shaped run's output blocks, ``(rows, width)`` arrays of dense ids padded with -1: one
    task per block, block ``b`` on the ``b % W``-th of the ``W`` workers holding pieces, each taking its pieces
    from them (so the run's pieces go as the blocks are made), or, where the run ``gathered`` them there
    (``run_supersteps``' ``blocks``), from its own worker alone."""
    workers = sorted(set(partitions.values()))
    layout = (blocks.rows, blocks.count, num_walks, width, blocks.dtype)
    limit = output_limit_setting()
    futures = []
    for b in range(blocks.count):
        worker = workers[b % len(workers)]
        held = {p: w for p, w in partitions.items() if w == worker} if gathered else partitions
        futures.append(client.submit(_advance.assemble, run_id, held, layout, limit, part=b, workers=[worker],
                                     allow_other_workers=False, pure=False, key=f"gpipe-assemble-{run_id}-{b}"))
    return futures


def id_dtype(id_map):
    """The dtype of an id column in original ids: that of a non-empty one, so that every block's is the same."""
    return None if id_map is None or id_map.size == 0 else pd.Series(id_map[:1]).dtype
