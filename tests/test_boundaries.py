"""A package's door is its ``__init__``: no module imports another package's private names.

The rule, checked on every import (and every attribute chain from an imported
gpipe name) in each module of ``gpipe/`` and ``workflows/``:

* A name or module whose name starts with ``_`` (dunders aside) belongs to the
  package whose folder holds it: a private module or subpackage to the
  package above it, a private name in a module to that module's package.
* A module of gpipe may import a private name of its own package
  (``from ._store import store`` in ``gpipe/runtime/``) or of a package above
  it: the top-level modules (``gpipe/_validate.py``, ``gpipe/_rng.py``,
  ``gpipe/_files.py``, ...) are gpipe's own shared internals, which every
  subpackage may use.
* Nothing else: not a sibling package's private module
  (``from ..runtime._store import store``, ``from ..runtime import _store``,
  ``import gpipe.runtime._files``), nor one of a subpackage from above
  (``from ..graph._readers import FORMATS`` in ``gpipe/cli/_walk.py``).
* The shipped workflows, which users copy, stand outside the package: they
  use public names only (``gpipe._validate`` is not one).

A private attribute reached through an object that another package hands over
(``partition._cdf`` in the runtime, ``g._put_on_workers`` in sampling) is out of
an import's sight; it is kept out by review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import distributed
import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(REPO / "gpipe").rglob("*.py"), *(REPO / "workflows").rglob("*.py")])


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _owner(parts: list[str], i: int) -> list[str]:
    """The package that owns ``parts[i]``: the one above a module or package, the module's package for a name."""
    for j in range(i, 0, -1):
        if REPO.joinpath(*parts[:j]).with_suffix(".py").is_file():
            return parts[:j - 1]
        if REPO.joinpath(*parts[:j], "__init__.py").is_file():
            return parts[:j]
    return []


def _package(path: Path) -> list[str] | None:
    """The package a source file belongs to (its folder), None outside gpipe."""
    parts = list(path.relative_to(REPO).parts)
    return parts[:-1] if parts[0] == "gpipe" else None


def _crossing(target: str, package: list[str] | None) -> bool:
    """Whether the dotted gpipe path ``target`` passes a private name that ``package`` may not use."""
    parts = target.split(".")
    for i, name in enumerate(parts):
        if _private(name):
            owner = _owner(parts, i)
            if package is None or package[:len(owner)] != owner:
                return True
    return False


def violations(source: str, path: Path) -> list[str]:
    """``path:line: gpipe.name`` for each import or attribute of ``source`` (the module at ``path``) off the rule."""
    package = _package(path)
    bound: dict[str, str] = {}  # local name -> the gpipe module or name it is bound to
    found = []

    def check(node: ast.AST, target: str) -> None:
        if target.split(".")[0] == "gpipe" and _crossing(target, package):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: {target}")

    tree = ast.parse(source, str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check(node, alias.name)
                local = alias.asname or alias.name.split(".")[0]
                bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module
            for alias in node.names:
                target = f"{origin}.{alias.name}"
                check(node, target)
                bound[alias.asname or alias.name] = target
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = []
            while isinstance(node, ast.Attribute):
                chain.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name) and node.id in bound and any(map(_private, chain)):
                check(node, ".".join([bound[node.id], *reversed(chain)]))
    return list(dict.fromkeys(found))  # an attribute chain is met once per link


@pytest.mark.parametrize("source, where, bad", [
    ("from ._store import store", "gpipe/runtime/_driver.py", False),
    ("from .._validate import check_int", "gpipe/graph/_graph.py", False),
    ("from .. import _rng", "gpipe/walks/_mh.py", False),
    ("from ..runtime import store", "gpipe/graph/_graph.py", False),
    ("from ..runtime._store import store", "gpipe/graph/_graph.py", True),
    ("from ..runtime import _store", "gpipe/graph/_graph.py", True),
    ("import gpipe.runtime._files", "gpipe/cli/_walk.py", True),
    ("from ..graph._readers import FORMATS", "gpipe/cli/_walk.py", True),
    ("from ._progress import _Phase", "gpipe/cli/_walk.py", False),
    ("from ._store import _rows", "gpipe/runtime/_driver.py", False),
    ("from ._graph import _private", "gpipe/graph/_io.py", False),
    ("from ._graph import Graph\nGraph._put_on_workers", "gpipe/graph/_io.py", False),
    ("from ..graph import Graph\nGraph._put_on_workers", "gpipe/sampling/_sampler.py", True),
    ("from gpipe._validate import check_int", "workflows/embeddings/run.py", True),
    ("import gpipe\ngpipe._validate.check_int('n', 1)", "workflows/embeddings/run.py", True),
    ("from gpipe import workflow\nworkflow._read_yaml('x')", "workflows/embeddings/run.py", True),
    ("import gpipe\ngpipe.workflow.write_json('x', {})", "workflows/embeddings/run.py", False),
])
def test_the_rule_tells_a_private_import_across_packages(source, where, bad):
    assert bool(violations(source, REPO / where)) == bad


