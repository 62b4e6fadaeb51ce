"""A command's config: its flags are keys of it, checked by the one loader of batch runs (:mod:`gpipe.workflow`),
so that ``gpipe walk|sample|mine|count`` are the workflows ``walk``, ``sample``, ``mine`` and ``count`` with flags,
which ``gpipe run CONFIG.yaml`` runs from a config file as well (``workflow: walk``, ``algorithm: deepwalk`` and the
keys the flags set)."""

from __future__ import annotations

import argparse
import inspect
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .. import counting, generators, mining, workflow
from .._batch_config import _read_yaml
from .._validate import check_text
from ._count import _count
from ._mine import _mine
from ._options import (
    _FORMATS,
    _MINERS,
    _POSITIVE,
    _SAMPLERS,
    _WALKS,
    _Flag,
    _cluster_flags,
    _default,
    _flag,
    _fmt_flag,
    _graph_flags,
    _metavar,
    _out_flags,
    _partitions_flag,
    _pattern,
    _positive_int,
    _probability,
    _seed,
    _switch,
    _update_flags,
    _vertex_order_flag,
    _vertices,
    _walk_flags,
)
from ._sample import _sample
from ._walk import _walk


def _walk_command(algorithm: str) -> tuple[_Flag, ...]:
    function, extra = _WALKS[algorithm]
    return (*_graph_flags(), _partitions_flag(), _vertex_order_flag(), *_walk_flags(function), *extra,
            _Flag("--format", "format", workflow.one_of(_FORMATS), default="corpus", metavar=_metavar(_FORMATS),
                  help="DIR/walks.txt (one walk per line), DIR/walks.parquet/, or both (default: %(default)s)"),
            *_update_flags(), *_out_flags("writes the walks and DIR/summary.json", required=True),
            *_cluster_flags(local=True))


def _sample_command(algorithm: str) -> tuple[_Flag, ...]:
    function, extra = _SAMPLERS[algorithm]
    seeds = () if "seeds" not in inspect.signature(function).parameters else (
        _Flag("--seeds", "seeds", _vertices, required=True, metavar="IDS",
              help="seed vertices, one instance each: ID,ID,... or @FILE with one id per line"),)
    nodes = ", DIR/nodes.parquet" if algorithm == "random-node" else ""
    return (*_graph_flags(), _partitions_flag(), _vertex_order_flag(), *seeds,
            _seed(function, "seed of the sample"), *extra,
            *_out_flags(f"writes DIR/edges.parquet{nodes} and DIR/summary.json", required=True),
            *_cluster_flags(local=True))


def _count_command(algorithm: str) -> tuple[_Flag, ...]:
    flags = [_Flag("--graph", "graph.path", workflow.RULES["graph.path"], required=True, metavar="PATH",
                   help="labeled data graph, in the t/v/e format"),
             _Flag("--query", "query", check_text, required=True, metavar="PATH",
                   help="query graph, in the t/v/e format"),
             _partitions_flag()]
    if algorithm == "estimate":
        function = counting.estimate
        methods = ("partial_refine", "alley", "wanderjoin")
        flags += [
            _flag(function, "--method", workflow.one_of(methods), "the estimator (default: %(default)s)",
                  metavar=_metavar(methods)),
            _positive_int(function, "--samples", "samples to draw"),
            _flag(function, "--alpha", workflow.optional(workflow.probability(open_low=True)),
                  "partial_refine's refinement probability in (0, 1] (default: 0.1)", metavar="A"),
            _seed(function, "seed of the samples"),
            _switch("--no-inheritance", "inheritance", "samples that die do not inherit live ones of their warp",
                    value=False)]
    return (*flags, *_out_flags("writes DIR/summary.json", required=True), *_cluster_flags(local=True))


