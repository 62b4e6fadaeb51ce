"""The command line's options: the argument types, the flags the commands share, and the tables of walks,
samplers and miners (a new one is an entry there)."""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import re
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import numpy as np

from .. import generators, mining, sampling, walks, workflow
from .._files import GRAPH_FILES, SAMPLE_FILES, SCORE_FILES, WALK_FILES
from .._validate import VERTEX_ORDERS, check_fanouts, check_int, check_probability, check_seed, is_ascii_digits
from ..backend import DEVICES
from ..cluster import ENV_ADDRESS, ENV_SCHEDULER_FILE
from ..errors import GpipeValueError
from ..graph import FORMATS, Graph

_FORMATS = ("corpus", "parquet", "both")


# Every file a command writes in its --out folder; --overwrite replaces a folder only when it holds no other, and
# each as the folder's list of what gpipe wrote names it.
_RUN_FILES = (rf"summary\.json|walks\.txt|scores\.parquet/(?:{SCORE_FILES})|(?:edges|nodes)\.parquet/(?:{SAMPLE_FILES})"
              rf"|walks\.parquet/(?:{WALK_FILES})|graph/(?:{GRAPH_FILES})")


_NOT_PARAMETERS = ("run", "command", "command_line")


def _default(function: Callable, name: str):
    return inspect.signature(function).parameters[name].default


def _dest(flag: str) -> str:
    """The attribute argparse stores ``flag`` under."""
    return flag.lstrip("-").replace("-", "_")


def _checked(check: Callable, convert: Callable = int) -> Callable[[str], Any]:
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


def _fanouts(text: str) -> int | list[int]:
    """``--fanouts``: one int (for every depth) or a list of them, ``K,K,...``."""
    fanouts = _checked(partial(check_fanouts, "fanouts"), lambda t: [int(k) for k in t.split(",")])(text)
    return fanouts if "," in text else fanouts[0]


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
# underscores) of the function; ``old=`` names its old flag, still taken for one release (_parser._add_flags).
# A new walk is one entry here.
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
        _option(walks.ppr, "--start", type=_vertices("start"), required=True, default=None, metavar="IDS",
                old="--sources", help="the sources (start vertices), each once, ID,ID,... or @FILE with one id "
                                      "per line; also writes the folder DIR/scores.parquet"),
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
        _option(sampling.neighbor, "--fanouts", type=_fanouts, metavar="K[,K...]", old="--fanout",
                help="neighbors each frontier vertex picks: K,K,... one a depth from the seeds outwards, or one K "
                     "at each of --depth depths (-1: all of them; default: %(default)s)"),
        _option(sampling.neighbor, "--depth", type=_positive("depth"), metavar="D",
                help="expansion rounds from the seeds, with one K in --fanouts (default: 2)"),
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
                        help="replace DIR when it holds an earlier gpipe run (only files gpipe wrote there, as its "
                             ".gpipe-files.json lists them); "
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


def _vertex_order_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vertex-order", choices=VERTEX_ORDERS,
                        help="renumber the vertices by the graph's structure before the partitions are cut, so that "
                             "fewer walker steps cross between workers: rcmk (reverse Cuthill-McKee) or metis (needs "
                             "pymetis); outputs keep the graph's ids (default: the input's order)")


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


_MINERS = {"cliques": mining.count_cliques, "match": mining.match, "fpm": mining.frequent_patterns}


def _pattern_pairs(text: str) -> list[tuple]:
    """``--pattern``'s ``u-v`` pairs separated by commas (integer names as integers)."""
    pairs = [tuple(part.strip().split("-")) for part in text.split(",")]
    if not pairs or any(len(p) != 2 or not all(p) for p in pairs):
        raise argparse.ArgumentTypeError(f"'pattern' must be edges such as 0-1,1-2,2-0, got {text!r}")
    return [tuple(int(u) if is_ascii_digits(u) else u for u in p) for p in pairs]


# The argparse type of ``--pattern``: its pairs, checked as match checks a pattern, before any work.
_pattern_edges = _checked(mining.check_pattern, _pattern_pairs)
