"""The ``gpipe`` command, for batch and HPC use.

``gpipe info`` reports the software stack, the GPUs and, when one is named, the
cluster; ``gpipe generate rmat`` writes a generated graph; ``gpipe walk ALGORITHM``
(``deepwalk``, ``node2vec``, ``metropolis-hastings``, ``jump``, ``ppr``) walks a
graph file, a graph folder or a generated ``rmat:SCALE[:EDGE_FACTOR]`` graph, and
with ``--updates LOG --rounds N`` (deepwalk, node2vec, jump, ppr) applies an update log to
it in N rounds (:class:`gpipe.dynamic.DynamicGraph`), walking after each;
``gpipe sample ALGORITHM`` (``neighbor``, ``snowball``, ``forest-fire``, ``layer``
from ``--seeds``; ``random-node``, ``random-edge``) writes the sampled edges into
the folder ``edges.parquet``, a file per range of instances written by the workers
(``random-node`` its vertices into ``nodes.parquet`` too);
``gpipe count estimate|exact`` counts the embeddings of a labeled query graph
in a labeled data graph (both in the ``t/v/e`` text format), estimated by
:func:`gpipe.counting.estimate` or exact by :func:`gpipe.counting.count_exact`;
``gpipe mine cliques|match|fpm`` counts (or lists) the k-cliques, the matches
of a small pattern or the frequent labeled patterns of a graph with
:mod:`gpipe.mining`, and prints a JSON summary (or writes it to ``--summary``;
listed embeddings go into the folder ``--embeddings``, a file per block written
by the workers);
``gpipe run WORKFLOW.yaml`` runs the workflow a YAML config names
(:mod:`gpipe.workflow`) on a cluster, as the batch scripts of ``cluster/`` do;
``gpipe demo`` runs DeepWalk on an R-MAT graph in one command.

Commands that do work connect with :func:`gpipe.connect` (``--scheduler-file``,
``--address``, the ``GPIPE_SCHEDULER_*`` variables, else a local cluster of
``--workers`` on ``--device``), print the Dask dashboard link and their progress
(reading, walking, writing) on stderr, and write their outputs and a ``summary.json`` (parameters, graph,
cluster, walk statistics, outputs, timings) to ``--out``. The folder appears as
a whole once the command succeeded, so ``summary.json`` in it means that run
succeeded: it is written under a temporary name and renamed at the end, and removed
when the command fails, is interrupted or gets SIGTERM. ``--out`` must be new or
empty, where a folder can be created; ``--overwrite`` replaces an earlier run's
folder, never one holding other files. Bad input exits with status 2 and a one-line
message naming the parameter, the rule and the value, before any work.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import inspect
import json
import os
import re
import shlex
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass
from functools import partial
from typing import Callable

import numpy as np
from dask.utils import format_bytes

from . import __version__, config, counting, dynamic, generators, mining, sampling, walks, workflow
from ._files import (EMBEDDING_FILES, GRAPH_FILES, SAMPLE_FILES, SCORE_FILES, WALK_FILES, atomic_dir,
                     check_folder_target, write_json)
from ._validate import check_bytes, check_int, check_probability, check_seed, is_ascii_digits
from .backend import DEVICES, gpu_problem, versions
from .cluster import ENV_ADDRESS, ENV_SCHEDULER_FILE, connect
from .errors import GpipeError, GpipeValueError
from .graph import FORMATS, Graph, edge_format, read_edges
from .runtime import EdgeSample, current, workers_info

_FORMATS = ("corpus", "parquet", "both")
# Every file a command writes in its --out folder; --overwrite replaces a folder only when it holds no other.
_RUN_FILES = (rf"summary\.json|walks\.txt|scores\.parquet/(?:{SCORE_FILES})|(?:edges|nodes)\.parquet/(?:{SAMPLE_FILES})"
              rf"|walks\.parquet/(?:{WALK_FILES})|graph/(?:{GRAPH_FILES})")
_NOT_PARAMETERS = ("run", "command", "command_line")


def main(argv: list[str] | None = None) -> int:
    """Run the ``gpipe`` command line.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 on success, 2 on bad input (usage errors included)
        or any other :class:`GpipeError`, whose message is printed to stderr
        on one line without a traceback; 130 (128 + SIGINT) when interrupted
        (Ctrl-C) and 143 (128 + SIGTERM) when terminated, after removing the
        unfinished outputs, with one line saying so.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            args = _parser().parse_args(argv)
        except SystemExit as exc:  # argparse has printed the usage error or the help
            return exc.code
        args.command_line = shlex.join(["gpipe", *argv])
        with _terminate_as_interrupt():
            return args.run(args)
    except (GpipeError, FileNotFoundError) as exc:
        print(f"gpipe: error: {' '.join(str(exc).splitlines())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # the outputs' context managers have removed what was unfinished
        signum = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
        how = "terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted (Ctrl-C)"
        print(f"gpipe: {how}; unfinished outputs were removed", file=sys.stderr)
        return 128 + signum


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where SIGINT raises KeyboardInterrupt, so that the same cleanup runs."""


def _raise_terminated(signum, frame) -> None:
    raise _Terminated


@contextlib.contextmanager
def _terminate_as_interrupt():
    """Raise :class:`_Terminated` on SIGTERM inside the block (from the main thread, the only one signals reach)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- the parser -------------------------------------------------------------------------------

def _default(function: Callable, name: str):
    return inspect.signature(function).parameters[name].default


def _dest(flag: str) -> str:
    """The attribute argparse stores ``flag`` under."""
    return flag.lstrip("-").replace("-", "_")


def _checked(check: Callable, convert: Callable = int) -> Callable[[str], object]:
    """An argparse type applying gpipe's ``check`` to the converted text, so its message names the parameter."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = text  # the check then says what was expected
        try:
            return check(value)
        except GpipeValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _positive(name: str) -> Callable[[str], int]:
    return _checked(partial(check_int, name, minimum=1))


def _positive_finite(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
        raise GpipeValueError(f"'{name}' must be a positive finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True, eq=False)
class _Vertices:
    """Vertex ids given as ``ID,ID,...`` or ``@FILE`` (one id per line); ``str`` gives the text, for summary.json."""

    text: str
    ids: tuple[str, ...]

    def __str__(self) -> str:
        return self.text

    def of(self, g: Graph) -> np.ndarray:
        """The ids typed as ``g``'s: strings where its ids are strings, else ints when each one is an int64."""
        if (g.id_map is None or g.id_map.dtype.kind in "iu") and all(_INTEGER.fullmatch(i) for i in self.ids):
            with contextlib.suppress(OverflowError):  # beyond int64, so no vertex of g: to_internal says so
                return np.array([int(i) for i in self.ids], dtype=np.int64)
        return np.array(self.ids, dtype=object)


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _vertices(name: str) -> Callable[[str], _Vertices]:
    """The argparse type of a vertex list, whose ids are typed once the graph is known (:meth:`_Vertices.of`)."""
    def parse(text: str) -> _Vertices:
        if text.startswith("@"):
            try:
                with open(text[1:]) as f:
                    ids = [line.strip() for line in f]
            except OSError as exc:
                raise argparse.ArgumentTypeError(
                    f"'{name}' must be ID,ID,... or @FILE with one id per line; cannot read {text[1:]!r}: "
                    f"{exc.strerror}") from None
            ids = [i for i in ids if i]
        else:
            ids = [i.strip() for i in text.split(",")]
            if not all(ids):
                raise argparse.ArgumentTypeError(f"'{name}' must be ID,ID,... with no empty id, got {text!r}")
        if not ids:
            raise argparse.ArgumentTypeError(f"'{name}' must hold at least one vertex id, got {text!r}")
        return _Vertices(text, tuple(ids))
    return parse


def _option(function: Callable, flag: str, **keywords) -> tuple[str, dict]:
    """An extra flag of ``function``: its default is the function's default for that parameter."""
    keywords.setdefault("default", _default(function, _dest(flag)))
    return flag, keywords


def _instances(function: Callable) -> tuple[str, dict]:
    return _option(function, "--instances", type=_positive("instances"), metavar="N",
                   help="independent samples (default: %(default)s)")


def _start(function: Callable) -> tuple[str, dict]:
    return _option(function, "--start", type=_vertices("start"), metavar="IDS",
                   help="start vertices, ID,ID,... or @FILE with one id per line (default: every vertex)")


def _weighted(function: Callable) -> tuple[str, dict]:
    return _option(function, "--weighted", action="store_true",
                   help="bias each step by the edge weights (with rmat:..., generate a weighted graph)")


def _positive_number(function: Callable, flag: str, text: str) -> tuple[str, dict]:
    name = _dest(flag)
    return _option(function, flag, type=_checked(partial(_positive_finite, name), float), metavar=name.upper(),
                   help=text + " (default: %(default)s)")


def _probability(function: Callable, flag: str, text: str, **rule) -> tuple[str, dict]:
    name = _dest(flag)
    return _option(function, flag, type=_checked(partial(check_probability, name, **rule), float), metavar="X",
                   help=text + " (default: %(default)s)")


# name -> (function, its extra flags as (flag, argparse keywords)); every walk also takes --length and --seed,
# and --walks-per-vertex when its function does. Each flag is the keyword of the same name (dashes as
# underscores) of the function. A new walk is one entry here.
_WALKS: dict[str, tuple[Callable, tuple[tuple[str, dict], ...]]] = {
    "deepwalk": (walks.deepwalk, (_start(walks.deepwalk), _weighted(walks.deepwalk))),
    "node2vec": (walks.node2vec, (
        _positive_number(walks.node2vec, "--p", "return parameter: 1/p weighs stepping back, > 0"),
        _positive_number(walks.node2vec, "--q", "in-out parameter: 1/q weighs moving away, > 0"),
        _start(walks.node2vec), _weighted(walks.node2vec))),
    "metropolis-hastings": (walks.metropolis_hastings, (_start(walks.metropolis_hastings),)),
    "jump": (walks.with_jump, (
        _probability(walks.with_jump, "--jump", "probability of jumping to a uniformly random vertex, in [0, 1]"),
        _start(walks.with_jump), _weighted(walks.with_jump))),
    "ppr": (walks.ppr, (
        _option(walks.ppr, "--sources", type=_vertices("sources"), required=True, default=None, metavar="IDS",
                help="source vertices, each once, ID,ID,... or @FILE with one id per line; also writes "
                     "the folder DIR/scores.parquet"),
        _probability(walks.ppr, "--restart", "probability of returning to the source at each step, in [0, 1)",
                     open_high=True),
        _option(walks.ppr, "--walks-per-source", type=_positive("walks_per_source"), metavar="R",
                help="walks from each source (default: %(default)s)"),
        _weighted(walks.ppr))),
    "multidimensional": (walks.multidimensional, (
        _option(walks.multidimensional, "--frontier-size", type=_positive("frontier_size"), metavar="M",
                help="vertices in each instance's pool (default: %(default)s)"),
        _option(walks.multidimensional, "--budget", type=_positive("budget"), metavar="B",
                help="edges sampled per instance (default: the frontier size); writes DIR/edges.parquet"),
        _instances(walks.multidimensional))),
}


def _depth(function: Callable) -> tuple[str, dict]:
    return _option(function, "--depth", type=_positive("depth"), metavar="D",
                   help="expansion rounds from the seeds (default: %(default)s)")


# name -> (function, its extra flags), as _WALKS; every sampler also takes --seeds and --seed. A new one is one entry.
_SAMPLERS: dict[str, tuple[Callable, tuple[tuple[str, dict], ...]]] = {
    "neighbor": (sampling.neighbor, (
        _option(sampling.neighbor, "--fanout", type=_positive("fanout"), metavar="K",
                help="out-neighbors each frontier vertex picks (default: %(default)s)"),
        _depth(sampling.neighbor),
        _option(sampling.neighbor, "--weighted", action="store_true",
                help="pick in proportion to the edge weights (with rmat:..., generate a weighted graph)"))),
    "snowball": (sampling.snowball, (
        _depth(sampling.snowball),
        _option(sampling.snowball, "--max-per-vertex", type=_positive("max_per_vertex"), metavar="K",
                help="out-neighbors each vertex adds at most (default: all)"))),
    "forest-fire": (sampling.forest_fire, (
        _probability(sampling.forest_fire, "--p-forward", "forward burning probability, in [0, 1)", open_high=True),
        _depth(sampling.forest_fire))),
    "layer": (sampling.layer, (
        _option(sampling.layer, "--layer-size", type=_positive("layer_size"), metavar="K",
                help="edges each instance picks from its whole frontier per layer (default: %(default)s)"),
        _depth(sampling.layer))),
    "random-node": (sampling.random_node, (
        _option(sampling.random_node, "--n", type=_positive("n"), required=True, metavar="N",
                help="vertices per instance; the sample is the subgraph they induce"),
        _instances(sampling.random_node),
        _option(sampling.random_node, "--by-degree", action="store_true",
                help="pick vertices in proportion to their out-degree"))),
    "random-edge": (sampling.random_edge, (
        _option(sampling.random_edge, "--m", type=_positive("m"), required=True, metavar="M",
                help="edges per instance"),
        _instances(sampling.random_edge))),
}
_NODE_SAMPLERS = {"random-node"}  # samples of vertices, not all in their edges: they write DIR/nodes.parquet too



@dataclass(frozen=True)
class _Rmat:
    """A graph given as ``rmat:SCALE[:EDGE_FACTOR]``: generated on the workers with rmat's default seed."""

    scale: int
    edge_factor: int = _default(generators.rmat, "edge_factor")

    def __str__(self) -> str:
        return f"rmat:{self.scale}:{self.edge_factor}"


def _graph_source(text: str) -> str | _Rmat:
    """The argparse type of ``--graph``: a path, or an :class:`_Rmat` for ``rmat:SCALE[:EDGE_FACTOR]``."""
    if text.split(":")[0] != "rmat":
        if not os.path.exists(text):
            raise argparse.ArgumentTypeError(f"'graph' must be an existing file or folder, got {text!r}")
        return text
    spec = workflow._rmat_spec(text)
    if spec is None:
        raise argparse.ArgumentTypeError(
            f"'graph' must be an edge file, a graph folder or rmat:SCALE[:EDGE_FACTOR] with positive integers, "
            f"got {text!r}")
    return _Rmat(*spec)


def _cluster_flags(parser: argparse.ArgumentParser, *, local: bool) -> None:
    group = parser.add_argument_group("cluster")
    group.add_argument("--scheduler-file", metavar="F",
                       help=f"scheduler file of a running cluster (or ${ENV_SCHEDULER_FILE})")
    group.add_argument("--address", metavar="A", help=f"scheduler address of a running cluster (or ${ENV_ADDRESS})")
    group.add_argument("--device", choices=DEVICES, help="where kernels run (default: gpipe.device, 'auto')")
    if local:
        group.add_argument("--workers", type=_positive("n_workers"), metavar="N",
                           help="workers of a local cluster (default: one per GPU, else one CPU worker)")
        group.add_argument("--quiet", action="store_true", help="no dashboard link or progress on stderr")


def _out_flags(parser: argparse.ArgumentParser, text: str, **keywords) -> None:
    parser.add_argument("--out", metavar="DIR", help=text + "; DIR must be new or empty", **keywords)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace DIR when it holds an earlier gpipe run (only files gpipe writes there); "
                             "DIR changes only once this run has succeeded")


