"""gpipe's settings: defaults (gpipe/gpipe.yaml) merged into ``dask.config`` under ``gpipe.``, each read through
:func:`get`, which checks it against its rule (:data:`RULES`)."""

from __future__ import annotations

import math
import numbers
import os
from typing import Any

import dask.config
import yaml

from ._validate import check_bool, check_bytes, check_choice, check_int, check_probability
from .backend import DEVICES
from .errors import GpipeValueError

_DEFAULTS_FILE = os.path.join(os.path.dirname(__file__), "gpipe.yaml")

with open(_DEFAULTS_FILE) as _f:
    dask.config.update_defaults(yaml.safe_load(_f))

EXCHANGES = ("auto", "nccl", "comms")  # gpipe.exchange: the ends of supersteps between workers
MODES = ("auto", "partitioned", "replicated")  # gpipe.graph.mode, and read_edges' and from_edges' 'mode'
POLICIES = ("workload", "round-robin")  # gpipe.memory.schedule
TRANSFERS = ("auto", "memory", "comms")  # gpipe.results.transfer


def _choice(choices):
    return lambda name, value: check_choice(name, value, choices)


def _count(minimum: int = 1, maximum: int | None = None, *, none: bool = False, auto: bool = False):
    """An integer of at least ``minimum`` (and at most ``maximum``), or null / 'auto' where they are allowed."""
    def rule(name, value):
        if (none and value is None) or (auto and value == "auto"):
            return value
        if auto and isinstance(value, str):
            raise GpipeValueError(f"'{name}' must be 'auto' or a positive integer, got {value!r}")
        return check_int(name, value, minimum=minimum, maximum=maximum)
    return rule


def _bytes(minimum: int, *, none: bool = False):
    """'auto', a byte count (an int or a string such as '4 GB', returned as an int), or null where it is allowed."""
    return lambda name, value: value if value == "auto" or (none and value is None) else check_bytes(
        name, value, minimum=minimum)


def _fraction(*, open_low: bool = False):
    return lambda name, value: check_probability(name, value, open_low=open_low)


def _text(*, absolute: bool = False):
    """null or a non-empty string; ``absolute``: a path, made absolute here, where the client reads the setting,
    since the workers that open it may have another working directory."""
    def rule(name, value):
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise GpipeValueError(f"'{name}' must be null or a non-empty string, got {value!r}")
        return os.path.abspath(value) if absolute else value
    return rule


def _seconds(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
        raise GpipeValueError(f"'{name}' must be null (no limit) or a positive number of seconds, got {value!r}")
    return value


#: Every setting under ``gpipe.`` (a key of gpipe.yaml), with its rule: ``rule(name, value)`` returns the value
#: (a byte count given as a string, as an int) or raises a GpipeValueError naming ``name`` and the value.
RULES = {
    "device": _choice(DEVICES),
    "partitions-per-worker": _count(),
    "exchange": _choice(EXCHANGES),
    "exchange-chunks": _count(1, 1024, auto=True),  # (at most _exchange.MAX_CHUNKS: its rounds' mail numbers)
    "graph.chunk-edges": _count(),
    "graph.read-bytes": _bytes(1),
    "graph.mode": _choice(MODES),
    "graph.replicate-fraction": _fraction(open_low=True),
    "memory.device-partitions": _count(none=True),
    "memory.schedule": _choice(POLICIES),
    "memory.read-in-place-below": _fraction(),
    "memory.output-limit": _bytes(0, none=True),
    "memory.sort-budget": _bytes(1),
    "dynamic.dense-fraction": _fraction(open_low=True),
    "mining.ranges": _count(),
    "mining.chunk-embeddings": _count(auto=True),
    "mining.device-budget": _bytes(0),
    "mining.host-budget": _bytes(0),
    "mining.spill-directory": _text(absolute=True),
    "results.transfer": _choice(TRANSFERS),
    "walks.block-size": _count(),
    "sampling.block-size": _count(),
    "sampling.fused": check_bool,
    "sampling.candidate-budget": _bytes(0),
    "kernels.threads-per-block": _count(1, 1024),  # CUDA's most threads in a block
    "cluster.scheduler-file": _text(),
    "cluster.address": _text(),
    "cluster.n-workers": _count(none=True),
    "cluster.wait-for-workers": _count(none=True),
    "cluster.wait-timeout": _seconds,
}


def get(key: str) -> Any:
    """``dask.config.get('gpipe.' + key)``, checked against its rule in :data:`RULES`: a bad value is a
    :class:`~gpipe.GpipeValueError` naming the setting and the value."""
    return RULES[key](f"gpipe.{key}", dask.config.get(f"gpipe.{key}"))


def budget(key: str, value=None, name: str | None = None) -> int | None:
    """A budget in bytes: ``value`` (the parameter ``name``: bytes or 'auto'), or the setting ``gpipe.<key>`` where
    ``value`` is None; None for 'auto', which each worker decides by its memory."""
    if value is None:
        value = get(key)
    elif value != "auto":
        value = check_bytes(name, value)
    return None if value == "auto" else value