def test_no_module_imports_another_packages_private_names():
    found = [line for path in SOURCES for line in violations(path.read_text(), path)]
    assert not found, "imports of private names across package boundaries:\n" + "\n".join(found)


# The floors of gpipe, lowest first: a module imports only from its own floor or below, and no circle runs through
# the units (a top-level module, or a subpackage as a whole), lazy imports inside functions included.
FLOORS = (
    ("errors", "config", "backend", "kernels", "_validate", "_files", "_rng", "_search", "_alias", "_csr",
     "_progress", "_batch_config", "_select", "_neighbor", "_space_pick"),  # base
    ("runtime",),
    ("graph",),
    ("walks", "sampling", "mining", "counting", "dynamic", "gnn", "sort"),  # the families
    ("embeddings",),  # trained on the walks
    ("cluster", "workflow", "cli", "__init__", "__main__"),  # the face
)
FLOOR = {unit: floor for floor, units in enumerate(FLOORS) for unit in units}


def _unit(parts: list[str]) -> str:
    """The unit a dotted path inside gpipe (without the leading ``gpipe``) belongs to: a subpackage, a top-level
    module, or ``__init__`` for a name of gpipe's own door."""
    if not parts:
        return "__init__"
    if (REPO / "gpipe" / parts[0]).is_dir() or (REPO / "gpipe" / f"{parts[0]}.py").is_file():
        return parts[0]
    return "__init__"


