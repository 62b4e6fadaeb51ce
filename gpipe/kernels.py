"""The CUDA kernels of ``kernels/*.cu``: each declared once, and the one loader that compiles them.

A kernel is declared once, next to its CPU twin, as a :class:`Kernel`: its
ordered arguments with their dtypes, the constants it shares with Python
(``defines``, injected as ``#define``s) and its launch shape. One keyword call,
``KERNEL.launch(indptr=..., n=..., ...)``, checks the arguments against the
declaration, then runs the numba twin on numpy arrays or the CUDA kernel on
cupy arrays, with the same arguments in the same order.
``tests/test_kernels.py`` checks every declaration against its ``__global__``
signature, and the table of ``kernels/README.md`` is :func:`readme_table`.

Each source file is compiled once per (device, file, defines, template
instantiation) through ``cupy.RawModule`` and memoized; templates are
instantiated with ``name_expressions``: for the ids' type, then the arguments a
declaration names (``template``), so one ``__global__`` with compile-time
switches is declared once per instantiation, not written out once per variant.
"""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import config
from .backend import device_of, xp
from .errors import GpipeError

# An argument's type name: its numpy dtype and its C type. ``IdT`` is the vertex-id type a templated kernel is
# instantiated for, that of a graph's CSR ``indices``: int32 below 2**31 vertices, else int64.
TYPES = {"i8": ("int8", "signed char"), "u8": ("uint8", "unsigned char"), "i32": ("int32", "int"),
         "u32": ("uint32", "unsigned int"), "i64": ("int64", "long long"), "u64": ("uint64", "unsigned long long"),
         "f32": ("float32", "float"), "f64": ("float64", "double")}
_ID_TYPES = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}


@dataclass(frozen=True)
class Arg:
    """One argument of a kernel.

    ``type`` is a scalar (``"i32"``), an array (``"i64[n]"``: what the brackets
    hold is documentation, but for their commas: ``"u64[n,2]"`` is passed as a
    2-D array, the twin's view of the kernel's flat one) or an array of vertex
    ids (``"IdT[]"``); ``out`` marks an array the kernel writes (a non-const
    pointer in CUDA).
    """

    name: str
    type: str
    out: bool = False
    note: str = ""

    def __post_init__(self):
        if self.base not in (*TYPES, "IdT") or (self.base == "IdT" or self.out) and not self.is_array:
            raise ValueError(f"kernel argument {self.name!r}: no such type {self.type!r}{' (out)' if self.out else ''}")

    @functools.cached_property
    def base(self) -> str:
        return self.type.split("[")[0]

    @functools.cached_property
    def is_array(self) -> bool:
        return self.type.endswith("]")

    @functools.cached_property
    def ndim(self) -> int:
        """The dimensions of the array the twin takes (1 but where the brackets say ``[n,2]``)."""
        return self.type.split("[")[1].count(",") + 1 if self.is_array else 0

    @functools.cached_property
    def dtype(self) -> np.dtype | None:
        """The numpy dtype (None for ``IdT``: the ids' own)."""
        return None if self.base == "IdT" else np.dtype(TYPES[self.base][0])


_DECLARED: dict[str, Kernel] = {}


