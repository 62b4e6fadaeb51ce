"""Programmable graph sampling (C-SAW): the bias-centric Sampler on the partitioned runtime, and SELECT."""

from ._sampler import Sampler

__all__ = ["Sampler"]
