"""The command line's options: the argument types, the flags the commands share, and the tables of walks,
samplers and miners (a new one is an entry there)."""

from __future__ import annotations

import contextlib
import inspect
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import mining, sampling, walks, workflow
from .._files import GRAPH_FILES, SAMPLE_FILES, SCORE_FILES, WALK_FILES
from .._validate import VERTEX_ORDERS, check_fanouts, check_text, is_ascii_digits
from ..backend import DEVICES
from ..cluster import ENV_ADDRESS, ENV_SCHEDULER_FILE
from ..errors import GpipeValueError
from ..graph import FORMATS, Graph

_FORMATS = ("corpus", "parquet", "both")


# Every file a command writes in its --out folder; --overwrite replaces a folder only when it holds no other, and
# each as the folder's list of what gpipe wrote names it.
_RUN_FILES = (rf"summary\.json|walks\.txt|scores\.parquet/(?:{SCORE_FILES})|(?:edges|nodes)\.parquet/(?:{SAMPLE_FILES})"
              rf"|walks\.parquet/(?:{WALK_FILES})|graph/(?:{GRAPH_FILES})")


def _default(function: Callable, name: str):
    return inspect.signature(function).parameters[name].default


def _dest(flag: str) -> str:
    """The attribute argparse stores ``flag`` under."""
    return flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class _Flag:
    """A flag of a command: the config key it sets (its text, as argparse gives it, goes to the key's rule, the
    rule a config file's value of that key follows), the key's default, and how ``--help`` shows it."""

    flag: str
    key: str
    rule: Callable[[str, Any], Any]
    default: Any = None
    help: str = ""
    metavar: str | None = None
    required: bool = False
    switch: Any = None  # a flag without a value: it sets the key to this (True, or False for --no-...)
    old: str | None = None  # its old name, taken for one release (_parser._add_flags)

    @property
    def dest(self) -> str:
        """The flag's name in the summary's parameters and on the namespace a command runs on: a ``--no-...``
        switch's is its key's (``--no-inheritance`` sets ``inheritance``, false)."""
        return self.key if self.switch is False else _dest(self.flag)


def _flag(function: Callable, flag: str, rule: Callable, text: str, **keywords) -> _Flag:
    """A flag of ``function``'s keyword of the same name (dashes as underscores), a top-level key of the config;
    its default is the function's default for that keyword."""
    keywords.setdefault("default", _default(function, _dest(flag)))
    return _Flag(flag, _dest(flag), rule, help=text, **keywords)


def _switch(flag: str, key: str, text: str, value: bool = True) -> _Flag:
    return _Flag(flag, key, workflow.boolean, default=not value, help=text, switch=value)


def _positive_int(function: Callable, flag: str, text: str, **keywords) -> _Flag:
    keywords.setdefault("metavar", "N")
    return _flag(function, flag, _POSITIVE, text + " (default: %(default)s)", **keywords)


_POSITIVE = workflow.integer(minimum=1)


def _choice(choices: tuple) -> Callable[[str, Any], Any]:
    return workflow.optional(workflow.one_of(choices))


def _metavar(choices: tuple) -> str:
    return "{" + ",".join(map(str, choices)) + "}"


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


def _vertices(name: str, value) -> _Vertices:
    """The rule of a vertex list: ``ID,ID,...`` or ``@FILE`` (one id per line), or a list of ids (in a config file);
    its ids are typed once the graph is known (:meth:`_Vertices.of`)."""
    if isinstance(value, _Vertices):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, list) and value and all(isinstance(i, (int, str)) and not isinstance(i, bool)
                                                 for i in value):
        return _Vertices(",".join(map(str, value)), tuple(map(str, value)))
    if not isinstance(value, str) or not value:
        raise GpipeValueError(f"'{name}' must be ID,ID,... or @FILE with one id per line, or a list of ids, "
                              f"got {value!r}")
    if value.startswith("@"):
        try:
            with open(value[1:]) as f:
                ids = [line.strip() for line in f]
        except OSError as exc:
            raise GpipeValueError(f"'{name}' must be ID,ID,... or @FILE with one id per line; cannot read "
                                  f"{value[1:]!r}: {exc.strerror}") from None
        ids = [i for i in ids if i]
    else:
        ids = [i.strip() for i in value.split(",")]
        if not all(ids):
            raise GpipeValueError(f"'{name}' must be ID,ID,... with no empty id, got {value!r}")
    if not ids:
        raise GpipeValueError(f"'{name}' must hold at least one vertex id, got {value!r}")
    return _Vertices(value, tuple(ids))


