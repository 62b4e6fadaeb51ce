"""Trained vertex vectors, kept on the worker that holds the table until asked for."""

from __future__ import annotations

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
from ..runtime.results import HeldResult
from ..runtime.workers import worker_xp

if TYPE_CHECKING:
    import dask.array as da


class Embeddings(HeldResult):
    """One float32 vector per vertex, row ``i`` for dense vertex ``i``, held on a worker (its device) as one block.

    ``compute()`` gives the ``(num_vertices, dim)`` array (``device=True``:
    on this process's GPU, written there from the worker's); ``ids`` the
    original id of each row. ``most_similar`` ranks by cosine where the table
    is; ``to_parquet`` writes a folder of one file (columns ``id``, ``v0`` ..
    ``v{dim-1}``) and ``to_word2vec`` word2vec's text format (gensim's
    ``KeyedVectors.load_word2vec_format`` reads it), each from that worker,
    complete or not at all. ``map_blocks(fn)`` runs ``fn(vectors)`` there.
    ``to_dask()`` gives them as a dask array made there. ``stats`` says how
    the training went.

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

    def __init__(self, client, table, holder: str, id_map, num_vertices: int, dim: int, stats: dict):
        super().__init__(client, {0: holder}, id_map, stats, (), unit="table")
        self._block_futures = [table]
        self.num_vertices, self.dim = num_vertices, dim

    def __repr__(self) -> str:
        s = self.stats
        return (f"<gpipe.embeddings.Embeddings: {self.num_vertices} vertices x {self.dim} ({s['mode']}, "
                f"{s['workers']} worker{'s' * (s['workers'] != 1)})>")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.num_vertices, self.dim)

    @property
    def ids(self) -> np.ndarray:
        """The original id of each row (the graph's ids; ``0 .. num_vertices - 1`` where they are dense)."""
        return np.arange(self.num_vertices) if self._id_map is None else self._id_map

    def compute(self, device: bool = False) -> Any:
        """The vectors as a float32 ``(num_vertices, dim)`` NumPy array; with ``device=True`` a CuPy array on this
        process's GPU, written there from the worker's (``torch.from_dlpack`` takes it without a copy)."""
        if check_bool("device", device):
            return self._on_client_gpu("embeddings", lambda: ({"vectors": (self.shape, np.float32)}, [0]),
                                       _as_vectors)["vectors"]
        return self._gather("embeddings", _vectors)[0]

    def to_dask(self) -> da.Array:
        """The vectors as a dask array of one chunk, made where they are held (in host memory)."""
        import dask.array as da

        [future] = self._on_blocks(_vectors)
        return da.from_delayed(future, self.shape, dtype=np.float32)

    def map_blocks(self, fn, *args, **kwargs) -> list:
        """Futures (one: the table is one block) of ``fn(vectors, *args, **kwargs)``, run on the worker holding the
        vectors, the ``(num_vertices, dim)`` array on its device (``fn`` must not modify it)."""
        return self._map(_syn0, fn, args, kwargs)

    def most_similar(self, vertex, k: int = 10) -> list[tuple]:
        """The ``k`` vertices whose vectors have the largest cosine with ``vertex``'s (an original id), most
        similar first, ``vertex`` itself left out: a list of ``(id, cosine)``. Ranked where the table is."""
        k = check_int("k", k, minimum=1)
        row = self._row("vertex", vertex)
        nearest, cosines = self._gather("most similar", _nearest, lambda b: (row, k))[0]
        ids = self.ids
        return [(ids[i].item() if hasattr(ids[i], "item") else ids[i], float(c))
                for i, c in zip(nearest, cosines, strict=True)]

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
        """Write the vectors into folder ``path`` as one Parquet file: column ``id`` (original ids), then
        ``v0`` .. ``v{dim-1}`` (float32); ``pandas.read_parquet(path)`` reads it back. ``path`` must be a new
        or empty folder; ``overwrite=True`` also replaces one that holds only vectors gpipe wrote."""
        return self._write(path, overwrite, VECTOR_FILES, _write_parquet, lambda b: (self._ids(),))

    def to_word2vec(self, path) -> str:
        """Write the vectors in word2vec's text format: a line ``count dim``, then a line per vertex, its id and
        its values separated by spaces (9 significant digits: a float32 reads back the same). A file at ``path``
        is replaced once complete."""
        path = check_path("path", path)
        with atomic_file(path, "wb") as out:
            self._gather("writing", _write_text, lambda b: (self._ids(), out.name))
        return path


def _syn0(table):
    return table.syn0


def _vectors(table) -> np.ndarray:
    return to_host(table.syn0)


def _as_vectors(table) -> dict:
    return {"vectors": table.syn0}


def _nearest(table, row: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of the largest cosine with ``row`` (itself left out), largest first, and their cosines."""
    x = worker_xp()
    vectors = table.syn0
    norms = x.sqrt((vectors * vectors).sum(axis=1))
    cosines = vectors @ vectors[row] / x.maximum(norms * norms[row], x.float32(1e-30))
    cosines[row] = -x.inf
    top = x.argsort(-cosines)[:min(k, vectors.shape[0] - 1)]
    return to_host(top), to_host(cosines[top])


def _write_parquet(table, id_map, folder: str) -> str:
    vectors = to_host(table.syn0)
    ids = np.arange(vectors.shape[0]) if id_map is None else id_map
    columns = pa.table({"id": ids, **{f"v{d}": vectors[:, d] for d in range(vectors.shape[1])}})
    name = os.path.join(folder, "vectors-000000.parquet")
    # no dictionary: a trained vector's floats hardly repeat, and building one only to drop it halved the speed
    pq.write_table(columns, name, use_dictionary=False)
    return name


def _write_text(table, id_map, name: str) -> int:
    vectors = to_host(table.syn0)
    frame = pd.DataFrame(vectors)
    frame.insert(0, "id", np.arange(vectors.shape[0]) if id_map is None else id_map)
    with open(name, "w") as out:
        out.write(f"{vectors.shape[0]} {vectors.shape[1]}\n")
        frame.to_csv(out, sep=" ", header=False, index=False, float_format="%.9g")  # 9 digits: a float32 reads back
    return vectors.shape[0]
