"""Sampled subgraphs kept on the workers: :class:`EdgeSample`, a block per range of instances, in canonical order."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .. import config
from .._files import SAMPLE_FILES
from .._validate import check_bool
from ..backend import device_of, to_device, to_host, xp
from ..runtime.results import HeldResult, id_dtype, kept_blocks
from ..runtime.workers import failing, output_on_device, run_outputs, worker_device

if TYPE_CHECKING:
    import dask.dataframe as dd


@dataclass(frozen=True)
class SampleLayout:
    """How a sample's rows are kept on the workers: a block of rows per range of instances.

    ``columns``: the edge columns and their dtypes, ``instance`` first, then
    ``src`` and ``dst`` among them; ``order``: the columns that sort a block's
    rows (the canonical order: by instance first), or none where they come in
    order; ``vertices``: the run's outputs naming an instance's vertices
    besides its edges' ends (``instance``, ``vertex``), if any; ``cuts``: the
    instance ranges' bounds, ``[cuts[b], cuts[b + 1])`` in block ``b``;
    ``finish``: where set, what a block's sorted edges (``columns``) become, a
    function of their columns giving the sample's (e.g. frontier sampling keeps
    each instance's first moves, ranked, and drops its sort-only ``walk_id``).
    """

    columns: tuple[tuple[str, str], ...]
    order: tuple[str, ...] = ()
    vertices: tuple[str, str] | None = None
    cuts: tuple[int, ...] = (0, 0)
    finish: Callable[[dict], dict] | None = None

    def cut(self, instances: int, rows: int) -> SampleLayout:
        """This layout cut into ranges of about ``gpipe.sampling.block-size`` rows of ``rows`` in all, at equal
        instance counts: the same blocks for any number of workers or partitions."""
        blocks = max(1, min(instances, -(-rows // config.get("sampling.block-size"))))
        cuts = np.linspace(0, instances, blocks + 1).round().astype(np.int64)
        return dataclasses.replace(self, cuts=tuple(int(c) for c in cuts))

    @property
    def blocks(self) -> int:
        return len(self.cuts) - 1


class EdgeSample(HeldResult):
    """Sampled subgraphs, one per instance, kept on the workers until asked for; ``stats`` says how the run went.

    The edges stay where the run left them, in a block per range of
    instances: the first use assembles each block on one worker from every
    partition's rows of its instances, sorted there into the canonical order
    (by instance, then each of the other columns in turn for the samplers of
    :mod:`gpipe.sampling`; by instance and time for frontier sampling), so the
    blocks one after the other are the sample in that order with no sort on
    the client, and do not depend on the partitions or the workers.

    ``compute()`` gives the sampled edges, one row per edge of each instance
    (``instance, depth, src, dst`` from the samplers of :mod:`gpipe.sampling`;
    ``instance, step, src, dst, time`` from frontier sampling), ``nodes()``
    each instance's vertices (``instance, vertex``): the endpoints of its edges
    and the ``vertices`` it holds without one (e.g. a seed with no out-edge, or
    a vertex random node sampling picked that induces no edge). Ids are the
    graph's original ones. ``to_dask()`` gives either as a dask DataFrame made
    on the workers (a partition per block, indexed by row as ``compute()``),
    ``to_parquet()`` writes a file per block from the workers.

    Examples
    --------
    >>> import pandas as pd, gpipe
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.from_edges(pd.DataFrame({"src": ["a", "b", "c", "c"], "dst": ["b", "c", "a", "d"]}))
    ...     s = gpipe.sampling.neighbor(g, seeds=["a", "d"], fanouts=1, depth=2, seed=3)
    ...     edges, nodes, lazy = s.compute(), s.nodes(), s.to_dask().compute()
    >>> edges
       instance  depth src dst
    0         0      0   a   c
    1         0      1   c   a
    2         1      0   d   c
    3         1      1   c   b
    >>> nodes
       instance vertex
    0         0      a
    1         0      c
    2         1      b
    3         1      c
    4         1      d
    >>> lazy.equals(edges)
    True
    """

    def __init__(self, client, held: dict[int, str], layout: SampleLayout, rows: int, id_map, stats: dict,
                 run_ids: tuple[str, ...]):
        super().__init__(client, held, id_map, stats, run_ids)
        self._layout = layout
        self._rows = rows
        self._run_ids = run_ids
        self._sizes: dict[bool, list[int]] = {}

    @classmethod
    def of_runs(cls, client, run_ids: tuple[str, ...], partitions: dict[int, str], *, layout: SampleLayout,
                instances: int, rows: int, id_map, stats: dict) -> EdgeSample:
        """The sample that runs left in their partitions' stores (``rows`` edges of ``instances`` instances, each
        block made from every run's rows; ``partitions``: every partition that any of them ran), cut into blocks
        by ``layout.cut``; the rows stay there until first used."""
        return cls(client, partitions, layout.cut(instances, rows), rows, id_map, stats, tuple(run_ids))

    def __len__(self) -> int:
        return self._rows

    def __repr__(self) -> str:
        return f"<gpipe.EdgeSample {self.stats.get('algorithm', '')}: {len(self)} edges in {self.stats['seconds']:.3f} s>"

    def _assemble(self) -> list:
        """Futures of the blocks, each made on one worker from every partition's rows of its instances (by direct
        calls, kept there: no task's round trips)."""
        workers = sorted(set(self._held.values()))
        keys = {f"gpipe-sample-{self._run_ids[0]}-{b}": (workers[b % len(workers)], b)
                for b in range(self._layout.blocks)}
        limit = config.get("memory.output-limit")
        futures = kept_blocks(self._client, keys, _assemble_sample,
                              lambda w: (self._run_ids, self._held, self._layout, limit), self._held, "sample assembly")
        return [futures[key] for key in keys]

    def _original_frame(self, nodes: bool) -> pd.DataFrame:
        """Every block's rows, one frame of original ids. The blocks come as arrays (Dask moves a frame's columns
        ~3x slower), the edges' narrow as kept (:func:`_narrow`); each column is widened (and its ids mapped)
        straight into its place in the frame's, in ranges on every core (one pass: :func:`_filled`)."""
        blocks = self._gather("sample", _shipped, lambda b: (nodes,), lent=True)
        dtypes = {k: v.dtype for k, v in _columns(_empty_block(self._layout), nodes).items()}
        ends = np.cumsum([0] + [len(next(iter(b.values()))) for b in blocks]).tolist()
        ids = self._id_map
        mapped = {k for k in dtypes if ids is not None and k in ("src", "dst", "vertex")}
        columns = {k: np.empty(ends[-1], ids.dtype if k in mapped else dtype) for k, dtype in dtypes.items()}
        _filled([(columns[k], lo, b[k], ids if k in mapped else None) for k in columns
                 for b, lo in zip(blocks, ends[:-1], strict=True)])
        return pd.DataFrame(columns, copy=False)  # the arrays are the frame's own: no copy into one 2-D block

    def compute(self, device: bool = False) -> pd.DataFrame | dict[str, Any]:
        """The edges as a frame of original vertex ids; with ``device=True``, its columns as a dict of CuPy arrays
        on this process's GPU (``cudf.DataFrame(columns)`` makes it a frame), written there straight from the
        workers' GPUs (GPU workers on this host, integer ids; CUDA IPC: no host copy, no Dask comms)."""
        return self._on_gpu(nodes=False) if check_bool("device", device) else self._original_frame(nodes=False)

    def nodes(self, device: bool = False) -> pd.DataFrame | dict[str, Any]:
        """Each instance's vertices, once each: a frame ``instance, vertex`` (original ids) in order of instance;
        ``device=True`` as in :meth:`compute`."""
        return self._on_gpu(nodes=True) if check_bool("device", device) else self._original_frame(nodes=True)

    def _on_gpu(self, nodes: bool) -> dict:
        dtypes = {k: v.dtype for k, v in _columns(_empty_block(self._layout), nodes).items()}

        def laid_out():
            bases = self._bases(nodes)
            return {k: ((bases[-1],), dtype) for k, dtype in dtypes.items()}, bases[:-1]

        return self._on_client_gpu("sample", laid_out, _on_device, lambda b: (nodes,), ids=("src", "dst", "vertex"))

    def _bases(self, nodes: bool) -> list[int]:
        """The first row of each block (of the edges, or of the nodes)."""
        if nodes not in self._sizes:
            self._sizes[nodes] = self._gather("sample sizing", _block_size, lambda b: (nodes,))
        return np.concatenate([[0], np.cumsum(self._sizes[nodes], dtype=np.int64)]).tolist()

    def to_dask(self, nodes: bool = False) -> dd.DataFrame:
        """The edges (or, with ``nodes``, the nodes) as a dask DataFrame of original ids, a partition per block,
        made on the worker holding it; its index is the row's in ``compute()`` (``nodes()``)."""
        import dask.dataframe as dd

        nodes = check_bool("nodes", nodes)
        bases = self._bases(nodes)
        ids, dtype = self._ids(), id_dtype(self._id_map)
        parts = self._on_blocks(_frame, lambda b: (ids, bases[b], nodes, dtype))
        meta = _frame(_empty_block(self._layout), self._id_map, 0, nodes, dtype)
        divisions = (*bases[:-1], bases[-1] - 1) if all(np.diff(bases) > 0) else None
        return dd.from_delayed(parts, meta=meta, divisions=divisions, verify_meta=False)

    def map_blocks(self, fn, *args, nodes: bool = False, **kwargs) -> list:
        """Futures of ``fn(columns, *args, **kwargs)``, each run on the worker that holds a block, block by block.

        ``columns`` is a dict of the block's edge columns (``instance``, ...,
        ``src``, ``dst``; with ``nodes``, ``instance, vertex``), dense vertex
        ids (:meth:`Graph.to_original` maps them back), in the canonical order,
        as arrays of that worker's device: on a GPU worker the block as kept on
        its GPU (or, past ``gpipe.memory.output-limit``, copied there from its
        host memory; no client in between;
        ``torch.from_dlpack(columns["src"])`` takes a column without a further
        copy), on a CPU worker NumPy arrays. ``fn``'s results stay on those
        workers until gathered.

        Examples
        --------
        >>> import pandas as pd, gpipe
        >>> with gpipe.connect(n_workers=1, device="cpu") as client:
        ...     g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 0]}), directed=True)
        ...     s = gpipe.sampling.neighbor(g, seeds=[0, 1], fanouts=1, depth=2, seed=3)
        ...     client.gather(s.map_blocks(lambda c: c["dst"].tolist()))
        [[1, 2, 2, 0]]
        """
        nodes = check_bool("nodes", nodes)
        return self._map(functools.partial(_on_device, nodes=nodes), fn, args, kwargs)

    def to_parquet(self, path, nodes: bool = False, overwrite: bool = False) -> str:
        """Write the edges (or, with ``nodes``, the nodes) into folder ``path``, a Parquet file per block
        (``edges-000000.parquet``, ...; ``nodes-...``) written by the worker holding it.

        ``path`` must be a new or empty folder; ``overwrite=True`` also replaces a
        folder that holds only samples gpipe wrote. Anything else there (another
        file, a link, an empty folder; a file at ``path``) is refused with a
        ``GpipeValueError`` before any work, and kept. A symbolic link at ``path``
        is written through, to the folder it leads to. The folder appears complete or not at all;
        ``pandas.read_parquet(path)`` reads it back as ``compute()`` (``nodes()``) gives it.
        """
        nodes, overwrite = check_bool("nodes", nodes), check_bool("overwrite", overwrite)
        ids, dtype = self._ids(), id_dtype(self._id_map)
        return self._write(path, overwrite, SAMPLE_FILES, _write_block, lambda b: (b, ids, nodes, dtype))


