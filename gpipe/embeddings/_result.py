"""Trained vertex vectors, kept in shards of rows on the workers that hold them until asked for."""

from __future__ import annotations

import bisect
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._files import VECTOR_FILES, atomic_file
from .._validate import check_bool, check_int, check_path
from ..backend import to_host
from ..errors import GpipeValueError
from ..runtime.calls import gather_pinned, submit
from ..runtime.results import HeldResult
from ..runtime.workers import worker_xp

if TYPE_CHECKING:
    import dask.array as da


class Embeddings(HeldResult):
    """One float32 vector per vertex, row ``i`` for dense vertex ``i``, held on the workers (their devices) in
    shards of consecutive rows: shard ``s`` holds rows ``bounds[s]`` to ``bounds[s + 1]`` on ``holders[s]`` (one
    shard, the whole table, where one worker trained it).

    ``compute()`` gives the ``(num_vertices, dim)`` array (``device=True``:
    on this process's GPU, written there from the workers'); ``ids`` the
    original id of each row. ``most_similar`` ranks by cosine on each shard's
    worker and merges their best here; ``to_parquet`` writes a folder of one
    file per shard (columns ``id``, ``v0`` .. ``v{dim-1}``) and
    ``to_word2vec`` word2vec's text format (gensim's
    ``KeyedVectors.load_word2vec_format`` reads it), each from those workers,
    complete or not at all. ``map_blocks(fn)`` runs ``fn(vectors)`` on each
    shard where it is. ``to_dask()`` gives them as a dask array of a chunk per
    shard, made there. No method gathers the table on one worker. ``stats``
    says how the training went.

    Examples
    --------
    >>> import gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     walks = gpipe.walks.deepwalk(gpipe.generators.rmat(6, seed=0), length=10, seed=1)
    ...     emb = gpipe.embeddings.word2vec(walks, dim=8, window=3, seed=1)
    ...     near = emb.most_similar(0, k=3)
    >>> emb
    <gpipe.embeddings.Embeddings: 64 vertices x 8 (fast, 1 worker)>
    >>> len(near), near[0][0] != 0
    (3, True)
    """

    def __init__(self, client, tables: list, holders: list[str], bounds: list[int], id_map, dim: int, stats: dict):
        # tables[s]: a future of the Table whose syn0 holds rows bounds[s]:bounds[s + 1], on holders[s]; the last
        # bound is the vertex count
        super().__init__(client, dict(enumerate(holders)), id_map, stats, (),
                         unit="table" if len(tables) == 1 else "shard")
        self._block_futures = list(tables)
        self._bounds = [int(b) for b in bounds]
        self.num_vertices, self.dim = self._bounds[-1], dim

    def __repr__(self) -> str:
        s, shards = self.stats, len(self._bounds) - 1
        return (f"<gpipe.embeddings.Embeddings: {self.num_vertices} vertices x {self.dim} ({s['mode']}, "
                f"{s['workers']} worker{'s' * (s['workers'] != 1)}{f', {shards} shards' * (shards > 1)})>")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.num_vertices, self.dim)

    @property
    def ids(self) -> np.ndarray:
        """The original id of each row (the graph's ids; ``0 .. num_vertices - 1`` where they are dense)."""
        return np.arange(self.num_vertices) if self._id_map is None else self._id_map

    def compute(self, device: bool = False) -> Any:
        """The vectors as a float32 ``(num_vertices, dim)`` NumPy array; with ``device=True`` a CuPy array on this
        process's GPU, each shard's rows written there from its worker's (``torch.from_dlpack`` takes it without a
        copy)."""
        if check_bool("device", device):
            return self._on_client_gpu("embeddings", lambda: ({"vectors": (self.shape, np.float32)}, self._bounds[:-1]),
                                       _as_vectors)["vectors"]
        shards = self._gather("embeddings", _vectors)
        return shards[0] if len(shards) == 1 else np.concatenate(shards)  # one shard: as it came, not copied

    def to_dask(self) -> da.Array:
        """The vectors as a dask array of a chunk per shard along the rows, made where they are held (in host
        memory)."""
        import dask.array as da

        futures = self._on_blocks(_vectors)
        return da.concatenate([da.from_delayed(future, (hi - lo, self.dim), dtype=np.float32)
                               for future, lo, hi in zip(futures, self._bounds[:-1], self._bounds[1:], strict=True)])

    def map_blocks(self, fn, *args, **kwargs) -> list:
        """Futures of ``fn(vectors, *args, **kwargs)``, one per shard in row order, each run on the worker holding
        the shard, ``vectors`` its rows' ``(rows, dim)`` array on that worker's device (``fn`` must not modify it);
        one future where one worker trained the table."""
        return self._map(_syn0, fn, args, kwargs)

    def most_similar(self, vertex, k: int = 10) -> list[tuple]:
        """The ``k`` vertices whose vectors have the largest cosine with ``vertex``'s (an original id), most
        similar first, ``vertex`` itself left out: a list of ``(id, cosine)``. Each shard ranks its rows where it
        is, given ``vertex``'s vector; their ``k`` best each are merged here."""
        k = check_int("k", k, minimum=1)
        row = self._row("vertex", vertex)
        home = bisect.bisect_right(self._bounds, row) - 1  # the shard holding the row (an empty one holds none)

        def in_shard(s: int) -> int:  # the row in shard s, -1 where another holds it
            return row - self._bounds[s] if s == home else -1

        query = self._gather("most similar", _row_vector, lambda s: (in_shard(s),))[home]
        ranked = self._gather("most similar", _nearest, lambda s: (query, in_shard(s), k))
        rows = np.concatenate([top + first for (top, _), first in zip(ranked, self._bounds[:-1], strict=True)])
        cosines = np.concatenate([c for _, c in ranked])
        best = np.argsort(-cosines, kind="stable")[:k]
        ids = self.ids
        return [(ids[i].item() if hasattr(ids[i], "item") else ids[i], float(c))
                for i, c in zip(rows[best], cosines[best], strict=True)]

    def _row(self, name: str, vertex) -> int:
        if self._id_map is None:
            if isinstance(vertex, (int, np.integer)) and not isinstance(vertex, bool) and \
                    0 <= vertex < self.num_vertices:
                return int(vertex)
        else:
            found = pd.Index(self._id_map).get_indexer([vertex])[0]
            if found >= 0:
                return int(found)
        raise GpipeValueError(f"'{name}' must be a vertex of the graph, got {vertex!r}")

    def to_parquet(self, path, overwrite: bool = False) -> str:
        """Write the vectors into folder ``path`` as one Parquet file per shard, ``vectors-000000.parquet`` onwards
        in row order: column ``id`` (original ids), then ``v0`` .. ``v{dim-1}`` (float32); ``pandas.read_parquet(path)``
        reads them back, rows in order. ``path`` must be a new or empty folder; ``overwrite=True`` also replaces one
        that holds only vectors gpipe wrote."""
        return self._write(path, overwrite, VECTOR_FILES, _write_parquet, lambda s: (s, *self._placed(s)))

    def to_word2vec(self, path) -> str:
        """Write the vectors in word2vec's text format: a line ``count dim``, then a line per vertex in row order,
        its id and its values separated by spaces (9 significant digits: a float32 reads back the same). Each shard
        appends its rows from its worker, one after another. A file at ``path`` is replaced once complete."""
        path = check_path("path", path)
        with atomic_file(path, "wb") as out:
            out.write(f"{self.num_vertices} {self.dim}\n".encode())
            out.flush()
            appends: list = []  # each shard's task takes the one before it's: the rows go in order
            for s, table in enumerate(self.persist()._blocks()):
                appends.append(submit(self._client, _append_text, table, *self._placed(s), out.name,
                                      appends[-1] if appends else None, workers=[self._held[s]]))
            gather_pinned(self._client, appends, self._held, "writing", self._unit)
        return path

    def _placed(self, shard: int) -> tuple[int, Any]:
        """The shard's first row and its rows' original ids (None for dense ids: made where they are written), sent
        to its worker alone (not the whole id map to every worker)."""
        first, end = self._bounds[shard], self._bounds[shard + 1]
        return first, None if self._id_map is None else self._id_map[first:end]


