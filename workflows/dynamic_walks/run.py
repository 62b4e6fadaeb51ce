"""Walks on a graph that changes: an update log applied in rounds, walks from every vertex after each.

    python workflows/dynamic_walks/run.py [config.yaml] [--set key.sub=value ...]
    gpipe run config.yaml [--scheduler-file F] [--set key.sub=value ...]   # config.yaml: workflow: dynamic_walks

The config is merged over ``config.yaml`` next to this script (which holds every
key and its default), then ``--set`` overrides are applied (values read as YAML),
and the result is checked before connecting (:mod:`gpipe.workflow`); an update log
file (``updates.path``) is read and checked then too, a bad row named. The workflow
connects with :func:`gpipe.connect`, loads or generates the graph, makes it a
:class:`gpipe.dynamic.DynamicGraph` — without a log file, first splitting its edges
into the initial graph and the log, as Bingo's evaluation does
(:func:`gpipe.dynamic.update_log`) — then applies the log in ``updates.rounds``
batches and walks from every vertex after each. It writes to ``output``:
``summary.json`` (a record per round: update seconds, updates/s, walk seconds,
steps/s, the graph's size), ``corpus.txt`` (the last round's walks, one per line)
and, for a log it made, ``updates.parquet``. The folder appears whole once the run
has succeeded (:func:`gpipe.workflow.atomic_dir`); it must be new or empty unless
``overwrite`` is set. A bad config exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import gpipe
from gpipe import workflow
from gpipe.dynamic import UPDATE_COLUMNS, DynamicGraph, read_updates, update_log
from gpipe.errors import GpipeValueError

DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.yaml")
# The files the workflow writes in its output folder: `overwrite` replaces a folder that holds no other.
OUTPUT_FILES = r"corpus\.txt|updates\.parquet|summary\.json"

# The walks of gpipe.walks that take a DynamicGraph; ppr starts walks_per_vertex walks from every vertex.
WALKS = ("deepwalk", "node2vec", "with_jump", "ppr")
# Walk arguments the workflow sets itself; a walk's other keywords may go in walks.params.
_SET_BY_WORKFLOW = ("g", "length", "walks_per_vertex", "walks_per_source", "seed", "start", "progress")


_positive = workflow.integer(minimum=1)

# Every key of the config and the rule its value follows (gpipe.workflow.RULES: the workflow's name, the graph,
# the output and the cluster); a new key is one entry here and one in config.yaml.
_RULES = {
    **workflow.RULES,
    "updates.path": lambda name, value: None if value is None else _log_file(name, value),
    "updates.count": _positive,
    "updates.kind": workflow.one_of(("insertion", "deletion", "mixed")),
    "updates.seed": workflow.seed,
    "updates.rounds": _positive,
    "walks.algorithm": workflow.one_of(WALKS),
    "walks.length": _positive,
    "walks.walks_per_vertex": _positive,
    "walks.seed": workflow.seed,
    "walks.params": workflow.mapping,
}


def _log_file(name: str, value) -> str:
    """An update log file, read and checked (a bad row named) before connecting."""
    path = workflow.RULES["output"](name, value)  # a non-empty string
    if not os.path.isfile(path) or not path.endswith((".parquet", ".csv")):
        raise GpipeValueError(f"'{name}' must be an existing .parquet or .csv file, got {value!r}")
    read_updates(path)
    return path


def _check(config: dict) -> None:
    walk = config["walks"]
    workflow.check_params("walks.params", getattr(gpipe.walks, walk["algorithm"]), walk["params"], _SET_BY_WORKFLOW)


WORKFLOW = workflow.Workflow("dynamic_walks", __doc__.splitlines()[0], DEFAULTS, _RULES, check=_check,
                             run=lambda config: _report(_run(config)))
# The script's door (``gpipe run`` calls main): main(argv) -> exit status; the config checked before connecting.
main, load_config, validate_config = WORKFLOW.main, WORKFLOW.load_config, WORKFLOW.validate_config


# -- the run ----------------------------------------------------------------------------------

def _initial(run: workflow.Run) -> tuple[DynamicGraph, object, str]:
    """The dynamic graph to start from, the log and where it came from (a file, or made and written here)."""
    updates, weighted = run.config["updates"], run.config["walks"]["params"].get("weighted", False)
    g = run.graph(weighted=weighted, mode="partitioned")
    if updates["path"] is not None:
        return DynamicGraph.from_graph(g), read_updates(updates["path"]), os.path.abspath(updates["path"])
    edges = DynamicGraph.from_graph(g).edges()  # every stored edge: an undirected one twice, kept once below
    if not g.directed:
        edges = edges[edges.src < edges.dst]
    if updates["count"] > len(edges):
        raise GpipeValueError(f"'updates.count' must be at most the graph's {len(edges)} edges, got "
                              f"{updates['count']}")
    initial, log = update_log(edges, updates["count"], updates["kind"], updates["seed"])
    start = gpipe.from_edges(initial, weight="weight", directed=g.directed, num_vertices=g.num_vertices,
                             partitions=g.num_partitions, mode="partitioned")
    g.release()
    run.outputs["updates"] = run.path("updates.parquet")
    log.to_parquet(run.outputs["updates"], index=False)
    return DynamicGraph.from_graph(start), log, "updates.parquet"


def _run(config: dict) -> dict:
    """Apply the log in rounds, walking after each; write summary.json, the corpus and a made log into ``output``
    (whole once the run has succeeded); return the summary."""
    updates, walks = config["updates"], config["walks"]
    walk = getattr(gpipe.walks, walks["algorithm"])
    with workflow.Run(config, owned=OUTPUT_FILES, prog="dynamic_walks") as run:
        dg, log, source = _initial(run)
        if updates["rounds"] > len(log):
            raise GpipeValueError(f"'updates.rounds' must be at most the log's {len(log)} updates, got "
                                  f"{updates['rounds']}")
        initial = {"num_vertices": dg.num_vertices, "num_edges": dg.num_edges, "directed": dg.directed}
        run.lap("graph")
        _walk(walk, dg, walks, length=2)  # compile the kernels on every worker: the timed walks measure walking only
        run.lap("compile")
        rounds = []
        for number, rows in enumerate(np.array_split(np.arange(len(log)), updates["rounds"]), 1):
            batch = log.iloc[rows]
            started = time.perf_counter()
            dg.apply(*(batch[c] for c in UPDATE_COLUMNS), first=int(rows[0]))
            applied = time.perf_counter()
            result = _walk(walk, dg, walks, walks["length"])
            walked = time.perf_counter()
            update_seconds, walk_seconds, steps = applied - started, walked - applied, result.stats["steps"]
            rounds.append({"round": number, "updates": len(rows), "update_seconds": update_seconds,
                           "updates_per_second": len(rows) / update_seconds, "walk_seconds": walk_seconds,
                           "steps": steps, "steps_per_second": steps / walk_seconds,
                           "num_vertices": dg.num_vertices, "num_edges": dg.num_edges})
        run.lap("rounds")
        run.outputs["corpus"] = result.to_corpus(run.path("corpus.txt"))
        run.lap("corpus")
        return run.finish(graph=initial, updates={"log": source, "count": len(log), "rounds": updates["rounds"],
                                                  "ops": log["op"].value_counts().to_dict()},
                          rounds=rounds, walk=result.stats)


def _walk(walk, dg: DynamicGraph, walks: dict, length: int):
    """``walk`` from every vertex of ``dg`` as it is now, ``walks_per_vertex`` times."""
    if walk is gpipe.walks.ppr:
        return walk(dg, start=np.arange(dg.num_vertices), walks_per_source=walks["walks_per_vertex"],
                    length=length, seed=walks["seed"], **walks["params"])
    return walk(dg, length=length, walks_per_vertex=walks["walks_per_vertex"], seed=walks["seed"], **walks["params"])


def _report(summary: dict) -> None:
    graph, rounds, stats, outputs = summary["graph"], summary["rounds"], summary["walk"], summary["outputs"]
    updates = sum(r["updates"] for r in rounds)
    update_seconds, walk_seconds = sum(r["update_seconds"] for r in rounds), sum(r["walk_seconds"] for r in rounds)
    files = "".join(f"\n  {key:<9} {path}" for key, path in outputs.items())
    print(f"dynamic_walks: {stats['algorithm']} on {graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges, "
          f"{len(rounds)} rounds of {updates / len(rounds):,.0f} updates\n"
          f"  updates   {updates:,} in {update_seconds:.3f} s = {updates / update_seconds:,.0f} updates/s\n"
          f"  walks     {sum(r['steps'] for r in rounds):,} steps in {walk_seconds:.3f} s = "
          f"{sum(r['steps'] for r in rounds) / walk_seconds:,.0f} steps/s{files}")


if __name__ == "__main__":
    sys.exit(main())
