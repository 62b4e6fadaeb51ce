"""Programmable graph sampling (C-SAW): the bias-centric Sampler on the partitioned runtime, and built-ins on it;
:class:`EdgeSample`, the sampled subgraphs every sampler (and frontier sampling) keeps on the workers."""

from ._builtin import forest_fire, layer, neighbor, random_edge, random_node, snowball
from ._result import EdgeSample, SampleLayout
from ._sampler import Sampler

__all__ = ["EdgeSample", "SampleLayout", "Sampler", "forest_fire", "layer", "neighbor", "random_edge", "random_node",
           "snowball"]
