"""Batch runs: the workflows (one script and one YAML config each, run by ``gpipe run`` or as a script) and the
``gpipe`` commands, which are workflows with flags.

A workflow is a folder holding ``run.py``, whose ``main(argv)`` runs it from
``[config.yaml] [--set key.sub=value ...]``, and ``config.yaml``, which holds every
key of its config with its default, ``workflow: NAME`` included. The shipped ones
are in ``workflows/`` of the source tree (``gpipe/_workflows`` in a wheel); users
copy and adapt them. This module holds what they share: :class:`Workflow` (a script's
config and command line, declared once: :func:`load_config` merges a config over the
defaults, then the overrides, and :func:`check_config` checks it against a table of rules
that extends :data:`RULES`, built with the rules :func:`integer`, :func:`one_of`,
:func:`seed` and :func:`mapping`; :func:`main` is a script's command line), :class:`Run`
(the one runner: the output folder, the cluster, the graph of :func:`load_graph`, the
phases and ``summary.json``, which the ``gpipe`` commands run on too, from a config their
flags make: each flag is a key of it, checked under the key's rule, so that ``gpipe walk|sample|mine|count`` are
the workflows ``walk``, ``sample``, ``mine`` and ``count`` with flags), :func:`atomic_dir`, :func:`atomic_file` and :func:`write_json` (outputs that
appear complete or not at all), and :func:`run`, which runs the workflow that a YAML file
names on a given cluster (``gpipe run``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.config

from ._batch_config import (
    RULES,
    _read_yaml,
    _rmat_spec,
    boolean,
    byte_count,
    check_config,
    check_params,
    integer,
    load_config,
    mapping,
    number,
    one_of,
    optional,
    probability,
    seed,
)
from ._files import atomic_dir, atomic_file, write_json
from ._progress import _Phase, _Stopwatch, _graph_done, _reading, _written
from ._validate import check_bool, check_callable, check_int, check_mapping, check_text, check_texts
from .cluster import connect
from .errors import GpipeError, GpipeFileError, GpipeValueError
from .graph import Graph, generators, read_edges
from .runtime import current, workers_info
from .runtime.calls import as_current

__all__ = ["RULES", "Run", "Workflow", "atomic_dir", "atomic_file", "boolean", "byte_count", "check_config", "check_params", "integer",
           "load_config", "load_graph", "main", "mapping", "number", "one_of", "optional", "probability", "run", "seed",
           "write_json"]

_GRAPH_RULES = {key: rule for key, rule in RULES.items() if key.startswith("graph.")}


# -- a workflow script ------------------------------------------------------------------------

def main(argv: list[str] | None, *, prog: str, description: str, defaults: str,
         configure: Callable[[str | None, list[str]], Any], run: Callable[[Any], object]) -> int:
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
        ``configure(path, overrides)``: the checked config, or what ``run`` takes made of it (raises
        :class:`GpipeError` on a bad one).
    run : callable
        ``run(config)``: runs the workflow on what ``configure`` returned, and reports.

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


def load_graph(section: dict, *, weighted: bool = False, mode: str | None = None, fmt: str | None = None,
               weight: str | None = None, vertex_order: str | None = None) -> Graph:
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
    fmt, weight : str, optional
        How an edge file is read: its format and its weight column, as :func:`gpipe.read_edges` takes them.
    vertex_order : {'rcmk', 'metis'}, optional
        Renumber the vertices before the partitions are cut (see :func:`gpipe.read_edges`).

    Returns
    -------
    Graph
        Read or generated, as the section says; a bad key, an unreadable file or a bad argument raises the
        :class:`GpipeValueError` of :func:`check_config` or of the reader, naming it.

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
                               weighted=weighted, mode=mode, vertex_order=vertex_order)
    return read_edges(section["path"], directed=section["directed"], partitions=section["partitions"], mode=mode,
                      fmt=fmt, weight=weight, vertex_order=vertex_order)


@dataclass(frozen=True)
class Workflow:
    """A workflow script's config and command line, declared once: ``load_config``, ``validate_config`` and
    ``main`` follow from its defaults file and its table of rules.

    Parameters
    ----------
    prog, description : str
        The script's name, which starts its error messages, and its one-line description.
    defaults : str
        Its ``config.yaml``, which holds every key.
    rules : mapping
        Its keys and their rules (``{**RULES, "section.key": rule, ...}``).
    run : callable
        ``run(config)``: runs the workflow on a checked config and reports.
    check : callable, optional
        ``check(config)``: what the rules cannot say alone (a key that depends on another); raises
        :class:`GpipeValueError`.

    Examples
    --------
    >>> import os, tempfile
    >>> from gpipe.workflow import Workflow, integer
    >>> defaults = os.path.join(tempfile.mkdtemp(), "config.yaml")
    >>> _ = open(defaults, "w").write("walks: {length: 40}\\n")
    >>> demo = Workflow("demo", "A demo.", defaults, {"walks.length": integer(minimum=1)}, run=print)
    >>> demo.main(["--set", "walks.length=5"])
    {'walks': {'length': 5}}
    0
    """

    prog: str
    description: str
    defaults: str
    rules: Mapping
    run: Callable[[dict], object]
    check: Callable[[dict], object] | None = None

    def load_config(self, path: str | None = None, overrides: Iterable[str] = ()) -> dict:
        """The config at ``path`` merged over the defaults, then the ``key.sub=value`` overrides (not yet
        checked; see :func:`load_config`)."""
        return load_config(path, overrides, defaults=self.defaults, rules=self.rules)

    def validate_config(self, config: dict) -> dict:
        """Check that ``config`` has exactly the known keys and valid values (:func:`check_config`, then
        ``check``), and return it; else raise :class:`GpipeValueError` naming the key, the rule and the value."""
        check_config(config, self.rules)
        if self.check is not None:
            self.check(config)
        return config

    def main(self, argv: list[str] | None = None) -> int:
        """Run the workflow from ``[config.yaml] [--set key.sub=value ...]`` (default ``sys.argv[1:]``): 0 on
        success; 2 on a bad config or bad input, printed as ``PROG: error: ...`` on stderr (see :func:`main`)."""
        return main(argv, prog=self.prog, description=self.description, defaults=self.defaults,
                    configure=lambda path, overrides: self.validate_config(self.load_config(path, overrides)),
                    run=self.run)


# -- a run ------------------------------------------------------------------------------------

class Run:
    """One batch run, a workflow's or a ``gpipe`` command's: its output folder, its cluster, its graph, its
    phases and its ``summary.json``.

    ``with Run(config, owned=..., prog=...) as run:`` checks the ``output`` folder and opens a temporary one
    (:func:`atomic_dir`, which becomes ``output`` once the block succeeds), connects to the config's
    ``cluster`` (:func:`gpipe.connect`, current inside the block) and prints the Dask dashboard link. Inside,
    :meth:`graph` loads the config's ``graph``, :meth:`phase` tells a long step on stderr, :meth:`lap` times
    one, :meth:`path` names a file in the output folder and :meth:`finish` writes ``summary.json`` last.

    Parameters
    ----------
    config : dict
        A checked config holding the keys of :data:`RULES`; ``output`` None writes no folder (the outputs then
        lie where the run puts them, and :meth:`finish` returns the summary unwritten).
    owned : str, optional
        The files the run writes in its folder, as :func:`atomic_dir` takes them; none where ``output`` is None.
    prog : str
        The name that starts the run's lines on stderr (``graph_sampling``, ``gpipe``).
    header : dict, optional
        What the summary says first about the run (default ``{"config": config}``).
    quiet : bool
        Print nothing on stderr: no dashboard link, no phases.
    output_name : str
        The name the output folder was given by (``output``, ``out``), in the errors.

    Examples
    --------
    >>> import os, tempfile
    >>> from gpipe.workflow import Run
    >>> config = {"graph": {"path": "rmat:6:4", "directed": False, "partitions": None}, "overwrite": False,
    ...           "output": os.path.join(tempfile.mkdtemp(), "out"),
    ...           "cluster": {"scheduler_file": None, "address": None, "device": "cpu", "n_workers": 1}}
    >>> with Run(config, owned=r"summary\\.json", prog="demo", quiet=True) as run:
    ...     g = run.graph()
    ...     summary = run.finish(found={"vertices": g.num_vertices})
    >>> summary["found"], sorted(summary["timings"])
    ({'vertices': 64}, ['connect', 'graph', 'total'])
    """

    def __init__(self, config: dict, *, owned: str | None = None, prog: str, header: dict | None = None,
                 quiet: bool = False, output_name: str = "output") -> None:
        self.config = config
        self.quiet = quiet
        self.outputs: dict[str, str] = {}
        self._out = None if config["output"] is None else os.path.abspath(config["output"])
        self._owned = owned if self._out is None else check_text("owned", owned)
        self._prog, self._output_name = prog, output_name
        self._header = {"config": config} if header is None else header
        self._graph: Graph | None = None

    def __enter__(self) -> Run:
        self._watch = _Stopwatch()
        self._stack = contextlib.ExitStack().__enter__()
        try:
            self.folder = None if self._out is None else self._stack.enter_context(
                atomic_dir(self._out, owned=self._owned, overwrite=self.config["overwrite"], name=self._output_name))
            cluster = self.config["cluster"]
            self.client = self._stack.enter_context(connect(cluster["scheduler_file"], cluster["address"],
                                                            n_workers=cluster["n_workers"], device=cluster["device"]))
            self._stack.enter_context(as_current(self.client))
            if not self.quiet:
                print(f"{self._prog}: Dask dashboard at {self.client.dashboard_link}", file=sys.stderr)
        except BaseException:
            self._stack.__exit__(*sys.exc_info())
            raise
        self.lap("connect")
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None and self._graph is not None:
            self._graph.release()  # on a shared cluster, nothing would free it once this client is closed
        self._stack.__exit__(kind, error, traceback)  # none of its contexts swallows an error

    def lap(self, name: str) -> None:
        """Time the step that ends now as ``name`` in the summary's ``timings``."""
        self._watch.lap(name)

    def phase(self, text: str) -> _Phase:
        """A long step told on stderr as it starts, then what it did (``phase.done(...)``) and its seconds."""
        return _Phase(self, text)

    def graph(self, load: Callable[[], Graph] | None = None, *, lap: str = "graph", weighted: bool = False,
              mode: str | None = None, **reading) -> Graph:
        """The config's graph, generated or read (:func:`load_graph`, with ``reading`` for
        :func:`gpipe.read_edges`), or what ``load()`` returns; told as a phase, timed as ``lap``, described in
        the summary and released at the end of a run that succeeds."""
        path = self.config["graph"].get("path")  # none where the run makes its graph (gnn_training)
        rmat = None if path is None else _rmat_spec(path)
        text = "making the graph" if path is None else f"generating R-MAT scale {rmat[0]}" if rmat else _reading(path)
        with self.phase(text) as phase:
            self._graph = load() if load is not None else load_graph(self.config["graph"], weighted=weighted,
                                                                     mode=mode, **reading)
            _graph_done(phase, self._graph)
        self.lap(lap)
        return self._graph

    def path(self, name: str) -> str:
        """Where the output file (or folder) ``name`` is written: in the temporary folder."""
        return os.path.join(self.folder, name)

    def written(self, phase: _Phase, outputs: dict[str, str]) -> None:
        """Record ``outputs`` (output name -> the path written) and say at the end of ``phase`` how much it wrote."""
        _written(phase, outputs)
        self.outputs.update(outputs)

    def finish(self, **sections) -> dict:
        """Write ``summary.json`` into the output folder, its last file, and return the summary.

        The summary holds ``status``, the header, ``graph`` (the graph of :meth:`graph`, unless ``sections``
        gives it), ``cluster``, ``sections`` (each the run's own, under its key; None ones left out), ``outputs``
        (where each is once the folder is ``output``), ``timings`` and ``gpipe_version``.
        """
        g = self._graph
        graph = sections.pop("graph", None) or {
            "num_vertices": g.num_vertices, "num_edges": g.num_edges, "num_partitions": g.num_partitions,
            "directed": g.directed, "weighted": g.weighted}
        outputs = {key: path if self.folder is None else os.path.join(self._out, os.path.relpath(path, self.folder))
                   for key, path in self.outputs.items()}
        if self.folder is not None:
            outputs["summary"] = os.path.join(self._out, "summary.json")
        summary = {
            "status": "ok",
            **self._header,
            "graph": graph,
            "cluster": _cluster_info(self.client),
            **{key: value for key, value in sections.items() if value is not None},
            "outputs": outputs,
            "timings": dict(self._watch.seconds, total=self._watch.total()),
            # gpipe's door imports this module: its version is read from it once it is loaded
            "gpipe_version": importlib.import_module(__package__).__version__,
        }
        if self.folder is not None:
            write_json(os.path.join(self.folder, "summary.json"), summary)
        return summary


