"""Out-neighbor lists that walkers take along when they leave a worker (``StepSpec.lends``).

A node2vec walker at v coming from t reads t's out-neighbors at every
proposal; when t lies on another worker, its step borrowed t's list from
there mid-superstep, through a Dask message (``neighbor_lists``). Instead, at
the end of each superstep, every rank sends each peer the lists of the
vertices in the ``lends`` field of the walkers going there that it holds and
has not sent that peer before in the run, in a round of its own on the run's
exchange transport (NCCL between GPU workers), numbered ``-(superstep + 1)``
so that it never meets a superstep's own. A round's header is two int64 words
per rank: the vertices and the neighbors sent to it. A payload holds the
vertex ids (int64), their list lengths (int64) and the neighbors (the graph's
id dtype), each array starting on an ``ALIGN``-byte offset. Arrived lists wait
in the run's :class:`LentLists` state until its step keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..backend import to_host, unique, xp
from ..errors import GpipeError
from ._packing import aligned, packed, viewed
from ._peers import rows_of


@dataclass
class LentLists:
    """A walk run's state on a worker: the out-neighbor lists of other partitions its steps read, those peers sent
    with their walkers (``arrived``: ``(ids, indptr, indices)`` each, not yet taken by a step) and those kept, by
    graph id (``kept``: see ``walks/_borrowed.py``)."""

    arrived: list = field(default_factory=list)
    kept: dict = field(default_factory=dict)


def places(vertices: int, neighbors: int, dtype) -> tuple[list[tuple[str, np.dtype, int, int]], int]:
    """Where each array of a payload of ``vertices`` lists holding ``neighbors`` neighbors lies
    (``_packing.aligned``): ``[(name, dtype, offset, count)]``, and its bytes."""
    return aligned((("ids", np.int64, vertices), ("length", np.int64, vertices), ("indices", dtype, neighbors)))


class Lending:
    """One rank's lists lent in a run: those sent to each peer so far, and the rounds that send them."""

    def __init__(self, exchange, graph_id: str, name: str):
        self.exchange, self.graph_id, self.name = exchange, graph_id, name
        self._partitions = exchange.run.store.partitions
        self._mine = exchange.of_rank[exchange.rank]
        self.dtype = np.dtype(self._partitions.as_held(graph_id, self._mine[0]).indices.dtype)
        self._sent: dict[int, object] = {}  # peer -> the sorted ids lent it so far
        self.sent_bytes = 0

    def round(self, superstep: int, outbound: dict[int, list[dict]]) -> None:
        """Send each peer the lists its arriving walkers will read, and keep those the peers sent here."""
        ex = self.exchange
        ranks, me = len(ex.workers), ex.rank
        words = np.zeros(2 * ranks, np.int64)
        payloads = {}
        for r in range(ranks):
            if r == me:
                continue
            lists = self._lists_for(r, [w[self.name] for p in ex.of_rank[r] for w in outbound.get(p, ())])
            if lists is not None:
                words[r], words[ranks + r] = lists["ids"].shape[0], lists["indices"].shape[0]
                payloads[r] = packed(xp(ex.device), *places(words[r], words[ranks + r], self.dtype), lists)

        def expected(matrix: np.ndarray) -> dict[int, int]:
            return {r: places(int(row[me]), int(row[ranks + me]), self.dtype)[1]
                    for r, row in enumerate(matrix) if r != me and row[me]}

        ex.watch.start()
        matrix, received = ex.swap(-(superstep + 1), words, payloads, expected)
        self.sent_bytes += sum(int(p.shape[0]) for p in payloads.values())
        arrived = ex.run.state(LentLists).arrived
        for r in sorted(received):
            arrived.append(self._unpack(received.pop(r), int(matrix[r, me]), int(matrix[r, ranks + me]),
                                     ex.workers[r]))

    def _lists_for(self, rank: int, values: list) -> dict | None:
        """The lists of the vertices of ``values`` held here and not lent to ``rank`` yet, or None."""
        if not values:
            return None
        x = xp(self.exchange.device)
        ids = unique(x, x.concatenate(values).astype(x.int64, copy=False))
        bounds = x.asarray(self.exchange.bounds)
        owner = x.searchsorted(bounds, ids, side="right") - 1
        here = x.isin(owner, x.asarray(self._mine)) & (ids >= 0)
        ids = ids[here]
        owner = owner[here]
        if rank in self._sent:
            fresh = ~x.isin(ids, self._sent[rank])
            ids, owner = ids[fresh], owner[fresh]
        if not ids.shape[0]:
            return None
        rows = [rows_of(self._partitions.as_held(self.graph_id, p), to_host(ids[owner == p])) for p in self._mine
                if bool((owner == p).any())]  # where it is held (an out-of-memory partition's, staged or not)
        self._sent[rank] = ids if rank not in self._sent else x.sort(x.concatenate([self._sent[rank], ids]))
        return {"ids": ids, "length": x.concatenate([x.asarray(length) for length, _ in rows]).astype(x.int64),
                "indices": x.concatenate([x.asarray(indices) for _, indices in rows])}

    def _unpack(self, payload, vertices: int, neighbors: int, sender: str) -> tuple:
        """``(ids, indptr, indices)`` of a payload from ``sender`` said to hold ``vertices`` lists of ``neighbors``
        neighbors, each an array of its own (the payload goes)."""
        spots, size = places(vertices, neighbors, self.dtype)
        if payload.shape[0] != size:
            raise GpipeError(f"neighbor lists from worker {sender} arrived as {payload.shape[0]} bytes where their "
                             f"header said {size} ({vertices} lists of {neighbors} neighbors)")
        x = xp(self.exchange.device)
        arrays = {name: a.copy() for name, a in viewed(payload, spots).items()}
        indptr = x.zeros(vertices + 1, x.int64)
        x.cumsum(arrays["length"], out=indptr[1:])
        if int(indptr[-1]) != neighbors:
            raise GpipeError(f"neighbor lists from worker {sender} arrived damaged: their lengths add up to "
                             f"{int(indptr[-1])} neighbors, their header said {neighbors}")
        return arrays["ids"], indptr, arrays["indices"]
