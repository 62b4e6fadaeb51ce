"""Pattern mining: k-cliques, the matches of a pattern or frequent labeled patterns, a batch workflow to copy and adapt.

    python workflows/mining/run.py [config.yaml] [--set key.sub=value ...]
    gpipe run config.yaml [--scheduler-file F] [--set key.sub=value ...]   # config.yaml: workflow: mining

Built like ``workflows/graph_sampling/run.py``: the config is merged over ``config.yaml``
next to this script, then ``--set`` overrides are applied (values read as YAML), and the
result is checked before connecting (:mod:`gpipe.workflow`). The workflow connects with
:func:`gpipe.connect`, loads or generates the graph (replicated on the workers), runs one
algorithm of :mod:`gpipe.mining` and writes to ``output``: ``summary.json``, and
``patterns.parquet`` (fpm) or the folder ``embeddings.parquet`` (cliques, match, when asked
for: a file per block, written by the workers that found the embeddings). The
folder appears whole once the run has succeeded (:func:`gpipe.workflow.atomic_dir`); it must
be new or empty unless ``overwrite`` is set. A bad config exits with status 2 and one line on
stderr.
"""

from __future__ import annotations

import os
import sys

import numpy as np

import gpipe
from gpipe import workflow
from gpipe.errors import GpipeValueError

DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.yaml")
# The files the workflow writes in its output folder: `overwrite` replaces a folder that holds no other.
OUTPUT_FILES = r"summary\.json|patterns\.parquet|embeddings\.parquet/embeddings-\d{6}\.parquet"
ALGORITHMS = ("cliques", "match", "fpm")


def _pattern(name: str, value) -> list:
    """A non-empty list of [u, v] edges."""
    if not isinstance(value, list) or not value or not all(
            isinstance(e, list) and len(e) == 2 and all(isinstance(u, (int, str)) for u in e) for e in value):
        raise GpipeValueError(f"'{name}' must be a non-empty list of [u, v] edges, got {value!r}")
    return value


# Every key of the config and its rule (gpipe.workflow.RULES: the workflow's name, the graph, the output and
# the cluster); a new key is one entry here and one in config.yaml.
_RULES = {
    **workflow.RULES,
    "mining.algorithm": workflow.one_of(ALGORITHMS),
    "mining.k": workflow.integer(minimum=3),
    "mining.pattern": _pattern,
    "mining.induced": workflow.boolean,
    "mining.max_edges": workflow.integer(minimum=1, maximum=gpipe.mining.FPM_MAX_EDGES),
    "mining.min_support": workflow.integer(minimum=1),
    "mining.random_labels": workflow.integer(minimum=1),
    "mining.seed": workflow.seed,
    "mining.embeddings": workflow.boolean,
    "mining.device_budget": workflow.byte_count,
    "mining.host_budget": workflow.byte_count,
}


def _check(config: dict) -> None:
    if config["graph"]["directed"]:
        raise GpipeValueError("'graph.directed' must be false: gpipe.mining mines undirected graphs, got true")


WORKFLOW = workflow.Workflow("mining", __doc__.splitlines()[0], DEFAULTS, _RULES, check=_check,
                             run=lambda config: _report(_run(config)))
# The script's door (``gpipe run`` calls main): main(argv) -> exit status; the config checked before connecting.
main, load_config, validate_config = WORKFLOW.main, WORKFLOW.load_config, WORKFLOW.validate_config


def _run(config: dict) -> dict:
    """Mine the graph, write the outputs and summary.json into ``output`` (whole once the run has succeeded);
    return the summary."""
    mining = config["mining"]
    budgets = {"device_budget": mining["device_budget"], "host_budget": mining["host_budget"]}
    with workflow.Run(config, owned=OUTPUT_FILES, prog="mining") as run:
        g = run.graph(mode="replicated")
        found = {}
        if mining["algorithm"] == "fpm":
            labels = np.random.default_rng(mining["seed"]).integers(0, mining["random_labels"], g.num_vertices)
            result = gpipe.mining.frequent_patterns(g, mining["max_edges"], mining["min_support"], labels=labels)
            run.lap("mine")
            run.outputs["patterns"] = result.to_parquet(run.path("patterns.parquet"))
            found["patterns"] = len(result)
        else:
            listing = mining["embeddings"]
            if mining["algorithm"] == "cliques":
                count = gpipe.mining.list_cliques if listing else gpipe.mining.count_cliques
                result = count(g, mining["k"], **budgets)
            else:
                result = gpipe.mining.match(g, [tuple(e) for e in mining["pattern"]], mining["induced"],
                                            embeddings=listing, **budgets)
            run.lap("mine")
            if listing:
                run.outputs["embeddings"] = result.to_parquet(run.path("embeddings.parquet"))
            found["count"] = result.count
        run.lap("write")
        return run.finish(**found, stats=result.stats)


def _report(summary: dict) -> None:
    algorithm, graph = summary["config"]["mining"]["algorithm"], summary["graph"]
    found = (f"{summary['patterns']:,} frequent patterns" if algorithm == "fpm"
             else f"{summary['count']:,} embeddings")
    files = "".join(f"\n  {key:<10} {path}" for key, path in summary["outputs"].items())
    print(f"mining: {algorithm} on {graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges: {found} in "
          f"{summary['stats']['seconds']:.3f} s{files}")


if __name__ == "__main__":
    sys.exit(main())