def _fanouts(name: str, value) -> int | list[int]:
    """``fanouts``: one int (for every depth) or a list of them, given as ``K,K,...``."""
    if isinstance(value, str):
        fanouts = check_fanouts(name, [workflow.integer()(name, k) if is_ascii_digits(k.lstrip("-")) else k
                                       for k in value.split(",")])
        return fanouts if "," in value else fanouts[0]
    if isinstance(value, int) and not isinstance(value, bool):
        return check_fanouts(name, [value])[0]
    return check_fanouts(name, value)


def _pattern(name: str, value) -> list[tuple]:
    """``pattern``: ``u-v`` pairs separated by commas (integer names as integers), or a list of pairs; checked as
    :func:`gpipe.mining.match` checks a pattern, before any work."""
    if isinstance(value, str):
        pairs = [tuple(part.strip().split("-")) for part in value.split(",")]
        if any(len(p) != 2 or not all(p) for p in pairs):
            raise GpipeValueError(f"'{name}' must be edges such as 0-1,1-2,2-0, got {value!r}")
        value = [tuple(int(u) if is_ascii_digits(u) else u for u in p) for p in pairs]
    elif isinstance(value, list):
        value = [tuple(p) if isinstance(p, list) else p for p in value]
    mining.check_pattern(value)
    return value


def _graph_file(name: str, value) -> str:
    """The rule of a graph given as a file only (a labeled t/v/e graph)."""
    if not os.path.isfile(check_text(name, value)):
        raise GpipeValueError(f"'{name}' must be an existing file, got {value!r}")
    return value


def _instances(function: Callable) -> _Flag:
    return _positive_int(function, "--instances", "independent samples")


def _start(function: Callable) -> _Flag:
    return _flag(function, "--start", workflow.optional(_vertices), "start vertices, ID,ID,... or @FILE with one id "
                 "per line (default: every vertex)", metavar="IDS")


def _weighted(function: Callable, text: str = "bias each step by the edge weights (with rmat:..., generate a weighted "
                                             "graph)") -> _Flag:
    return _Flag("--weighted", "weighted", workflow.boolean, default=_default(function, "weighted"), help=text, switch=True)


def _number(function: Callable, flag: str, text: str) -> _Flag:
    return _flag(function, flag, workflow.number, text + " (default: %(default)s)", metavar=_dest(flag).upper())


def _probability(function: Callable, flag: str, text: str, **rule) -> _Flag:
    return _flag(function, flag, workflow.probability(**rule), text + " (default: %(default)s)", metavar="X")


def _seed(function: Callable, text: str, default=None) -> _Flag:
    return _Flag("--seed", "seed", workflow.seed, default=_default(function, "seed") if default is None else default,
                 help=text + " (default: %(default)s)", metavar="SEED")


