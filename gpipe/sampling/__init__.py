"""Programmable graph sampling (C-SAW): the SELECT kernel today; the Sampler and built-in samplers build on it."""

__all__: list[str] = []
