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
import time
from itertools import pairwise

import numpy as np

import gpipe
from gpipe import workflow
from gpipe.errors import GpipeValueError

DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.yaml")
# The files the workflow writes in its output folder: `overwrite` replaces a folder that holds no other.
OUTPUT_FILES = r"summary\.json|patterns\.parquet|embeddings\.parquet/embeddings-\d{6}\.parquet"
ALGORITHMS = ("cliques", "match", "fpm")


def main(argv: list[str] | None = None) -> int:
    """Run the workflow: 0 on success; 2 on a bad config or bad input (``mining: error: ...`` on stderr)."""
    return workflow.main(argv, prog="mining", description=__doc__.splitlines()[0], defaults=DEFAULTS,
                         configure=lambda path, overrides: validate_config(load_config(path, overrides)),
                         run=lambda config: _report(_run(config)))


def load_config(path: str | None = None, overrides=()) -> dict:
    """The config at ``path`` merged over the defaults, then the ``key.sub=value`` overrides (not yet checked)."""
    return workflow.load_config(path, overrides, defaults=DEFAULTS, rules=_RULES)


def validate_config(config: dict) -> dict:
    """Check that ``config`` has exactly the known keys and valid values, and return it (else GpipeValueError)."""
    workflow.check_config(config, _RULES)
    if config["graph"]["directed"]:
        raise GpipeValueError("'graph.directed' must be false: gpipe.mining mines undirected graphs, got true")
    return config


def _flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise GpipeValueError(f"'{name}' must be true or false, got {value!r}")
    return value


def _budget(name: str, value):
    """Null, or a byte count such as 2000000000 or '2 GB' (checked by gpipe.mining itself: a bad one names it)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, str))):
        raise GpipeValueError(f"'{name}' must be null or a byte count such as 1000000 or '4 GB', got {value!r}")
    return value


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
    "mining.induced": _flag,
    "mining.max_edges": workflow.integer(minimum=1, maximum=gpipe.mining.FPM_MAX_EDGES),
    "mining.min_support": workflow.integer(minimum=1),
    "mining.random_labels": workflow.integer(minimum=1),
    "mining.seed": workflow.seed,
    "mining.embeddings": _flag,
    "mining.device_budget": _budget,
    "mining.host_budget": _budget,
}


def _run(config: dict) -> dict:
    """Mine the graph, write the outputs and summary.json; return the summary.

    They are written into a temporary folder that becomes ``output`` once the run has succeeded (``output`` is
    checked before connecting); the summary names each file where it is then.
    """
    out = os.path.abspath(config["output"])
    with workflow.atomic_dir(out, owned=OUTPUT_FILES, overwrite=config["overwrite"], name="output") as folder:
        return _write(config, folder, out)


def _write(config: dict, folder: str, out: str) -> dict:
    """The run, writing into ``folder``, which becomes ``out``."""
    mining, cluster = config["mining"], config["cluster"]
    budgets = {"device_budget": mining["device_budget"], "host_budget": mining["host_budget"]}
    marks = {"start": time.perf_counter()}
    with gpipe.connect(cluster["scheduler_file"], cluster["address"], n_workers=cluster["n_workers"],
                       device=cluster["device"]) as client, client.as_current():
        print(f"mining: Dask dashboard at {client.dashboard_link}", file=sys.stderr)
        marks["connect"] = time.perf_counter()
        g = workflow.load_graph(config["graph"], mode="replicated")
        marks["graph"] = time.perf_counter()
        outputs, found = {}, {}
        if mining["algorithm"] == "fpm":
            labels = np.random.default_rng(mining["seed"]).integers(0, mining["random_labels"], g.num_vertices)
            result = gpipe.mining.frequent_patterns(g, mining["max_edges"], mining["min_support"], labels=labels)
            marks["mine"] = time.perf_counter()
            result.to_parquet(os.path.join(folder, "patterns.parquet"))
            outputs["patterns"] = os.path.join(out, "patterns.parquet")
            found["patterns"] = len(result)
        else:
            listing = mining["embeddings"]
            if mining["algorithm"] == "cliques":
                count = gpipe.mining.list_cliques if listing else gpipe.mining.count_cliques
                result = count(g, mining["k"], **budgets)
            else:
                result = gpipe.mining.match(g, [tuple(e) for e in mining["pattern"]], mining["induced"],
                                            embeddings=listing, **budgets)
            marks["mine"] = time.perf_counter()
            if listing:
                result.to_parquet(os.path.join(folder, "embeddings.parquet"))
                outputs["embeddings"] = os.path.join(out, "embeddings.parquet")
            found["count"] = result.count
        outputs["summary"] = os.path.join(out, "summary.json")
        marks["write"] = time.perf_counter()
        summary = {
            "status": "ok",
            "config": config,
            "graph": {"num_vertices": g.num_vertices, "num_edges": g.num_edges},
            "cluster": {"scheduler": client.scheduler.address, "dashboard": client.dashboard_link},
            **found,
            "stats": result.stats,
            "outputs": outputs,
            "timings": dict({b: marks[b] - marks[a] for a, b in pairwise(marks)},
                            total=marks["write"] - marks["start"]),
            "gpipe_version": gpipe.__version__,
        }
        g.release()  # on a shared cluster, nothing would free it once this client is closed
    workflow.write_json(os.path.join(folder, "summary.json"), summary)
    return summary


def _report(summary: dict) -> None:
    algorithm, graph = summary["config"]["mining"]["algorithm"], summary["graph"]
    found = (f"{summary['patterns']:,} frequent patterns" if algorithm == "fpm"
             else f"{summary['count']:,} embeddings")
    files = "".join(f"\n  {key:<10} {path}" for key, path in summary["outputs"].items())
    print(f"mining: {algorithm} on {graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges: {found} in "
          f"{summary['stats']['seconds']:.3f} s{files}")


if __name__ == "__main__":
    sys.exit(main())
