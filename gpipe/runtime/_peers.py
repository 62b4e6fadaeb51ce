"""What a worker asks of its peers while a run lasts: partitions' CSR arrays, out-neighbor lists of vertices
they hold, and calls on their stores; and what it answers them (the ``gpipe_partition``, ``gpipe_neighbors`` and
``gpipe_call`` handlers' other ends)."""

from __future__ import annotations

import asyncio

import numpy as np
from distributed.protocol import to_serialize
from distributed.utils import sync

from ..backend import device_of, to_host, unique, xp
from ._wire import pack, unpack


class Peers:
    """One worker's store (``store``: its worker, device and partitions) as it reaches the others."""

    def __init__(self, store):
        self._store = store

    def call(self, peer: str, function, *args):
        """``function(*args)`` run on ``peer``'s store (this worker's own, without a message), its result here: a
        family's worker-to-worker exchange of what its runs hold (e.g. mining's table chunks)."""
        if peer == self._store.worker_address:
            return function(*args)
        return sync(self._store.worker.loop, self.call_async, peer, function, args)

    async def call_async(self, peer: str, function, args: tuple):
        return unpack(await self._store.worker.rpc(peer).gpipe_call(call=pack((function, args, {}))))

    async def partition_handler(self, graph_id: str, part: int):
        """``gpipe_partition``: a peer asks for the CSR arrays of a partition held here."""
        p = self._store.partitions.get(graph_id, part)
        return to_serialize({"indptr": to_host(p.indptr), "indices": to_host(p.indices),
                             "weights": None if p.weights is None else to_host(p.weights)})

    def fetch_partitions(self, graph_id: str, placement: list[str]) -> list[dict]:
        """Every partition's CSR arrays (host copies of remote ones, this worker's own as they are), in order."""
        here, partitions = self._store.worker_address, self._store.partitions
        local = {p: partitions.get(graph_id, p) for p, w in enumerate(placement) if w == here}
        remote = {p: w for p, w in enumerate(placement) if w != here}
        fetched = (dict(zip(remote, sync(self._store.worker.loop, self._fetch_partitions, graph_id, remote),
                            strict=True))
                   if remote else {})
        return [vars(local[p]) if p in local else fetched[p] for p in range(len(placement))]

    async def _fetch_partitions(self, graph_id: str, remote: dict[int, str]) -> list[dict]:
        worker = self._store.worker
        return await asyncio.gather(*(worker.rpc(w).gpipe_partition(graph_id=graph_id, part=p)
                                      for p, w in remote.items()))

    def neighbor_lists(self, graph_id: str, placement: list[str], bounds: np.ndarray, vertices) -> tuple:
        """The out-neighbors of ``vertices`` (sorted, unique, of any partitions): a CSR ``(indptr, indices)`` on this
        worker's device, read from the partitions here and fetched from the workers holding the others."""
        vertices = to_host(vertices)
        owner = np.searchsorted(bounds, vertices, side="right") - 1
        wanted = {int(p): vertices[owner == p] for p in unique(np, owner)}
        remote = {p: v for p, v in wanted.items() if placement[p] != self._store.worker_address}
        fetched = dict(zip(remote, sync(self._store.worker.loop, self._fetch_neighbors, graph_id, placement, remote),
                           strict=True)
                       if remote else ())
        rows = [fetched[p] if p in remote else rows_of(self._store.partitions.as_held(graph_id, p), v)
                for p, v in wanted.items()]
        x = xp(self._store.device)
        indptr = x.zeros(vertices.shape[0] + 1, x.int64)
        x.cumsum(x.concatenate([x.asarray(length) for length, _ in rows]), out=indptr[1:])
        return indptr, x.concatenate([x.asarray(indices) for _, indices in rows])

    async def _fetch_neighbors(self, graph_id: str, placement: list[str], remote: dict[int, np.ndarray]) -> list:
        worker = self._store.worker
        return await asyncio.gather(*(worker.rpc(placement[p]).gpipe_neighbors(graph_id=graph_id, part=p,
                                                                               vertices=to_serialize(v))
                                      for p, v in remote.items()))

    async def neighbors_handler(self, graph_id: str, part: int, vertices: np.ndarray):
        """``gpipe_neighbors``: a peer asks for the out-neighbor lists of vertices of a partition held here."""
        def read():
            return tuple(to_host(a) for a in rows_of(self._store.partitions.as_held(graph_id, part), vertices))

        return to_serialize(await asyncio.get_running_loop().run_in_executor(None, read))


def rows_of(p, vertices: np.ndarray) -> tuple:
    """The out-degrees and the concatenated out-neighbors of ``vertices`` (of partition ``p``)."""
    if hasattr(p, "rows"):  # a dynamic graph's view lays its rows out in blocks of its own
        return p.rows(vertices)
    x = xp(device_of(p.indptr))
    rows = p.indptr.shape[0] - 1
    local = x.minimum(x.asarray(vertices - p.lo), rows)
    start = p.indptr[local]
    length = p.indptr[x.minimum(local + 1, rows)] - start
    ends = x.cumsum(length)
    edge = x.arange(int(ends[-1]))
    row = x.searchsorted(ends, edge, side="right")
    return length, p.indices[start[row] + edge - (ends[row] - length[row])]