def _cluster_info(client) -> dict:
    """The summary's ``cluster``: the scheduler, the dashboard, the device and each worker."""
    workers = workers_info(client)
    return {"scheduler": client.scheduler.address, "dashboard": client.dashboard_link,
            "device": current(client).device,
            "workers": [{"address": address, "name": w.get("name"), "nthreads": w.get("nthreads")}
                        for address, w in sorted(workers.items())]}


# -- gpipe run --------------------------------------------------------------------------------

def run(workflow: str, overrides: Iterable[str] = (), *, scheduler_file: str | None = None,
        address: str | None = None, wait_for_workers: int | None = None, wait_timeout: float | None = None,
        commands: Mapping[str, Callable[[list[str]], int]] | None = None) -> int:
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
    commands : mapping, optional
        More workflows a config may name: name -> ``main(argv)``, as a ``run.py``'s (``gpipe run`` passes the
        ``gpipe`` commands, ``walk``, ``sample``, ``mine`` and ``count``, each the workflow its flags make).

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
    commands = check_mapping("commands", {} if commands is None else dict(commands))
    script, config = _find(check_text("workflow", workflow), commands)
    overrides = check_texts("overrides", overrides)
    scheduler_file = optional(check_text)("scheduler_file", scheduler_file)
    address = optional(check_text)("address", address)
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
    main = script if callable(script) else _load_script(script).main
    with dask.config.set(waits):  # gpipe.connect waits, after the workflow has checked its config
        return main(argv)


def _shipped() -> dict[str, Path]:
    """The shipped workflows, name -> run.py: ``gpipe/_workflows`` in a wheel, ``workflows/`` in a source tree."""
    here = Path(__file__).resolve().parent
    for folder in (here / "_workflows", here.parent / "workflows"):
        if folder.is_dir():
            return {d.name: d / "run.py" for d in sorted(folder.iterdir()) if (d / "run.py").is_file()}
    return {}


def _find(workflow: str, commands: Mapping[str, Callable]) -> tuple[Path | Callable, str | None]:
    """The ``run.py`` (or the ``main`` of ``commands``) that ``workflow`` names, and the config file to give it
    (None: its defaults)."""
    shipped: dict[str, Path | Callable] = {**_shipped(), **commands}
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
