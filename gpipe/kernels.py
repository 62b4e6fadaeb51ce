"""The one loader for the CUDA kernels in ``kernels/*.cu``.

Each source file is compiled once per (device, file, defines, template
instantiations) through ``cupy.RawModule`` and memoized; constants are
injected as ``#define``s and templates instantiated with ``name_expressions``.
``kernels/README.md`` lists every kernel's arguments, dtypes and launch shape.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np

from . import config
from .backend import xp


def kernel_dir() -> Path:
    """``gpipe/_kernels`` in an installed wheel, ``kernels/`` in a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_kernels", here.parent / "kernels"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"gpipe's CUDA sources are missing: looked in {here / '_kernels'} and {here.parent / 'kernels'}")


@functools.cache
def _module(filename: str, defines: tuple, name_expressions: tuple, device_id: int):
    cupy = xp("gpu")
    folder = kernel_dir()
    header = "".join(f"#define {k} {v}\n" for k, v in defines)
    # CuPy's on-disk cache keys a module by its source text, not by the headers it includes: name their
    # contents, or a changed header would be served its old binaries (seen: a stale gp_philox in rmat.cu)
    headers = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(folder.glob("*.cuh")))).hexdigest()
    source = f"// headers {headers}\n" + header + (folder / filename).read_text()
    options = ("-std=c++17", f"-I{folder}")
    return cupy.RawModule(code=source, options=options, name_expressions=name_expressions or None)


def function(filename: str, name: str, *, defines: dict | None = None, template: str | None = None):
    """The compiled kernel ``name`` (or ``name<template>``) of ``kernels/filename``."""
    cupy = xp("gpu")
    expression = f"{name}<{template}>" if template else None
    module = _module(
        filename,
        tuple(sorted((defines or {}).items())),
        (expression,) if expression else (),
        cupy.cuda.runtime.getDevice(),
    )
    return module.get_function(expression or name)


def launch(kernel, n: int, args: tuple) -> None:
    """Run ``kernel`` with one thread per item of ``n`` (nothing when ``n`` is 0)."""
    if n <= 0:
        return
    threads = int(config.get("kernels.threads-per-block"))
    kernel(((n + threads - 1) // threads,), (threads,), args)


def launch_queued(kernel, n: int, args: tuple) -> None:
    """Run a kernel whose threads take items from a shared counter (its last argument).

    As many threads start as the GPU keeps resident; each takes the next item
    when its last one is done, so items of very different cost keep every lane busy.
    """
    if n <= 0:
        return
    cupy = xp("gpu")
    threads = int(config.get("kernels.threads-per-block"))
    device = cupy.cuda.Device()
    resident = device.attributes["MultiProcessorCount"] * (2048 // threads)
    counter = cupy.zeros(1, dtype=cupy.uint64)
    kernel((min(resident, (n + threads - 1) // threads),), (threads,), args + (counter,))


def id_type(dtype) -> str:
    """The C++ type that instantiates a kernel for vertex ids of ``dtype``."""
    return {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}[np.dtype(dtype)]
