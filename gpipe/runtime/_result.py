"""The blocks of a walk-shaped run's output, and the id type of a result's original ids."""

from __future__ import annotations

import pandas as pd

from . import _advance
from ._store import output_limit_setting


def assemble_blocks(client, run_id: str, partitions: dict[int, str], num_walks: int, block_rows: int, width: int,
                     dtype) -> list:
    """Futures of a walk-shaped run's output blocks, ``(rows, width)`` arrays of dense ids padded with -1: one
    task per block of ``block_rows`` rows, spread over the workers that hold pieces, each taking its pieces from
    them (so the run's pieces go as the blocks are made)."""
    n_blocks = max(1, -(-num_walks // block_rows))
    workers = sorted(set(partitions.values()))
    layout = (block_rows, n_blocks, num_walks, width, dtype)
    limit = output_limit_setting()
    return [client.submit(_advance.assemble, run_id, partitions, layout, limit, part=b,
                          workers=[workers[b % len(workers)]],
                          allow_other_workers=False, pure=False, key=f"gpipe-assemble-{run_id}-{b}")
            for b in range(n_blocks)]


def id_dtype(id_map):
    """The dtype of an id column in original ids: that of a non-empty one, so that every block's is the same."""
    return None if id_map is None or id_map.size == 0 else pd.Series(id_map[:1]).dtype
