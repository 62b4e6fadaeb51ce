"""The ``gpipe`` command's parser: its commands and their flags."""

from __future__ import annotations

import argparse
import inspect
import sys
from functools import partial

from .. import __version__, config, counting, generators, mining, walks, workflow
from .._validate import check_bytes, check_int, check_probability, check_seed
from ..graph import FORMATS
from ._count import _count
from ._demo import _demo
from ._generate import _generate
from ._info import _info
from ._mine import _mine
from ._options import (
    _FORMATS,
    _MINERS,
    _NODE_SAMPLERS,
    _SAMPLERS,
    _WALKS,
    _checked,
    _cluster_flags,
    _default,
    _dest,
    _graph_flags,
    _graph_source,
    _out_flags,
    _partitions_flag,
    _pattern_edges,
    _positive,
    _positive_finite,
    _update_flags,
    _vertex_order_flag,
    _vertices,
    _walk_flags,
)
from ._run import _run_workflow
from ._sample import _sample
from ._walk import _walk
from ._warmup import _warmup


class _OldName(argparse.Action):
    """A flag's old name, kept for one release: it warns on stderr and stores its value as the new flag would."""

    def __init__(self, option_strings: list[str], dest: str, new: str, **keywords):
        super().__init__(option_strings, dest, **keywords)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated, it is now {self.new}; {option_string} goes in "
              f"the next release", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _add_flags(parser: argparse.ArgumentParser, extra) -> None:
    """Add a command's extra flags (flag, argparse keywords). A flag renamed (keyword ``old``: its old name) takes
    either name but not both (argparse says so), and one of them when it is required."""
    for flag, keywords in extra:
        keywords = dict(keywords)
        old = keywords.pop("old", None)
        if old is None:
            parser.add_argument(flag, **keywords)
            continue
        either = parser.add_mutually_exclusive_group(required=keywords.pop("required", False))
        either.add_argument(flag, **keywords)
        either.add_argument(old, action=_OldName, new=flag, dest=_dest(flag), type=keywords["type"],
                            metavar=keywords["metavar"], default=argparse.SUPPRESS,
                            help=f"deprecated: the old name of {flag}, taken until the next release")


def _on_a_graph(commands, name: str, summary_line: str) -> argparse.ArgumentParser:
    """The parser of command ``name`` that reads or generates ``--graph``, with the flags on how (the config's
    graph section, and how an edge file is read)."""
    one = commands.add_parser(name, help=summary_line, description=summary_line)
    _graph_flags(one)
    _partitions_flag(one)
    _vertex_order_flag(one)
    return one


def _run_flags(parser: argparse.ArgumentParser, writes: str, command) -> None:
    """The flags of a command that runs (``--out`` and the cluster: the config's output and cluster), and the
    function that runs it."""
    _out_flags(parser, writes, required=True)
    _cluster_flags(parser, local=True)
    parser.set_defaults(run=command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpipe", description="Graph sampling and random walks at scale, on Dask.")
    parser.add_argument("--version", action="version", version=f"gpipe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="versions, GPUs and the cluster, if one is named")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    _cluster_flags(info, local=False)
    info.set_defaults(run=_info)

    warm = commands.add_parser("warmup", help="compile the kernels ahead of the first call (numba's and CuPy's "
                                             "caches), here or on a named cluster's workers")
    _cluster_flags(warm, local=False)
    warm.add_argument("--quiet", action="store_true", help="no progress on stderr")
    warm.set_defaults(run=_warmup)

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
    _vertex_order_flag(rmat)
    _run_flags(rmat, "writes DIR/graph/ and DIR/summary.json", _generate)

    walk = commands.add_parser("walk", help="random walks on a graph")
    algorithms = walk.add_subparsers(dest="algorithm", required=True, metavar="ALGORITHM")
    for name, (function, extra) in _WALKS.items():
        summary_line = inspect.getdoc(function).splitlines()[0].replace("``", "")
        one = _on_a_graph(algorithms, name, summary_line)
        _walk_flags(one, function)
        _add_flags(one, extra)
        one.add_argument("--format", choices=_FORMATS, default="corpus",
                         help="DIR/walks.txt (one walk per line), DIR/walks.parquet/, or both (default: %(default)s)")
        _update_flags(one)
        _run_flags(one, "writes the walks and DIR/summary.json", _walk)

    sample = commands.add_parser("sample", help="sample edges around seed vertices")
    samplers = sample.add_subparsers(dest="algorithm", required=True, metavar="ALGORITHM")
    for name, (function, extra) in _SAMPLERS.items():
        summary_line = " ".join(inspect.getdoc(function).split("\n\n")[0].split()).split(":")[0]
        one = _on_a_graph(samplers, name, summary_line)
        if "seeds" in inspect.signature(function).parameters:
            one.add_argument("--seeds", type=_vertices("seeds"), required=True, metavar="IDS",
                             help="seed vertices, one instance each: ID,ID,... or @FILE with one id per line")
        one.add_argument("--seed", type=_checked(partial(check_seed, "seed")), default=_default(function, "seed"),
                         help="seed of the sample (default: %(default)s)")
        _add_flags(one, extra)
        nodes = ", DIR/nodes.parquet" if name in _NODE_SAMPLERS else ""
        _run_flags(one, f"writes DIR/edges.parquet{nodes} and DIR/summary.json", _sample)

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
        _run_flags(one, "writes DIR/summary.json", _count)

    mine = commands.add_parser("mine", help="mine cliques, pattern matches or frequent patterns in a graph")
    whats = mine.add_subparsers(dest="algorithm", required=True, metavar="WHAT")
    for name, function in _MINERS.items():  # type: ignore[assignment]
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
        if name == "fpm":
            one.add_argument("--patterns", metavar="FILE.parquet", help="also write the patterns table there")
        else:
            for flag in ("--device-budget", "--host-budget"):
                where = "on its device" if "device" in flag else "in host memory"
                one.add_argument(flag, type=_checked(partial(check_bytes, _dest(flag)), str), metavar="BYTES",
                                 help=f"table bytes a worker keeps {where} (e.g. '2 GB'; default: "
                                      f"gpipe.mining.{flag[2:]})")
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
                      start=None, weighted=False, directed=False, partitions=None, vertex_order=None, format="corpus",
                      fmt=None, weight_column=None, updates=None, rounds=1)
    return parser
