"""NeighborLoader: mini-batches of seeds, each sampled into Blocks in the trainer's process."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import numpy as np

from .. import _rng
from .._validate import check_bool, check_int
from ..backend import xp
from ..errors import GpipeValueError
from ._blocks import Blocks
from ._fused import sample
from ._local import local_graph
from ._sample import check_sampling

SHUFFLE_STEP = 1 << 31  # the step of the shuffle's draws: apart from the sampling's (its hops)


class NeighborLoader:
    """Mini-batches of seeds and their sampled neighborhoods, as PyG's and DGL's neighbor loaders give them.

    Each iteration is one epoch over ``seeds``, in ``batch_size`` batches (in
    a shuffled order when ``shuffle``), each yielded as :class:`Blocks` from
    :func:`sample_blocks` (the next epoch on the next iteration; see
    :meth:`set_epoch`). Sampling runs in this process, on the graph's CSR
    gathered once from the workers (on the GPU when the graph is on GPUs).
    The next batch is prepared while the current one is used: in a thread,
    and on the GPU on a stream of its own (a batch is complete when yielded).

    Parameters
    ----------
    g : gpipe.Graph
        A graph with integer vertex ids.
    seeds : array-like of int
        Distinct vertices (the training vertices).
    fanouts : list of int
        Neighbors picked per vertex at each hop, from the seeds outwards; ``-1`` every out-edge.
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
    replace, weighted, fused : bool
        As for :func:`sample_blocks`.

    Raises
    ------
    GpipeValueError
        As :func:`sample_blocks`, and ``batch_size`` below 1 or ``features``
        without a row per vertex.

    Examples
    --------
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=1)
    ...     loader = gpipe.gnn.NeighborLoader(g, seeds=range(100), fanouts=[10, 5], batch_size=32, seed=3)
    ...     [batch.output_nodes.size for batch in loader]
    [32, 32, 32, 4]
    """

    def __init__(self, g, seeds, fanouts, batch_size: int, shuffle: bool = True, drop_last: bool = False,
                 seed: int = 0, features=None, replace: bool = False, weighted: bool = False, fused: bool = True):
        dense, self._fanouts, self._replace, self._weighted, seed = check_sampling(g, seeds, fanouts, replace,
                                                                                    weighted, seed)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.shuffle, self.drop_last = check_bool("shuffle", shuffle), check_bool("drop_last", drop_last)
        self._fused = check_bool("fused", fused)
        self._key = _rng.key(seed)
        self._x = xp(g.device)
        self._seeds = self._x.asarray(dense)
        if features is not None:
            rows = getattr(features, "shape", (None,))[0]
            if rows != g.num_vertices:
                raise GpipeValueError(f"'features' must have a row per vertex ({g.num_vertices}), got "
                                      f"{getattr(features, 'shape', type(features).__name__)}")
            features = self._x.asarray(features)
        self._features = features
        self._local = local_graph(g)
        self._stream = None if self._x is np else self._x.cuda.Stream(non_blocking=True)
        self.epoch = 0

    def __len__(self) -> int:
        count = int(self._seeds.shape[0])
        return count // self.batch_size if self.drop_last else -(-count // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (as torch's ``DistributedSampler.set_epoch``)."""
        self.epoch = check_int("epoch", epoch, minimum=0)

    def __iter__(self) -> Iterator[Blocks]:
        epoch, batches = self.epoch, len(self)
        self.epoch += 1
        x = self._x
        count = int(self._seeds.shape[0])
        order = x.arange(count, dtype=x.int64)
        if self.shuffle:  # by each seed position's draw for the epoch (ties: by position)
            draws = _rng.draws(x, self._key, order, SHUFFLE_STEP, epoch)
            order = x.lexsort(x.stack([order.astype(x.uint64), draws[:, 0]]))
        if self._stream is not None:  # the loader's stream reads the order
            x.cuda.get_current_stream().synchronize()
        with ThreadPoolExecutor(1, thread_name_prefix="gpipe-gnn-loader") as ahead:
            upcoming = ahead.submit(self._batch, order, epoch, 0)
            for b in range(batches):
                batch = upcoming.result()
                if b + 1 < batches:
                    upcoming = ahead.submit(self._batch, order, epoch, b + 1)
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
        seeds = self._seeds[order[b * self.batch_size:(b + 1) * self.batch_size]]
        return sample(self._local, seeds, self._fanouts, replace=self._replace, weighted=self._weighted,
                      key=self._key, batch=epoch * len(self) + b, fused=self._fused, features=self._features)