# name -> (function, its own flags); every walk also takes --length and --seed, and --walks-per-vertex when its
# function does (_walk_flags). Each flag sets the top-level key of the config of the function's keyword of the same
# name (dashes as underscores). A new walk is one entry here.
_WALKS: dict[str, tuple[Callable, tuple[_Flag, ...]]] = {
    "deepwalk": (walks.deepwalk, (_start(walks.deepwalk), _weighted(walks.deepwalk))),
    "node2vec": (walks.node2vec, (
        _number(walks.node2vec, "--p", "return parameter: 1/p weighs stepping back, > 0"),
        _number(walks.node2vec, "--q", "in-out parameter: 1/q weighs moving away, > 0"),
        _start(walks.node2vec), _weighted(walks.node2vec))),
    "metropolis-hastings": (walks.metropolis_hastings, (_start(walks.metropolis_hastings),)),
    "jump": (walks.with_jump, (
        _probability(walks.with_jump, "--jump", "probability of jumping to a uniformly random vertex, in [0, 1]"),
        _start(walks.with_jump), _weighted(walks.with_jump))),
    "ppr": (walks.ppr, (
        _flag(walks.ppr, "--start", _vertices, "the sources (start vertices), each once, ID,ID,... or @FILE with one "
              "id per line; also writes the folder DIR/scores.parquet", required=True, default=None, metavar="IDS",
              old="--sources"),
        _probability(walks.ppr, "--restart", "probability of returning to the source at each step, in [0, 1)",
                     open_high=True),
        _positive_int(walks.ppr, "--walks-per-source", "walks from each source", metavar="R"),
        _weighted(walks.ppr))),
    "multidimensional": (walks.multidimensional, (
        _positive_int(walks.multidimensional, "--frontier-size", "vertices in each instance's pool", metavar="M"),
        _flag(walks.multidimensional, "--budget", workflow.optional(_POSITIVE),
              "edges sampled per instance (default: the frontier size); writes DIR/edges.parquet", metavar="B"),
        _instances(walks.multidimensional))),
}


def _depth(function: Callable) -> _Flag:
    return _positive_int(function, "--depth", "expansion rounds from the seeds", metavar="D")


# name -> (function, its own flags), as _WALKS; every sampler also takes --seed, and --seeds when its function does.
# A new one is one entry.
_SAMPLERS: dict[str, tuple[Callable, tuple[_Flag, ...]]] = {
    "neighbor": (sampling.neighbor, (
        _flag(sampling.neighbor, "--fanouts", _fanouts, "neighbors each frontier vertex picks: K,K,... one a depth "
              "from the seeds outwards, or one K at each of --depth depths (-1: all of them; default: %(default)s)",
              metavar="K[,K...]", old="--fanout"),
        _flag(sampling.neighbor, "--depth", workflow.optional(_POSITIVE),
              "expansion rounds from the seeds, with one K in --fanouts (default: 2)", metavar="D"),
        _weighted(sampling.neighbor, "pick in proportion to the edge weights (with rmat:..., generate a weighted "
                                     "graph)"))),
    "snowball": (sampling.snowball, (
        _depth(sampling.snowball),
        _flag(sampling.snowball, "--max-per-vertex", workflow.optional(_POSITIVE),
              "out-neighbors each vertex adds at most (default: all)", metavar="K"))),
    "forest-fire": (sampling.forest_fire, (
        _probability(sampling.forest_fire, "--p-forward", "forward burning probability, in [0, 1)", open_high=True),
        _depth(sampling.forest_fire))),
    "layer": (sampling.layer, (
        _positive_int(sampling.layer, "--layer-size", "edges each instance picks from its whole frontier per layer",
                      metavar="K"),
        _depth(sampling.layer))),
    "random-node": (sampling.random_node, (
        _flag(sampling.random_node, "--n", _POSITIVE, "vertices per instance; the sample is the subgraph they induce",
              required=True, default=None, metavar="N"),
        _instances(sampling.random_node),
        _Flag("--by-degree", "by_degree", workflow.boolean, default=False, switch=True,
              help="pick vertices in proportion to their out-degree"))),
    "random-edge": (sampling.random_edge, (
        _flag(sampling.random_edge, "--m", _POSITIVE, "edges per instance", required=True, default=None,
              metavar="M"),
        _instances(sampling.random_edge))),
}


_NODE_SAMPLERS = {"random-node"}  # samples of vertices, not all in their edges: they write DIR/nodes.parquet too


