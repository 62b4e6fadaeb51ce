"""Sorting beyond device memory: :func:`external_sort`, GAMMA's multi-merge sort."""

from ._external import external_sort

__all__ = ["external_sort"]
