"""Graph sampling around seed vertices: a batch workflow to copy and adapt.

    python workflows/graph_sampling/run.py [config.yaml] [--set key.sub=value ...]
    gpipe run config.yaml [--scheduler-file F] [--set key.sub=value ...]   # config.yaml: workflow: graph_sampling

Built like ``workflows/embeddings/run.py``: the config is merged over ``config.yaml``
next to this script, then ``--set`` overrides are applied (values read as YAML), and
the result is checked before connecting (:mod:`gpipe.workflow`). The workflow connects with
:func:`gpipe.connect`, loads or generates the graph, runs one sampler of
:mod:`gpipe.sampling` (one instance per seed) and writes to ``output``:
``edges.parquet`` (``instance, depth, src, dst``: a folder of Parquet files written by the workers, one per
range of instances) and ``summary.json``. The folder appears
whole once the run has succeeded (:func:`gpipe.workflow.atomic_dir`); it must be new or
empty unless ``overwrite`` is set. A bad config exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import inspect
import os
import sys

import numpy as np

import gpipe
from gpipe import workflow
from gpipe.errors import GpipeValueError

DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.yaml")
# The files the workflow writes in its output folder: `overwrite` replaces a folder that holds no other.
OUTPUT_FILES = r"edges\.parquet/edges-\d{6}\.parquet|summary\.json"
# The built-in samplers that start from seeds (random_node and random_edge sample without them).
SAMPLERS = tuple(name for name in gpipe.sampling.__all__ if name != "Sampler"
                 and "seeds" in inspect.signature(getattr(gpipe.sampling, name)).parameters)
# Sampler arguments the workflow sets itself; a sampler's other keywords go in sampler.params.
_SET_BY_WORKFLOW = ("g", "seeds", "seed")


def _seeds(name: str, value):
    """A non-empty list of vertex ids, or ``{random: N}``."""
    if isinstance(value, dict):
        if set(value) != {"random"}:
            raise GpipeValueError(f"'{name}' must be a list of vertex ids or {{random: N}}, got {value!r}")
        workflow.integer(minimum=1)(f"{name}.random", value["random"])
    elif not isinstance(value, list) or not value or not all(
            isinstance(v, (int, str)) and not isinstance(v, bool) for v in value):
        raise GpipeValueError(f"'{name}' must be a non-empty list of vertex ids or {{random: N}}, got {value!r}")
    return value


# Every key of the config and its rule (gpipe.workflow.RULES: the workflow's name, the graph, the output and
# the cluster); a new key is one entry here and one in config.yaml.
_RULES = {
    **workflow.RULES,
    "sampler.algorithm": workflow.one_of(SAMPLERS),
    "sampler.seed": workflow.seed,
    "sampler.params": workflow.mapping,
    "seeds": _seeds,
}


def _check(config: dict) -> None:
    sampler = config["sampler"]
    workflow.check_params("sampler.params", getattr(gpipe.sampling, sampler["algorithm"]), sampler["params"],
                          _SET_BY_WORKFLOW)


WORKFLOW = workflow.Workflow("graph_sampling", __doc__.splitlines()[0], DEFAULTS, _RULES, check=_check,
                             run=lambda config: _report(_run(config)))
# The script's door (``gpipe run`` calls main): main(argv) -> exit status; the config checked before connecting.
main, load_config, validate_config = WORKFLOW.main, WORKFLOW.load_config, WORKFLOW.validate_config


def random_seeds(g, count: int, seed: int) -> np.ndarray:
    """``count`` distinct vertices among ``0..n-1`` of a graph whose ids are ``0..n-1``, drawn with ``seed``."""
    dense = g.id_map is None or (np.issubdtype(g.id_map.dtype, np.integer)
                                 and np.array_equal(g.id_map, np.arange(g.num_vertices)))
    if not dense:
        raise GpipeValueError("'seeds.random' needs a graph whose vertex ids are 0..n-1; give 'seeds' as a list")
    if count > g.num_vertices:
        raise GpipeValueError(f"'seeds.random' must be at most the {g.num_vertices} vertices, got {count}")
    return np.sort(np.random.default_rng(seed).choice(g.num_vertices, size=count, replace=False))


def _run(config: dict) -> dict:
    """Sample the graph, write edges.parquet and summary.json into ``output`` (whole once the run has succeeded);
    return the summary."""
    sampler = config["sampler"]
    sample = getattr(gpipe.sampling, sampler["algorithm"])
    with workflow.Run(config, owned=OUTPUT_FILES, prog="graph_sampling") as run:
        g = run.graph(weighted=sampler["params"].get("weighted", False))
        if isinstance(config["seeds"], dict):
            seeds = random_seeds(g, config["seeds"]["random"], sampler["seed"])
        else:
            seeds = np.array(config["seeds"], dtype=object if any(isinstance(v, str) for v in config["seeds"])
                             else np.int64)
        # compile the kernels on every worker, so that the timed sample measures sampling only
        tiny = {"depth": 1}
        if isinstance(sampler["params"].get("fanouts"), list):  # one depth: the first
            tiny = {"fanouts": sampler["params"]["fanouts"][:1], "depth": None}
        sample(g, seeds[:1], **dict(sampler["params"], **tiny), seed=sampler["seed"])
        run.lap("compile")
        result = sample(g, seeds, seed=sampler["seed"], **sampler["params"])
        result.stats["algorithm"] = sampler["algorithm"]
        run.lap("sample")
        run.outputs["edges"] = result.to_parquet(run.path("edges.parquet"))
        run.lap("write")
        return run.finish(seeds=seeds.tolist(), sample=result.stats)


def _report(summary: dict) -> None:
    stats, graph = summary["sample"], summary["graph"]
    print(f"graph_sampling: {stats['algorithm']} on {graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges: "
          f"{stats['edges']:,} edges from {stats['instances']:,} seeds in {stats['seconds']:.3f} s = "
          f"{stats['edges_per_second']:,.0f} edges/s\n  edges    {summary['outputs']['edges']}\n"
          f"  summary  {summary['outputs']['summary']}")


if __name__ == "__main__":
    sys.exit(main())
