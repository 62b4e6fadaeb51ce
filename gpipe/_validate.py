"""Checks at the public boundary: each names the parameter, the rule and the value."""

from __future__ import annotations

import functools
import inspect
import numbers
import os
import textwrap
import warnings
from collections.abc import Callable, Iterable

import cloudpickle
import numpy as np
from distributed import Client

from .errors import GpipeValueError


def renamed(old: str, new: str) -> Callable[[Callable], Callable]:
    """A decorator: the function's parameter ``new`` is still taken by its old name ``old`` for one release, with a
    DeprecationWarning that names both; both at once is an error that names both."""
    def rename(function: Callable) -> Callable:
        parameters = list(inspect.signature(function).parameters)
        position = parameters.index(new)  # ``new`` came by position when more arguments than this did

        @functools.wraps(function)
        def call(*args, **kwargs):
            if old in kwargs:
                name = function.__name__
                if new in kwargs or len(args) > position:
                    raise GpipeValueError(f"{name}(): '{new}' and '{old}' (its old name) must not both be given, got "
                                          f"both: pass {new} only")
                warnings.warn(f"{name}(): '{old}' is deprecated, it is now '{new}' ({name}({parameters[0]}, "
                              f"{new}=...)); '{old}' goes in the next release", DeprecationWarning, stacklevel=2)
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)
        return call
    return rename