def _mine_command(algorithm: str) -> tuple[_Flag, ...]:
    flags = [_Flag("--graph", "graph.path", workflow.RULES["graph.path"], required=True, metavar="PATH",
                   help="edge file, graph folder, labeled graph in the t/v/e format (.graph), or "
                        "rmat:SCALE[:EDGE_FACTOR] to generate one"),
             _fmt_flag()]
    if algorithm == "cliques":
        flags.append(_Flag("--k", "k", workflow.integer(minimum=3), required=True, metavar="K",
                           help="clique size, at least 3"))
    elif algorithm == "match":
        flags += [_Flag("--pattern", "pattern", _pattern, required=True, metavar="EDGES",
                        help="the pattern's edges, e.g. 0-1,1-2,2-0 (a triangle)"),
                  _switch("--induced", "induced", "match induced subgraphs")]
    else:
        flags += [
            _Flag("--max-edges", "max_edges", workflow.integer(minimum=1, maximum=mining.FPM_MAX_EDGES),
                  required=True, metavar="E", help=f"the largest patterns' edge count (1 to {mining.FPM_MAX_EDGES})"),
            _Flag("--min-support", "min_support", _POSITIVE, required=True, metavar="S",
                  help="the least MNI support of a pattern reported"),
            _Flag("--random-labels", "random_labels", workflow.optional(_POSITIVE), metavar="L",
                  help="label the vertices uniformly in 0..L-1 (default: the t/v/e graph's labels)"),
            _seed(mining.frequent_patterns, "seed of --random-labels", default=0),
            _Flag("--patterns", "patterns", workflow.optional(check_text), metavar="FILE.parquet",
                  help="also write the patterns table there")]
    if algorithm != "fpm":
        for flag in ("--device-budget", "--host-budget"):
            where = "on its device" if "device" in flag else "in host memory"
            flags.append(_Flag(flag, flag[2:].replace("-", "_"), workflow.byte_count, metavar="BYTES",
                               help=f"table bytes a worker keeps {where} (e.g. '2 GB'; default: "
                                    f"gpipe.mining.{flag[2:]})"))
        flags += [_Flag("--embeddings", "embeddings", workflow.optional(check_text), metavar="DIR",
                        help="also list every embedding, a row each, into this new or empty folder: a Parquet file "
                             "per block, written by the workers"),
                  _switch("--overwrite", "overwrite", "replace --embeddings DIR when it holds an earlier run's "
                                                      "embeddings (only files gpipe writes there)")]
    return (*flags, _Flag("--summary", "summary", workflow.optional(check_text), metavar="FILE.json",
                          help="write the JSON summary there (default: stdout)"), *_cluster_flags(local=True))


def _generate_command(algorithm: str) -> tuple[_Flag, ...]:
    rmat = generators.rmat
    return (_Flag("--scale", "scale", _POSITIVE, required=True, metavar="S", help="2**S vertices"),
            _positive_int(rmat, "--edge-factor", "edges drawn per vertex", metavar="E"),
            _seed(rmat, "seed of the edge stream"),
            *(_probability(rmat, f"--{name}", "quadrant probability") for name in "abc"),
            _switch("--directed", "graph.directed", "keep edges directed"),
            _switch("--weighted", "weighted", "weights uniform in (0, 1]"),
            _partitions_flag(), _vertex_order_flag(),
            *_out_flags("writes DIR/graph/ and DIR/summary.json", required=True), *_cluster_flags(local=True))


def _demo_command(algorithm: None) -> tuple[_Flag, ...]:
    return (_Flag("--scale", "scale", _POSITIVE, default=16, metavar="S", help="2**S vertices (default: %(default)s)"),
            _Flag("--length", "length", _POSITIVE, default=_WALK_LENGTH, metavar="L",
                  help="steps per walk (default: %(default)s)"),
            *_out_flags("writes DIR/walks.txt and DIR/summary.json (default: %(default)s)", default="out"),
            *_cluster_flags(local=True))


_WALK_LENGTH = _default(_WALKS["deepwalk"][0], "length")


def _info_command(algorithm: None) -> tuple[_Flag, ...]:
    return (_switch("--json", "json", "print one JSON object"), *_cluster_flags(local=False))


def _warmup_command(algorithm: None) -> tuple[_Flag, ...]:
    return (*_cluster_flags(local=False), _switch("--quiet", "quiet", "no progress on stderr"))


def _run_command(algorithm: None) -> tuple[_Flag, ...]:
    from .. import config

    return (_Flag("--wait-for-workers", "wait_for_workers", workflow.optional(_POSITIVE), metavar="N",
                  help="on an existing cluster, wait until N workers have joined before starting"),
            _Flag("--wait-timeout", "wait_timeout", workflow.optional(workflow.number), metavar="S",
                  help="seconds to wait for the scheduler file and the workers (default: gpipe.cluster.wait-timeout, "
                       f"{config.get('cluster.wait-timeout')})"),
            *_cluster_flags(local=False))