def _graph_flags(parser: argparse.ArgumentParser) -> None:
    """``--graph`` and how to read it: read_edges's ``fmt``, ``weight`` (a column name) and ``directed``."""
    parser.add_argument("--graph", type=_graph_source, required=True, metavar="PATH",
                        help="edge file, graph folder, or rmat:SCALE[:EDGE_FACTOR] to generate one")
    parser.add_argument("--fmt", choices=FORMATS,
                        help="format of the edge file (default: from its extension, e.g. .txt is snap)")
    parser.add_argument("--weight-column", metavar="NAME",
                        help="the weight column of a csv or parquet edge file (default: none; a snap file's third "
                             "column is its weight)")
    parser.add_argument("--directed", action="store_true", help="keep the edges of an edge file directed")


def _partitions_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partitions", type=_positive("partitions"), metavar="P",
                        help="default: workers x gpipe.partitions-per-worker")


def _walk_flags(parser: argparse.ArgumentParser, function: Callable) -> None:
    taken = inspect.signature(function).parameters
    if "length" in taken:
        parser.add_argument("--length", type=_positive("length"), default=_default(function, "length"), metavar="L",
                            help="steps per walk (default: %(default)s)")
    if "walks_per_vertex" in taken:
        parser.add_argument("--walks-per-vertex", type=_positive("walks_per_vertex"), metavar="R",
                            default=_default(function, "walks_per_vertex"),
                            help="walks from each start vertex (default: %(default)s)")
    parser.add_argument("--seed", type=_checked(partial(check_seed, "seed")), default=_default(function, "seed"),
                        help="seed of the walks (default: %(default)s)")