def _on_device(block: dict, nodes: bool) -> dict:
    """A block's columns (or its nodes'), on this worker's device."""
    return _columns(block, nodes, worker_device())


def _no_vertices() -> dict:
    return {"instance": np.zeros(0, np.int64), "vertex": np.zeros(0, np.int64)}


def _empty_block(layout: SampleLayout) -> dict:
    return {"edges": _in_order({c: np.zeros(0, dtype) for c, dtype in layout.columns}, layout),
            "vertices": _no_vertices()}


def _in_order(edges: dict, layout: SampleLayout) -> dict:
    """A block's edges sorted by ``layout.order``, then made the sample's by ``layout.finish``."""
    edges = _sorted(edges, layout)
    return edges if layout.finish is None else layout.finish(edges)


def _sorted(edges: dict, layout: SampleLayout) -> dict:
    """Edges sorted by ``layout.order`` (stably) on their device."""
    if layout.order:
        keys = [edges[c] for c in layout.order]
        if set(layout.order) == set(edges):  # every column is in the key
            ordered = dict(zip(layout.order, _sorted_rows(keys), strict=True))
            edges = {k: ordered[k] for k in edges}
        else:
            order = _stable_order(keys)
            edges = {k: v[order] for k, v in edges.items()}
    return edges


def _packed(keys: list) -> tuple | None:
    """Integer ``keys`` (the first most significant; numpy or cupy) packed into an int64 each, in the same order,
    and each key's bits; None where they do not fit (a negative value, or more than 63 bits in all)."""
    if not keys[0].size or not all(k.dtype.kind in "iu" for k in keys):
        return None
    x = xp(device_of(keys[0]))
    widths = [int(k.max()).bit_length() for k in keys]
    if min(int(k.min()) for k in keys) < 0 or sum(widths) > 63:
        return None
    packed = x.zeros(keys[0].size, x.int64)
    for k, width in zip(keys, widths, strict=True):
        packed <<= width
        packed |= k.astype(x.int64, copy=False)
    return packed, widths


