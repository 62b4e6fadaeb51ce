"""Node embeddings from random walks: a batch workflow to copy and adapt.

    python workflows/embeddings/run.py [config.yaml] [--set key.sub=value ...]
    gpipe run config.yaml [--scheduler-file F] [--set key.sub=value ...]   # config.yaml: workflow: embeddings

The config is merged over ``config.yaml`` next to this script (which holds every
key and its default), then ``--set`` overrides are applied (values read as YAML),
and the result is checked before connecting (:mod:`gpipe.workflow`). The workflow connects with
:func:`gpipe.connect`, loads or generates the graph, runs the walk and writes to
``output``: ``corpus.txt`` (one walk per line), ``embeddings.w2v`` (word2vec text
format, only when gensim is installed) and ``summary.json``. The folder appears whole
once the run has succeeded (:func:`gpipe.workflow.atomic_dir`); it must be new or empty
unless ``overwrite`` is set. A bad config exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from itertools import pairwise

import gpipe
from gpipe import workflow

DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.yaml")
# The files the workflow writes in its output folder: `overwrite` replaces a folder that holds no other.
OUTPUT_FILES = r"corpus\.txt|embeddings\.w2v|summary\.json"

# Walk arguments the workflow sets itself; a walk's other keywords may go in walks.params.
_SET_BY_WORKFLOW = ("g", "length", "walks_per_vertex", "seed", "start", "progress")
# word2vec's arguments the workflow sets itself (its keys); the others may go in word2vec.params.
_SET_BY_WORD2VEC = ("walks", "dim", "window", "negative", "epochs", "seed", "progress")
# The walks of gpipe.walks that start walks_per_vertex walks from every vertex: those an embedding needs
# (not ppr, whose walks start from given sources).
WALKS = tuple(name for name in gpipe.walks.__all__
              if "walks_per_vertex" in inspect.signature(getattr(gpipe.walks, name)).parameters)


def main(argv: list[str] | None = None) -> int:
    """Run the workflow.

    Parameters
    ----------
    argv : list of str, optional
        ``[config.yaml] [--set key.sub=value ...]`` (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success; 2 on a bad config or bad input, whose message is printed
        to stderr as ``embeddings: error: ...`` without a traceback.
    """
    return workflow.main(argv, prog="embeddings", description=__doc__.splitlines()[0], defaults=DEFAULTS,
                         configure=lambda path, overrides: validate_config(load_config(path, overrides)),
                         run=lambda config: _report(_run(config)))


def load_config(path: str | None = None, overrides=()) -> dict:
    """The config at ``path`` merged over the defaults, then the ``key.sub=value`` overrides (not yet checked).

    Sections are merged key by key; a key's value, ``walks.params`` included, is replaced whole (so a config
    or ``--set walks.params={}`` for another walk drops node2vec's p and q), while ``--set walks.params.p=...``
    sets one entry of it.
    """
    return workflow.load_config(path, overrides, defaults=DEFAULTS, rules=_RULES)


def validate_config(config: dict) -> dict:
    """Check that ``config`` has exactly the known keys and valid values, and return it.

    Raises
    ------
    GpipeValueError
        The message names the key, the rule and the value (for an unknown key,
        the keys its section takes; for an unknown walk, the walks in ``WALKS``).
    """
    workflow.check_config(config, _RULES)
    walk = config["walks"]
    workflow.check_params("walks.params", getattr(gpipe.walks, walk["algorithm"]), walk["params"], _SET_BY_WORKFLOW)
    workflow.check_params("word2vec.params", gpipe.embeddings.word2vec, config["word2vec"]["params"],
                          _SET_BY_WORD2VEC)
    return config


_positive = workflow.integer(minimum=1)

# Every key of the config and the rule its value follows (gpipe.workflow.RULES: the workflow's name, the graph,
# the output and the cluster); a new key is one entry here and one in config.yaml.
_RULES = {
    **workflow.RULES,
    "walks.algorithm": workflow.one_of(WALKS),
    "walks.length": _positive,
    "walks.walks_per_vertex": _positive,
    "walks.seed": workflow.seed,
    "walks.params": workflow.mapping,
    "walks.corpus": workflow.one_of((False, True)),
    "word2vec.dim": _positive,
    "word2vec.window": _positive,
    "word2vec.negative": _positive,
    "word2vec.epochs": _positive,
    "word2vec.seed": workflow.seed,
    "word2vec.params": workflow.mapping,
}


# -- the run ----------------------------------------------------------------------------------

def _run(config: dict) -> dict:
    """Walk the graph, write the corpus, the embeddings and summary.json; return the summary.

    They are written into a temporary folder that becomes ``output`` once the run has succeeded (``output`` is
    checked before connecting); the summary names each file where it is then.
    """
    out = os.path.abspath(config["output"])
    with workflow.atomic_dir(out, owned=OUTPUT_FILES, overwrite=config["overwrite"], name="output") as folder:
        return _write(config, folder, out)


def _write(config: dict, folder: str, out: str) -> dict:
    """The run, writing into ``folder``, which becomes ``out``."""
    graph, walks, cluster, options = config["graph"], config["walks"], config["cluster"], config["word2vec"]
    walk = getattr(gpipe.walks, walks["algorithm"])
    outputs = {"embeddings": "embeddings.w2v", "summary": "summary.json"}
    marks = {"start": time.perf_counter()}
    with gpipe.connect(cluster["scheduler_file"], cluster["address"], n_workers=cluster["n_workers"],
                       device=cluster["device"]) as client, client.as_current():
        print(f"embeddings: Dask dashboard at {client.dashboard_link}", file=sys.stderr)
        marks["connect"] = time.perf_counter()
        g = workflow.load_graph(graph, weighted=walks["params"].get("weighted", False))  # weights if the walk uses them
        marks["graph"] = time.perf_counter()
        # compile the kernels on every worker, so that the timed walk measures walking only
        walk(g, length=2, start=g.to_original(g.bounds[:-1]), seed=walks["seed"], **walks["params"])
        marks["compile"] = time.perf_counter()
        result = walk(g, length=walks["length"], walks_per_vertex=walks["walks_per_vertex"], seed=walks["seed"],
                      **walks["params"])
        marks["walk"] = time.perf_counter()
        if walks["corpus"]:
            result.to_corpus(os.path.join(folder, "corpus.txt"))
            outputs["corpus"] = "corpus.txt"
            marks["corpus"] = time.perf_counter()
        vectors = gpipe.embeddings.word2vec(result, dim=options["dim"], window=options["window"],
                                            negative=options["negative"], epochs=options["epochs"],
                                            seed=options["seed"], **options["params"])
        vectors.to_word2vec(os.path.join(folder, "embeddings.w2v"))
        marks["word2vec"] = time.perf_counter()
        summary = {
            "status": "ok",
            "config": config,
            "graph": {"num_vertices": g.num_vertices, "num_edges": g.num_edges, "num_partitions": g.num_partitions,
                      "directed": g.directed},
            "cluster": {"scheduler": client.scheduler.address, "dashboard": client.dashboard_link},
            "walk": result.stats,
            "embeddings": {"vectors": vectors.num_vertices, "dim": vectors.dim, **vectors.stats},
        }
        g.release()  # on a shared cluster, nothing would free it once this client is closed
    marks["disconnect"] = time.perf_counter()
    summary["outputs"] = {key: os.path.join(out, name) for key, name in sorted(outputs.items())}
    summary["timings"] = dict({b: marks[b] - marks[a] for a, b in pairwise(marks)},
                              total=marks["disconnect"] - marks["start"])
    summary["gpipe_version"] = gpipe.__version__
    workflow.write_json(os.path.join(folder, "summary.json"), summary)
    return summary


def _report(summary: dict) -> None:
    graph, stats, trained, outputs = summary["graph"], summary["walk"], summary["embeddings"], summary["outputs"]
    corpus = f"  corpus      {outputs['corpus']}\n" if "corpus" in outputs else ""
    print(f"embeddings: {stats['algorithm']} on {graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges, "
          f"{stats['workers']} worker(s) on {stats['device']}\n"
          f"  walks       {stats['walks']:,} of length {stats['length']}: {stats['steps']:,} steps in "
          f"{stats['seconds']:.3f} s = {stats['steps_per_second']:,.0f} steps/s\n"
          f"{corpus}"
          f"  embeddings  {outputs['embeddings']} ({trained['vectors']:,} vectors of {trained['dim']}: "
          f"{trained['tokens']:,} tokens in {trained['seconds']:.3f} s = {trained['tokens_per_second']:,.0f} "
          f"tokens/s)\n"
          f"  summary     {outputs['summary']}")


if __name__ == "__main__":
    sys.exit(main())