# The walks that take a graph that changes (gpipe.dynamic.DynamicGraph): --updates walks them after each round.
_DYNAMIC_WALKS = ("deepwalk", "node2vec", "jump", "ppr")


def _update_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("a graph that changes (deepwalk, node2vec, jump, ppr)")
    group.add_argument("--updates", metavar="FILE",
                       help="an update log (.parquet or .csv: op, src, dst, weight a row, in log order; op insert, "
                            "delete or update): applied to the graph in --rounds batches, walking after each; one "
                            "JSON line per round on stdout and in summary.json; the walks written are the last "
                            "round's")
    group.add_argument("--rounds", type=_positive("rounds"), default=1, metavar="N",
                       help="batches the log is applied in, in log order, of equal size (default: %(default)s)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpipe", description="Graph sampling and random walks at scale, on Dask.")
    parser.add_argument("--version", action="version", version=f"gpipe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="versions, GPUs and the cluster, if one is named")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    _cluster_flags(info, local=False)
    info.set_defaults(run=_info)

    generate = commands.add_parser("generate", help="generate a graph and write it to a folder")
    kinds = generate.add_subparsers(dest="generator", required=True, metavar="GENERATOR")
    rmat = kinds.add_parser("rmat", help="Graph500-style R-MAT graph")
    rmat.add_argument("--scale", type=_positive("scale"), required=True, metavar="S", help="2**S vertices")
    rmat.add_argument("--edge-factor", type=_positive("edge_factor"), default=_default(generators.rmat, "edge_factor"),
                      metavar="E", help="edges drawn per vertex (default: %(default)s)")
    rmat.add_argument("--seed", type=_checked(partial(check_seed, "seed")), default=_default(generators.rmat, "seed"),
                      help="seed of the edge stream (default: %(default)s)")
    for name in "abc":
        rmat.add_argument(f"--{name}", type=_checked(partial(check_probability, name), float),
                          default=_default(generators.rmat, name), help="quadrant probability (default: %(default)s)")
    rmat.add_argument("--directed", action="store_true", help="keep edges directed")
    rmat.add_argument("--weighted", action="store_true", help="weights uniform in (0, 1]")
    _partitions_flag(rmat)
    _out_flags(rmat, "writes DIR/graph/ and DIR/summary.json", required=True)
    _cluster_flags(rmat, local=True)
    rmat.set_defaults(run=_generate)

    walk = commands.add_parser("walk", help="random walks on a graph")
    algorithms = walk.add_subparsers(dest="algorithm", required=True, metavar="ALGORITHM")
    for name, (function, extra) in _WALKS.items():
        summary_line = inspect.getdoc(function).splitlines()[0].replace("``", "")
        one = algorithms.add_parser(name, help=summary_line, description=summary_line)
        _graph_flags(one)
        _partitions_flag(one)
        _walk_flags(one, function)
        for flag, keywords in extra:
            one.add_argument(flag, **keywords)
        one.add_argument("--format", choices=_FORMATS, default="corpus",
                         help="DIR/walks.txt (one walk per line), DIR/walks.parquet/, or both (default: %(default)s)")
        _update_flags(one)
        _out_flags(one, "writes the walks and DIR/summary.json", required=True)
        _cluster_flags(one, local=True)
        one.set_defaults(run=_walk)

    sample = commands.add_parser("sample", help="sample edges around seed vertices")
    samplers = sample.add_subparsers(dest="algorithm", required=True, metavar="ALGORITHM")
    for name, (function, extra) in _SAMPLERS.items():
        summary_line = " ".join(inspect.getdoc(function).split("\n\n")[0].split()).split(":")[0]
        one = samplers.add_parser(name, help=summary_line, description=summary_line)
        _graph_flags(one)
        if "seeds" in inspect.signature(function).parameters:
            one.add_argument("--seeds", type=_vertices("seeds"), required=True, metavar="IDS",
                             help="seed vertices, one instance each: ID,ID,... or @FILE with one id per line")
        _partitions_flag(one)
        one.add_argument("--seed", type=_checked(partial(check_seed, "seed")), default=_default(function, "seed"),
                         help="seed of the sample (default: %(default)s)")
        for flag, keywords in extra:
            one.add_argument(flag, **keywords)
        nodes = ", DIR/nodes.parquet" if name in _NODE_SAMPLERS else ""
        _out_flags(one, f"writes DIR/edges.parquet{nodes} and DIR/summary.json", required=True)
        _cluster_flags(one, local=True)
        one.set_defaults(run=_sample)

    count = commands.add_parser("count", help="count a query's embeddings in a labeled graph")
    hows = count.add_subparsers(dest="algorithm", required=True, metavar="HOW")
    for name, function in (("estimate", counting.estimate), ("exact", counting.count_exact)):
        summary_line = inspect.getdoc(function).splitlines()[0].replace("``", "")
        one = hows.add_parser(name, help=summary_line, description=summary_line)
        one.add_argument("--graph", required=True, metavar="PATH", help="labeled data graph, in the t/v/e format")
        one.add_argument("--query", required=True, metavar="PATH",
                         help="query graph, in the t/v/e format")
        _partitions_flag(one)
        if name == "estimate":
            one.add_argument("--method", choices=("partial_refine", "alley", "wanderjoin"),
                             default=_default(function, "method"), help="the estimator (default: %(default)s)")
            one.add_argument("--samples", type=_positive("samples"), default=_default(function, "samples"),
                             metavar="N", help="samples to draw (default: %(default)s)")
            one.add_argument("--alpha", type=_checked(partial(check_probability, "alpha", open_low=True), float),
                             metavar="A", help="partial_refine's refinement probability in (0, 1] (default: 0.1)")
            one.add_argument("--seed", type=_checked(partial(check_seed, "seed")), default=_default(function, "seed"),
                             help="seed of the samples (default: %(default)s)")
            one.add_argument("--no-inheritance", action="store_false", dest="inheritance",
                             help="samples that die do not inherit live ones of their warp")
        _out_flags(one, "writes DIR/summary.json", required=True)
        _cluster_flags(one, local=True)
        one.set_defaults(run=_count)

    mine = commands.add_parser("mine", help="mine cliques, pattern matches or frequent patterns in a graph")
    whats = mine.add_subparsers(dest="algorithm", required=True, metavar="WHAT")
    for name, function in _MINERS.items():
        summary_line = inspect.getdoc(function).splitlines()[0].replace("``", "")
        one = whats.add_parser(name, help=summary_line, description=summary_line)
        one.add_argument("--graph", type=_graph_source, required=True, metavar="PATH",
                         help="edge file, graph folder, labeled graph in the t/v/e format (.graph), or "
                              "rmat:SCALE[:EDGE_FACTOR] to generate one")
        one.add_argument("--fmt", choices=FORMATS,
                         help="format of the edge file (default: from its extension, e.g. .txt is snap)")
        if name == "cliques":
            one.add_argument("--k", type=_checked(partial(check_int, "k", minimum=3)), required=True, metavar="K",
                             help="clique size, at least 3")
        elif name == "match":
            one.add_argument("--pattern", type=_pattern_edges, required=True, metavar="EDGES",
                             help="the pattern's edges, e.g. 0-1,1-2,2-0 (a triangle)")
            one.add_argument("--induced", action="store_true", help="match induced subgraphs")
        else:
            one.add_argument("--max-edges", required=True, metavar="E",
                             type=_checked(partial(check_int, "max_edges", minimum=1, maximum=mining.FPM_MAX_EDGES)),
                             help=f"the largest patterns' edge count (1 to {mining.FPM_MAX_EDGES})")
            one.add_argument("--min-support", type=_positive("min_support"), required=True, metavar="S",
                             help="the least MNI support of a pattern reported")
            one.add_argument("--random-labels", type=_positive("random_labels"), metavar="L",
                             help="label the vertices uniformly in 0..L-1 (default: the t/v/e graph's labels)")
            one.add_argument("--seed", type=_checked(partial(check_seed, "seed")), default=0,
                             help="seed of --random-labels (default: %(default)s)")
        for flag in ("--device-budget", "--host-budget"):
            where = "on its device" if "device" in flag else "in host memory"
            one.add_argument(flag, type=_checked(partial(check_bytes, _dest(flag)), str), metavar="BYTES",
                             help=f"table bytes a worker keeps {where} (e.g. '2 GB'; default: gpipe.mining.{flag[2:]})")
        if name == "fpm":
            one.add_argument("--patterns", metavar="FILE.parquet", help="also write the patterns table there")
        else:
            one.add_argument("--embeddings", metavar="DIR",
                             help="also list every embedding, a row each, into this new or empty folder: a "
                                  "Parquet file per block, written by the workers")
            one.add_argument("--overwrite", action="store_true",
                             help="replace --embeddings DIR when it holds an earlier run's embeddings (only files "
                                  "gpipe writes there)")
        one.add_argument("--summary", metavar="FILE.json", help="write the JSON summary there (default: stdout)")
        _cluster_flags(one, local=True)
        one.set_defaults(run=_mine, weight_column=None)

    run = commands.add_parser("run", help="run a workflow (workflows/*) from its YAML config, on a cluster",
                              description="Run the workflow that WORKFLOW.yaml names (its key 'workflow': a "
                                          "shipped workflow or the path of a run.py), with the config merged over "
                                          "that workflow's defaults.")
    run.add_argument("workflow", metavar="WORKFLOW.yaml",
                     help="a workflow config, or the name of a shipped workflow to run with its defaults "
                          f"({', '.join(workflow._shipped()) or 'none found'})")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                     help="override one key of the config, e.g. --set output=results (the value is read as YAML)")
    run.add_argument("--wait-for-workers", type=_positive("wait_for_workers"), metavar="N",
                     help="on an existing cluster, wait until N workers have joined before starting")
    run.add_argument("--wait-timeout", type=_checked(partial(_positive_finite, "wait_timeout"), float),
                     metavar="S", help="seconds to wait for the scheduler file and the workers "
                                       f"(default: gpipe.cluster.wait-timeout, {config.get('cluster.wait-timeout')})")
    _cluster_flags(run, local=False)
    run.set_defaults(run=_run_workflow)

    demo = commands.add_parser("demo", help="DeepWalk on an R-MAT graph, in one command")
    demo.add_argument("--scale", type=_positive("scale"), default=16, metavar="S",
                      help="2**S vertices (default: %(default)s)")
    demo.add_argument("--length", type=_positive("length"), default=_default(walks.deepwalk, "length"), metavar="L",
                      help="steps per walk (default: %(default)s)")
    _out_flags(demo, "writes DIR/walks.txt and DIR/summary.json (default: %(default)s)", default="out")
    _cluster_flags(demo, local=True)
    demo.set_defaults(run=_demo, algorithm="deepwalk", walks_per_vertex=1, seed=_default(walks.deepwalk, "seed"),
                      start=None, weighted=False, directed=False, partitions=None, format="corpus", fmt=None,
                      weight_column=None, updates=None, rounds=1)
    return parser


