"""Batch workflows: one script and one YAML config each, run by ``gpipe run`` or as a script.

A workflow is a folder holding ``run.py``, whose ``main(argv)`` runs it from
``[config.yaml] [--set key.sub=value ...]``, and ``config.yaml``, which holds every
key of its config with its default, ``workflow: NAME`` included. The shipped ones
are in ``workflows/`` of the source tree (``gpipe/_workflows`` in a wheel); users
copy and adapt them. This module holds what they share: :func:`load_config` and
:func:`check_config` (a config merged over the defaults, then the overrides, and
checked against a table of rules that extends :data:`RULES`, built with the rules
:func:`integer`, :func:`one_of`, :func:`seed` and :func:`mapping`), :func:`main` (a
script's command line), :func:`load_graph`, :func:`atomic_dir` (the ``output`` folder),
:func:`atomic_file` and :func:`write_json` (outputs that appear complete or not at all),
and :func:`run`, which runs the
workflow that a YAML file names on a given cluster (``gpipe run``).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

import dask.config
import yaml

from ._files import atomic_dir, atomic_file, write_json
from ._validate import (
    check_bool,
    check_callable,
    check_choice,
    check_int,
    check_mapping,
    check_optional_int,
    check_seed,
    check_text,
    check_texts,
    is_ascii_digits,
)
from .backend import DEVICES
from .errors import GpipeError, GpipeFileError, GpipeValueError
from .graph import Graph, generators, read_edges

__all__ = ["RULES", "atomic_dir", "atomic_file", "check_config", "check_params", "integer", "load_config", "load_graph",
           "main", "mapping", "one_of", "run", "seed", "write_json"]

_Rule = Callable[[str, Any], Any]


def integer(minimum: int | None = None, maximum: int | None = None) -> _Rule:
    """The rule of a key whose value is an integer in ``minimum..maximum`` (either bound optional).

    Parameters
    ----------
    minimum, maximum : int, optional
        The bounds, inclusive.

    Returns
    -------
    callable
        ``rule(key, value)``: returns the value as an int, or raises :class:`GpipeValueError` naming the key.

    Raises
    ------
    GpipeValueError
        A bound is not an integer, or ``minimum > maximum``.

    Examples
    --------
    >>> from gpipe.workflow import integer
    >>> integer(minimum=1)("walks.length", 40)
    40
    """
    minimum = check_optional_int("minimum", minimum)
    maximum = check_optional_int("maximum", maximum)
    if minimum is not None and maximum is not None and minimum > maximum:
        raise GpipeValueError(f"'maximum' must be at least 'minimum' ({minimum}), got {maximum}")
    return partial(check_int, minimum=minimum, maximum=maximum)


def one_of(choices: Iterable) -> _Rule:
    """The rule of a key whose value is one of ``choices``.

    Parameters
    ----------
    choices : iterable
        The values the key takes, named in the error.

    Returns
    -------
    callable
        ``rule(key, value)``: returns the value, or raises :class:`GpipeValueError` naming the key and the choices.

    Raises
    ------
    GpipeValueError
        ``choices`` is empty, a string (its characters would be the choices) or not iterable.

    Examples
    --------
    >>> from gpipe.workflow import one_of
    >>> one_of(("cpu", "gpu"))("cluster.device", "cpu")
    'cpu'
    """
    if isinstance(choices, str) or not isinstance(choices, Iterable) or not (choices := tuple(choices)):
        raise GpipeValueError(f"'choices' must be a non-empty iterable of values (not a string), got {choices!r}")
    return lambda name, value: check_choice(name, value, choices)


def seed(name: str, value) -> int:
    """The rule of a random seed: an integer in ``0..2**63-1``; returns it, else raises :class:`GpipeValueError`.

    Examples
    --------
    >>> from gpipe.workflow import seed
    >>> seed("walks.seed", 42)
    42
    """
    return check_seed(name, value)


def mapping(name: str, value) -> dict:
    """The rule of a key whose value is a mapping (``walks.params``); returns it, else raises :class:`GpipeValueError`.

    Examples
    --------
    >>> from gpipe.workflow import mapping
    >>> mapping("walks.params", {"p": 0.5})
    {'p': 0.5}
    """
    return check_mapping(name, value)


def _optional(rule: _Rule) -> _Rule:
    return lambda name, value: None if value is None else rule(name, value)


def _check_rules(rules) -> Mapping[str, _Rule]:
    if not isinstance(rules, Mapping):
        raise GpipeValueError(f"'rules' must be a mapping of 'section.key' to rule(key, value), got {rules!r}")
    for key, rule in rules.items():
        if not isinstance(key, str) or not all(key.split(".")) or not callable(rule):
            raise GpipeValueError(f"'rules' must map each 'section.key' to a callable rule(key, value), got "
                                  f"{key!r}: {rule!r}")
    return rules


def _rmat_spec(text: str) -> tuple[int, ...] | None:
    """``(scale,)`` or ``(scale, edge_factor)`` for ``rmat:SCALE[:EDGE_FACTOR]``, else None."""
    fields = text.split(":")
    if fields[0] == "rmat" and len(fields) in (2, 3) and all(is_ascii_digits(f) and int(f) > 0 for f in fields[1:]):
        return tuple(map(int, fields[1:]))
    return None


def _graph_path(name: str, value) -> str:
    if _rmat_spec(check_text(name, value)) is None and not os.path.exists(value):
        raise GpipeValueError(f"'{name}' must be an existing edge file or graph folder, or rmat:SCALE[:EDGE_FACTOR] "
                              f"with positive integers, got {value!r}")
    return value


_positive = integer(minimum=1)

#: The keys every workflow's config has, each with the rule its value follows (``rule(key, value)`` raises
#: :class:`GpipeValueError` naming the key): the workflow's name, the graph, the output folder (written with
#: :func:`atomic_dir`; ``overwrite`` replaces an earlier run's) and the cluster.
#: A workflow's own table is ``{**RULES, "section.key": rule, ...}``; a key of the table is replaced whole when
#: configs are merged, a section (``graph``) is merged key by key.
RULES: Mapping[str, _Rule] = MappingProxyType({
    "workflow": check_text,
    "graph.path": _graph_path,
    "graph.directed": check_bool,
    "graph.partitions": _optional(_positive),
    "output": check_text,
    "overwrite": check_bool,
    "cluster.scheduler_file": _optional(check_text),
    "cluster.address": _optional(check_text),
    "cluster.device": one_of(DEVICES),
    "cluster.n_workers": _optional(_positive),
})
_GRAPH_RULES = {key: rule for key, rule in RULES.items() if key.startswith("graph.")}


# -- configs ----------------------------------------------------------------------------------

def load_config(path: str | None, overrides: Iterable[str] = (), *, defaults: str,
                rules: Mapping[str, _Rule]) -> dict:
    """The config at ``path`` merged over the ``defaults`` file, then the ``key.sub=value`` overrides.

    Sections are merged key by key; the value of a key of ``rules`` (a mapping such as ``walks.params``
    included) is replaced whole, while the override ``walks.params.p=0.5`` sets one entry of it.

    Parameters
    ----------
    path : str or None
        A YAML config holding the keys it changes; None for the defaults alone.
    overrides : iterable of str
        ``key.sub=value`` items, as ``--set`` takes them; each value is read as YAML.
    defaults : str
        The workflow's ``config.yaml``, which holds every key.
    rules : mapping
        The workflow's keys and their rules (see :data:`RULES`).

    Returns
    -------
    dict
        The merged config, not yet checked: see :func:`check_config`.

    Raises
    ------
    GpipeValueError
        A file is missing or is not YAML, ``path`` holds an unknown key (the message names the file and the
        key), an override is not ``key.sub=value``, or a parameter is not of the kind above.

    Examples
    --------
    >>> import os, tempfile
    >>> from gpipe.workflow import load_config
    >>> defaults = os.path.join(tempfile.mkdtemp(), "config.yaml")
    >>> with open(defaults, "w") as f:
    ...     _ = f.write("walks: {length: 40, params: {p: 1.0, q: 1.0}}\\n")
    >>> rules = {"walks.length": lambda name, value: value, "walks.params": lambda name, value: value}
    >>> load_config(None, ["walks.length=5", "walks.params.q=2"], defaults=defaults, rules=rules)
    {'walks': {'length': 5, 'params': {'p': 1.0, 'q': 2}}}
    """
    path = _optional(check_text)("path", path)
    overrides = check_texts("overrides", overrides)
    rules = _check_rules(rules)
    config = _read_yaml(check_text("defaults", defaults))
    if path is not None:
        update = _read_yaml(path)
        try:
            _check_keys(update, "", rules, complete=False)
        except GpipeValueError as exc:
            raise GpipeValueError(f"{path}: {exc}") from None
        _merge(config, update, "", rules)
    for item in overrides:
        key, equals, text = item.partition("=")
        if not equals or not all(key.split(".")):
            raise GpipeValueError(f"'--set' must be key.sub=value, got {item!r}")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise GpipeValueError(f"'--set {item}': the value is not valid YAML ({' '.join(str(exc).split())})") \
                from None
        *sections, last = key.split(".")
        section = config
        for name in sections:
            if not isinstance(section.get(name), dict):
                section[name] = {}
            section = section[name]
        _merge(section, {last: value}, "".join(f"{name}." for name in sections), rules)
    return config


def check_config(config: dict, rules: Mapping[str, _Rule]) -> dict:
    """Check that ``config`` has exactly the keys of ``rules`` and that each value follows its rule.

    Parameters
    ----------
    config : dict
        A config, as :func:`load_config` returns it.
    rules : mapping
        The workflow's keys (``section.key``) and their rules (see :data:`RULES`).

    Returns
    -------
    dict
        ``config`` itself.

    Raises
    ------
    GpipeValueError
        The message names the key, the rule and the value; for an unknown key, the keys its section takes.

    Examples
    --------
    >>> from gpipe.workflow import check_config
    >>> check_config({"run": {"length": 3}}, {"run.length": lambda name, value: value})
    {'run': {'length': 3}}
    """
    rules = _check_rules(rules)
    _check_keys(config, "", rules)
    for key, rule in rules.items():
        value = config
        for name in key.split("."):
            value = value[name]
        rule(key, value)
    return config


def check_params(key: str, function: Callable, params: dict, set_by_workflow: Iterable[str]) -> None:
    """Check that every name in ``params`` (the config's ``key`` section) is a parameter of ``function`` that the
    workflow does not set itself.

    Raises
    ------
    GpipeValueError
        ``unknown key 'key.name'``, saying which parameters ``function`` takes.

    Examples
    --------
    >>> from gpipe.workflow import check_params
    >>> check_params("walks.params", gpipe.walks.node2vec, {"p": 0.5}, ("g", "seed"))
    >>> check_params("walks.params", gpipe.walks.deepwalk, {"q": 2}, ("g", "seed", "length", "walks_per_vertex",
    ...                                                                "start", "progress", "weighted"))
    Traceback (most recent call last):
    ...
    gpipe.errors.GpipeValueError: unknown key 'walks.params.q': deepwalk takes no extra parameters
    """
    accepted = [p for p in inspect.signature(function).parameters if p not in set_by_workflow]
    for name in params:
        if name not in accepted:
            raise GpipeValueError(f"unknown key '{key}.{name}': {function.__name__} takes "
                                  f"{', '.join(accepted) or 'no extra parameters'}")


def _check_keys(section, prefix: str, rules: Mapping[str, _Rule], complete: bool = True) -> None:
    """Every key under ``prefix`` is known and, when ``complete``, present, recursively."""
    check_mapping(prefix.rstrip(".") or "config", section)
    known = list(dict.fromkeys(k[len(prefix):].split(".")[0] for k in rules if k.startswith(prefix)))
    for key in section:
        if key not in known:
            takes = f"'{prefix.rstrip('.')}' takes" if prefix else "the config takes"
            raise GpipeValueError(f"unknown key '{prefix}{key}': {takes} {', '.join(known)}")
    for key in known:
        if key not in section:
            if complete:
                raise GpipeValueError(f"missing key '{prefix}{key}'")
        elif prefix + key not in rules:
            _check_keys(section[key], f"{prefix}{key}.", rules, complete)


def _read_yaml(path: str | os.PathLike) -> dict:
    try:
        with open(path) as f:
            config = yaml.safe_load(f)
    except FileNotFoundError:
        raise GpipeValueError(f"the config file {os.fspath(path)!r} does not exist") from None
    except yaml.YAMLError as exc:
        raise GpipeValueError(f"{os.fspath(path)}: not valid YAML ({' '.join(str(exc).split())})") from None
    return check_mapping(os.fspath(path), {} if config is None else config)


def _merge(base: dict, update: dict, prefix: str, rules: Mapping[str, _Rule]) -> None:
    """Merge ``update`` into ``base`` (at ``prefix``), section by section; a key of ``rules`` is replaced whole."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict) and prefix + key not in rules:
            _merge(base[key], value, f"{prefix}{key}.", rules)
        else:
            base[key] = value


# -- a workflow script ------------------------------------------------------------------------

def main(argv: list[str] | None, *, prog: str, description: str, defaults: str,
         configure: Callable[[str | None, list[str]], dict], run: Callable[[dict], object]) -> int:
    """The command line of a workflow script: ``[config.yaml] [--set key.sub=value ...]``.

    Parameters
    ----------
    argv : list of str or None
        The arguments (default ``sys.argv[1:]``).
    prog, description : str
        The script's name, which starts its error messages, and its one-line description.
    defaults : str
        The script's ``config.yaml``, named in the help.
    configure : callable
        ``configure(path, overrides)``: the checked config (raises :class:`GpipeError` on a bad one).
    run : callable
        ``run(config)``: runs the workflow and reports.

    Returns
    -------
    int
        0 on success; 2 on a bad config or bad input, whose message is printed to stderr as
        ``PROG: error: ...`` on one line, without a traceback; argparse's status on a usage error.

    Examples
    --------
    >>> from gpipe.workflow import main
    >>> main(["--set", "x=1"], prog="demo", description="A demo.", defaults="config.yaml",
    ...      configure=lambda path, overrides: {"x": 1}, run=print)
    {'x': 1}
    0

    A bad parameter (not a bad config) is the caller's mistake, raised before parsing:

    >>> main(["--set", "x=1"], prog="demo", description="A demo.", defaults="config.yaml",
    ...      configure=None, run=print)
    Traceback (most recent call last):
    ...
    gpipe.errors.GpipeValueError: 'configure' must be callable, got None
    """
    argv = None if argv is None else check_texts("argv", argv)
    for name, value in (("prog", prog), ("description", description), ("defaults", defaults)):
        check_text(name, value)
    check_callable("configure", configure)
    check_callable("run", run)
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("config", nargs="?", help=f"YAML config merged over the defaults ({defaults})")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one key, e.g. --set output=results (the value is read as YAML)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error or the help
        return int(exc.code or 0)
    try:
        run(configure(args.config, args.set))
    except (GpipeError, FileNotFoundError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


def load_graph(section: dict, *, weighted: bool = False, mode: str | None = None) -> Graph:
    """The graph of a config's ``graph`` section, on the current client.

    Parameters
    ----------
    section : dict
        ``path`` (an edge file or graph folder read with :func:`gpipe.read_edges`, or
        ``rmat:SCALE[:EDGE_FACTOR]``, generated with :func:`gpipe.generators.rmat`), ``directed``
        and ``partitions``.
    weighted : bool
        Generate an ``rmat:`` graph with edge weights (for a walk or sampler that uses them).
    mode : {'auto', 'partitioned', 'replicated'}, optional
        How the graph is held (see :func:`gpipe.read_edges`); pattern mining needs ``'replicated'``.

    Returns
    -------
    Graph

    Raises
    ------
    GpipeValueError
        ``section`` lacks one of those keys, has another, or a value breaks its rule in :data:`RULES`
        (the message names the key ``graph.KEY``); ``weighted`` is not a bool.

    Examples
    --------
    >>> import gpipe
    >>> from gpipe.workflow import load_graph
    >>> with gpipe.connect(n_workers=1, device="cpu") as client, client.as_current():
    ...     load_graph({"path": "rmat:6:4", "directed": False, "partitions": None}).num_vertices
    64
    """
    check_config({"graph": check_mapping("section", section)}, _GRAPH_RULES)
    weighted = check_bool("weighted", weighted)
    rmat = _rmat_spec(section["path"])
    if rmat is not None:
        return generators.rmat(*rmat, directed=section["directed"], partitions=section["partitions"],
                               weighted=weighted, mode=mode)
    return read_edges(section["path"], directed=section["directed"], partitions=section["partitions"], mode=mode)


# -- gpipe run --------------------------------------------------------------------------------

def run(workflow: str, overrides: Iterable[str] = (), *, scheduler_file: str | None = None,
        address: str | None = None, wait_for_workers: int | None = None, wait_timeout: float | None = None) -> int:
    """Run the workflow that a YAML file names, on a running cluster or a local one.

    Parameters
    ----------
    workflow : str
        A workflow config: a YAML file whose top-level ``workflow`` key names a shipped workflow
        (a folder of ``workflows/``: ``dynamic_walks``, ``embeddings``, ``gnn_training``, ``graph_sampling``,
        ``mining``) or the
        ``run.py`` of one (a path relative to the file); the rest is merged over that workflow's defaults. Or the name
        of a shipped workflow, run with its defaults.
    overrides : iterable of str
        ``key.sub=value`` items, as the workflow's ``--set`` takes them.
    scheduler_file, address : str, optional
        The cluster to run on, in place of the config's ``cluster.scheduler_file`` and
        ``cluster.address``. Without either: the config's cluster, else ``GPIPE_SCHEDULER_FILE`` /
        ``GPIPE_SCHEDULER_ADDRESS``, else a local cluster.
    wait_for_workers : int, optional
        On an existing cluster, wait until this many workers have joined before starting, once the
        config is checked (``gpipe.cluster.wait-for-workers``).
    wait_timeout : float, optional
        Seconds to wait for the scheduler file and those workers (default ``gpipe.cluster.wait-timeout``).

    Returns
    -------
    int
        The workflow's exit status: 0 on success; 2 on a bad config or a cluster that did not come up,
        whose message the workflow has printed on one line.

    Raises
    ------
    GpipeValueError
        The workflow file is missing, is not YAML or names no workflow that exists (the message names the
        file and the key), both ``scheduler_file`` and ``address`` are given, a wait is not positive, or a
        parameter is not of the kind above.

    Examples
    --------
    >>> import os, tempfile, gpipe
    >>> out = os.path.join(tempfile.mkdtemp(), "sample")
    >>> gpipe.workflow.run("graph_sampling", ["graph.path=rmat:8:4", f"output={out}", "cluster.device=cpu"])
    graph_sampling: neighbor on 256 vertices, 759 edges: 78 edges from 16 seeds in ... s = ... edges/s
      edges    .../sample/edges.parquet
      summary  .../sample/summary.json
    0
    >>> sorted(os.listdir(out))
    ['.gpipe-files.json', 'edges.parquet', 'summary.json']
    """
    script, config = _find(check_text("workflow", workflow))
    overrides = check_texts("overrides", overrides)
    scheduler_file = _optional(check_text)("scheduler_file", scheduler_file)
    address = _optional(check_text)("address", address)
    if scheduler_file is not None and address is not None:
        raise GpipeValueError(f"give 'scheduler_file' or 'address', not both; got {scheduler_file!r} and {address!r}")
    if scheduler_file is not None or address is not None:  # JSON is YAML: the values stay strings
        overrides += [f"cluster.scheduler_file={json.dumps(scheduler_file)}", f"cluster.address={json.dumps(address)}"]
    waits: dict[str, float] = {}
    if wait_for_workers is not None:
        waits["gpipe.cluster.wait-for-workers"] = check_int("wait_for_workers", wait_for_workers, minimum=1)
    if wait_timeout is not None:
        if isinstance(wait_timeout, bool) or not isinstance(wait_timeout, (int, float)) or not wait_timeout > 0:
            raise GpipeValueError(f"'wait_timeout' must be a positive number of seconds, got {wait_timeout!r}")
        waits["gpipe.cluster.wait-timeout"] = wait_timeout
    argv = ([config] if config is not None else []) + [arg for item in overrides for arg in ("--set", item)]
    main = _load_script(script).main
    with dask.config.set(waits):  # gpipe.connect waits, after the workflow has checked its config
        return main(argv)


def _shipped() -> dict[str, Path]:
    """The shipped workflows, name -> run.py: ``gpipe/_workflows`` in a wheel, ``workflows/`` in a source tree."""
    here = Path(__file__).resolve().parent
    for folder in (here / "_workflows", here.parent / "workflows"):
        if folder.is_dir():
            return {d.name: d / "run.py" for d in sorted(folder.iterdir()) if (d / "run.py").is_file()}
    return {}


def _find(workflow: str) -> tuple[Path, str | None]:
    """The ``run.py`` that ``workflow`` names, and the config file to give it (None: its defaults)."""
    shipped = _shipped()
    names = ", ".join(shipped) or "none shipped"
    if workflow in shipped and not os.path.exists(workflow):
        return shipped[workflow], None
    if not os.path.isfile(workflow):
        if workflow.endswith((".yaml", ".yml")) or os.sep in workflow:
            raise GpipeValueError(f"the workflow file {workflow!r} does not exist")
        raise GpipeValueError(f"'workflow' must be a workflow YAML file or the name of a shipped workflow "
                              f"({names}), got {workflow!r}")
    name = _read_yaml(workflow).get("workflow")
    if name is None:
        raise GpipeValueError(f"{workflow}: missing key 'workflow': it names the workflow to run ({names}) "
                              f"or its run.py")
    if isinstance(name, str) and name.endswith(".py"):
        script = Path(workflow).resolve().parent / name
        if not script.is_file():
            raise GpipeValueError(f"{workflow}: 'workflow' names {str(script)!r}, which does not exist")
        return script, workflow
    if not isinstance(name, str) or name not in shipped:
        raise GpipeValueError(f"{workflow}: 'workflow' must be a shipped workflow ({names}) or the path of a "
                              f"workflow's run.py, got {name!r}")
    return shipped[name], workflow


def _load_script(path: Path):
    """``path`` loaded as a module (not registered in ``sys.modules``: functions it sends to workers go by value).

    Its top-level code runs only once it is known to define ``main``: a script without it is refused unrun.
    """
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as exc:
        raise GpipeFileError(path, exc.lineno, f"not valid Python: {exc.msg}") from None
    if not _binds_main(tree):
        raise GpipeValueError(f"{path}: a workflow's run.py must define main(argv) returning an exit status")
    spec = importlib.util.spec_from_file_location(f"gpipe_workflow_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "main", None)):
        raise GpipeValueError(f"{path}: a workflow's run.py must define main(argv) returning an exit status")
    return module


def _binds_main(tree: ast.Module) -> bool:
    """Whether a module's own code (outside its functions and classes) binds the name ``main``: defines, assigns
    or imports it (a ``*`` import may)."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "main":
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" or (a.asname or a.name.split(".")[0]) == "main" for a in node.names):
                return True
        elif isinstance(node, ast.Name):
            if node.id == "main" and isinstance(node.ctx, ast.Store):
                return True
        elif not isinstance(node, ast.Lambda):  # a lambda's names are its own
            pending.extend(ast.iter_child_nodes(node))
    return False