@dataclass(frozen=True)
class Kernel:
    """A CUDA kernel of ``kernels/file`` and its numba CPU twin, declared once.

    ``args`` are the kernel's parameters in order; the twin takes the same, by
    the same names. ``items`` names the argument counting what the threads
    work on (walkers, segments, vertices ...): ``lanes`` threads start per item
    (32: a warp per item), or, when ``queued``, as many threads as stay
    resident, each taking the next item from a shared counter (the CUDA
    kernel's last parameter ``unsigned long long* next``, which the launcher
    adds: it is not declared, and the twin does not take it). ``defines`` are
    the constants the source uses as macros. A kernel with ``IdT[]`` arguments
    is a template, instantiated for their dtype, then for ``template``: the
    arguments of its other template parameters (``("true", "false")``), one
    declaration per instantiation, each named by :attr:`signature`.
    """

    file: str
    name: str
    args: tuple[Arg, ...]
    twin: Any  # a numba dispatcher: py_func, compile
    items: str
    queued: bool = False
    lanes: int = 1
    defines: dict = field(default_factory=dict)
    template: tuple[str, ...] = ()

    def __post_init__(self):
        names = [a.name for a in self.args]
        if len(set(names)) != len(names) or self.items not in names:
            raise ValueError(f"kernel {self.name}: arguments {names} must be unique and name items {self.items!r}")
        if self.signature in _DECLARED:
            raise ValueError(f"kernel {self.signature} is declared twice")
        _DECLARED[self.signature] = self

    @property
    def templated(self) -> bool:
        return any(a.base == "IdT" for a in self.args)

    @property
    def signature(self) -> str:
        """The kernel as the README names it: ``name``, or ``name<IdT, ...>`` with its template's arguments."""
        arguments = ("IdT",) * self.templated + self.template
        return f"{self.name}<{', '.join(arguments)}>" if arguments else self.name

    def instantiated(self, ids: np.dtype | None) -> tuple[str, ...]:
        """The template arguments of this kernel for ids of dtype ``ids`` (None: not templated on them)."""
        return (() if ids is None else (_ID_TYPES[np.dtype(ids)],)) + self.template

    def launch(self, **values) -> None:
        """Run the kernel on every declared argument, given by name: the twin on numpy arrays, CUDA on cupy ones."""
        names = [a.name for a in self.args]
        if set(values) != set(names):
            missing, extra = sorted(set(names) - set(values)), sorted(set(values) - set(names))
            raise TypeError(f"kernel {self.name}: missing arguments {missing}, unexpected {extra}")
        ids = {values[a.name].dtype for a in self.args if a.base == "IdT"}
        if len(ids) > 1 or not ids <= set(_ID_TYPES):
            raise TypeError(f"kernel {self.name}: the IdT arrays must share one dtype, int32 or int64, got "
                            f"{sorted(map(str, ids))}")
        device = device_of(next(values[a.name] for a in self.args if a.is_array))
        ordered = []
        for a in self.args:
            value = values[a.name]
            if not a.is_array:
                ordered.append(a.dtype.type(value))
                continue
            dtype = next(iter(ids)) if a.dtype is None else a.dtype
            if device_of(value) != device or value.dtype != dtype or not value.flags.c_contiguous:
                raise TypeError(f"kernel {self.name}: {a.name!r} must be a C-contiguous {dtype} array on the {device} "
                                f"like the others, got {value.dtype} on the {device_of(value)} "
                                f"(contiguous: {value.flags.c_contiguous})")
            ordered.append(value)
        if device == "cpu":
            self.twin(*ordered)
            return
        kernel = _function(self.file, self.name, defines=self.defines,
                           template=self.instantiated(next(iter(ids)) if ids else None))
        n = int(values[self.items])
        if self.queued:
            _launch_queued(kernel, n, tuple(ordered))
        else:
            _launch(kernel, n * self.lanes, tuple(ordered))

    def row(self) -> str:
        """This kernel's row of the table in ``kernels/README.md``."""
        args = [_describe(a) for a in self.args]
        if self.queued:
            args.append("next u64[1] (added by the launcher)")
            shape = f"resident threads taking the `{self.items}` items from `next`"
        else:
            shape = f"{'one thread' if self.lanes == 1 else f'{self.lanes} threads'} per item of `{self.items}`"
        defines = ", ".join(f"`{k}={v}`" for k, v in self.defines.items()) or "—"
        twin = self.twin.py_func
        return (f"| `{self.file}` | `{self.signature}` | {', '.join(args)} | {shape} | {defines} | "
                f"`{twin.__module__.replace('.', '/')}.py::{twin.__name__}` |")


def _describe(arg: Arg) -> str:
    notes = ["written"] * arg.out + [arg.note] * bool(arg.note)
    return f"{arg.name} {arg.type}" + (f" ({'; '.join(notes)})" if notes else "")


def declared() -> list[Kernel]:
    """Every declared kernel (all of gpipe's: importing ``gpipe`` imports the modules declaring them), by file."""
    return sorted(_DECLARED.values(), key=lambda k: (k.file, k.signature))


def readme_table() -> str:
    """The table of ``kernels/README.md``: each declared kernel's arguments, launch, defines and CPU twin."""
    head = ["| file | kernel | arguments (dtype) | launch | defines | CPU twin |", "|---|---|---|---|---|---|"]
    return "\n".join(head + [k.row() for k in declared()])


