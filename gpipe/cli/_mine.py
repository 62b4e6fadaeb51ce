"""``gpipe mine cliques|match|fpm``: counts or listings of cliques, pattern matches and frequent patterns."""

from __future__ import annotations

import json
import os
import re

import numpy as np

from .. import counting, mining, workflow
from .._files import EMBEDDING_FILES, check_folder_target, write_json
from ..errors import GpipeValueError
from ..graph import Graph
from ._shared import _check_graph_flags, _generated, _run


def _mine(args) -> int:
    """Read or generate the graph (replicated), mine it, print the JSON summary or write it to ``--summary``."""
    labeled = not _generated(args) and args.graph.endswith(".graph")
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
    with _run(args, header={"algorithm": args.algorithm}) as run:
        g = run.graph(lambda: counting.read_graph(args.graph, mode="replicated")) if labeled else \
            run.graph(mode="replicated", fmt=args.fmt)
        result = _mined(args, g, run)
        run.lap("mine")
        summary = run.finish(**result)
    if args.summary:
        write_json(args.summary, summary)
    else:
        print(json.dumps(summary, indent=2, default=str))
    return 0


def _mined(args, g: Graph, run: workflow.Run) -> dict:
    """The mining call of ``args.algorithm``: its summary sections; the files it wrote go in ``run.outputs``."""
    if args.algorithm == "fpm":
        if args.random_labels is not None:
            g.set_labels(np.random.default_rng(args.seed).integers(0, args.random_labels, g.num_vertices))
        found = mining.frequent_patterns(g, args.max_edges, args.min_support)
        if args.patterns:
            run.outputs["patterns"] = os.path.abspath(found.to_parquet(args.patterns))
        return {"patterns": found.patterns.to_dict("records"), "stats": found.stats}
    listing = args.embeddings is not None
    budgets = {"device_budget": args.device_budget, "host_budget": args.host_budget}
    if args.algorithm == "cliques":
        result = (mining.list_cliques if listing else mining.count_cliques)(g, args.k, **budgets)
    else:
        result = mining.match(g, args.pattern, args.induced, embeddings=listing, **budgets)
    if listing:
        with run.phase(f"writing {args.embeddings}") as phase:
            run.written(phase, {"embeddings": os.path.abspath(result.to_parquet(args.embeddings,
                                                                                overwrite=args.overwrite))})
    return {"count": result.count, "stats": result.stats}
