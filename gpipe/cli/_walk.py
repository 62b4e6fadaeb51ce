"""``gpipe walk ALGORITHM``: walks of a graph (and of an update log's rounds), written as a corpus or parquet."""

from __future__ import annotations

import inspect
import json
import os
import sys
import time
from typing import Callable

import numpy as np

from .. import dynamic, walks
from .._progress import _Progress
from ..errors import GpipeValueError
from ..sampling import EdgeSample
from ._options import _DYNAMIC_WALKS, _RUN_FILES, _WALKS
from ._shared import _check_graph_flags, _reading, _run, _typed_as_ids_of


def _walk(args) -> int:
    summary = _run_walk(args)
    stats = summary["walk"]
    print(f"{stats['algorithm']}: {stats['walks']:,} walks, {stats['steps']:,} steps in {stats['seconds']:.3f} s, "
          f"{stats['steps_per_second']:,.0f} steps/s")
    print("wrote " + ", ".join(summary["outputs"].values()))
    return 0


def _run_walk(args) -> dict:
    """Load or generate ``args.graph``, walk it, write the walks and summary.json; return the summary."""
    function, extra = _WALKS[args.algorithm]
    taken = inspect.signature(function).parameters
    options = {"seed": args.seed, **{flag.dest: getattr(args, flag.dest) for flag in extra}}
    if "walks_per_vertex" in taken:
        options["walks_per_vertex"] = args.walks_per_vertex
    _check_graph_flags(args)
    log = _update_log(args)
    with _run(args, _RUN_FILES) as run:
        g = run.graph(weighted=options.get("weighted", False), mode=None if log is None else "partitioned",
                      **_reading(args))
        options = _typed_as_ids_of(g, options)
        walked = g if log is None else dynamic.DynamicGraph.from_graph(g)
        # compile the kernels on every worker: one short walk from the first vertex of each non-empty partition
        if "length" in taken:
            warm_up = dict(options, length=2)
            if "start" in taken:
                warm_up["start"] = g.to_original(g.bounds[:-1][np.diff(g.bounds) > 0])  # distinct, as ppr's must be
            for name in ("walks_per_vertex", "walks_per_source"):
                if name in taken:
                    warm_up[name] = 1
        else:  # frontier sampling: one small instance
            warm_up = dict(options, budget=2, instances=1)
        function(walked, **warm_up)
        run.lap("compile")
        if "length" in taken:
            options["length"] = args.length
        rounds = None
        if log is None:
            result = function(g, progress=None if args.quiet else _Progress(sys.stderr), **options)
        else:
            result, rounds = _walk_rounds(args, walked, function, options, log)
        run.lap("walk")
        with run.phase(f"writing {args.out}") as phase:
            run.written(phase, _walk_outputs(args, result, run.folder))
        run.lap("write")
        return run.finish(walk=result.stats, rounds=rounds)


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