def _syn0(table):
    return table.syn0


def _vectors(table) -> np.ndarray:
    return to_host(table.syn0)


def _as_vectors(table) -> dict:
    return {"vectors": table.syn0}


def _row_vector(table, row: int) -> np.ndarray | None:
    """The shard's row ``row`` (None for -1: another shard holds the row asked for)."""
    return None if row < 0 else to_host(table.syn0[row])


def _nearest(table, query: np.ndarray, row: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The shard's ``k`` rows of the largest cosine with ``query`` (its row ``row`` left out, -1: none is the
    query), largest first, and their cosines."""
    x = worker_xp()
    vectors, query = table.syn0, x.asarray(query)
    norms = x.sqrt((vectors * vectors).sum(axis=1))
    cosines = vectors @ query / x.maximum(norms * x.sqrt((query * query).sum()), x.float32(1e-30))
    if row >= 0:
        cosines[row] = -x.inf
    top = x.argsort(-cosines)[:min(k, vectors.shape[0] - (row >= 0))]
    return to_host(top), to_host(cosines[top])


def _shard_ids(first: int, ids, rows: int):
    return np.arange(first, first + rows) if ids is None else ids


def _write_parquet(table, shard: int, first: int, ids, folder: str) -> str:
    vectors = to_host(table.syn0)
    columns = pa.table({"id": _shard_ids(first, ids, vectors.shape[0]),
                        **{f"v{d}": vectors[:, d] for d in range(vectors.shape[1])}})
    name = os.path.join(folder, f"vectors-{shard:06d}.parquet")
    # no dictionary: a trained vector's floats hardly repeat, and building one only to drop it halved the speed
    pq.write_table(columns, name, use_dictionary=False)
    return name


def _append_text(table, first: int, ids, name: str, after) -> int:
    """The shard's rows appended to the file ``name`` (``after``: the previous shard's append, done before this
    one)."""
    vectors = to_host(table.syn0)
    frame = pd.DataFrame(vectors)
    frame.insert(0, "id", _shard_ids(first, ids, vectors.shape[0]))
    with open(name, "r+") as out:  # not "a": a file the client removed (it gave up) is not made again
        out.seek(0, os.SEEK_END)
        frame.to_csv(out, sep=" ", header=False, index=False, float_format="%.9g")  # 9 digits: a float32 reads back
    return vectors.shape[0]