# -- commands ---------------------------------------------------------------------------------

def _info(args) -> int:
    stack = versions()
    report = {"versions": stack, "gpu": {"count": stack["gpus"], "problem": gpu_problem()}, "cluster": None}
    named = (args.scheduler_file, args.address, os.environ.get(ENV_SCHEDULER_FILE), os.environ.get(ENV_ADDRESS),
             config.get("cluster.scheduler-file"), config.get("cluster.address"))
    if any(named):
        with connect(args.scheduler_file, args.address, device=args.device) as client:
            report["cluster"] = _cluster_info(client)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    print(f"gpipe {stack['gpipe']}")
    print("  " + ", ".join(f"{name} {version or '-'}" for name, version in stack.items()
                           if name not in ("gpipe", "gpus", "cuda_visible_devices")))
    gpu = report["gpu"]
    print(f"GPU: {gpu['count']} visible" if gpu["problem"] is None else f"GPU: none usable: {gpu['problem']}")
    cluster = report["cluster"]
    if cluster is None:
        print(f"cluster: none given (--scheduler-file, --address, ${ENV_SCHEDULER_FILE} or ${ENV_ADDRESS})")
        return 0
    print(f"cluster: {cluster['scheduler']}, device {cluster['device']}, dashboard {cluster['dashboard']}")
    for worker in cluster["workers"]:
        print(f"  {worker['address']}  {worker['nthreads']} threads  (name {worker['name']})")
    return 0