def _unpacked(packed, widths: list[int], dtypes: list) -> list:
    """The keys :func:`_packed` packed, as ``dtypes``."""
    keys, shift = [], sum(widths)
    for width, dtype in zip(widths, dtypes, strict=True):
        shift -= width
        keys.append(((packed >> shift) & ((1 << width) - 1)).astype(dtype))
    return keys


def _sorted_rows(keys: list) -> list:
    """The rows of ``keys`` (columns, the first most significant) and nothing else, sorted: equal keys are equal
    rows, so the packed keys themselves are sorted where they fit (a sort, not an argsort and a gather per column),
    else as :func:`_stable_order` orders them."""
    packed = _packed(keys)
    if packed is None:
        order = _stable_order(keys)
        return [k[order] for k in keys]
    x = xp(device_of(keys[0]))
    return _unpacked(x.sort(packed[0]), packed[1], [k.dtype for k in keys])


def _stable_order(keys: list):
    """``np.lexsort`` of integer ``keys``, the first most significant: one stable sort of the keys packed into an
    int64 where they fit (5.6 M rows of a sample's four columns: 0.5 s against lexsort's 4.6 s), else lexsort (on
    a GPU, a stable sort per key from the last)."""
    packed = _packed(keys)
    x = xp(device_of(keys[0]))
    if packed is not None:
        return x.argsort(packed[0], kind="stable")
    if x is np:
        return np.lexsort(keys[::-1])
    order = x.arange(keys[0].size)
    for k in keys[::-1]:
        order = order[x.argsort(k[order], kind="stable")]
    return order


