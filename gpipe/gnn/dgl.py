"""DGL's names for gpipe's loader, for code being ported: ``from gpipe.gnn.dgl import DataLoader, NeighborSampler``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .._validate import check_bool, check_edge_dir, check_fanouts
from ..errors import GpipeValueError
from . import _loader

__all__ = ["DataLoader", "NeighborSampler"]


@dataclass(frozen=True)
class NeighborSampler:
    """``dgl.dataloading.NeighborSampler``'s arguments: ``fanouts`` in DGL's order, one a GNN layer, the input layer
    first, so the last is sampled around the seeds (-1: every neighbor; gpipe's own ``fanouts`` go from the seeds
    outwards, the other way round); ``edge_dir`` 'in' (DGL's default: each vertex's in-edges) or 'out'; ``prob`` any
    edge feature name to pick in proportion to the graph's weights (a gpipe graph has one); ``replace``."""

    fanouts: list
    edge_dir: str = "in"
    prob: str | None = None
    replace: bool = False

    def __post_init__(self):
        object.__setattr__(self, "fanouts", check_fanouts("fanouts", self.fanouts))
        check_edge_dir(self.edge_dir)
        check_bool("replace", self.replace)


class DataLoader(_loader.NeighborLoader):
    """``dgl.dataloading.DataLoader(graph, indices, graph_sampler, ...)`` over a gpipe graph with a
    :class:`NeighborSampler`: :class:`gpipe.gnn.NeighborLoader` underneath, each batch handed over as DGL's
    ``input_nodes, output_nodes, blocks`` (the blocks from :meth:`gpipe.gnn.Blocks.to_dgl`, needing dgl).

    ``indices``: the seeds (vertex ids, a boolean mask with an entry per vertex, or None: every vertex);
    ``batch_size`` (DGL's default, 1), ``shuffle``, ``drop_last`` as DGL's; ``**kwargs`` gpipe's own
    (``features``, ``labels``, ``seed``, ``fused``).

    Examples
    --------
    >>> from gpipe.gnn.dgl import DataLoader, NeighborSampler
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=1, directed=True)
    ...     loader = DataLoader(g, range(100), NeighborSampler([10, 5]), batch_size=32, drop_last=True)
    ...     len(loader)   # each batch: input_nodes, output_nodes, blocks, with dgl installed
    3
    """

    def __init__(self, graph, indices, graph_sampler: NeighborSampler, *, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, **kwargs):
        if not isinstance(graph_sampler, NeighborSampler):
            raise GpipeValueError(f"'graph_sampler' must be a gpipe.gnn.dgl.NeighborSampler, got "
                            f"{type(graph_sampler).__name__}")
        s = graph_sampler  # DGL samples its fanouts from the last, around the seeds, to the first
        super().__init__(graph, _loader.seeds_of(graph, indices, "indices"), s.fanouts[::-1], batch_size,
                         shuffle=shuffle, drop_last=drop_last, replace=s.replace, weighted=s.prob is not None,
                         edge_dir=s.edge_dir, **kwargs)

    def __iter__(self) -> Iterator[tuple]:  # type: ignore[override]  # DGL's batches, not gpipe's Blocks: the point
        for batch in super().__iter__():
            yield batch.input_nodes, batch.output_nodes, batch.to_dgl()