def _generate(args) -> int:
    watch = _Stopwatch()
    with _out_folder(args) as folder, _cluster(args) as client:
        watch.lap("connect")
        g = generators.rmat(args.scale, args.edge_factor, args.a, args.b, args.c, args.seed, directed=args.directed,
                            weighted=args.weighted, partitions=args.partitions)
        watch.lap("generate")
        outputs = {"graph": g.to_parquet(os.path.join(folder, "graph"))}
        watch.lap("write")
        summary = _write_summary(args, folder, client, g, outputs, watch)
        g.release()  # on a shared cluster, nothing would free it once this client is closed
    graph = summary["graph"]
    print(f"{graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges, {graph['num_partitions']} partitions "
          f"-> {summary['outputs']['graph']} ({summary['timings']['total']:.2f} s)")
    return 0


def _walk(args) -> int:
    summary = _run_walk(args)
    stats = summary["walk"]
    print(f"{stats['algorithm']}: {stats['walks']:,} walks, {stats['steps']:,} steps in {stats['seconds']:.3f} s, "
          f"{stats['steps_per_second']:,.0f} steps/s")
    print("wrote " + ", ".join(summary["outputs"].values()))
    return 0


def _sample(args) -> int:
    """Load or generate ``args.graph``, sample it, write edges.parquet (and nodes.parquet) and summary.json."""
    function, extra = _SAMPLERS[args.algorithm]
    options = {"seed": args.seed, **{_dest(flag): getattr(args, _dest(flag)) for flag, _ in extra}}
    if "seeds" in args:
        options["seeds"] = args.seeds
    tiny = {k: 1 for k in ("depth", "instances") if k in options}
    _check_graph_flags(args)
    watch = _Stopwatch()
    with _out_folder(args) as folder, _cluster(args) as client:
        watch.lap("connect")
        g = _load_graph(args, weighted=options.get("weighted", False))
        options = _typed_as_ids_of(g, options)
        if "seeds" in options:
            tiny["seeds"] = options["seeds"][:1]
        watch.lap("graph")
        function(g, **dict(options, **tiny))  # compile the kernels: a tiny sample
        watch.lap("compile")
        result = function(g, **options)
        result.stats["algorithm"] = function.__name__
        watch.lap("sample")
        with _Phase(args, f"writing {args.out}") as phase:
            outputs = {"edges": result.to_parquet(os.path.join(folder, "edges.parquet"))}
            if args.algorithm in _NODE_SAMPLERS:
                outputs["nodes"] = result.to_parquet(os.path.join(folder, "nodes.parquet"), nodes=True)
            _written(phase, outputs)
        watch.lap("write")
        summary = _write_summary(args, folder, client, g, outputs, watch, sample=result.stats)
        g.release()  # on a shared cluster, nothing would free it once this client is closed
    stats, written = summary["sample"], ", ".join(summary["outputs"][k] for k in outputs)
    print(f"{stats['algorithm']}: {stats['edges']:,} edges in {stats['instances']:,} instances in "
          f"{stats['seconds']:.3f} s, {stats['edges_per_second']:,.0f} edges/s -> {written}")
    return 0


