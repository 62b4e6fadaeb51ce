"""A worker's run outputs: where they are kept (the device, or host memory past ``gpipe.memory.output-limit``), and
how they are taken, grouped and gathered into a result's blocks from the workers that hold them."""

from __future__ import annotations

import asyncio
import threading
from typing import cast

import numpy as np
from distributed.protocol import to_serialize
from distributed.utils import sync

from ..backend import can_allocate, to_host
from ._run import Spilled
from ._run import nbytes as size


class Outputs:
    """The outputs of the runs of one worker's store (``store``: its registry, device, worker and peers)."""

    def __init__(self, store, auto_limit: int | None):
        self._store = store
        self._auto_limit = auto_limit  # what gpipe.memory.output-limit 'auto' means here
        self.allotting = threading.Lock()  # held while a run sees whether its rows fit and makes them

    def limit(self, limit: int | str | None) -> int | None:
        """``gpipe.memory.output-limit`` here, in bytes: 'auto' is half of a GPU's memory, and no limit (None) on a
        CPU worker, whose outputs are in host memory already."""
        return self._auto_limit if limit == "auto" else cast(int | None, limit)

    def keep_block(self, block, limit: int | str | None):
        """An assembled output block as it is to be kept: on the device while this GPU's live arrays (the runs'
        outputs, the graphs, the blocks made so far) stay within ``limit`` (:meth:`limit`), else in host
        memory, which the blocks of a result too large for the devices then fill (R-MAT 24 with 10 walks per
        vertex: 54 GB of walks besides the graph on two 80 GB GPUs)."""
        return block if self.keeps_on_device(limit) else to_host(block)

    def keeps_on_device(self, limit: int | str | None) -> bool:
        """Whether a block assembled now stays where it was made: on a CPU worker, or on a GPU whose live arrays
        are within ``limit`` (:meth:`limit`)."""
        limit = self.limit(limit)
        if self._store.device == "cpu" or limit is None:
            return True
        import cupy

        return cupy.get_default_memory_pool().used_bytes() <= limit

    def blocks_module(self, piece_sets: list, limit: int | str | None, nbytes: int):
        """Where ``nbytes`` of blocks made from ``piece_sets`` go (numpy or cupy): on a GPU worker's device if they
        fit there and, once those pieces are gone, its live arrays stay within ``limit`` (:meth:`limit`); else
        in host memory, which the blocks of a result too large for the devices then fill."""
        limit = self.limit(limit)
        if self._store.device == "cpu":
            return np
        import cupy

        if not can_allocate(cupy, nbytes):
            return np
        if limit is None:
            return cupy
        pieces = sum(size(s) for s in piece_sets if not isinstance(s, Spilled))
        return cupy if cupy.get_default_memory_pool().used_bytes() - pieces + nbytes <= limit else np

    def rows_fit(self, nbytes: int, limit: int | str | None, more: int = 0) -> bool:
        """Whether ``nbytes`` of rows for a run's steps to write to fit now, and ``more`` bytes beside them for a
        while: on a GPU worker's device (the rows as :meth:`blocks_module` takes blocks, both in its free memory),
        on a CPU worker within ``limit`` (its outputs' 'device', simulated) or, without one, a quarter of its
        memory."""
        if self._store.device == "gpu":
            import cupy

            return self.blocks_module([], limit, nbytes) is not np and can_allocate(cupy, nbytes + more)
        limit = self.limit(limit)
        return nbytes + more <= (limit if limit is not None else self._store.memory()[0] // 4)

    def spill(self, limit: int | str) -> int:
        """Past ``limit`` bytes of every run's outputs on the device (:meth:`limit`), move the oldest to host
        memory; returns the bytes moved (call under the store's lock)."""
        limit = self.limit(limit)
        runs = self._store.runs.values()
        over = sum(run.held for run in runs) - limit if limit is not None else 0
        spilled = 0
        for run in runs:
            if spilled >= over:
                break
            spilled += run.spill(over - spilled)
        return spilled

    async def block_handler(self, run_id: str, part: int, block: int, block_rows: int, n_blocks: int, dtype: str):
        """``gpipe_block``: a peer asks for a partition's pieces of an output block held here."""
        loop = asyncio.get_running_loop()
        taken = await loop.run_in_executor(None, self.take_block, run_id, part, block, block_rows, n_blocks, dtype)
        return to_serialize(taken)

    def take_block(self, run_id: str, part: int, block: int, block_rows: int, n_blocks: int, dtype) -> list[dict]:
        """Partition ``part``'s pieces of output block ``block`` of a run (none if the run left none here)."""
        run = self._store.find(run_id)
        return [] if run is None else run.take_block(part, block, block_rows, n_blocks, dtype)

    def pieces(self, run_id: str, part: int) -> list:
        """What a run output on partition ``part`` so far, left here (none if the run left none here)."""
        run = self._store.find(run_id)
        return [] if run is None else run.pieces(part)

    def take_group(self, run_id: str, part: int, key, group, rows: bool = False) -> object:
        """Group ``key`` of what a run output on partition ``part`` (see ``Run.take_group``; from no pieces if the
        run left none here)."""
        run = self._store.find(run_id)
        if run is None:
            return (group([], None) if rows else group([]))[key]
        return run.take_group(part, key, group, rows)

    def gather_group(self, run_id: str, key, partitions: dict[int, str], group) -> list:
        """Every partition's group ``key`` of a run's outputs, in the order of ``partitions``: taken here, or
        taken by the worker holding them and fetched from it."""
        here, worker = self._store.worker_address, self._store.worker
        remote = {p: w for p, w in partitions.items() if w != here}
        fetched = dict(zip(remote, sync(worker.loop, self._fetch_groups, run_id, key, remote, group), strict=True)
                       if remote else ())
        return [fetched[p] if p in remote else self.take_group(run_id, p, key, group) for p in partitions]

    async def _fetch_groups(self, run_id: str, key, remote: dict[int, str], group) -> list:
        peers = self._store.peers
        return await asyncio.gather(*(peers.call_async(w, _take_group, (run_id, p, key, group))
                                      for p, w in remote.items()))

    def gather_block(self, run_id: str, block: int, partitions: dict[int, str], block_rows: int, n_blocks: int,
                     dtype) -> list[dict]:
        """Every partition's pieces of output block ``block``: taken here, or fetched from the worker holding them."""
        here, worker = self._store.worker_address, self._store.worker
        dtype = np.dtype(dtype).name
        local = [self.take_block(run_id, p, block, block_rows, n_blocks, dtype)
                 for p, w in partitions.items() if w == here]
        remote = {p: w for p, w in partitions.items() if w != here}
        fetched = (sync(worker.loop, self._fetch, run_id, block, remote, block_rows, n_blocks, dtype)
                   if remote else [])
        return [piece_set for per_part in local + fetched for piece_set in per_part]

    async def _fetch(self, run_id: str, block: int, remote: dict[int, str], block_rows: int, n_blocks: int,
                     dtype: str) -> list[dict]:
        worker = self._store.worker
        return await asyncio.gather(*(
            worker.rpc(w).gpipe_block(run_id=run_id, part=p, block=block, block_rows=block_rows,
                                      n_blocks=n_blocks, dtype=dtype)
            for p, w in remote.items()))


def _take_group(run_id: str, part: int, key, group) -> object:
    from ._store import store

    return store().outputs.take_group(run_id, part, key, group)