def _split_by_instance(sets: list[dict], layout: SampleLayout) -> dict[int, dict]:
    """A partition's output piece sets as one block's share per instance range, each share's edges sorted by
    ``layout.order`` (on the device that holds the sets: a GPU sorts millions of rows in milliseconds), each
    column narrowed (:func:`_narrow`), where they are."""
    x = xp(device_of(next((v for s in sets for v in s.values()), np.zeros(0))))

    def column(name: str, dtype):
        parts = [s[name] for s in sets if name in s]
        return x.concatenate(parts).astype(dtype, copy=False) if parts else x.zeros(0, dtype)

    edges = _sorted({c: column(c, dtype) for c, dtype in layout.columns}, layout)
    vertices = {k: column(name, np.int64) if layout.vertices else x.zeros(0, np.int64)
                for k, name in zip(("instance", "vertex"), layout.vertices or ("", ""), strict=True)}
    cuts = x.asarray(layout.cuts, x.int64)

    def split(rows: dict, by_instance: bool) -> list[dict]:
        if by_instance:  # sorted by instance: each block's rows are a range of them
            ends = x.searchsorted(rows["instance"], cuts, side="left").tolist()
        else:
            block = x.searchsorted(cuts, rows["instance"], side="right") - 1
            if layout.blocks < 1 << 15:  # numpy sorts 16-bit keys stably by radix: ~5x a 64-bit key's speed
                block = block.astype(x.int16)
            order = x.argsort(block, kind="stable")
            rows = {k: v[order] for k, v in rows.items()}
            ends = x.searchsorted(block[order], x.arange(layout.blocks + 1), side="left").tolist()
        rows = {k: _narrow(v) for k, v in rows.items()}  # on the device: fewer bytes to move and keep
        return [{k: v[lo:hi] for k, v in rows.items()} for lo, hi in pairwise(ends)]

    by_instance = bool(layout.order) and layout.order[0] == "instance"
    return {b: {"edges": e, "vertices": v}
            for b, (e, v) in enumerate(zip(split(edges, by_instance), split(vertices, False), strict=True))}


