"""What the commands share: the run a command's flags make (a workflow's config), the cluster, the graph flags."""

from __future__ import annotations

import os

from .. import workflow
from .._batch_config import _rmat_spec
from ..cluster import named_cluster
from ..errors import GpipeValueError
from ..graph import Graph, edge_format
from ._options import _Vertices, _dest


def _run(args, owned: str | None = None, *, header: dict | None = None) -> workflow.Run:
    """The run of a command: the workflow runner on the checked config its flags give (``args.config``, which has
    :data:`gpipe.workflow.RULES`' keys), writing ``owned`` files into ``--out`` (where the command has one) and a
    summary that starts with the command, ``header`` and its parameters (each flag's value under its name)."""
    parameters = {name: value for name, value in vars(args).items() if name not in _NOT_PARAMETERS}
    header = {"command": args.command, **(header or {}), "command_line": args.command_line,
              "parameters": parameters}
    return workflow.Run(args.config, owned=owned, prog="gpipe", header=header, quiet=args.quiet, output_name="out")


# What the namespace of a command holds beside its flags' values.
_NOT_PARAMETERS = ("run", "command", "command_line", "config")


def _generated(args) -> bool:
    """Whether ``--graph`` is ``rmat:SCALE[:EDGE_FACTOR]``, generated, not read."""
    return _rmat_spec(args.graph) is not None


def _running_cluster(args) -> bool:
    """Whether the flags, the environment or the config name a cluster, for a command that works on a running one:
    its scheduler file must be there already (connect() would wait for a starting scheduler to write it)."""
    (scheduler_file, address), name = named_cluster(args.scheduler_file, args.address)
    if scheduler_file and not os.path.exists(scheduler_file):
        raise GpipeValueError(f"'{name}' must be the scheduler file of a running cluster, got {scheduler_file!r}: "
                              "no such file")
    return name is not None


def _check_graph_flags(args) -> None:
    """Before any work: the flags on reading an edge file are refused with ``rmat:...``, which reads none; an
    edge file needs ``--fmt`` when its extension names no format."""
    for flag in ("--fmt", "--weight-column"):
        value = getattr(args, _dest(flag), None)
        if value is not None and _generated(args):
            raise GpipeValueError(f"'{_dest(flag)}' must be given with an edge file only, got {flag} {value} with "
                                  f"--graph {args.graph}, which is generated")
    if args.fmt is None and not _generated(args):
        edge_format(args.graph, name="graph", force="--fmt")


def _reading(args) -> dict:
    """How ``--graph`` is read: the keywords of :func:`gpipe.workflow.load_graph` beyond the config's graph."""
    return {"fmt": args.fmt, "weight": args.weight_column, "vertex_order": args.vertex_order}


def _typed_as_ids_of(g: Graph, options: dict) -> dict:
    """``options`` with their vertex lists (``--start``, ``--seeds``) typed as ``g``'s ids."""
    return {name: value.of(g) if isinstance(value, _Vertices) else value for name, value in options.items()}