def check_int(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise GpipeValueError(f"'{name}' must be an integer, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise GpipeValueError(f"'{name}' must be {rule}, got {value}")
    if maximum is not None and value > maximum:
        raise GpipeValueError(f"'{name}' must be an integer <= {maximum}, got {value}")
    return value


def check_optional_int(name: str, value, *, minimum: int | None = None) -> int | None:
    return None if value is None else check_int(name, value, minimum=minimum)


def check_probability(name: str, value, *, open_low: bool = False, open_high: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):  # type: ignore[call-overload]
        raise GpipeValueError(f"'{name}' must be a finite number, got {value!r}")
    value = float(value)
    low_ok = value > 0 if open_low else value >= 0
    high_ok = value < 1 if open_high else value <= 1
    if not (low_ok and high_ok):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise GpipeValueError(f"'{name}' must be in {interval}, got {value}")
    return value


def check_choice(name: str, value, choices) -> str:
    if value not in choices:
        raise GpipeValueError(f"'{name}' must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


VERTEX_ORDERS = ("rcmk", "metis")  # DGL's names (dgl.reorder_graph's node_permute_algo) for the same orders


def check_vertex_order(name: str, value) -> str | None:
    """A graph builder's vertex order: None, or one of :data:`VERTEX_ORDERS`; 'metis' only where pymetis is
    installed."""
    if value is None:
        return None
    if not isinstance(value, str) or value not in VERTEX_ORDERS:
        raise GpipeValueError(f"'{name}' must be None or one of {', '.join(map(repr, VERTEX_ORDERS))}; got {value!r}")
    if value == "metis":
        try:
            import pymetis  # noqa: F401
        except ImportError as exc:
            raise GpipeValueError(f"'{name}' 'metis' needs pymetis, which is not installed here ({exc}): install it "
                                  "with `pip install pymetis`, or choose 'rcmk'") from None
    return value


def check_seed(name: str, value) -> int:
    return check_int(name, value, minimum=0, maximum=2**63 - 1)


def check_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise GpipeValueError(f"'{name}' must be true or false, got {value!r}")
    return value


def check_path(name: str, value) -> str:
    """A path to write: a str, or an ``os.PathLike`` (``pathlib.Path``) that gives one."""
    path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(path, str):
        raise GpipeValueError(f"'{name}' must be a str or an os.PathLike path, got {value!r}")
    return path


def check_array(name: str, value) -> np.ndarray:
    """``value`` as a numpy array; nested rows of different lengths are refused, naming the lengths."""
    try:
        return np.asarray(value)
    except ValueError:
        first_row: dict[int, int] = {}  # each row length, at the first row that has it
        for row, item in enumerate(value):
            first_row.setdefault(_length(item), row)
        if len(first_row) == 1:  # the rows agree at the top: they differ further down
            raise GpipeValueError(f"'{name}' must be a regular array of numbers, got rows nested unevenly "
                                  f"within them") from None
        shown = [f"{length} (row {row})" for length, row in first_row.items()]
        if len(shown) > 4:
            shown = shown[:3] + [f"{len(shown) - 3} other lengths"]
        raise GpipeValueError(f"'{name}' must have rows of equal length, got rows of {', '.join(shown[:-1])} and "
                              f"{shown[-1]}") from None


def _length(row) -> int:
    try:
        return 1 if isinstance(row, str) else len(row)
    except TypeError:  # a scalar among the rows
        return 1


def check_client(name: str, value) -> Client:
    """A Dask client still connected to its cluster."""
    if not isinstance(value, Client):
        raise GpipeValueError(f"'{name}' must be a distributed.Client (gpipe.connect() returns one), got {value!r}")
    if value.status != "running":
        raise GpipeValueError(f"'{name}' must be a connected client, got one that is {value.status}: connect again "
                              "with gpipe.connect()")
    return value


def check_picklable(name: str, value):
    """``value`` if cloudpickle, Dask's serializer of functions, can send it to the workers."""
    try:  # a captured array's buffers stay out of band: checked, not copied
        cloudpickle.dumps(value, protocol=5, buffer_callback=lambda buffer: False)
    except Exception as exc:  # whatever a captured object's reduction raises
        cause = textwrap.shorten(str(exc), 120, placeholder=" ...")
        raise GpipeValueError(f"'{name}' must be picklable (by cloudpickle) to reach the workers; pickling it "
                              f"failed: {cause}") from None
    return value


def check_callable(name: str, value):
    if not callable(value):
        raise GpipeValueError(f"'{name}' must be callable, got {value!r}")
    return value


def check_texts(name: str, value) -> list[str]:
    """``value`` as a list, if it is an iterable of strings (a string alone is refused: it is not a list of them)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise GpipeValueError(f"'{name}' must be an iterable of strings, got {value!r}")
    items = list(value)
    for item in items:
        if not isinstance(item, str):
            raise GpipeValueError(f"'{name}' must be an iterable of strings, got {item!r} among them")
    return items


def check_text(name: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise GpipeValueError(f"'{name}' must be a non-empty string, got {value!r}")
    return value


def check_mapping(name: str, value) -> dict:
    if not isinstance(value, dict):
        raise GpipeValueError(f"'{name}' must be a mapping of keys to values, got {value!r}")
    return value


def check_fanouts(name: str, value, depth: int | None = None) -> list[int]:
    """Per-depth fanouts (neighbors picked per vertex at each depth, from the seeds outwards): a non-empty list of
    positive ints or -1 (every neighbor), one a depth (``depth``, when given, its length); or, given ``depth``, one
    such int for each of its depths."""
    if depth is not None and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        values: list | None = [value] * check_int("depth", depth, minimum=1)
    else:
        values = list(value) if isinstance(value, (list, tuple)) else None
    if not values or any(isinstance(f, bool) or not isinstance(f, numbers.Integral) or (f < 1 and f != -1)
                         for f in values):
        either = "" if depth is None else ", or one such int"
        raise GpipeValueError(f"'{name}' must be a non-empty list of positive ints or -1 (every neighbor){either}, "
                              f"got {value!r}")
    if depth is not None and check_int("depth", depth, minimum=1) != len(values):
        raise GpipeValueError(f"'depth' must be None or the length of '{name}' ({len(values)}), got {depth}")
    return [int(f) for f in values]


EDGE_DIRS = ("out", "in")  # PyG's and DGL's edge_dir: which neighbors of a vertex a sampler, walk or loader reads


def check_edge_dir(value) -> str:
    """``edge_dir``: 'out' (a vertex's out-neighbors, the edges as stored) or 'in' (its in-neighbors)."""
    return check_choice("edge_dir", value, EDGE_DIRS)


def check_bytes(name: str, value, *, minimum: int = 0) -> int:
    """A byte count given as an integer or a string such as ``'4 GB'``."""
    if isinstance(value, str):
        from dask.utils import parse_bytes

        try:
            value = parse_bytes(value)
        except (ValueError, OverflowError):  # OverflowError: a float past every integer, such as '1e400'
            raise GpipeValueError(f"'{name}' must be a byte count such as 1000000 or '4 GB', got {value!r}") from None
    return check_int(name, value, minimum=minimum)


def check_integers(name: str, value, *, minimum: int | None = 0) -> np.ndarray:
    """``value`` as an int64 array of integers (ids, labels), kept exactly or refused naming the first bad one.

    Floats (a pandas float Series included), booleans, strings and objects are refused, as are uint64 values of
    2**63 or more, which int64 would wrap to negatives; ``minimum`` (default 0) bounds the values from below.
    """
    values = value.to_numpy() if hasattr(value, "to_numpy") else check_array(name, value)
    if values.dtype.kind in "iuf" and not isinstance(value, np.ndarray) and not hasattr(value, "to_numpy"):
        # a Python sequence as given: numpy reads a boolean among ints as an int, and ints past 2**63 as floats
        exact = np.asarray(value, dtype=object)
        if any(isinstance(v, (bool, np.bool_)) for v in exact.flat) or (
                values.dtype.kind == "f" and all(_int(v) for v in exact.flat)):
            values = exact
    if values.dtype == object and values.size:  # Python ints, maybe past int64: keep them exact or refuse
        if all(_int(v) for v in values.flat):
            too_big = [v for v in values.flat if not -2**63 <= int(v) < 2**63]
            if too_big:
                raise GpipeValueError(f"'{name}' must hold integers below 2**63, got {too_big[0]}")
            values = values.astype(np.int64)
    if values.size and values.dtype.kind not in "iu":
        first = next((v for v in values.flat if isinstance(v, (bool, np.bool_)) or not _whole(v)), values.flat[0])
        shown = first.item() if isinstance(first, np.generic) else first
        raise GpipeValueError(f"'{name}' must hold integers, got dtype {values.dtype} (e.g. {shown!r})")
    if values.dtype.kind == "u" and values.size and values.max() >= 2**63:
        raise GpipeValueError(f"'{name}' must hold integers below 2**63, got {int(values.max())}")
    values = values.astype(np.int64, copy=False)
    if minimum is not None and values.size and values.min() < minimum:
        raise GpipeValueError(f"'{name}' must hold integers >= {minimum}, got {int(values.min())}")
    return values


def check_edge_index(name: str, value: np.ndarray) -> np.ndarray:
    """PyG's ``edge_index``: a 2 x E array of at least one edge's non-negative integer vertex ids, sources in row 0
    and targets in row 1; as int64."""
    if value.ndim != 2 or value.shape[0] != 2:
        hint = f": pass {name}.T for an E x 2 array" if value.ndim == 2 and value.shape[1] == 2 else ""
        raise GpipeValueError(f"'{name}' must be a 2 x E array (sources in row 0, targets in row 1), got shape "
                              f"{value.shape}{hint}")
    if value.shape[1] == 0:
        raise GpipeValueError(f"'{name}' must hold at least one edge, got shape {value.shape}")
    return check_integers(name, value)


def check_per_edge(name: str, value: np.ndarray, edges: int) -> np.ndarray:
    """``value``, if it holds one number per edge: a 1-D array of ``edges`` values."""
    if value.shape != (edges,):
        raise GpipeValueError(f"'{name}' must be a 1-D array of one value per edge ({edges}), got shape {value.shape}")
    return value


def check_sparse_square(name: str, value) -> None:
    """A sparse matrix of at least one stored entry whose rows and columns are the same vertices: square."""
    shape = getattr(value, "shape", None)
    if not hasattr(value, "tocoo") or shape is None or len(shape) != 2:
        raise GpipeValueError(f"'{name}' must be a SciPy sparse matrix or array (CSR, CSC, COO, ...), got "
                              f"{type(value).__name__}: a dense array a converts with scipy.sparse.csr_array(a)")
    if shape[0] != shape[1]:
        raise GpipeValueError(f"'{name}' must be square (row i and column i are vertex i), got shape {shape}")
    if value.nnz == 0:
        raise GpipeValueError(f"'{name}' must hold at least one stored entry (an edge), got none in shape {shape}")


def _int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _whole(value) -> bool:
    """Whether ``value`` is an integer, or a float that holds one (shown only where no other value is to blame)."""
    return isinstance(value, numbers.Integral) or (isinstance(value, numbers.Real) and float(value).is_integer())


def is_ascii_digits(text: str) -> bool:
    """Whether ``text`` is decimal digits 0-9 only: ``str.isdigit`` alone takes other scripts' digits and
    superscripts (``int('²')`` raises, ``int('١٢')`` is 12), and ``int`` also takes signs, spaces and underscores."""
    return text.isascii() and text.isdigit()