def unit_imports(source: str, path: Path) -> set[tuple[str, str, int]]:
    """``(importing unit, imported unit, line)`` for each gpipe import of ``source`` (the module at ``path``) that
    leaves its unit."""
    here = list(path.relative_to(REPO / "gpipe").parts)
    package = here[:-1]
    me = _unit(here[:1]) if package else here[0][:-3]
    found = set()
    for node in ast.walk(ast.parse(source, str(path))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name.split(".")[1:] for alias in node.names if alias.name.split(".")[0] == "gpipe"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "gpipe":
                base = node.module.split(".")[1:]
            else:
                continue
            targets = [base] if base else [[alias.name] for alias in node.names]
        for target in targets:
            unit = _unit(target)
            if unit != me:
                found.add((me, unit, node.lineno))
    return found


def test_every_unit_of_gpipe_has_a_floor():
    units = {p.stem if p.parent == REPO / "gpipe" else p.relative_to(REPO / "gpipe").parts[0]
             for p in (REPO / "gpipe").rglob("*.py")}
    assert not units - set(FLOOR), f"units with no floor in FLOORS: {sorted(units - set(FLOOR))}"


def test_no_import_runs_down_to_up_and_no_circle():
    edges = {}
    for path in (REPO / "gpipe").rglob("*.py"):
        for me, unit, line in unit_imports(path.read_text(), path):
            assert FLOOR[unit] <= FLOOR[me], (f"{path.relative_to(REPO)}:{line} imports {unit} (floor {FLOOR[unit]}) "
                                              f"from {me} (floor {FLOOR[me]}): a floor imports only from below")
            edges.setdefault(me, set()).add(unit)
    state = {}  # unit -> 1 while its imports are followed, 2 once done

    def follow(unit: str, trail: list[str]) -> None:
        state[unit] = 1
        for nxt in sorted(edges.get(unit, ())):
            assert state.get(nxt) != 1, "an import circle: " + " -> ".join([*trail, unit, nxt])
            if nxt not in state:
                follow(nxt, [*trail, unit])
        state[unit] = 2

    for unit in sorted(edges):
        if unit not in state:
            follow(unit, [])


@pytest.mark.parametrize("source, where, found", [
    ("from .graph import Graph", "gpipe/_validate.py", {("_validate", "graph")}),
    ("def f():\n    from ..graph import Graph", "gpipe/runtime/_store.py", {("runtime", "graph")}),
    ("from . import _pieces", "gpipe/runtime/_advance.py", set()),
    ("from .. import _rng, config", "gpipe/walks/_mh.py", {("walks", "_rng"), ("walks", "config")}),
    ("import gpipe.runtime._store", "gpipe/cli/_walk.py", {("cli", "runtime")}),
    ("from .. import __version__", "gpipe/cli/_parser.py", {("cli", "__init__")}),
    ("from ._progress import _Phase", "gpipe/cli/_walk.py", set()),
])
def test_the_floor_check_sees_each_import_as_its_units(source, where, found):
    assert {(a, b) for a, b, _ in unit_imports(source, REPO / where)} == found


# The connect layer makes, checks and closes a client: it may call one and import distributed, as the runtime does.
CONNECT = REPO / "gpipe" / "cluster.py"
# Every public method of a Dask client: past the runtime (and the connect layer), none is called, nor handed on.
CLIENT_METHODS = frozenset(name for name in dir(distributed.Client)
                           if not name.startswith("_") and callable(getattr(distributed.Client, name)))


def _reaches(source: str) -> list[tuple[int, str]]:
    """``(line, call)`` of each use in ``source`` that reaches workers past the runtime: a method of a Dask client
    (:data:`CLIENT_METHODS`: ``<x>.client.run``, ``client.gather(...)``, ``self._client.scatter``, a client by any
    name ending in ``client``; called or handed on, where its state, ``client.status``, may be read) or ``store()``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "store":
            found.append((node.lineno, "store()"))
        elif (isinstance(node, ast.Attribute) and node.attr in CLIENT_METHODS
              and (isinstance(node.value, ast.Name) and node.value.id.endswith("client")
                   or isinstance(node.value, ast.Attribute) and node.value.attr.endswith("client"))):
            found.append((node.lineno, f"client.{node.attr}"))
    return found


def test_nothing_past_the_runtime_reaches_the_workers_but_through_it():
    """One way for the graph and every family to reach its workers (``runtime/calls/``, Dask's calls by Dask's
    names): no private gateway of its own, no method of a Dask client called itself, no ``store()``."""
    assert not any((REPO / "gpipe" / family / "_cluster.py").exists() for family in ("mining", "counting"))
    runtime = REPO / "gpipe" / "runtime"
    found = [f"{path.relative_to(REPO)}:{line}: {call}" for path in SOURCES
             if runtime not in path.parents and path != CONNECT for line, call in _reaches(path.read_text())]
    assert not found, "calls past the runtime:\n" + "\n".join(found)


@pytest.mark.parametrize("source, found", [
    ("g.client.run(drop_run, run_id)", ["client.run"]),
    ("self._client.scatter([ids], broadcast=True)", ["client.scatter"]),
    ("client.submit(f, workers=[w])", ["client.submit"]),
    ("hist, n = client.gather([total, n])", ["client.gather"]),
    ("self._stack.enter_context(self.client.as_current())", ["client.as_current"]),
    ("asyncio.run_coroutine_threadsafe(client.who_has(futures), loop)", ["client.who_has"]),
    ("finalize(self, g.client.cancel, futures)", ["client.cancel"]),
    ("store().worker_address", ["store()"]),
    ("run_state(run_id, MiningState)", []),
    ("gather(client, futures)", []),
    ("client.status == 'running' and client.dashboard_link", []),
    ("partitions.get(p)", []),
])
def test_the_reach_check_sees_each_call_past_the_runtime(source, found):
    assert [call for _, call in _reaches(source)] == found


def test_the_reach_check_sees_every_method_of_a_dask_client():
    assert {"run", "submit", "scatter", "gather", "compute", "replicate", "who_has", "cancel", "as_current"} \
        <= CLIENT_METHODS
    assert [call for method in sorted(CLIENT_METHODS) for _, call in _reaches(f"g.client.{method}()")] == \
        [f"client.{method}" for method in sorted(CLIENT_METHODS)]


# Where gpipe imports distributed past the runtime and the connect layer, and what: ``check_client``, with the
# validation of every argument in one module (gpipe/_validate.py, below the runtime), knows a client by its class.
DASK_IMPORTS = {"gpipe/_validate.py": {"distributed.Client"}}


def _typing_only(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _dask_imports(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each import in ``source`` of ``distributed`` or any of its modules (``dask.distributed``
    too), but those under ``if TYPE_CHECKING:``, which annotations read and the program never runs."""
    tree = ast.parse(source)
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If) and _typing_only(node.test)
                   for statement in node.body for inner in ast.walk(statement)}
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [(node.lineno, name) for name in names
                  if name.split(".")[0] == "distributed" or name.split(".")[:2] == ["dask", "distributed"]]
    return found