def _cluster_flags(*, local: bool) -> tuple[_Flag, ...]:
    """The config's cluster: a running one, or a local one of ``--workers`` (``local``), told unless ``--quiet``."""
    flags = (
        _Flag("--scheduler-file", "cluster.scheduler_file", workflow.optional(check_text), metavar="F",
              help=f"scheduler file of a running cluster (or ${ENV_SCHEDULER_FILE})"),
        _Flag("--address", "cluster.address", workflow.optional(check_text), metavar="A",
              help=f"scheduler address of a running cluster (or ${ENV_ADDRESS})"),
        _Flag("--device", "cluster.device", _choice(DEVICES), metavar=_metavar(DEVICES),
              help="where kernels run (default: gpipe.device, 'auto')"),
    )
    if not local:
        return flags
    return (*flags, _Flag("--workers", "cluster.n_workers", workflow.optional(_POSITIVE), metavar="N",
                          help="workers of a local cluster (default: one per GPU, else one CPU worker)"),
            _switch("--quiet", "quiet", "no dashboard link or progress on stderr"))


def _out_flags(text: str, **keywords) -> tuple[_Flag, ...]:
    return (_Flag("--out", "output", check_text, metavar="DIR", help=text + "; DIR must be new or empty", **keywords),
            _switch("--overwrite", "overwrite", "replace DIR when it holds an earlier gpipe run (only files gpipe "
                    "wrote there, as its .gpipe-files.json lists them); DIR changes only once this run has succeeded"))


def _graph_flags() -> tuple[_Flag, ...]:
    """``--graph`` and how to read it: read_edges's ``fmt``, ``weight`` (a column name) and ``directed``."""
    return (
        _Flag("--graph", "graph.path", workflow.RULES["graph.path"], required=True, metavar="PATH",
              help="edge file, graph folder, or rmat:SCALE[:EDGE_FACTOR] to generate one"),
        _fmt_flag(),
        _Flag("--weight-column", "weight_column", workflow.optional(check_text), metavar="NAME",
              help="the weight column of a csv or parquet edge file (default: none; a snap file's third column is "
                   "its weight)"),
        _switch("--directed", "graph.directed", "keep the edges of an edge file directed"),
    )


def _fmt_flag() -> _Flag:
    return _Flag("--fmt", "fmt", _choice(FORMATS), metavar=_metavar(FORMATS),
                 help="format of the edge file (default: from its extension, e.g. .txt is snap)")


def _partitions_flag() -> _Flag:
    return _Flag("--partitions", "graph.partitions", workflow.optional(_POSITIVE), metavar="P",
                 help="default: workers x gpipe.partitions-per-worker")


def _vertex_order_flag() -> _Flag:
    return _Flag("--vertex-order", "vertex_order", _choice(VERTEX_ORDERS), metavar=_metavar(VERTEX_ORDERS),
                 help="renumber the vertices by the graph's structure before the partitions are cut, so that fewer "
                      "walker steps cross between workers: rcmk (reverse Cuthill-McKee) or metis (needs pymetis); "
                      "outputs keep the graph's ids (default: the input's order)")


def _walk_flags(function: Callable) -> tuple[_Flag, ...]:
    taken = inspect.signature(function).parameters
    flags = []
    if "length" in taken:
        flags.append(_positive_int(function, "--length", "steps per walk", metavar="L"))
    if "walks_per_vertex" in taken:
        flags.append(_positive_int(function, "--walks-per-vertex", "walks from each start vertex", metavar="R"))
    return (*flags, _seed(function, "seed of the walks"))


# The walks that take a graph that changes (gpipe.dynamic.DynamicGraph): --updates walks them after each round.
_DYNAMIC_WALKS = ("deepwalk", "node2vec", "jump", "ppr")


def _update_flags() -> tuple[_Flag, ...]:
    return (
        _Flag("--updates", "updates", workflow.optional(check_text), metavar="FILE",
              help="an update log (.parquet or .csv: op, src, dst, weight a row, in log order; op insert, delete or "
                   "update): applied to the graph in --rounds batches, walking after each; one JSON line per round "
                   "on stdout and in summary.json; the walks written are the last round's"),
        _Flag("--rounds", "rounds", _POSITIVE, default=1, metavar="N",
              help="batches the log is applied in, in log order, of equal size (default: %(default)s)"),
    )


_MINERS = {"cliques": mining.count_cliques, "match": mining.match, "fpm": mining.frequent_patterns}