# command -> (its algorithms, or None; its flags for one of them). A command that runs (a graph, an output folder, a
# cluster) has the keys of gpipe.workflow.RULES too (_RUN_KEYS), whether its flags set them or not.
_COMMANDS: dict[str, tuple[tuple[str, ...] | None, Callable[[Any], tuple[_Flag, ...]]]] = {
    "walk": (tuple(_WALKS), _walk_command),
    "sample": (tuple(_SAMPLERS), _sample_command),
    "count": (("estimate", "exact"), _count_command),
    "mine": (tuple(_MINERS), _mine_command),
    "generate": (("rmat",), _generate_command),
    "demo": (None, _demo_command),
    "info": (None, _info_command),
    "warmup": (None, _warmup_command),
    "run": (None, _run_command),
}

# The keys of a run's config (gpipe.workflow.RULES) and their defaults where a command has no flag for one: its
# output (None: none, as gpipe mine writes its files where its flags say), its cluster's device (None:
# gpipe.device), the graph as read.
_RUN_KEYS: dict[str, tuple[Callable, Any]] = {
    **{key: (rule, None) for key, rule in workflow.RULES.items()},
    "graph.directed": (workflow.boolean, False),
    "output": (workflow.optional(check_text), None),
    "overwrite": (workflow.boolean, False),
    "graph.path": (workflow.optional(workflow.RULES["graph.path"]), None),
    "cluster.device": (workflow.optional(workflow.RULES["cluster.device"]), None),
    "quiet": (workflow.boolean, False),
}

# The commands that are workflows, run by gpipe run from a config file too (``workflow: walk``).
_WORKFLOWS = {"walk": _walk, "sample": _sample, "mine": _mine, "count": _count}


def flags(command: str, algorithm: str | None) -> tuple[_Flag, ...]:
    """The flags of ``gpipe command [algorithm]``."""
    return _COMMANDS[command][1](algorithm)


def configured(command: str, algorithm: str | None, *, values: Mapping[str, Any] | None = None,
               path: str | None = None, overrides: Iterable[str] = (), command_line: str) -> argparse.Namespace:
    """The checked config of ``gpipe command [algorithm]``, from its flags' ``values`` (key -> the flag's text,
    named as the flag in the errors) or a config file at ``path`` and ``key=value`` overrides, as the namespace the
    command runs on: each flag's value under its name, and the config itself (``config``)."""
    algorithms, _ = _COMMANDS[command]
    given = flags(command, algorithm)
    rules: dict[str, Callable] = {}
    defaults: dict = {}
    if command in _WORKFLOWS or command in ("generate", "demo"):
        for key, (rule, default) in _RUN_KEYS.items():
            rules[key], defaults = rule, _with(defaults, key, default)
        defaults["workflow"] = command
    if algorithms is not None:
        rules["algorithm"], defaults["algorithm"] = workflow.one_of(algorithms), algorithm
    for flag in given:
        rules[flag.key], defaults = flag.rule, _with(defaults, flag.key, flag.default)
    config = workflow.load_config(path, overrides, defaults=defaults, rules=rules, values=values)
    workflow.check_config(config, rules, names={flag.key: flag.flag for flag in given if flag.key in (values or {})})
    return argparse.Namespace(command=command, algorithm=algorithm, command_line=command_line, config=config,
                              **{flag.dest: _get(config, flag.key) for flag in given})


def _with(config: dict, key: str, value) -> dict:
    *sections, last = key.split(".")
    section = config
    for name in sections:
        section = section.setdefault(name, {})
    section[last] = value
    return config


def _get(config: dict, key: str):
    for name in key.split("."):
        config = config[name]
    return config


def _workflow_main(command: str) -> Callable[[list[str]], int]:
    """``main(argv)`` of the workflow ``command``: ``[config.yaml] [--set key.sub=value ...]``, as a ``run.py``'s."""
    algorithms = _COMMANDS[command][0] or ()

    def configure(path: str | None, overrides: list[str]) -> argparse.Namespace:
        algorithm = next((o.partition("=")[2] for o in reversed(overrides) if o.startswith("algorithm=")), None)
        if algorithm is None:
            algorithm = None if path is None else _read_yaml(path).get("algorithm")
        workflow.one_of(algorithms)("algorithm", algorithm)
        return configured(command, algorithm, path=path, overrides=overrides,
                          command_line=shlex.join(["gpipe", "run", *([path] if path else []),
                                                   *(f"--set={o}" for o in overrides)]))

    return lambda argv: workflow.main(argv, prog=f"gpipe {command}", description=f"gpipe {command} from a config",
                                      defaults=f"the defaults of gpipe {command}'s flags", configure=configure,
                                      run=_WORKFLOWS[command])


#: The gpipe commands that ``gpipe run`` runs from a config file: name -> main(argv).
COMMAND_WORKFLOWS = {command: _workflow_main(command) for command in _WORKFLOWS}