def warm(device: str, progress: Callable | None = None) -> dict:
    """Compile every declared kernel for ``device`` in this process, each instantiation once, into the caches that
    later processes load from: on ``"cpu"`` the numba twins (numba's cache beside gpipe's sources), on ``"gpu"``
    the CUDA sources for this process's GPU (CuPy's kernel cache). A first use then costs no compile: on a fresh
    install, a 2-core machine took 52 s to compile the twins and 0.46 s to load them once cached.
    ``progress(done, total, kernel)`` after each. Returns what it did: ``device``, ``kernels`` (instantiations)
    and ``seconds``."""
    started = time.perf_counter()
    todo: list[tuple[Kernel, Any]] = [(k, ids) for k in declared()
                                      for ids in (tuple(_ID_TYPES) if k.templated else (None,))]
    for done, (kernel, ids) in enumerate(todo, 1):
        try:
            if device == "gpu":
                _function(kernel.file, kernel.name, defines=kernel.defines, template=kernel.instantiated(ids))
            else:
                kernel.twin.compile(_twin_signature(kernel, ids))
        except Exception as exc:
            raise GpipeError(f"kernel {kernel.signature} ({kernel.file}) does not compile for the {device}"
                             f"{'' if ids is None else f' with {ids} ids'}: {exc}") from exc
        if progress is not None:
            progress(done, len(todo), kernel.signature)
    if device == "gpu":
        _warm_reductions()
    return {"device": device, "kernels": len(todo), "seconds": time.perf_counter() - started}


def _warm_reductions() -> None:
    """CuPy's reductions, compiled at first use and cached per host, in the form it takes for arrays of more than a
    few thousand elements (two passes): a walk sums its steps so (int32 differences summed as int64), and a first
    full-size DeepWalk on a fresh H200 host compiled it."""
    cupy = xp("gpu")
    int(cupy.ones(1 << 22, cupy.int32).sum(dtype=cupy.int64))


def _twin_signature(kernel: Kernel, ids: np.dtype | None) -> tuple:
    """The numba types a launch passes ``kernel``'s twin, the ids of dtype ``ids``: C arrays and numpy scalars."""
    import numba

    types = []
    for a in kernel.args:
        scalar = numba.from_dtype(ids if a.base == "IdT" else a.dtype)
        types.append(numba.types.Array(scalar, a.ndim, "C") if a.is_array else scalar)
    return tuple(types)


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


def _function(filename: str, name: str, *, defines: dict | None = None, template: tuple[str, ...] = ()):
    """The compiled kernel ``name`` (or ``name<template...>``) of ``kernels/filename``."""
    cupy = xp("gpu")
    expression = f"{name}<{', '.join(template)}>" if template else None
    module = _module(
        filename,
        tuple(sorted((defines or {}).items())),
        (expression,) if expression else (),
        cupy.cuda.runtime.getDevice(),
    )
    return module.get_function(expression or name)


def _launch(kernel, threads: int, args: tuple) -> None:
    """Run ``kernel`` with ``threads`` threads (nothing when that is 0)."""
    if threads <= 0:
        return
    per_block = min(config.get("kernels.threads-per-block"), kernel.max_threads_per_block)  # __launch_bounds__
    kernel(((threads + per_block - 1) // per_block,), (per_block,), args)


def _launch_queued(kernel, n: int, args: tuple) -> None:
    """Run a kernel whose threads take items from a shared counter (its last argument).

    As many threads start as the GPU keeps resident; each takes the next item
    when its last one is done, so items of very different cost keep every lane busy.
    """
    if n <= 0:
        return
    cupy = xp("gpu")
    threads = min(config.get("kernels.threads-per-block"), kernel.max_threads_per_block)  # __launch_bounds__
    counter = cupy.zeros(1, dtype=cupy.uint64)
    kernel((min(_resident_blocks(kernel, threads), (n + threads - 1) // threads),), (threads,), args + (counter,))


def _resident_blocks(kernel, threads: int) -> int:
    """How many blocks of ``threads`` the GPU keeps resident at once, as the kernel's registers allow."""
    sms, most_threads, most_registers = _multiprocessors(xp("gpu").cuda.runtime.getDevice())
    warps = (threads + 31) // 32
    per_warp = -(-kernel.num_regs * 32 // 256) * 256  # registers are given to a warp 256 at a time
    return sms * max(1, min(most_threads // threads, most_registers // (per_warp * warps)))


@functools.cache
def _multiprocessors(device_id: int) -> tuple[int, int, int]:
    """The GPU's multiprocessors, and threads and registers per multiprocessor, asked once (``Device.attributes``
    asks for every attribute at each read)."""
    attributes = xp("gpu").cuda.Device(device_id).attributes
    return (int(attributes["MultiProcessorCount"]), int(attributes["MaxThreadsPerMultiProcessor"]),
            int(attributes["MaxRegistersPerMultiprocessor"]))
