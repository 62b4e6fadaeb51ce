"""``gpipe mine cliques|match|fpm``: counts or listings of cliques, pattern matches and frequent patterns."""

from __future__ import annotations

import json
import os
import re

import numpy as np

from .. import __version__, counting, generators, mining
from .._files import EMBEDDING_FILES, check_folder_target, write_json
from ..errors import GpipeValueError
from ..graph import Graph, read_edges
from ._options import _NOT_PARAMETERS, _Rmat
from ._progress import _Phase, _Stopwatch, _graph_done, _read_phase, _written
from ._shared import _check_graph_flags, _cluster, _cluster_info


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
        result, written = _mined(args, g)
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


def _mined(args, g: Graph) -> tuple[dict, dict]:
    """The mining call of ``args.algorithm``: its summary sections and the files it wrote."""
    written = {}
    if args.algorithm == "fpm":
        if args.random_labels is not None:
            g.set_labels(np.random.default_rng(args.seed).integers(0, args.random_labels, g.num_vertices))
        found = mining.frequent_patterns(g, args.max_edges, args.min_support)
        if args.patterns:
            written["patterns"] = os.path.abspath(found.to_parquet(args.patterns))
        return {"patterns": found.patterns.to_dict("records"), "stats": found.stats}, written
    listing = args.embeddings is not None
    budgets = {"device_budget": args.device_budget, "host_budget": args.host_budget}
    if args.algorithm == "cliques":
        result = (mining.list_cliques if listing else mining.count_cliques)(g, args.k, **budgets)
    else:
        result = mining.match(g, args.pattern, args.induced, embeddings=listing, **budgets)
    if listing:
        with _Phase(args, f"writing {args.embeddings}") as phase:
            written["embeddings"] = os.path.abspath(result.to_parquet(args.embeddings, overwrite=args.overwrite))
            _written(phase, written)
    return {"count": result.count, "stats": result.stats}, written
