"""How a run's calls and their results travel between client and workers (and between workers).

Small calls dominate a short run: Dask's serializers cost ~0.4 ms a message
each way, about a small sampling call's kernel, where one pickle costs ~20 us.
"""

from __future__ import annotations

from typing import Any

from distributed.protocol import pickle
from distributed.protocol.serialize import Pickled

INLINE_BYTES = 1 << 20  # a call's arrays up to this many bytes in all travel inside its pickle


def pack(obj) -> bytes | Pickled:
    """``obj`` (a call, or its result) for a message: one pickle when its arrays are small, else with each array
    a frame of its own (not copied into the pickle)."""
    buffers: list = []
    head = pickle.dumps(obj, buffer_callback=buffers.append)
    if sum(memoryview(b).nbytes for b in buffers) > INLINE_BYTES:
        return Pickled({"pickled-obj": head}, [memoryview(b).cast("B") for b in buffers])
    return pickle.dumps(obj) if buffers else head


def unpack(message):
    """What :func:`pack` made, as it arrives (Dask unpickles the framed form itself)."""
    return pickle.loads(message) if isinstance(message, bytes) else message


def dumps(obj) -> bytes:
    """``distributed.protocol.pickle.dumps(obj)``: ``obj`` as Dask pickles a task's result (pickle, else
    cloudpickle), for a family that sends it as bytes, to tell a result that cannot be pickled from a failed task."""
    return pickle.dumps(obj)


def loads(data: bytes) -> Any:
    """``distributed.protocol.pickle.loads(data)``: what :func:`dumps` made."""
    return pickle.loads(data)
