"""sample_blocks: one mini-batch's multi-hop neighborhood, sampled in this process; the checks it shares with
the loader."""

from __future__ import annotations

import numpy as np

from .. import _rng
from .._validate import check_array, check_bool, check_fanouts, check_seed
from ..backend import to_host, xp
from ..errors import GpipeValueError
from ..graph import check_graph, oriented
from ._blocks import Blocks
from ._fused import sample
from ._local import local_graph


def sample_blocks(g, seeds, fanouts, replace: bool = False, weighted: bool = False, seed: int = 0,
                  fused: bool = True, *, edge_dir: str = "out") -> Blocks:
    """Sample the multi-hop neighborhood of a mini-batch of seeds, as one block per layer (GraphSAGE sampling).

    Hop ``h`` picks up to ``fanouts[h]`` out-neighbors (in-neighbors with
    ``edge_dir='in'``) of every vertex of its frontier; the next frontier is that frontier and the picked neighbors
    (the destination nodes of a layer are among its source nodes). Runs in
    this process on the graph's CSR, gathered from the workers on first use
    and kept (on the GPU when the graph is on GPUs): no Dask round trip per
    call. By default all hops run in one pass (PGSampler): a persistent
    kernel over a queue of (vertex, hop) tasks, each done once.

    Parameters
    ----------
    g : gpipe.Graph
        A graph with integer vertex ids.
    seeds : array-like of int
        Distinct vertices: the output nodes.
    fanouts : list of int
        Neighbors picked per vertex at each hop, from the seeds outwards;
        ``-1`` takes every one.
    replace : bool
        Pick with replacement (``fanout`` independent draws per vertex).
    weighted : bool
        Pick in proportion to the edge weights (without replacement: each
        next pick in proportion among those left; zero weights are never
        picked, but by ``-1``).
    seed : int
        The picks of vertex ``v`` at hop ``h`` depend on ``(seed, v, h)``
        only: the blocks are the same fused or not, on either device, and
        for any partitioning of the graph.
    fused : bool
        All hops in one kernel launch (default), or hop by hop as DGL's
        ``NeighborSampler`` does (bulk-synchronous: a sampling kernel over
        the hop's frontier, then a unique to number the new vertices before
        the next hop; for comparison); the blocks are the same.
    edge_dir : {'out', 'in'}
        Pick each vertex's out-neighbors, or its in-neighbors (what a GNN
        aggregates on a directed graph, and PyG's and DGL's samplers pick):
        the blocks of the graph's reverse (:meth:`gpipe.Graph.reverse`, built
        at the first such call and kept; a block's ``edge_ids`` are then
        positions in the reverse's CSR). The same on an undirected graph.

    Returns
    -------
    Blocks
        ``input_nodes``, ``output_nodes``, ``blocks`` (input layer first) and
        the per-hop counts, on the graph's device.

    Raises
    ------
    GpipeValueError
        Bad ``fanouts`` (empty, 0 or below -1), seeds not in the graph or
        repeated, ``weighted`` on a graph without weights.

    Examples
    --------
    >>> with gpipe.connect(n_workers=1, device="cpu"):
    ...     g = gpipe.generators.rmat(10, seed=1)
    ...     blocks = gpipe.gnn.sample_blocks(g, seeds=[0, 1, 2], fanouts=[5, 3], seed=7)
    ...     [(b.num_src_nodes, b.num_dst_nodes) for b in blocks.blocks], blocks.num_sampled_nodes
    ([(34, 10), (10, 3)], (3, 7, 24))
    """
    g, dense, fanouts, replace, weighted, seed = check_sampling(g, seeds, fanouts, replace, weighted, seed, edge_dir)
    local = local_graph(g)
    x = xp(g.device)
    return sample(local, x.asarray(dense), fanouts, replace=replace, weighted=weighted, key=_rng.key(seed), batch=0,
                  fused=check_bool("fused", fused))


def check_sampling(g, seeds, fanouts, replace, weighted, seed, edge_dir) -> tuple:
    """The checked parameters, with ``g`` the graph ``edge_dir`` reads (:func:`gpipe.graph.oriented`) and ``seeds``
    as distinct dense ids (numpy)."""
    check_graph("g", g)
    fanouts = check_fanouts("fanouts", fanouts)
    replace, weighted = check_bool("replace", replace), check_bool("weighted", weighted)
    if weighted and not g.weighted:
        raise GpipeValueError("'weighted' = True needs a graph with edge weights; this graph has none")
    values = check_array("seeds", to_host(seeds) if hasattr(seeds, "__cuda_array_interface__") else seeds)
    if values.ndim != 1 or values.size == 0:
        raise GpipeValueError(f"'seeds' must be a non-empty 1-D array of vertices, got shape {values.shape}")
    dense = g.to_internal(values, "seeds")
    unique, counts = np.unique(dense, return_counts=True)
    if (counts > 1).any():
        repeated = g.to_original(unique[counts > 1])
        raise GpipeValueError(f"'seeds' must be distinct vertices; {repeated.size} repeat, e.g. "
                              f"{repeated[:3].tolist()}")
    return oriented(g, edge_dir), dense, fanouts, replace, weighted, check_seed("seed", seed)
