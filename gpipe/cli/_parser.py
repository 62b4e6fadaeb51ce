"""The ``gpipe`` command's parser: its commands and their flags."""

from __future__ import annotations

import argparse
import inspect
import shlex
import sys
from collections.abc import Callable

from .. import __version__, counting, workflow
from ._config import configured, flags
from ._count import _count
from ._demo import _demo
from ._generate import _generate
from ._info import _info
from ._mine import _mine
from ._options import _MINERS, _SAMPLERS, _WALKS, _Flag
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


def _add_flags(parser: argparse.ArgumentParser, command: str, algorithm: str | None, run: Callable) -> None:
    """Add the flags of ``gpipe command [algorithm]``: each stores its text (or a switch its value) under its config
    key, which the command's config checks (:func:`configured`), and nothing when not given. A flag renamed (its old
    name ``old``) takes either name but not both (argparse says so), and one of them when it is required."""
    for flag in flags(command, algorithm):
        keywords: dict = {"dest": flag.key, "default": argparse.SUPPRESS, "help": _help(flag)}
        if flag.switch is not None:
            keywords.update(action="store_const", const=flag.switch)
        else:
            keywords["metavar"] = flag.metavar
        if flag.old is None:
            parser.add_argument(flag.flag, required=flag.required, **keywords)
            continue
        either = parser.add_mutually_exclusive_group(required=flag.required)
        either.add_argument(flag.flag, **keywords)
        either.add_argument(flag.old, action=_OldName, new=flag.flag, dest=flag.key, metavar=flag.metavar,
                            default=argparse.SUPPRESS,
                            help=f"deprecated: the old name of {flag.flag}, taken until the next release")
    parser.set_defaults(leaf=(command, algorithm, run))


def _help(flag: _Flag) -> str:
    return flag.help.replace("%(default)s", str(flag.default)).replace("%", "%%")


def parsed(argv: list[str]) -> argparse.Namespace:
    """The namespace a command runs on: its flags' texts checked as its config (:func:`configured`), each under
    the flag's name; ``run`` the function that runs it. Raises ``SystemExit`` where argparse stops (a usage error,
    ``--help``) and :class:`gpipe.errors.GpipeValueError` naming the flag, the rule and the value of a bad one."""
    given = vars(build_parser().parse_args(argv))
    command, algorithm, run = given.pop("leaf")
    keys = {flag.key for flag in flags(command, algorithm)}
    args = configured(command, algorithm, values={k: v for k, v in given.items() if k in keys},
                      command_line=shlex.join(["gpipe", *argv]))
    for name, value in given.items():  # what is no key of the config: gpipe run's workflow and --set
        if name not in keys and not hasattr(args, name):
            setattr(args, name, value)
    args.run = run
    return args


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpipe", description="Graph sampling and random walks at scale, on Dask.")
    parser.add_argument("--version", action="version", version=f"gpipe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="versions, GPUs and the cluster, if one is named")
    _add_flags(info, "info", None, _info)

    warm = commands.add_parser("warmup", help="compile the kernels ahead of the first call (numba's and CuPy's "
                                             "caches), here or on a named cluster's workers")
    _add_flags(warm, "warmup", None, _warmup)

    generate = commands.add_parser("generate", help="generate a graph and write it to a folder")
    kinds = generate.add_subparsers(dest="algorithm", required=True, metavar="GENERATOR")
    _add_flags(kinds.add_parser("rmat", help="Graph500-style R-MAT graph"), "generate", "rmat", _generate)

    walk = commands.add_parser("walk", help="random walks on a graph")
    algorithms = walk.add_subparsers(dest="algorithm", required=True, metavar="ALGORITHM")
    for name, (function, _) in _WALKS.items():
        summary_line = inspect.getdoc(function).splitlines()[0].replace("``", "")
        _add_flags(algorithms.add_parser(name, help=summary_line, description=summary_line), "walk", name, _walk)

    sample = commands.add_parser("sample", help="sample edges around seed vertices")
    samplers = sample.add_subparsers(dest="algorithm", required=True, metavar="ALGORITHM")
    for name, (function, _) in _SAMPLERS.items():
        summary_line = " ".join(inspect.getdoc(function).split("\n\n")[0].split()).split(":")[0]
        _add_flags(samplers.add_parser(name, help=summary_line, description=summary_line), "sample", name, _sample)

    count = commands.add_parser("count", help="count a query's embeddings in a labeled graph")
    hows = count.add_subparsers(dest="algorithm", required=True, metavar="HOW")
    for name, function in (("estimate", counting.estimate), ("exact", counting.count_exact)):
        summary_line = inspect.getdoc(function).splitlines()[0].replace("``", "")
        _add_flags(hows.add_parser(name, help=summary_line, description=summary_line), "count", name, _count)

    mine = commands.add_parser("mine", help="mine cliques, pattern matches or frequent patterns in a graph")
    whats = mine.add_subparsers(dest="algorithm", required=True, metavar="WHAT")
    for name, function in _MINERS.items():  # type: ignore[assignment]
        summary_line = inspect.getdoc(function).splitlines()[0].replace("``", "")
        _add_flags(whats.add_parser(name, help=summary_line, description=summary_line), "mine", name, _mine)

    run = commands.add_parser("run", help="run a workflow (workflows/*) from its YAML config, on a cluster",
                              description="Run the workflow that WORKFLOW.yaml names (its key 'workflow': a "
                                          "shipped workflow, a gpipe command (walk, sample, mine, count: its flags' "
                                          "keys) or the path of a run.py), with the config merged over that "
                                          "workflow's defaults.")
    run.add_argument("workflow", metavar="WORKFLOW.yaml",
                     help="a workflow config, or the name of a shipped workflow to run with its defaults "
                          f"({', '.join(workflow._shipped()) or 'none found'})")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                     help="override one key of the config, e.g. --set output=results (the value is read as YAML)")
    _add_flags(run, "run", None, _run_workflow)

    demo = commands.add_parser("demo", help="DeepWalk on an R-MAT graph, in one command")
    _add_flags(demo, "demo", None, _demo)
    return parser