def _count(args) -> int:
    """Read the labeled graph, count (or estimate) the query's embeddings in it, write summary.json."""
    query = counting.Query.from_file(args.query)  # before any work: a malformed query names its file and line
    watch = _Stopwatch()
    with _out_folder(args) as folder, _cluster(args) as client:
        watch.lap("connect")
        with _read_phase(args, args.graph) as phase:
            g = counting.read_graph(args.graph, partitions=args.partitions)
            _graph_done(phase, g)
        watch.lap("graph")
        if args.algorithm == "exact":
            started = time.perf_counter()
            section = {"count": counting.count_exact(g, query), "seconds": time.perf_counter() - started}
        else:
            options = {"method": args.method, "alpha": args.alpha, "seed": args.seed,
                       "inheritance": args.inheritance}
            counting.estimate(g, query, samples=1, **options)  # compile the kernels: one group
            watch.lap("compile")
            section = asdict(counting.estimate(g, query, samples=args.samples, **options))
        watch.lap("count")
        summary = _write_summary(args, folder, client, g, {}, watch, count=section)
        g.release()
    result = summary["count"]
    if args.algorithm == "exact":
        print(f"exact count: {result['count']:,} embeddings in {result['seconds']:.3f} s")
    else:
        print(f"{result['method']}: {result['estimate']:,.6g} +- {result['std_error']:.3g} (95% "
              f"{result['confidence_interval'][0]:,.6g} .. {result['confidence_interval'][1]:,.6g}) from "
              f"{result['samples']:,} samples, {result['valid_fraction']:.3f} valid, "
              f"{result['samples_per_second']:,.0f} samples/s over the call, {result['candidate_seconds']:.3f} s of it "
              "building the candidate graph")
    return 0


_MINERS = {"cliques": mining.count_cliques, "match": mining.match, "fpm": mining.frequent_patterns}


def _pattern_pairs(text: str) -> list[tuple]:
    """``--pattern``'s ``u-v`` pairs separated by commas (integer names as integers)."""
    pairs = [tuple(part.strip().split("-")) for part in text.split(",")]
    if not pairs or any(len(p) != 2 or not all(p) for p in pairs):
        raise argparse.ArgumentTypeError(f"'pattern' must be edges such as 0-1,1-2,2-0, got {text!r}")
    return [tuple(int(u) if is_ascii_digits(u) else u for u in p) for p in pairs]


# The argparse type of ``--pattern``: its pairs, checked as match checks a pattern, before any work.
_pattern_edges = _checked(mining.check_pattern, _pattern_pairs)


def _mine(args) -> int:
    """Read or generate the graph (replicated), mine it, print the JSON summary or write it to ``--summary``."""
    labeled = not isinstance(args.graph, _Rmat) and args.graph.endswith(".graph")
    if not labeled:
        _check_graph_flags(args)
    if args.algorithm == "fpm" and not labeled and args.random_labels is None:
        raise GpipeValueError(f"'labels' must come with the graph: give --random-labels L or a t/v/e graph (.graph), "
                              f"got --graph {args.graph}")
    outputs = [getattr(args, name, None) for name in ("embeddings", "patterns", "summary")]
    for path in filter(None, outputs):  # before any work: a file that cannot be written names itself
        if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise GpipeValueError(f"the folder of {path!r} must exist")
    if getattr(args, "embeddings", None):
        check_folder_target(os.path.abspath(args.embeddings), "embeddings", re.compile(EMBEDDING_FILES),
                            args.overwrite)
    budgets = {"device_budget": args.device_budget, "host_budget": args.host_budget}
    watch = _Stopwatch()
    with _cluster(args) as client:
        watch.lap("connect")
        rmat = isinstance(args.graph, _Rmat)
        with (_Phase(args, f"generating R-MAT scale {args.graph.scale}") if rmat else
              _read_phase(args, args.graph)) as phase:
            if labeled:
                g = counting.read_graph(args.graph, mode="replicated")
            elif rmat:
                g = generators.rmat(args.graph.scale, args.graph.edge_factor, mode="replicated")
            else:
                g = read_edges(args.graph, fmt=args.fmt, mode="replicated")
            _graph_done(phase, g)
        watch.lap("graph")
        result, written = _mined(args, g, budgets)
        watch.lap("mine")
        summary = {"status": "ok", "command": "mine", "algorithm": args.algorithm, "command_line": args.command_line,
                   "parameters": {k: v for k, v in vars(args).items() if k not in _NOT_PARAMETERS},
                   "graph": {"num_vertices": g.num_vertices, "num_edges": g.num_edges},
                   "cluster": _cluster_info(client), **result, "outputs": written,
                   "timings": dict(watch.seconds, total=watch.total()), "gpipe_version": __version__}
        g.release()
    if args.summary:
        write_json(args.summary, summary)
    else:
        print(json.dumps(summary, indent=2, default=str))
    return 0


def _mined(args, g: Graph, budgets: dict) -> tuple[dict, dict]:
    """The mining call of ``args.algorithm``: its summary sections and the files it wrote."""
    written = {}
    if args.algorithm == "fpm":
        if args.random_labels is not None:
            g.set_labels(np.random.default_rng(args.seed).integers(0, args.random_labels, g.num_vertices))
        found = mining.frequent_patterns(g, args.max_edges, args.min_support, **budgets)
        if args.patterns:
            written["patterns"] = os.path.abspath(found.to_parquet(args.patterns))
        return {"patterns": found.patterns.to_dict("records"), "stats": found.stats}, written
    listing = args.embeddings is not None
    if args.algorithm == "cliques":
        result = (mining.list_cliques if listing else mining.count_cliques)(g, args.k, **budgets)
    else:
        result = mining.match(g, args.pattern, args.induced, embeddings=listing, **budgets)
    if listing:
        with _Phase(args, f"writing {args.embeddings}") as phase:
            written["embeddings"] = os.path.abspath(result.to_parquet(args.embeddings, overwrite=args.overwrite))
            _written(phase, written)
    return {"count": result.count, "stats": result.stats}, written


def _run_workflow(args) -> int:
    """``gpipe run``: the workflow's own exit status (it prints its report, or its one-line error)."""
    overrides = [*args.overrides, *([f"cluster.device={args.device}"] if args.device else [])]
    return workflow.run(args.workflow, overrides, scheduler_file=args.scheduler_file, address=args.address,
                        wait_for_workers=args.wait_for_workers, wait_timeout=args.wait_timeout)