def _assemble_sample(run_ids: tuple[str, ...], partitions: dict[int, str], layout: SampleLayout, limit, *,
                     part: int) -> dict:
    """Block ``part`` of a sample: every run's and partition's rows of its instance range, in canonical order (a
    share alone is in it already), its edge columns narrow unless the layout's ``finish`` made them (``"wide"``:
    each one's type in the sample). It stays on the device that made it while this GPU's live arrays are within
    ``limit`` (``gpipe.memory.output-limit``; a ``finish``, host code, takes it to host memory), else goes to host
    memory."""
    with failing("sample assembly", part):
        group = functools.partial(_split_by_instance, layout=layout)
        shares = [s for run_id in run_ids for s in run_outputs(run_id, part, partitions, group)]
        if not shares:
            return _empty_block(layout)
        wide = dict(layout.columns)
        # host code; or a share on a CPU worker or spilled to host memory (the output limit): the block is made there
        on_host = layout.finish is not None or any(device_of(s["edges"][layout.columns[0][0]]) == "cpu"
                                                   for s in shares)
        if on_host:
            shares = [{kind: {k: to_host(v) for k, v in s[kind].items()} for kind in ("edges", "vertices")}
                      for s in shares]
        if layout.finish is not None:  # on the columns' own types
            shares = [{**s, "edges": {k: v.astype(wide[k], copy=False) for k, v in s["edges"].items()}}
                      for s in shares]
        x = xp("cpu" if on_host else "gpu")
        block = {kind: {k: shares[0][kind][k] if len(shares) == 1 else _joined(x, [s[kind][k] for s in shares])
                        for k in shares[0][kind]} for kind in ("edges", "vertices")}
        if len(shares) > 1:
            block["edges"] = _sorted(block["edges"], layout)
        if layout.finish is not None:
            block["edges"] = layout.finish(block["edges"])
        else:
            block["wide"] = wide  # what _columns makes of the narrow columns
        if not output_on_device(limit):
            block.update({kind: {k: to_host(v) for k, v in block[kind].items()} for kind in ("edges", "vertices")})
        return block


def _joined(x, columns: list):
    """Shares' columns (narrowed each as its values allowed) as one, of the type that holds them all."""
    dtype = np.result_type(*(c.dtype for c in columns))
    return x.concatenate([c.astype(dtype, copy=False) for c in columns])


