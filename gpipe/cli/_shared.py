"""What the commands share: the output folder, the cluster, the graph they read, the run summary."""

from __future__ import annotations

import contextlib
import os
import sys

from .. import __version__, generators
from .._files import atomic_dir, write_json
from ..cluster import connect, named_cluster
from ..errors import GpipeValueError
from ..graph import Graph, edge_format, read_edges
from ..runtime import current, workers_info
from ._options import _NOT_PARAMETERS, _RUN_FILES, _Rmat, _Vertices, _dest
from ._progress import _Phase, _Stopwatch, _graph_done, _read_phase


def _out_folder(args):
    """A temporary folder that becomes ``--out`` as a whole when the command succeeds (checked before any work)."""
    return atomic_dir(args.out, owned=_RUN_FILES, overwrite=args.overwrite, name="out")


def _running_cluster(args) -> bool:
    """Whether the flags, the environment or the config name a cluster, for a command that works on a running one:
    its scheduler file must be there already (connect() would wait for a starting scheduler to write it)."""
    (scheduler_file, address), name = named_cluster(args.scheduler_file, args.address)
    if scheduler_file and not os.path.exists(scheduler_file):
        raise GpipeValueError(f"'{name}' must be the scheduler file of a running cluster, got {scheduler_file!r}: "
                              "no such file")
    return name is not None


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
                                partitions=args.partitions, mode=mode, vertex_order=args.vertex_order)
            _graph_done(phase, g)
        return g
    with _read_phase(args, args.graph) as phase:
        g = read_edges(args.graph, weight=args.weight_column, directed=args.directed, partitions=args.partitions,
                       fmt=args.fmt, mode=mode, vertex_order=args.vertex_order)
        _graph_done(phase, g)
    return g


def _typed_as_ids_of(g: Graph, options: dict) -> dict:
    """``options`` with their vertex lists (``--start``, ``--seeds``) typed as ``g``'s ids."""
    return {name: value.of(g) if isinstance(value, _Vertices) else value for name, value in options.items()}


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