def test_nothing_past_the_runtime_imports_distributed():
    """Dask's client, its futures, comms and pickle are the runtime's (``gpipe.runtime.calls`` has them by Dask's
    names), so that Dask's internals, and the versions they hold to, are met in one place."""
    runtime = REPO / "gpipe" / "runtime"
    found = [f"{path.relative_to(REPO)}:{line}: {name}" for path in SOURCES
             if runtime not in path.parents and path != CONNECT for line, name in _dask_imports(path.read_text())
             if name not in DASK_IMPORTS.get(str(path.relative_to(REPO)), ())]
    assert not found, "imports of distributed past the runtime:\n" + "\n".join(found)


@pytest.mark.parametrize("source, found", [
    ("from distributed import Client, Future", ["distributed.Client", "distributed.Future"]),
    ("from distributed.comm import get_address_host", ["distributed.comm.get_address_host"]),
    ("import distributed.protocol", ["distributed.protocol"]),
    ("from dask.distributed import wait", ["dask.distributed.wait"]),
    ("from dask import distributed", ["dask.distributed"]),
    ("def f():\n    from distributed.utils import sync", ["distributed.utils.sync"]),
    ("if TYPE_CHECKING:\n    from distributed import Client", []),
    ("if typing.TYPE_CHECKING:\n    import distributed", []),
    ("if TYPE_CHECKING:\n    pass\nelse:\n    import distributed", ["distributed"]),
    ("from dask.utils import format_bytes", []),
    ("import torch.distributed", []),
    ("from ..runtime.calls import Future, gather", []),
])
def test_the_import_check_sees_each_import_of_distributed(source, found):
    assert [name for _, name in _dask_imports(source)] == found


MOST_POSITIONAL = 7  # parameters a function takes by position (``self`` and ``cls`` aside); options go by keyword


def _long_positional(source: str) -> list[tuple[int, str, int]]:
    """``(line, name, count)`` of each function in ``source`` taking more than :data:`MOST_POSITIONAL` parameters
    by position, but numba twins (``@cpu_kernel``), whose parameters are a kernel's, in the kernel's order."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any("cpu_kernel" in ast.unparse(d) for d in node.decorator_list):
                continue
            names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
            count = len(names) - (1 if names[:1] in (["self"], ["cls"]) else 0)
            if count > MOST_POSITIONAL:
                found.append((node.lineno, node.name, count))
    return found


def test_no_function_takes_more_than_seven_positional_parameters():
    found = [f"{path.relative_to(REPO)}:{line}: {name} takes {count}" for path in SOURCES
             for line, name, count in _long_positional(path.read_text())]
    assert not found, "past seven positional parameters (pass options by keyword):\n" + "\n".join(found)


@pytest.mark.parametrize("source, found", [
    ("def f(a, b, c, d, e, f, g, h): pass", [("f", 8)]),
    ("def f(self, a, b, c, d, e, f, g): pass", []),
    ("def f(a, b, c, d, e, f, g, *, h): pass", []),
    ("@cpu_kernel(parallel=True)\ndef f(a, b, c, d, e, f, g, h): pass", []),
])
def test_the_positional_check_counts_what_a_call_may_pass_by_position(source, found):
    assert [(name, count) for _, name, count in _long_positional(source)] == found


MOST_LINES = 600  # a module longer than this does more than one thing: split it along its seams


def _lines(source: str) -> int:
    """The lines of ``source``, each import counted as one: ruff writes a long one a name to a line."""
    tree = ast.parse(source)
    imports = (node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))
    return len(source.splitlines()) - sum(node.end_lineno - node.lineno for node in imports)


def test_no_module_of_gpipe_is_longer_than_six_hundred_lines():
    long = [f"{path.relative_to(REPO)}: {n} lines" for path in SOURCES if path.is_relative_to(REPO / "gpipe")
            and (n := _lines(path.read_text())) > MOST_LINES]
    assert not long, "modules past 600 lines:\n" + "\n".join(long)
