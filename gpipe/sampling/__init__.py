"""Programmable graph sampling (C-SAW): the bias-centric Sampler on the partitioned runtime, and built-ins on it;
:class:`EdgeSample`, the sampled subgraphs every sampler (and frontier sampling) keeps on the workers; and, for
``gpipe.gnn``'s mini-batches, the one fused neighbor sampler (:func:`neighbor_queue`)."""

from ._builtin import forest_fire, layer, neighbor, random_edge, random_node, snowball
from ._fused import neighbor_queue
from ._result import EdgeSample, SampleLayout
from ._sampler import Sampler

__all__ = ["EdgeSample", "SampleLayout", "Sampler", "forest_fire", "layer", "neighbor", "neighbor_queue", "random_edge",
           "random_node", "snowball"]
