"""NeighborLoader: mini-batches of seeds, each sampled into Blocks in the trainer's process."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from .. import _rng
from .._validate import check_bool, check_int
from ..backend import check_cpu_kernels_run_here, to_host, xp
from ..errors import GpipeValueError
from ..graph import check_graph
from ._blocks import Blocks
from ._fused import sample
from ._local import LocalGraph, local_graph
from ._sample import check_sampling

SHUFFLE_STEP = 1 << 31  # the step of the shuffle's draws: apart from the sampling's (its hops)


if TYPE_CHECKING:  # checked as the plain iterable it is without torch: the same code either way
    _Dataset = object

    def get_worker_info() -> Any: ...
else:
    try:  # the loader is a torch dataset where torch can be imported (gpipe.gnn imports this module on first use)
        from torch.utils.data import IterableDataset as _Dataset
        from torch.utils.data import get_worker_info
    except ImportError:
        _Dataset, get_worker_info = object, lambda: None  # no DataLoader worker without torch


@dataclass(frozen=True)
class LoaderSpec:
    """A loader's checked parameters but its graph, seeds and per-vertex arrays: what a worker's loader is built
    from (:func:`gpipe.gnn.run_on_workers`)."""

    fanouts: tuple
    batch_size: int
    shuffle: bool
    drop_last: bool
    seed: int
    replace: bool
    weighted: bool
    fused: bool


def check_loader(g, seeds, *, fanouts, batch_size, shuffle, drop_last, seed, features, labels, replace, weighted,
                 fused, edge_dir) -> tuple:
    """The checked ``(the graph edge_dir reads, seeds as dense ids (numpy), LoaderSpec, features, labels)`` of a
    loader over ``g``."""
    g, dense, fanouts, replace, weighted, seed = check_sampling(g, seeds, fanouts, replace, weighted, seed, edge_dir)
    spec = LoaderSpec(tuple(fanouts), check_int("batch_size", batch_size, minimum=1), check_bool("shuffle", shuffle),
                      check_bool("drop_last", drop_last), seed, replace, weighted, check_bool("fused", fused))
    return g, dense, spec, _per_vertex("features", features, g), _per_vertex("labels", labels, g)


def seeds_of(g, nodes, name: str) -> np.ndarray:
    """The seed vertices PyG's ``input_nodes`` or DGL's ``indices`` name: None (every vertex), a boolean mask with
    an entry per vertex, or vertex ids (NumPy, CuPy or a CPU torch tensor)."""
    check_graph("g", g)
    if nodes is None:
        return np.arange(g.num_vertices) if g.id_map is None else g.id_map
    values = np.asarray(to_host(nodes) if hasattr(nodes, "__cuda_array_interface__") else nodes)
    if values.dtype == bool:
        if values.shape != (g.num_vertices,):
            raise GpipeValueError(f"'{name}' as a mask must have an entry per vertex ({g.num_vertices}), got shape "
                                  f"{values.shape}")
        return np.flatnonzero(values) if g.id_map is None else g.id_map[values]
    return values


def _per_vertex(name: str, values, g):
    """``values`` if it has a row per vertex of ``g`` (or is None)."""
    if values is not None and getattr(values, "shape", (None,))[:1] != (g.num_vertices,):
        raise GpipeValueError(f"'{name}' must have a row per vertex ({g.num_vertices}), got "
                              f"{getattr(values, 'shape', type(values).__name__)}")
    return values


class NeighborLoader(_Dataset):
    """Mini-batches of seeds and their sampled neighborhoods, as PyG's and DGL's neighbor loaders give them.

    Each iteration is one epoch over ``seeds``, in ``batch_size`` batches (in
    a shuffled order when ``shuffle``; ``len(loader)`` of them), each yielded
    as :class:`Blocks` from :func:`sample_blocks` (the next epoch on the next
    iteration; see :meth:`set_epoch`). Sampling runs in this process, on the
    graph's CSR gathered once from the workers (on the GPU when the graph is
    on GPUs). The next batch is prepared while the current one is used: in a
    thread, and on the GPU on a stream of its own (a batch is complete when
    yielded).

    Where torch is installed the loader is a ``torch.utils.data.IterableDataset``
    of batches: ``DataLoader(loader, batch_size=None)`` yields its batches
    (``num_workers`` > 0: each worker process samples every ``num_workers``-th
    batch, on the CPU, with a copy of the loader, so call :meth:`set_epoch`
    before each epoch; start the workers with
    ``multiprocessing_context='spawn'`` or ``'forkserver'``: a worker forked
    from a process whose CPU kernels ran on numba's OpenMP threads cannot
    sample, and raises a :class:`GpipeError` that says so). Without torch it
    is a plain iterable.

    Parameters
    ----------
    g : gpipe.Graph
        A graph with integer vertex ids.
    seeds : array-like of int
        Distinct vertices (the training vertices).
    fanouts : list of int
        Neighbors picked per vertex at each hop, from the seeds outwards; ``-1`` every one.
    batch_size : int
        Seeds per batch.
    shuffle : bool
        Shuffle the seeds every epoch.
    drop_last : bool
        Leave out the last batch of an epoch when it is smaller than ``batch_size``.
    seed : int
        Batch ``b`` of epoch ``e`` (its seeds and its picks) depends on ``(seed, e, b)`` only.
    features : array, optional
        A feature matrix whose row ``i`` belongs to vertex ``i`` (numpy, or
        cupy on the GPU; copied to the graph's device once): each batch
        carries the rows of its ``input_nodes`` as ``features``.
    labels : array, optional
        Per-vertex values (row ``i``: vertex ``i``), e.g. class labels: each
        batch carries those of its ``output_nodes`` as ``labels``.
    replace, weighted, fused : bool
        As for :func:`sample_blocks`.
    edge_dir : {'out', 'in'}
        As for :func:`sample_blocks`: pick out-neighbors, or in-neighbors.

    Raises
    ------
    GpipeValueError
        As :func:`sample_blocks`, and ``batch_size`` below 1 or ``features``
        or ``labels`` without a row per vertex.
    GpipeError
        Iterated on the CPU in a process forked after numba's OpenMP threads
        ran (a ``DataLoader`` worker started by 'fork').

    Examples
    --------
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=1)
    ...     loader = gpipe.gnn.NeighborLoader(g, seeds=range(100), fanouts=[10, 5], batch_size=32, seed=3)
    ...     [batch.output_nodes.size for batch in loader]
    [32, 32, 32, 4]
    """

    def __init__(self, g, seeds, fanouts, batch_size: int, *, shuffle: bool = True, drop_last: bool = False,
                 seed: int = 0, features=None, labels=None, replace: bool = False, weighted: bool = False,
                 fused: bool = True, edge_dir: str = "out"):
        g, dense, spec, features, labels = check_loader(
            g, seeds, fanouts=fanouts, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, seed=seed,
            features=features, labels=labels, replace=replace, weighted=weighted, fused=fused, edge_dir=edge_dir)
        self._start(local_graph(g), g.device, dense, spec, features, labels)

    @classmethod
    def _on(cls, local: LocalGraph, device: str, dense, spec: LoaderSpec, features=None, labels=None):
        """A loader over an assembled graph (on a worker) with checked parameters (:func:`check_loader`)."""
        loader = cls.__new__(cls)
        loader._start(local, device, dense, spec, features, labels)
        return loader

    def _start(self, local: LocalGraph, device: str, dense, spec: LoaderSpec, features, labels) -> None:
        self._spec, self._local = spec, local
        self.batch_size, self.shuffle, self.drop_last = spec.batch_size, spec.shuffle, spec.drop_last
        self._key = _rng.key(spec.seed)
        self._device = device
        x = xp(device)
        self._seeds = x.asarray(dense)
        self._features = None if features is None else x.asarray(features)  # copied to the graph's device once
        self._labels = None if labels is None else x.asarray(labels)
        self._stream = _stream(x)
        self.epoch = 0

    def __getstate__(self) -> dict:
        """What a ``DataLoader`` worker started by 'spawn' or 'forkserver' gets: the loader but its GPU stream, which
        belongs to this process (the worker makes its own)."""
        return {**self.__dict__, "_stream": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._stream = _stream(xp(self._device))

    def __len__(self) -> int:
        count = int(self._seeds.shape[0])
        return count // self.batch_size if self.drop_last else -(-count // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (as torch's ``DistributedSampler.set_epoch``)."""
        self.epoch = check_int("epoch", epoch, minimum=0)

    def __iter__(self) -> Iterator[Blocks]:
        epoch, batches = self.epoch, len(self)
        self.epoch += 1
        worker = get_worker_info()
        first, every = (0, 1) if worker is None else (worker.id, worker.num_workers)  # a DataLoader worker's share
        x = xp(self._device)
        if x is np:
            check_cpu_kernels_run_here("gpipe.gnn.NeighborLoader", "DataLoader(..., multiprocessing_context='spawn')")
        count = int(self._seeds.shape[0])
        order = x.arange(count, dtype=x.int64)
        if self.shuffle:  # by each seed position's draw for the epoch (ties: by position)
            draws = _rng.draws(x, self._key, order, SHUFFLE_STEP, epoch)
            order = x.lexsort(x.stack([order.astype(x.uint64), draws[:, 0]]))
        if self._stream is not None:  # the loader's stream reads the order
            x.cuda.get_current_stream().synchronize()
        mine = range(first, batches, every)
        if not mine:
            return
        with ThreadPoolExecutor(1, thread_name_prefix="gpipe-gnn-loader") as ahead:
            upcoming = ahead.submit(self._batch, order, epoch, mine[0])
            for b in mine:
                batch = upcoming.result()
                if b + every < batches:
                    upcoming = ahead.submit(self._batch, order, epoch, b + every)
                yield batch

    def _batch(self, order, epoch: int, b: int) -> Blocks:
        """Batch ``b`` of the epoch whose seed order is ``order``, complete: on the GPU, sampled on the loader's
        stream, on the loader's device (this thread's current one may be another)."""
        if self._stream is None:
            return self._sample(order, epoch, b)
        with self._seeds.device, self._stream:
            blocks = self._sample(order, epoch, b)
            self._stream.synchronize()
        return blocks

    def _sample(self, order, epoch: int, b: int) -> Blocks:
        seeds, spec = self._seeds[order[b * self.batch_size:(b + 1) * self.batch_size]], self._spec
        blocks = sample(self._local, seeds, list(spec.fanouts), replace=spec.replace, weighted=spec.weighted,
                        key=self._key, batch=epoch * len(self) + b, fused=spec.fused, features=self._features)
        return blocks if self._labels is None else replace(blocks, labels=self._labels[seeds])


def _stream(x):
    """A stream of the loader's own on the GPU (cupy ``x``); None on the CPU."""
    return None if x is np else x.cuda.Stream(non_blocking=True)