def _demo(args) -> int:
    args.graph = _Rmat(args.scale)
    summary = _run_walk(args)
    graph, cluster, stats = summary["graph"], summary["cluster"], summary["walk"]
    print(f"gpipe demo: DeepWalk on an R-MAT graph (scale {args.scale}, edge factor {args.graph.edge_factor})\n"
          f"  graph      {graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges, "
          f"{graph['num_partitions']} partitions\n"
          f"  cluster    {len(cluster['workers'])} worker(s) on {cluster['device']} ({cluster['scheduler']})\n"
          f"  walks      {stats['walks']:,} of length {stats['length']}: {stats['steps']:,} steps in "
          f"{stats['seconds']:.3f} s = {stats['steps_per_second']:,.0f} steps/s\n"
          f"  corpus     {summary['outputs']['corpus']}\n"
          f"  summary    {summary['outputs']['summary']}\n"
          f"  dashboard  {cluster['dashboard']}")
    return 0


# -- helpers ----------------------------------------------------------------------------------

def _out_folder(args):
    """A temporary folder that becomes ``--out`` as a whole when the command succeeds (checked before any work)."""
    return atomic_dir(args.out, owned=_RUN_FILES, overwrite=args.overwrite, name="out")


@contextlib.contextmanager
def _cluster(args):
    """The client named by the flags (else a local cluster, closed on exit), current inside the block."""
    with connect(args.scheduler_file, args.address, n_workers=args.workers, device=args.device) as client, \
            client.as_current():
        if not args.quiet:
            print(f"gpipe: Dask dashboard at {client.dashboard_link}", file=sys.stderr)
        yield client


def _check_graph_flags(args) -> None:
    """Before any work: the flags on reading an edge file are refused with ``rmat:...``, which reads none; an
    edge file needs ``--fmt`` when its extension names no format."""
    for flag in ("--fmt", "--weight-column"):
        value = getattr(args, _dest(flag))
        if value is not None and isinstance(args.graph, _Rmat):
            raise GpipeValueError(f"'{_dest(flag)}' must be given with an edge file only, got {flag} {value} with "
                                  f"--graph {args.graph}, which is generated")
    if args.fmt is None and not isinstance(args.graph, _Rmat):
        edge_format(args.graph, name="graph", force="--fmt")


def _load_graph(args, weighted: bool, mode: str | None = None) -> Graph:
    """``args.graph`` read, or generated for ``rmat:...`` (with weights when ``weighted`` asks for them)."""
    if isinstance(args.graph, _Rmat):
        with _Phase(args, f"generating R-MAT scale {args.graph.scale}") as phase:
            g = generators.rmat(args.graph.scale, args.graph.edge_factor, directed=args.directed, weighted=weighted,
                                partitions=args.partitions, mode=mode)
            _graph_done(phase, g)
        return g
    with _read_phase(args, args.graph) as phase:
        g = read_edges(args.graph, weight=args.weight_column, directed=args.directed, partitions=args.partitions,
                       fmt=args.fmt, mode=mode)
        _graph_done(phase, g)
    return g


def _typed_as_ids_of(g: Graph, options: dict) -> dict:
    """``options`` with their vertex lists (``--start``, ``--sources``, ``--seeds``) typed as ``g``'s ids."""
    return {name: value.of(g) if isinstance(value, _Vertices) else value for name, value in options.items()}


def _run_walk(args) -> dict:
    """Load or generate ``args.graph``, walk it, write the walks and summary.json; return the summary."""
    function, extra = _WALKS[args.algorithm]
    taken = inspect.signature(function).parameters
    options = {"seed": args.seed, **{_dest(flag): getattr(args, _dest(flag)) for flag, _ in extra}}
    if "walks_per_vertex" in taken:
        options["walks_per_vertex"] = args.walks_per_vertex
    _check_graph_flags(args)
    log = _update_log(args)
    watch = _Stopwatch()
    with _out_folder(args) as folder, _cluster(args) as client:
        watch.lap("connect")
        g = _load_graph(args, weighted=options.get("weighted", False),
                        mode=None if log is None else "partitioned")
        options = _typed_as_ids_of(g, options)
        walked = g if log is None else dynamic.DynamicGraph.from_graph(g)
        watch.lap("graph")
        # compile the kernels on every worker: one short walk from the first vertex of each non-empty partition
        if "length" in taken:
            warm_up = dict(options, length=2)
            for name in ("start", "sources"):
                if name in taken:
                    warm_up[name] = g.to_original(g.bounds[:-1][np.diff(g.bounds) > 0])  # distinct, as sources must be
            for name in ("walks_per_vertex", "walks_per_source"):
                if name in taken:
                    warm_up[name] = 1
        else:  # frontier sampling: one small instance
            warm_up = dict(options, budget=2, instances=1)
        function(walked, **warm_up)
        watch.lap("compile")
        if "length" in taken:
            options["length"] = args.length
        rounds = None
        if log is None:
            result = function(g, progress=None if args.quiet else _Progress(sys.stderr), **options)
        else:
            result, rounds = _walk_rounds(args, walked, function, options, log)
        watch.lap("walk")
        with _Phase(args, f"writing {args.out}") as phase:
            outputs = _walk_outputs(args, result, folder)
            _written(phase, outputs)
        watch.lap("write")
        summary = _write_summary(args, folder, client, g, outputs, watch, walk=result.stats, rounds=rounds)
        g.release()  # on a shared cluster, nothing would free it once this client is closed
    return summary


def _walk_outputs(args, result, folder: str) -> dict:
    """Write what ``gpipe walk`` outputs of ``result`` into ``folder``: output name -> path."""
    outputs = {}
    if isinstance(result, EdgeSample):  # frontier sampling gives edges, not walks
        outputs["edges"] = result.to_parquet(os.path.join(folder, "edges.parquet"))
    elif args.format in ("corpus", "both"):
        outputs["corpus"] = result.to_corpus(os.path.join(folder, "walks.txt"))
    if args.format in ("parquet", "both") and not isinstance(result, EdgeSample):
        outputs["parquet"] = result.to_parquet(os.path.join(folder, "walks.parquet"))
    if isinstance(result, walks.PPRResult):  # the personalized PageRank its walks estimate
        outputs["scores"] = result.scores_to_parquet(os.path.join(folder, "scores.parquet"))
    return outputs


def _update_log(args):
    """``--updates`` read and checked before any work (None without it), with ``--rounds`` and the walk."""
    if args.updates is None:
        if args.rounds != 1:
            raise GpipeValueError(f"'rounds' must be given with --updates only, got --rounds {args.rounds}")
        return None
    if args.algorithm not in _DYNAMIC_WALKS:
        raise GpipeValueError(f"'updates' must be given with {', '.join(_DYNAMIC_WALKS)} (the walks that take a "
                              f"graph that changes), got {args.algorithm}")
    log = dynamic.read_updates(args.updates)
    if args.rounds > len(log):
        raise GpipeValueError(f"'rounds' must be at most the log's {len(log)} updates, got {args.rounds}")
    return log


