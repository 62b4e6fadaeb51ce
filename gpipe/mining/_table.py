"""The column-first embedding table (GAMMA Fig. 6) of one range of first vertices, in chunks on three tiers.

Each chunk holds a slice of one column: the vertex at that pattern position
of each embedding and the index of its parent (the embedding it extends) in
a chunk of the previous column. A chunk stays on the device while the
device budget allows, then goes to host memory, then past the host budget to
an ordinary ``.npy`` file in the spill folder, read back when it is extended
or listed. On a CPU worker the device is host memory too: the first two
tiers differ only by their budgets.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psutil

from ..backend import to_device, to_host

TIERS = ("device", "host", "disk")


@dataclass
class Stats:
    """What one worker's part of a run did: embeddings per column, peak bytes held per tier, bytes spilled off
    the device, bytes of embeddings and adjacency rows fetched from peers (a partitioned graph), seconds per
    primitive."""

    embeddings: list = field(default_factory=list)
    peak_bytes: dict = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    held_bytes: dict = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    spilled_bytes: int = 0
    exchanged_bytes: dict = field(default_factory=lambda: {"embeddings": 0, "adjacency": 0})
    seconds: dict = field(default_factory=dict)
    synchronize: Any = None  # the device's synchronize, so a primitive's seconds include its kernels

    @contextlib.contextmanager
    def timer(self, primitive: str):
        start = time.perf_counter()
        yield
        if self.synchronize is not None:
            self.synchronize()
        self.seconds[primitive] = self.seconds.get(primitive, 0.0) + time.perf_counter() - start

    def count(self, column: int, size: int) -> None:
        self.embeddings.extend([0] * (column + 1 - len(self.embeddings)))
        self.embeddings[column] += size

    def hold(self, tier: str, nbytes: int) -> None:
        self.held_bytes[tier] += nbytes
        self.peak_bytes[tier] = max(self.peak_bytes[tier], self.held_bytes[tier])

    def summary(self) -> dict:
        return {"embeddings": self.embeddings, "bytes": self.peak_bytes, "spilled_bytes": self.spilled_bytes,
                "exchanged_bytes": self.exchanged_bytes, "seconds": self.seconds}


def merged(summaries: list[dict]) -> dict:
    """The workers' summaries added up (bytes: the sum of each worker's peak)."""
    columns = max(len(s["embeddings"]) for s in summaries)
    return {"embeddings": [sum(s["embeddings"][c] for s in summaries if c < len(s["embeddings"]))
                           for c in range(columns)],
            "bytes": {t: sum(s["bytes"][t] for s in summaries) for t in TIERS},
            "spilled_bytes": sum(s["spilled_bytes"] for s in summaries),
            "exchanged_bytes": {k: sum(s["exchanged_bytes"][k] for s in summaries) for k in ("embeddings", "adjacency")},
            "seconds": {p: sum(s["seconds"].get(p, 0.0) for s in summaries)
                        for p in sorted({p for s in summaries for p in s["seconds"]})}}


def worker_budgets(device_budget: int | None, host_budget: int | None, device: str, x) -> tuple[int, int]:
    """On a worker: the table's device and host budgets in bytes, 'auto' (None) decided by this worker's memory."""
    memory = psutil.virtual_memory().available
    if device_budget is None:
        device_budget = x.cuda.Device().mem_info[0] // 2 if device == "gpu" else memory // 4
    return device_budget, memory // 2 if host_budget is None else host_budget


@dataclass
class Chunk:
    column: int
    parent_chunk: int  # in the previous column's chunks; -1 in the first column
    size: int
    nbytes: int
    tier: str
    arrays: tuple | None  # (vertex, parent or None) on the device or in host memory; None on disk
    paths: tuple | None = None  # the .npy files of a chunk on disk


class EmbeddingTable:
    """The chunks of each column of one table, placed by the budgets; ``folder`` takes what goes to disk."""

    def __init__(self, device: str, device_budget: int, host_budget: int, folder: str, stats: Stats):
        self.device, self.folder, self.stats = device, folder, stats
        self.budgets = {"device": device_budget, "host": host_budget, "disk": None}
        self.columns: list[list[Chunk]] = []
        self._files = 0  # chunks written to disk so far, which name them

    def add(self, column: int, parent_chunk: int, vertex, parent) -> None:
        nbytes = int(vertex.nbytes + (0 if parent is None else parent.nbytes))
        tier = next(t for t in TIERS if self.budgets[t] is None or self.stats.held_bytes[t] + nbytes <= self.budgets[t])
        while len(self.columns) <= column:
            self.columns.append([])
        chunk = Chunk(column, parent_chunk, int(vertex.shape[0]), nbytes, tier, None)
        with self.stats.timer("placement"):
            if tier == "device":
                chunk.arrays = (vertex, parent)
            elif tier == "host":
                chunk.arrays = (to_host(vertex), None if parent is None else to_host(parent))
            else:
                name = os.path.join(self.folder, f"column{column}-chunk{self._files}")
                self._files += 1
                chunk.paths = (f"{name}-vertex.npy", None if parent is None else f"{name}-parent.npy")
                for path, array in zip(chunk.paths, (vertex, parent), strict=True):
                    if path is not None:
                        np.save(path, to_host(array))
        self.columns[column].append(chunk)
        self.stats.hold(tier, nbytes)
        self.stats.spilled_bytes += nbytes * (tier != "device")
        self.stats.count(column, chunk.size)

    def arrays(self, chunk: Chunk) -> tuple:
        """A chunk's (vertex, parent) on the device, read back from host memory or disk when it was spilled."""
        with self.stats.timer("placement"):
            if chunk.tier == "disk":
                return tuple(None if p is None else to_device(np.load(p), self.device) for p in chunk.paths)
            return tuple(None if a is None else to_device(a, self.device) for a in chunk.arrays)

    def rows(self, x, chunk: Chunk, arrays: tuple | None = None):
        """A chunk's embeddings as rows of vertices, one per column up to its own: its parents followed up
        (``arrays``: the chunk's own, read already)."""
        vertex, index = self.arrays(chunk) if arrays is None else arrays
        columns = [vertex]
        above = chunk
        while above.column > 0:
            above = self.columns[above.column - 1][above.parent_chunk]
            vertex, parent = self.arrays(above)
            columns.append(vertex[index])
            index = None if parent is None else parent[index]
        return x.stack(columns[::-1], axis=1)

    def take(self, column: int) -> tuple | None:
        """The first chunk left in ``column``, (vertex, parent) on the device, let go here; None when none is left.
        """
        if len(self.columns) <= column or not self.columns[column]:
            return None
        chunk = self.columns[column].pop(0)
        arrays = self.arrays(chunk)
        self._free(chunk)
        return arrays

    def drop(self, column: int) -> None:
        """Free a column's chunks (its files too)."""
        for chunk in self.columns[column]:
            self._free(chunk)

    def _free(self, chunk: Chunk) -> None:
        if chunk.arrays is None and chunk.paths is None:  # dropped already
            return
        self.stats.hold(chunk.tier, -chunk.nbytes)
        for path in chunk.paths or ():
            if path is not None:
                os.remove(path)
        chunk.arrays = chunk.paths = None

    def close(self) -> None:
        for column in range(len(self.columns)):
            self.drop(column)
