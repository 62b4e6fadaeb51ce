"""PyTorch Geometric's names for gpipe's loader, for code being ported: ``from gpipe.gnn.pyg import NeighborLoader``."""

from __future__ import annotations

from typing import Iterator

from . import _loader

__all__ = ["NeighborLoader"]


class NeighborLoader(_loader.NeighborLoader):
    """``torch_geometric.loader.NeighborLoader``'s arguments over a gpipe graph: :class:`gpipe.gnn.NeighborLoader`
    underneath, each batch handed over as PyG's ``Data`` (:meth:`gpipe.gnn.Blocks.to_pyg`: ``x``, ``y``,
    ``edge_index``, ``n_id``, ``e_id``, ``batch_size``, ``num_sampled_nodes``, ``num_sampled_edges``).

    Parameters
    ----------
    data : gpipe.Graph
        The graph (PyG's ``Data``: its ``x`` and ``y`` are ``features`` and ``labels`` here).
    num_neighbors : list of int
        Neighbors sampled per vertex at each hop, from the seeds outwards; -1 all of them (gpipe's ``fanouts``).
    input_nodes : array-like of int, boolean mask, or None
        The seeds: vertex ids, a mask with one entry per vertex, or None (every vertex), as PyG takes them.
    batch_size : int
        Seeds per batch (PyG's default, 1).
    shuffle, drop_last, replace : bool
        As PyG's (default False).
    edge_dir : {'in', 'out'}
        'in' (PyG's sampling: the edges into each vertex, messages flowing along ``edge_index`` from row 0 to
        row 1), or 'out'.
    **kwargs
        gpipe's own: ``features``, ``labels``, ``seed``, ``weighted``, ``fused``.

    Examples
    --------
    >>> from gpipe.gnn.pyg import NeighborLoader
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=1, directed=True)
    ...     loader = NeighborLoader(g, num_neighbors=[10, 5], input_nodes=range(100), batch_size=32, shuffle=True)
    ...     len(loader)   # each batch: loader's Data, with torch_geometric installed
    4
    """

    def __init__(self, data, num_neighbors, input_nodes=None, *, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, replace: bool = False, edge_dir: str = "in", **kwargs):
        super().__init__(data, _loader.seeds_of(data, input_nodes, "input_nodes"), num_neighbors, batch_size,
                         shuffle=shuffle, drop_last=drop_last, replace=replace, edge_dir=edge_dir, **kwargs)

    def __iter__(self) -> Iterator:
        for batch in super().__iter__():
            yield batch.to_pyg()