def _walk_rounds(args, dg, function: Callable, options: dict, log) -> tuple:
    """Apply ``log`` to ``dg`` in ``args.rounds`` batches, walking after each; the last walk and a record per round
    (each also printed as a JSON line)."""
    rounds = []
    for number, rows in enumerate(np.array_split(np.arange(len(log)), args.rounds), 1):
        batch = log.iloc[rows]
        started = time.perf_counter()
        try:
            dg.apply(*(batch[c] for c in dynamic.UPDATE_COLUMNS), first=int(rows[0]))
        except GpipeValueError as exc:
            raise GpipeValueError(f"{args.updates}: round {number}: {exc}") from None
        applied = time.perf_counter()
        result = function(dg, **options)
        walked = time.perf_counter()
        update_seconds, walk_seconds = applied - started, walked - applied
        record = {"round": number, "updates": len(rows), "update_seconds": update_seconds,
                  "updates_per_second": len(rows) / update_seconds, "walk_seconds": walk_seconds,
                  "steps": result.stats["steps"], "steps_per_second": result.stats["steps"] / walk_seconds,
                  "num_vertices": dg.num_vertices, "num_edges": dg.num_edges}
        rounds.append(record)
        print(json.dumps(record), flush=True)
    return result, rounds


def _cluster_info(client) -> dict:
    workers = workers_info(client)
    return {"scheduler": client.scheduler.address, "dashboard": client.dashboard_link,
            "device": current(client).device,
            "workers": [{"address": address, "name": w.get("name"), "nthreads": w.get("nthreads")}
                        for address, w in sorted(workers.items())]}


def _write_summary(args, folder: str, client, g: Graph, outputs: dict, watch: _Stopwatch,
                   **sections: dict | None) -> dict:
    """Write ``summary.json`` into the run's temporary ``folder`` (its last file) and return the summary.

    ``outputs`` are paths in ``folder``; the summary names them where they will be once ``folder`` becomes
    ``--out``. ``sections`` (``walk=``, ``sample=``) are the run's statistics, each under its own key; None ones
    are left out.
    """
    out = os.path.abspath(args.out)
    outputs = {key: os.path.join(out, os.path.relpath(path, folder)) for key, path in outputs.items()}
    outputs["summary"] = os.path.join(out, "summary.json")
    summary = {
        "status": "ok",
        "command": args.command,
        "command_line": args.command_line,
        "parameters": {k: v for k, v in vars(args).items() if k not in _NOT_PARAMETERS},
        "graph": {"num_vertices": g.num_vertices, "num_edges": g.num_edges, "num_partitions": g.num_partitions,
                  "directed": g.directed, "weighted": g.weighted},
        "cluster": _cluster_info(client),
        **{key: value for key, value in sections.items() if value is not None},
        "outputs": outputs,
        "timings": dict(watch.seconds, total=watch.total()),
        "gpipe_version": __version__,
    }
    write_json(os.path.join(folder, "summary.json"), summary)
    return summary


class _Stopwatch:
    """Seconds spent in each phase of a command, one lap per phase."""

    def __init__(self):
        self._last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] = now - self._last
        self._last = now

    def total(self) -> float:
        return sum(self.seconds.values())


class _Phase:
    """A long phase of a command told on stderr: ``reading edges.el (1.2 GB) ...`` as it starts, its seconds
    ticking in place on a TTY (else a line every ``interval`` seconds), then what it did and how long it took.
    Silent with ``--quiet`` (or where a command has no such flag)."""

    tick = 1.0
    interval = 10.0

    def __init__(self, args, text: str):
        self._stream = sys.stderr if getattr(args, "quiet", True) is False else None
        self._text = text
        self._detail = "done"
        self._stop = threading.Event()
        self._ticker = None

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._started

    def done(self, detail: str) -> None:
        """What the phase did, said at its end."""
        self._detail = detail

    def __enter__(self) -> _Phase:
        self._started = time.perf_counter()
        if self._stream is not None:
            self._write(f"{self._text} ...", end=not self._stream.isatty())
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            outcome = self._detail if kind is None else "failed"
            self._write(f"{self._text}: {outcome} in {self.seconds:.1f} s", end=True)

    def _tick(self) -> None:
        tty, last = self._stream.isatty(), 0.0
        while not self._stop.wait(self.tick):
            if tty:
                self._write(f"{self._text} ... {self.seconds:.0f} s", end=False)
            elif self.seconds - last >= self.interval:
                last = self.seconds
                self._write(f"{self._text} ... {last:.0f} s", end=True)

    def _write(self, line: str, end: bool) -> None:
        tty = self._stream.isatty()
        self._stream.write(("\r\033[K" if tty else "") + line + ("\n" if end else ""))
        self._stream.flush()


def _bytes_at(path: str) -> int:
    """The bytes of the file at ``path``, or of every file under the folder (or glob) there."""
    paths = [path] if os.path.exists(path) else glob.glob(path)
    total = 0
    for p in paths:
        if os.path.isdir(p):
            total += sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(p) for f in files)
        elif os.path.isfile(p):
            total += os.path.getsize(p)
    return total


def _read_phase(args, g_text: str) -> _Phase:
    return _Phase(args, f"reading {g_text} ({format_bytes(_bytes_at(g_text))})")


def _graph_done(phase: _Phase, g: Graph) -> None:
    phase.done(f"{g.num_vertices:,} vertices, {g.num_edges:,} edges "
               f"({g.num_edges / max(phase.seconds, 1e-9):,.0f} edges/s)")


def _written(phase: _Phase, outputs: dict) -> None:
    size = sum(_bytes_at(path) for path in outputs.values())
    phase.done(f"{format_bytes(size)} ({format_bytes(int(size / max(phase.seconds, 1e-9)))}/s)")


class _Progress:
    """A walk's ``progress=`` callback: a bar redrawn in place on a TTY, else printed every 2 s and at the end."""

    width = 30
    interval = 2.0

    def __init__(self, stream):
        self._stream = stream
        self._tty = stream.isatty()
        self._printed = time.monotonic()

    def __call__(self, *, superstep: int, active: int, steps: int, total: int) -> None:
        done = (total - active) / total if total else 1.0
        filled = round(done * self.width)
        line = (f"walks [{'#' * filled}{'-' * (self.width - filled)}] {done:4.0%} "
                f"superstep {superstep} steps {steps:,}")
        now = time.monotonic()
        if self._tty:
            self._stream.write("\r" + line + ("\n" if active == 0 else ""))
        elif active == 0 or now - self._printed >= self.interval:
            self._stream.write(line + "\n")
            self._printed = now
        self._stream.flush()