def _node_rows(block: dict) -> tuple:
    """A block's instances' vertices, each once, by instance then vertex (dense ids, where the block is)."""
    edges, vertices = block["edges"], block["vertices"]
    x = xp(device_of(edges["src"]))
    instance = x.concatenate([x.asarray(a).astype(x.int64) for a in (edges["instance"], edges["instance"],
                                                                     vertices["instance"])])
    vertex = x.concatenate([x.asarray(a).astype(x.int64) for a in (edges["src"], edges["dst"], vertices["vertex"])])
    instance, vertex = _sorted_rows([instance, vertex])
    first = x.ones(instance.size, bool)
    first[1:] = (instance[1:] != instance[:-1]) | (vertex[1:] != vertex[:-1])
    return instance[first], vertex[first]


def _narrow(values):
    """An integer column (numpy or cupy) in the narrowest integer type that holds its values (itself where none is
    narrower): a sample's edge, 28 bytes wide, takes about 11."""
    if values.dtype.kind not in "iu" or not values.size:
        return values
    dtype = np.result_type(np.min_scalar_type(int(values.min())), np.min_scalar_type(int(values.max())))
    return values.astype(dtype) if dtype.itemsize < values.dtype.itemsize else values


def _shipped(block: dict, nodes: bool) -> dict[str, np.ndarray]:
    """A block's columns as they go to the client, in host memory: its narrow edge columns as kept (widened
    there), or its nodes'."""
    columns = dict(zip(("instance", "vertex"), _node_rows(block), strict=True)) if nodes else block["edges"]
    return {k: to_host(v) for k, v in columns.items()}


FILL_ROWS = 1 << 20  # rows a thread widens (and maps) at a time


def _filled(parts: list[tuple]) -> None:
    """Each ``(out, first, values, ids)``: ``out[first:first + len(values)]`` = ``ids[values]`` (``values`` where
    ``ids`` is None), widened as it is put there, in ranges of ``FILL_ROWS`` on every core (numpy lets go of the
    GIL while it casts and takes: the frame's fresh pages are faulted in on every core too)."""
    def fill(out, at, values, ids):
        if ids is None:
            out[at:at + len(values)] = values
        else:
            np.take(ids, values, out=out[at:at + len(values)])

    ranges = [(out, first + lo, values[lo:lo + FILL_ROWS], ids)
              for out, first, values, ids in parts for lo in range(0, len(values), FILL_ROWS)]
    with ThreadPoolExecutor(max(1, min(len(ranges), os.cpu_count() or 1))) as pool:
        list(pool.map(lambda r: fill(*r), ranges))


def _block_size(block: dict, nodes: bool) -> int:
    return int(_node_rows(block)[0].size if nodes else next(iter(block["edges"].values())).size)


def _original(dense: np.ndarray, id_map, dtype):
    return dense if id_map is None else pd.array(id_map[dense], dtype=dtype)


def _columns(block: dict, nodes: bool, device: str = "cpu") -> dict:
    """A block's edge columns (or its nodes', ``instance, vertex``), dense ids, each of its type in the sample, as
    arrays of ``device`` (moved narrow, then widened)."""
    wide = {} if nodes else block.get("wide", {})
    columns = dict(zip(("instance", "vertex"), _node_rows(block), strict=True)) if nodes else block["edges"]
    return {k: to_device(v, device).astype(wide.get(k, v.dtype), copy=False) for k, v in columns.items()}


def _frame(block: dict, id_map, base: int, nodes: bool, dtype=None) -> pd.DataFrame:
    """A block's edges (or nodes) as a frame, ids mapped by ``id_map`` (None: dense), rows numbered from ``base``."""
    columns = {c: _original(v, id_map, dtype) if c in ("src", "dst", "vertex") else v
               for c, v in _columns(block, nodes).items()}
    rows = len(next(iter(columns.values())))
    return pd.DataFrame(columns, index=pd.RangeIndex(base, base + rows))


def _write_block(block: dict, number: int, id_map, nodes: bool, dtype, folder: str) -> str:
    name = os.path.join(folder, f"{'nodes' if nodes else 'edges'}-{number:06d}.parquet")
    _frame(block, id_map, 0, nodes, dtype).to_parquet(name, index=False)
    return name
