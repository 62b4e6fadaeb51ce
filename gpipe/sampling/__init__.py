"""Programmable graph sampling (C-SAW): the bias-centric Sampler on the partitioned runtime, and built-ins on it."""

from ._builtin import forest_fire, layer, neighbor, random_edge, random_node, snowball
from ._sampler import Sampler

__all__ = ["Sampler", "forest_fire", "layer", "neighbor", "random_edge", "random_node", "snowball"]
