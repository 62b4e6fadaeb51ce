"""Programmable graph sampling (C-SAW): the bias-centric Sampler on the partitioned runtime, and built-ins on it;
:class:`EdgeSample`, the sampled subgraphs every sampler (and frontier sampling) keeps on the workers. Its fused
neighbor sampler, which ``gpipe.gnn``'s mini-batches share, is ``gpipe/_neighbor.py`` (SELECT: ``gpipe/_select.py``)."""

from ._builtin import forest_fire, layer, neighbor, random_edge, random_node, snowball
from ._result import EdgeSample, SampleLayout
from ._sampler import Sampler

__all__ = ["EdgeSample", "SampleLayout", "Sampler", "forest_fire", "layer", "neighbor", "random_edge", "random_node",
           "snowball"]
