"""The lazy result of a walk run: blocks of the walk matrix that stay on the workers."""

from __future__ import annotations

import dataclasses
import functools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._files import WALK_FILES, atomic_file
from .._validate import check_bool, check_path
from ..backend import cpu_kernel, prange, to_host
from ..errors import GpipeValueError
from ..runtime import OutputBlocks
from ..runtime.calls import gather_pinned, scatter, submit
from ..runtime.results import HeldResult, assemble_blocks
from ..runtime.workers import worker_xp

if TYPE_CHECKING:
    import dask.array as da

WRITE_THREADS, WRITE_BYTES = 8, 1 << 26  # a corpus block's text is written in up to 8 ranges of at least 64 MB


class WalkResult(HeldResult):
    """Walks kept on the workers until asked for.

    When the walk ends, each walk is a set of path pieces in the stores of the
    workers it passed through. The first use (``persist``, ``compute``,
    ``to_corpus``, ``to_parquet``, ``to_dask``) assembles them on the workers
    into blocks of rows; a walk on a graph whole on one worker (one replica)
    makes its blocks there as it ends. ``compute()`` gives an ``(n_walks, length + 1)`` array
    of original vertex ids, padded after a walk's end with a value that cannot
    be an id: -1 in an int64 array when the ids are non-negative integers;
    otherwise (strings, or integers of which some are negative) None in an
    object array, as ``to_dask`` does too, and ``to_parquet`` writes null there.
    ``to_corpus`` writes one walk per line, ids separated by spaces (gensim's
    ``LineSentence`` format), written by the workers; ``to_parquet`` writes
    one file per block. ``stats`` holds steps, seconds (of the walk) and steps
    per second, and ``assemble_seconds`` once assembled.

    Examples
    --------
    >>> import os, tempfile, pandas as pd, gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(pd.DataFrame({"src": ["a", "b", "c", "c"], "dst": ["b", "c", "a", "d"]}))
    ...     w = gpipe.walks.deepwalk(g, length=3, seed=2)
    ...     walks = w.compute()
    ...     corpus = w.to_corpus(os.path.join(tempfile.mkdtemp(), "walks.txt"))
    >>> walks
    array([['a', 'c', 'd', 'c'],
           ['b', 'a', 'c', 'a'],
           ['c', 'b', 'c', 'a'],
           ['d', 'c', 'b', 'a']], dtype=object)
    >>> print(open(corpus).read(), end="")
    a c d c
    b a c a
    c b c a
    d c b a
    >>> w.stats["walks"], w.stats["steps"]
    (4, 12)
    """

    def __init__(self, client, run_id: str, partitions: dict[int, str], *, blocks: OutputBlocks, id_map,
                 stats: dict, made: list | None = None):
        super().__init__(client, partitions, id_map, stats, (run_id,))
        self._block_futures = made  # made by the run as it ended (its one worker's), else on first use
        self._run_id = run_id
        self.num_walks = blocks.walks
        self.width = blocks.width
        self._layout = blocks
        self._corpus_ids: Any = None

    def _assemble(self) -> list:
        return assemble_blocks(self._client, self._run_id, self._held, self._layout, self.stats.get("gathered", False))

    @property
    def shape(self) -> tuple[int, int]:
        return (self.num_walks, self.width)

    @property
    def vertex_ids(self) -> np.ndarray | None:
        """The original id of each dense vertex id of the blocks (:meth:`map_blocks`), or None where the graph's
        ids are its dense ids."""
        return self._id_map

    def __len__(self) -> int:
        return self.num_walks

    def __repr__(self) -> str:
        s = self.stats
        return (f"<gpipe.WalkResult {s['algorithm']}: {self.num_walks} walks x {self.width} vertices, "
                f"{s['steps']} steps in {s['seconds']:.3f} s ({s['steps_per_second']:.3g} steps/s)>")

    def _ids(self):
        if self._id_map is not None and self._id_future is None:
            self._id_future = scatter(self._client, [self._id_map], broadcast=True)[0]
        return self._id_future

    @functools.cached_property
    def _walk_dtype(self) -> np.dtype:
        """int64 (padding -1) where -1 cannot be an id: dense or non-negative integer ids; else object (None)."""
        ids = self._id_map
        if ids is None or (ids.dtype.kind in "iu" and (ids.size == 0 or ids.min() >= 0)):
            return np.dtype(np.int64)
        return np.dtype(object)

    def _map_blocks(self, func, *args, **kwargs):
        """Futures of ``func(block, id_map, first_row, *args, **kwargs)`` of every block, where it is held
        (``kwargs`` as :func:`gpipe.runtime.calls.submit` takes them)."""
        return self._on_blocks(func, self._placed(*args), **kwargs)

    def _gather_blocks(self, phase: str, func, *args) -> list:
        """``func(block, id_map, first_row, *args)`` of every block, watched; the results in order."""
        return self._gather(phase, func, self._placed(*args))

    def _placed(self, *args):
        """Each block's arguments after it: the id map, the block's first row, then ``args``."""
        ids = self._ids()
        return lambda b: (ids, b * self.block_rows, *args)

    @property
    def block_rows(self) -> int:
        """Walks per block (``gpipe.walks.block-size``): block ``b`` holds walks ``b * block_rows`` onwards."""
        return self._layout.rows

    def map_blocks(self, fn, *args, **kwargs) -> list:
        """Futures of ``fn(block, *args, **kwargs)``, each run on the worker that holds ``block``, block by block.

        ``block`` is the ``(rows, length + 1)`` array of the walks' dense vertex
        ids (padded with -1; :meth:`Graph.to_original` maps them back) where it
        lives: a CuPy array on a GPU worker, which ``torch.from_dlpack(block)``
        hands to PyTorch without a copy, or a NumPy array on a CPU worker.
        ``fn``'s results stay on those workers until gathered
        (``client.gather``); ``fn`` must not modify ``block``.

        Examples
        --------
        >>> import pandas as pd, gpipe
        >>> with gpipe.connect(n_workers=1, device="cpu") as client:
        ...     g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 0]}), directed=True)
        ...     w = gpipe.walks.deepwalk(g, length=4, seed=1)
        ...     client.gather(w.map_blocks(lambda block, k: (block == k).sum(axis=1).tolist(), 0))
        [[2, 1, 2]]
        """
        return self._map(_on_device, fn, args, kwargs)

    def compute(self, device: bool = False) -> Any:
        """All walks as one host array of original vertex ids; with ``device=True``, as a CuPy array on this
        process's GPU.

        Integer ids travel as the blocks' dense ids (their smallest integer type, not the int64 of the result) and
        are mapped here, each block straight into its rows of the result, in one parallel pass. ``device=True``
        (GPU workers on this host, ids that are non-negative integers) has each worker write its blocks straight
        from its GPU into the result's memory on this process's GPU (CUDA IPC: no host copy, no Dask comms), where
        they are mapped to original ids; ``torch.from_dlpack`` takes the array without a copy."""
        if check_bool("device", device):
            return self._on_gpu()
        if self._walk_dtype == object:
            parts = self._gather_blocks("walks", _original, self._walk_dtype)
            return np.concatenate(parts) if parts else np.zeros((0, self.width), self._walk_dtype)
        out = np.empty((self.num_walks, self.width), np.int64)

        def into(b: int, lent) -> np.ndarray:  # a lent block's dense ids go to the first bytes of its rows
            rows = out[b * self.block_rows:b * self.block_rows + lent.shape[0]].reshape(-1).view(np.uint8)
            return rows[:rows.size // out.itemsize * np.dtype(lent.dtype).itemsize]

        blocks = self._gather("walks", to_host, lent=True, into=into)
        row = 0
        for block in blocks:
            _integer_originals(block, self._id_map, out[row:row + block.shape[0]])
            row += block.shape[0]
        return out

    def _on_gpu(self):
        if self._walk_dtype == object:
            raise GpipeValueError("device=True needs vertex ids that are non-negative integers (-1 pads a walk after "
                                  "its end, and a GPU array holds no strings or objects); use compute()")
        firsts = [b * self.block_rows for b in range(self._layout.count)]
        walks = self._on_client_gpu("walks", lambda: ({"walks": (self.shape, np.int64)}, firsts), _as_rows,
                                    ids=("walks",))
        return walks["walks"]

    def to_dask(self) -> da.Array:
        """The walks as a dask array, one chunk per block, original vertex ids."""
        import dask.array as da

        futures = self._map_blocks(_original, self._walk_dtype)
        rows = [min(self.block_rows, self.num_walks - b * self.block_rows) for b in range(len(futures))]
        return da.concatenate([da.from_delayed(f, (r, self.width), dtype=self._walk_dtype)
                               for f, r in zip(futures, rows, strict=True)])

    def to_parquet(self, path, overwrite: bool = False) -> str:
        """Write one Parquet file per block (columns ``walk``, ``step_0`` .. ``step_L``) into folder ``path``.

        ``path`` must be a new or empty folder; ``overwrite=True`` also replaces a
        folder that holds only walks gpipe wrote. Anything else there (another
        file, a link, an empty folder; a file at ``path``) is refused with a
        ``GpipeValueError`` before any work, and kept. A symbolic link at ``path``
        is written through, to the folder it leads to. The folder appears complete or not at all.
        """
        return self._write(path, overwrite, WALK_FILES, _write_parquet, self._placed(self._walk_dtype))

    def to_corpus(self, path) -> str:
        """Write the walks as text, one per line, ids separated by spaces (word2vec ``LineSentence``).

        One file, written by the workers: each block's text is sized where
        the block is, then formatted by a compiled kernel and written by that
        worker straight to its offset in the file (the client and the workers
        share its file system, as for ``to_parquet``). No id passes through
        the client, which holds the id map's text only when the ids are not
        integers. A file at ``path`` is replaced, as pandas' writers do, once
        the corpus is complete (through a symbolic link, the file it leads
        to); anything else there (a folder, a FIFO, a device) is refused with
        a ``GpipeValueError`` before any work, as is a path where no file can
        be created (no permission, a file in the way of its folder).

        Ids are written as they are, not escaped: an id that would not read
        back as one token (empty, or holding a space, a tab, a newline or
        other whitespace: ``'New York'`` would be two ids) is refused with a
        ``GpipeValueError`` naming it, before anything is written. Every id of
        the graph is checked, walked or not.
        """
        path = check_path("path", path)
        _check_corpus_ids(self._id_map)
        with atomic_file(path, "wb") as out:  # a path it may not write is refused before the work
            if self._corpus_ids is None:  # dense ids need no table: sent with each task, not broadcast beforehand
                ids = _CorpusIds.of(self._id_map)
                self._corpus_ids = ids if self._id_map is None else scatter(self._client, [ids], broadcast=True)[0]
            ids = self._corpus_ids
            blocks = self.persist()._blocks()
            # each block's line sizes stay on its worker for the write; only their sums come here
            sizes = [submit(self._client, _corpus_sizes, block, ids) for block in blocks]
            totals = gather_pinned(self._client, [submit(self._client, _total, s) for s in sizes],
                                   self._held, "corpus sizing")
            offsets = np.concatenate([[0], np.cumsum(totals, dtype=np.int64)]).tolist()
            out.truncate(offsets[-1])
            out.flush()
            written = [submit(self._client, _write_corpus_block, block, ids, size, out.name, offsets[b])
                       for b, (block, size) in enumerate(zip(blocks, sizes, strict=True))]
            gather_pinned(self._client, written, self._held, "corpus writing")
        return path


def _on_device(block):
    """A block on this worker's device (one kept in host memory goes there first)."""
    return worker_xp().asarray(block)


def _as_rows(block) -> dict:
    return {"walks": block}


def _original(block, id_map, base: int, dtype: np.dtype) -> np.ndarray:
    """The block in original ids, padded as ``WalkResult._walk_dtype`` says: -1 (int64) or None (object)."""
    dense = to_host(block)
    if dtype != object:
        return _integer_originals(dense, id_map, np.empty(dense.shape, np.int64))
    pad = dense < 0
    out = id_map[np.where(pad, 0, dense)].astype(object)
    out[pad] = None
    return out


def _integer_originals(dense: np.ndarray, id_map, out: np.ndarray) -> np.ndarray:
    """``out`` (int64, the block's shape) filled with the original ids of the host block ``dense``, -1 where it is
    padded, in one parallel pass; ``dense`` may be a narrower or equal view of ``out``'s first bytes (``compute()``
    reads a lent block there), widened in place then: no array in between."""
    mapped = id_map is not None
    ids = id_map.astype(np.int64, copy=False) if mapped else np.zeros(0, np.int64)
    if np.may_share_memory(dense, out):
        _widen_in_place(dense.reshape(-1), out.reshape(-1), ids, mapped)
    else:
        _originals_into(dense, ids, mapped, out)
    return out


_WIDEN_CHUNK = 32768  # ids a thread widens at once, copied out first: a loop whose reads and writes may alias runs
# element by element (40 ms for DeepWalk's 52 M ids on 2 cores, 11 ms through the copy)


@cpu_kernel(parallel=True)
def _widen_in_place(dense, out, ids, mapped):
    """``out[i]`` = the original id of ``dense[i]`` (-1 where padded), ``dense`` a view of ``out``'s first bytes:
    of int64 each in place, of a narrower type in rounds from the end, ``[lo, hi)`` with ``hi <= 2 lo``, whose
    reads (``dense``'s bytes below ``hi`` items) lie below their writes (``out``'s from ``lo`` on): every round
    reads what no round before it wrote, its chunks in parallel."""
    hi = out.shape[0]
    while hi > 0:
        lo = (hi + 1) // 2 if dense.itemsize < 8 else 0
        lo = 0 if lo == hi else lo
        for c in prange((hi - lo + _WIDEN_CHUNK - 1) // _WIDEN_CHUNK):
            a = lo + c * _WIDEN_CHUNK
            b = min(hi, a + _WIDEN_CHUNK)
            chunk, to = dense[a:b].copy(), out[a:b]
            if mapped:
                for j in range(b - a):
                    to[j] = -1 if chunk[j] < 0 else ids[chunk[j]]
            else:
                for j in range(b - a):
                    to[j] = max(chunk[j], -1)
        hi = lo


@cpu_kernel(parallel=True)
def _originals_into(dense, ids, mapped, out):
    """``out``: the original ids of a block of dense ids (``ids[d]``, or ``d`` itself unless ``mapped``), -1 where
    the block is padded."""
    for r in prange(dense.shape[0]):
        for c in range(dense.shape[1]):
            d = dense[r, c]
            out[r, c] = -1 if d < 0 else ids[d] if mapped else d


def _write_parquet(block, id_map, base: int, dtype: np.dtype, folder: str) -> str:
    walks = _original(block, id_map, base, dtype)
    name = os.path.join(folder, f"walks-{base:012d}.parquet")
    rows = np.arange(base, base + walks.shape[0], dtype=np.int64)
    if dtype != object:  # int64 columns straight to Arrow (each step's column contiguous): no pandas frame between
        steps = np.ascontiguousarray(walks.T)
        # no dictionaries: vertex ids rarely repeat within a page, and trying them cost 60 % of the write
        pq.write_table(pa.table({"walk": rows, **{f"step_{j}": steps[j] for j in range(steps.shape[0])}}), name,
                       use_dictionary=False)
        return name
    # nullable columns of the ids' type: a block whose column is all None still reads as one
    dtype = pd.Int64Dtype() if id_map.dtype.kind in "iu" else pd.StringDtype()
    frame = pd.DataFrame({f"step_{j}": pd.array(walks[:, j], dtype=dtype) for j in range(walks.shape[1])})
    frame.insert(0, "walk", rows)
    frame.to_parquet(name, index=False)
    return name


def _check_corpus_ids(id_map) -> None:
    """Refuse ids whose text is not one whitespace-free token (LineSentence splits lines on whitespace)."""
    if id_map is None or id_map.dtype.kind in "iu":
        return
    text = pd.Series(id_map, dtype=object).astype(str)  # as _corpus_text writes them
    bad = id_map[((text == "") | text.str.contains(r"\s")).to_numpy()]
    if bad.size:
        examples = ", ".join(repr(str(i)) for i in bad[:3])
        raise GpipeValueError(f"vertex ids written to a corpus must be non-empty and hold no whitespace (spaces "
                              f"separate ids, newlines walks); {bad.size} are not, e.g. {examples}")


@dataclasses.dataclass(frozen=True)
class _CorpusIds:
    """What the corpus kernels write for dense id ``d``: ``d`` itself (``kind`` 0), the integer ``ids[d]`` (1),
    or the UTF-8 text ``text[end[d]:end[d + 1]]`` of any other id (2)."""

    kind: int
    ids: np.ndarray
    text: np.ndarray
    end: np.ndarray

    @classmethod
    def of(cls, id_map) -> _CorpusIds:
        none, no_text = np.zeros(0, np.int64), np.zeros(0, np.uint8)
        if id_map is None:
            return cls(0, none, no_text, np.zeros(1, np.int64))
        if np.issubdtype(id_map.dtype, np.integer):
            return cls(1, id_map.astype(np.int64), no_text, np.zeros(1, np.int64))
        encoded = [str(i).encode() for i in id_map]
        end = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum([len(e) for e in encoded], out=end[1:])
        return cls(2, none, np.frombuffer(b"".join(encoded), np.uint8), end)


def _corpus_sizes(block, ids: _CorpusIds) -> np.ndarray:
    """Bytes of each line of the block's text."""
    return _corpus_row_sizes(to_host(block), ids.kind, ids.ids, ids.end)


def _total(sizes: np.ndarray) -> int:
    return int(sizes.sum())


def _write_corpus_block(block, ids: _CorpusIds, sizes: np.ndarray, name: str, offset: int) -> int:
    """Format the block's text (its lines of ``sizes`` bytes) and write it at ``offset`` into the file ``name``
    (which the client sized), in ranges written side by side: one thread copies to the page cache at about
    2 GB/s, a block's text is hundreds of MB."""
    starts = np.zeros(len(sizes), np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    size = int(sizes.sum())
    text = np.empty(size, np.uint8)
    _corpus_fill(to_host(block), ids.kind, ids.ids, ids.text, ids.end, starts, text)
    view, cuts = text.data, np.linspace(0, size, min(WRITE_THREADS, size // WRITE_BYTES + 1) + 1)

    def write(a: int, b: int) -> None:
        while a < b:
            a += os.pwrite(fd, view[a:b], offset + a)

    fd = os.open(name, os.O_WRONLY)
    try:
        with ThreadPoolExecutor(len(cuts) - 1) as pool:
            list(pool.map(write, cuts[:-1].astype(int).tolist(), cuts[1:].astype(int).tolist()))
    finally:
        os.close(fd)
    return size


_POWERS = np.array([10**i for i in range(20)], np.uint64)  # every power of ten a uint64 holds
_PAIRS = np.frombuffer(b"".join(b"%02d" % i for i in range(100)), np.uint8)  # "00" .. "99": two digits a step


@cpu_kernel()
def _magnitude(v):
    """``|v|`` as uint64: -2**63 has no int64 negation."""
    return np.uint64(0) - np.uint64(v) if v < 0 else np.uint64(v)


@cpu_kernel()
def _digits(u):
    """The decimal digits of ``u`` (uint64): comparisons, no division."""
    n = 1
    while n < 20 and u >= _POWERS[n]:
        n += 1
    return n


@cpu_kernel()
def _write_digits(u, out, end):
    """The decimal digits of ``u`` (uint64) into ``out``, ending before ``end``: two at a time, from the last."""
    hundred = np.uint64(100)
    while u >= hundred:
        q = u // hundred
        r = 2 * (u - q * hundred)
        end -= 2
        out[end] = _PAIRS[r]
        out[end + 1] = _PAIRS[r + 1]
        u = q
    if u >= np.uint64(10):
        out[end - 2] = _PAIRS[2 * u]
        out[end - 1] = _PAIRS[2 * u + 1]
    else:
        out[end - 1] = np.uint8(48 + u)


@cpu_kernel(parallel=True)
def _corpus_row_sizes(dense, kind, ids, end):
    """Bytes of each row's line: its ids' text, a space between two, and a newline."""
    sizes = np.zeros(dense.shape[0], np.int64)
    for r in prange(dense.shape[0]):
        size = 0
        count = 0
        for c in range(dense.shape[1]):
            d = dense[r, c]
            if d < 0:
                break
            count += 1
            if kind == 2:
                size += end[d + 1] - end[d]
            else:
                v = ids[d] if kind == 1 else np.int64(d)
                size += _digits(_magnitude(v)) + (1 if v < 0 else 0)
        sizes[r] = size + max(count, 1)
    return sizes


@cpu_kernel(parallel=True)
def _corpus_fill(dense, kind, ids, text, end, starts, out):
    """Each row's line at ``starts[row]`` of ``out`` (sized by :func:`_corpus_row_sizes`)."""
    for r in prange(dense.shape[0]):
        pos = starts[r]
        for c in range(dense.shape[1]):
            d = dense[r, c]
            if d < 0:
                break
            if c > 0:
                out[pos] = 32
                pos += 1
            if kind == 2:
                for k in range(end[d], end[d + 1]):
                    out[pos] = text[k]
                    pos += 1
                continue
            v = ids[d] if kind == 1 else np.int64(d)
            if v < 0:
                out[pos] = 45
                pos += 1
            u = _magnitude(v)
            pos += _digits(u)
            _write_digits(u, out, pos)
        out[pos] = 10
