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


def _check(config: dict) -> None:
    """The walk's and word2vec's own keywords (for an unknown walk, the walks in ``WALKS``)."""
    walk = config["walks"]
    workflow.check_params("walks.params", getattr(gpipe.walks, walk["algorithm"]), walk["params"], _SET_BY_WORKFLOW)
    workflow.check_params("word2vec.params", gpipe.embeddings.word2vec, config["word2vec"]["params"],
                          _SET_BY_WORD2VEC)


# Sections are merged key by key; a key's value, walks.params included, is replaced whole (so a config or
# `--set walks.params={}` for another walk drops node2vec's p and q), while `--set walks.params.p=...` sets one
# entry of it.
WORKFLOW = workflow.Workflow("embeddings", __doc__.splitlines()[0], DEFAULTS, _RULES, check=_check,
                             run=lambda config: _report(_run(config)))
# The script's door (``gpipe run`` calls main): main(argv) -> exit status; the config checked before connecting.
main, load_config, validate_config = WORKFLOW.main, WORKFLOW.load_config, WORKFLOW.validate_config


# -- the run ----------------------------------------------------------------------------------

def _run(config: dict) -> dict:
    """Walk the graph, write the corpus, the embeddings and summary.json into ``output`` (whole once the run has
    succeeded); return the summary."""
    walks, options = config["walks"], config["word2vec"]
    walk = getattr(gpipe.walks, walks["algorithm"])
    with workflow.Run(config, owned=OUTPUT_FILES, prog="embeddings") as run:
        g = run.graph(weighted=walks["params"].get("weighted", False))  # weights if the walk uses them
        # compile the kernels on every worker, so that the timed walk measures walking only
        walk(g, length=2, start=g.to_original(g.bounds[:-1]), seed=walks["seed"], **walks["params"])
        run.lap("compile")
        result = walk(g, length=walks["length"], walks_per_vertex=walks["walks_per_vertex"], seed=walks["seed"],
                      **walks["params"])
        run.lap("walk")
        if walks["corpus"]:
            run.outputs["corpus"] = result.to_corpus(run.path("corpus.txt"))
            run.lap("corpus")
        vectors = gpipe.embeddings.word2vec(result, dim=options["dim"], window=options["window"],
                                            negative=options["negative"], epochs=options["epochs"],
                                            seed=options["seed"], **options["params"])
        run.outputs["embeddings"] = vectors.to_word2vec(run.path("embeddings.w2v"))
        run.lap("word2vec")
        return run.finish(walk=result.stats,
                          embeddings={"vectors": vectors.num_vertices, "dim": vectors.dim, **vectors.stats})


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
