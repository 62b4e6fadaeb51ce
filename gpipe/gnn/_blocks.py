"""A sampled mini-batch as per-layer message-flow blocks, and its hand-over to PyTorch Geometric and DGL."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..backend import device_of, xp


@dataclass(frozen=True)
class Block:
    """One layer's sampled edges, ``src -> dst`` in local ids (positions in :attr:`Blocks.input_nodes`).

    Its destination nodes are local ids ``0..num_dst_nodes-1`` and its source
    nodes ``0..num_src_nodes-1``: the destinations are a prefix of the sources
    (DGL's message-flow graph). ``edge_ids`` are the edges' positions in the
    graph's CSR (sorted by source, then destination). Edges are sorted by
    destination; a destination's edges are in the order they were drawn.
    """

    src: Any
    dst: Any
    edge_ids: Any
    num_src_nodes: int
    num_dst_nodes: int


@dataclass(frozen=True)
class Blocks:
    """The sampled neighborhood of a mini-batch of seeds, all on one device (numpy or cupy arrays).

    Attributes
    ----------
    input_nodes : array
        Every sampled vertex (the graph's ids): the seeds first, then the
        vertices each hop found, hop by hop, each hop's in the graph's
        internal order (by id, unless it was renumbered). Local id ``i`` is
        ``input_nodes[i]``.
    output_nodes : array
        The seeds, in the order given: ``input_nodes[:len(output_nodes)]``.
    blocks : tuple of Block
        One per layer, input layer first (DGL's order): ``blocks[-1]`` holds
        the edges into the seeds, and ``blocks[0].num_src_nodes`` is
        ``len(input_nodes)``.
    num_sampled_nodes, num_sampled_edges : tuple of int
        Per hop from the seeds (PyG's order): the seeds, then the vertices
        each hop added; the edges each hop sampled.
    features : array or None
        The feature rows of ``input_nodes``, when a loader was given features.
    labels : array or None
        The label rows of ``output_nodes``, when a loader was given labels.
    """

    input_nodes: Any
    output_nodes: Any
    blocks: tuple
    num_sampled_nodes: tuple
    num_sampled_edges: tuple
    features: Any = None
    labels: Any = None

    @property
    def device(self) -> str:
        """'cpu' (numpy arrays) or 'gpu' (cupy arrays)."""
        return device_of(self.input_nodes)

    def to_pyg(self) -> Any:
        """A ``torch_geometric.data.Data`` shaped as PyG ``NeighborLoader``'s output.

        ``n_id`` (= ``input_nodes``), ``edge_index`` (row 0 the sampled
        neighbor, row 1 the vertex it was sampled for, in local ids; hop by hop
        from the seeds), ``e_id``, ``batch_size``, ``num_sampled_nodes``,
        ``num_sampled_edges`` and, given features, ``x`` and, given labels,
        ``y`` (the seeds' only: ``y[:batch_size]`` as with PyG). The tensors share the
        arrays' memory (through DLPack on the GPU). Needs torch and
        torch_geometric.
        """
        torch = _require("torch", "to_pyg")
        data = _require("torch_geometric.data", "to_pyg")
        x = xp(self.device)
        hops = self.blocks[::-1]
        edge_index = x.stack([x.concatenate([b.src for b in hops]), x.concatenate([b.dst for b in hops])])
        out = data.Data(edge_index=_tensor(torch, edge_index), n_id=_tensor(torch, self.input_nodes),
                        e_id=_tensor(torch, x.concatenate([b.edge_ids for b in hops])),
                        batch_size=int(self.output_nodes.shape[0]), num_sampled_nodes=list(self.num_sampled_nodes),
                        num_sampled_edges=list(self.num_sampled_edges), num_nodes=int(self.input_nodes.shape[0]))
        if self.features is not None:
            out.x = _tensor(torch, self.features)
        if self.labels is not None:
            out.y = _tensor(torch, self.labels)
        return out

    def to_dgl(self) -> list:
        """The layers as ``dgl.block`` s, input layer first, with ``dgl.NID`` on their nodes and ``dgl.EID`` on
        their edges (a DGL ``DataLoader`` yields ``input_nodes, output_nodes, blocks``); given features, the first
        block's ``srcdata["feat"]``, given labels, the last block's ``dstdata["label"]``. Needs torch and dgl."""
        torch = _require("torch", "to_dgl")
        dgl = _require("dgl", "to_dgl")
        out = []
        for b in self.blocks:
            block = dgl.create_block((_tensor(torch, b.src), _tensor(torch, b.dst)), num_src_nodes=b.num_src_nodes,
                                     num_dst_nodes=b.num_dst_nodes)
            block.srcdata[dgl.NID] = _tensor(torch, self.input_nodes[:b.num_src_nodes])
            block.dstdata[dgl.NID] = _tensor(torch, self.input_nodes[:b.num_dst_nodes])
            block.edata[dgl.EID] = _tensor(torch, b.edge_ids)
            out.append(block)
        if self.features is not None:
            out[0].srcdata["feat"] = _tensor(torch, self.features)
        if self.labels is not None:
            out[-1].dstdata["label"] = _tensor(torch, self.labels)
        return out


def _require(module: str, method: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0]
        raise ImportError(f"Blocks.{method}() needs {package}, which cannot be imported ({exc}): install it "
                          f"(`pip install 'gpipe[gnn]'` brings torch and torch_geometric; dgl from dgl.ai)") from None


def _tensor(torch, array):
    """A torch tensor sharing ``array``'s memory: numpy directly, cupy through DLPack."""
    return torch.from_numpy(array) if device_of(array) == "cpu" else torch.from_dlpack(array)
