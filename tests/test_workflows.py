"""Tests of ``workflows/embeddings``, run in-process against the session's two-worker cluster."""

import importlib.util
import json
import os
import sys

import pandas as pd
import pytest
import yaml

import gpipe
from gpipe import workflow
from gpipe.errors import GpipeError, GpipeValueError
from helpers import load_workflow

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKFLOW = os.path.join(REPO, "workflows", "embeddings")


@pytest.fixture(scope="module")
def embeddings():
    return load_workflow(WORKFLOW)


def test_embeddings_workflow_writes_node2vec_walks_along_edges_summary_and_embeddings(embeddings, cpu_cluster,
                                                                                      tmp_path, capsys):
    out = tmp_path / "out"
    code = embeddings.main(["--set", f"cluster.address={cpu_cluster.scheduler.address}", "--set", "cluster.device=cpu",
                            "--set", "graph.path=rmat:7:4", "--set", "walks.length=6",
                            "--set", "walks.walks_per_vertex=2", "--set", "walks.params={p: 0.5, q: 2}",
                            "--set", "walks.corpus=true", "--set", "word2vec.dim=8",
                            "--set", "word2vec.params={min_count: 2}", "--set", f"output={out}"])
    stdout = capsys.readouterr().out
    assert code == 0
    assert "node2vec on 128 vertices" in stdout and "vectors of 8" in stdout

    with open(out / "corpus.txt") as f:
        walks = [line.split() for line in f]
    assert len(walks) == 2 * 128 and all(1 <= len(w) <= 7 for w in walks)
    with cpu_cluster.as_current():
        g = gpipe.generators.rmat(7, 4)
        g.to_parquet(tmp_path / "graph")
        g.release()
    frame = pd.concat(pd.read_parquet(tmp_path / "graph" / f) for f in os.listdir(tmp_path / "graph")
                      if f.startswith("part-"))
    edges = set(zip(frame["src"].astype(str), frame["dst"].astype(str)))
    assert all((a, b) in edges for w in walks for a, b in zip(w, w[1:]))

    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["status"] == "ok" and summary["walk"]["steps"] > 0
    assert summary["graph"]["num_vertices"] == 128 and summary["config"]["walks"]["length"] == 6
    assert summary["walk"]["algorithm"] == "node2vec" and summary["config"]["walks"]["params"] == {"p": 0.5, "q": 2}
    with open(out / "embeddings.w2v") as f:  # a vector per vertex of the graph, trained or not
        lines = f.read().splitlines()
    assert lines[0] == "128 8" and len(lines) == 129 and all(len(line.split()) == 9 for line in lines[1:])
    assert summary["embeddings"]["tokens"] == sum(len(w) for w in walks) and summary["embeddings"]["dim"] == 8
    assert summary["outputs"] == {name: str(out / file) for name, file in
                                  (("corpus", "corpus.txt"), ("embeddings", "embeddings.w2v"),
                                   ("summary", "summary.json"))}


def test_embeddings_workflow_writes_no_corpus_unless_asked(embeddings, cpu_cluster, tmp_path, capsys):
    out = tmp_path / "out"
    code = embeddings.main(["--set", f"cluster.address={cpu_cluster.scheduler.address}", "--set", "cluster.device=cpu",
                            "--set", "graph.path=rmat:6:4", "--set", "walks.length=4", "--set", "word2vec.dim=4",
                            "--set", f"output={out}"])
    assert code == 0, capsys.readouterr().err
    assert sorted(f for f in os.listdir(out) if not f.startswith(".")) == ["embeddings.w2v", "summary.json"]


@pytest.mark.parametrize("override, expected", [
    ("walks.lenght=5", ["'walks.lenght'", "length"]),
    ("walks.algorithm=nope", ["'walks.algorithm'", "'nope'", "'node2vec'", "'deepwalk'", "'metropolis_hastings'",
                              "'with_jump'"]),
    ("walks.algorithm=ppr", ["'walks.algorithm'", "'ppr'"]),
    ("walks.algorithm=deepwalk", ["unknown key 'walks.params.p'", "deepwalk takes weighted"]),
    ("walks.params.nope=1", ["'walks.params.nope'", "node2vec takes p, q, weighted"]),
    ("walks.length=0", ["'walks.length' must be a positive integer"]),
    ("graph.path=no/such/edges.txt", ["'graph.path'", "no/such/edges.txt"]),
    ("walks", ["'--set' must be key.sub=value"]),
    ("word2vec.params={vector_size: 3}", ["'word2vec.params.vector_size'", "word2vec takes"]),
    ("word2vec.params={dim: 3}", ["'word2vec.params.dim'"]),
    ("walks.corpus=3", ["'walks.corpus'"]),
])
def test_bad_config_exits_2_naming_the_key_before_connecting(embeddings, capsys, override, expected):
    code = embeddings.main(["--set", "cluster.address=tcp://127.0.0.1:1", "--set", override])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("embeddings: error: ") and "Traceback" not in err
    assert all(text in err for text in expected)


def test_shipped_config_parses_and_validates(embeddings):
    with open(os.path.join(WORKFLOW, "config.yaml")) as f:
        config = yaml.safe_load(f)
    assert embeddings.validate_config(config) == config
    assert config["walks"]["algorithm"] == "node2vec" and config["walks"]["params"] == {"p": 1.0, "q": 1.0}
    assert set(embeddings.WALKS) == {"deepwalk", "node2vec", "metropolis_hastings", "with_jump"}


def test_a_config_file_is_merged_over_the_defaults(embeddings, tmp_path):
    path = tmp_path / "my.yaml"
    path.write_text("walks:\n  length: 3\noutput: elsewhere\n")
    config = embeddings.validate_config(embeddings.load_config(str(path), ["walks.seed=4"]))
    assert config["walks"]["length"] == 3 and config["walks"]["seed"] == 4 and config["output"] == "elsewhere"
    assert config["walks"]["walks_per_vertex"] == 10 and config["word2vec"]["dim"] == 64
    assert config["walks"]["params"] == {"p": 1.0, "q": 1.0}


def test_another_walk_replaces_the_node2vec_params(embeddings):
    config = embeddings.validate_config(embeddings.load_config(None, ["walks.algorithm=with_jump",
                                                                      "walks.params={jump: 0.2}"]))
    assert config["walks"]["params"] == {"jump": 0.2}
    config = embeddings.load_config(None, ["walks.params.q=4"])
    assert config["walks"]["params"] == {"p": 1.0, "q": 4}


def test_a_config_file_for_deepwalk_drops_the_node2vec_params(embeddings, tmp_path):
    path = tmp_path / "deepwalk.yaml"
    path.write_text("walks:\n  algorithm: deepwalk\n  params: {}\n")
    config = embeddings.validate_config(embeddings.load_config(str(path)))
    assert config["walks"]["algorithm"] == "deepwalk" and config["walks"]["params"] == {}
    assert config["walks"]["length"] == 40


import numpy as np  # noqa: E402  (for the graph sampling tests below)

SAMPLING = os.path.join(REPO, "workflows", "graph_sampling")


@pytest.fixture(scope="module")
def graph_sampling():
    return load_workflow(SAMPLING)


def test_graph_sampling_workflow_samples_edges_from_random_seeds(graph_sampling, cpu_cluster, tmp_path, capsys):
    out = tmp_path / "out"
    code = graph_sampling.main(["--set", f"cluster.address={cpu_cluster.scheduler.address}",
                                "--set", "cluster.device=cpu", "--set", "graph.path=rmat:7:4",
                                "--set", "seeds={random: 5}", "--set", "sampler.seed=3",
                                "--set", "sampler.params={fanouts: [2, 2]}", "--set", f"output={out}"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "neighbor on 128 vertices" in captured.out

    with open(out / "summary.json") as f:
        summary = json.load(f)
    expected = sorted(np.random.default_rng(3).choice(128, size=5, replace=False).tolist())
    assert summary["status"] == "ok" and summary["seeds"] == expected
    assert summary["config"]["seeds"] == {"random": 5} and summary["sample"]["algorithm"] == "neighbor"
    edges = pd.read_parquet(out / "edges.parquet")
    assert summary["sample"]["edges"] == len(edges) > 0 and set(edges.instance) <= set(range(5))
    assert edges.groupby(["instance", "depth", "src"]).size().max() <= 2
    roots = edges[edges.depth == edges.depth.min()]
    assert {expected[i] for i in roots.instance} == set(roots.src)
    with cpu_cluster.as_current():
        g = gpipe.generators.rmat(7, 4)
        g.to_parquet(tmp_path / "graph")
        g.release()
    frame = pd.concat(pd.read_parquet(tmp_path / "graph" / f) for f in os.listdir(tmp_path / "graph")
                      if f.startswith("part-"))
    assert set(zip(edges.src, edges.dst)) <= set(zip(frame.src, frame.dst))


@pytest.mark.parametrize("override, expected", [
    ("sampler.fanout=2", ["unknown key 'sampler.fanout'", "algorithm, seed, params"]),
    ("sampler.params.p=0.5", ["unknown key 'sampler.params.p'", "neighbor takes fanouts, depth, weighted"]),
    ("sampler.algorithm=walk", ["'sampler.algorithm'", "'walk'"]),
    ("seeds={random: 0}", ["'seeds.random' must be a positive integer"]),
    ("seeds=[]", ["'seeds'"]),
])
def test_graph_sampling_bad_config_exits_2_naming_the_key(graph_sampling, capsys, override, expected):
    code = graph_sampling.main(["--set", "cluster.address=tcp://127.0.0.1:1", "--set", override])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("graph_sampling: error: ") and "Traceback" not in err
    assert all(text in err for text in expected)


def test_graph_sampling_shipped_config_validates(graph_sampling):
    with open(os.path.join(SAMPLING, "config.yaml")) as f:
        config = yaml.safe_load(f)
    assert graph_sampling.validate_config(config) == config
    assert set(graph_sampling.SAMPLERS) == {"neighbor", "snowball", "forest_fire", "layer"}



GNN_TRAINING = os.path.join(REPO, "workflows", "gnn_training")
_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def gnn_training():
    return load_workflow(GNN_TRAINING)


@pytest.mark.parametrize("on_workers", [False, True])
def test_gnn_training_learns_the_planted_communities_well_above_chance(gnn_training, cpu_cluster, tmp_path, capsys,
                                                                        on_workers):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    code = gnn_training.main(["--set", f"cluster.address={cpu_cluster.scheduler.address}",
                              "--set", "cluster.device=cpu", "--set", "graph.vertices=1024",
                              "--set", "train.epochs=3", "--set", "train.batch_size=64",
                              "--set", f"train.on_workers={str(on_workers).lower()}", "--set", f"output={out}"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "GraphSAGE on 1,024 vertices" in captured.out
    with open(out / "summary.json") as f:
        training = json.load(f)["training"]
    assert training["mode"] == ("workers" if on_workers else "in_process")
    assert training["world_size"] == (2 if on_workers else 1) and len(training["epochs"]) == 3
    assert training["chance"] < 0.2 and training["accuracy"] > max(0.6, 3 * training["chance"])
    assert training["accuracy"] > training["accuracy_before"] + 0.3


def test_gnn_training_without_torch_exits_2_saying_what_to_install(gnn_training, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # as where it is not installed
    code = gnn_training.main(["--set", "cluster.address=tcp://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("gnn_training: error: this workflow trains with PyTorch, which is not "
                                        "installed: `pip install 'gpipe[gnn]'`")


@pytest.mark.parametrize("override, expected", [
    ("graph.path=rmat:6", ["unknown key 'graph.path'", "vertices, communities, degree, mixing"]),
    ("graph.mixing=1.5", ["'graph.mixing' must be a number >= 0 and <= 1, got 1.5"]),
    ("train.fraction=0", ["'train.fraction' must be a number > 0 and <= 1, got 0"]),
    ("train.fanouts=[10, 0]", ["'train.fanouts' must be a non-empty list of positive ints or -1", "[10, 0]"]),
    ("train.on_workers=1", ["'train.on_workers' must be true or false, got 1"]),
    ("train.lr=-0.1", ["'train.lr' must be a number > 0, got -0.1"]),
])
def test_gnn_training_bad_config_exits_2_naming_the_key(gnn_training, capsys, override, expected):
    code = gnn_training.main(["--set", "cluster.address=tcp://127.0.0.1:1", "--set", override])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("gnn_training: error: ") and "Traceback" not in err
    assert all(text in err for text in expected), err


def test_gnn_training_shipped_config_validates(gnn_training):
    with open(os.path.join(GNN_TRAINING, "config.yaml")) as f:
        config = yaml.safe_load(f)
    assert gnn_training.validate_config(config) == config
    assert config["train"]["fanouts"] == [10, 5] and config["train"]["on_workers"] is False


def test_the_planted_partition_keeps_most_edges_in_a_community_and_features_near_its_centroid(gnn_training):
    edges, labels, features = gnn_training.planted_partition(3000, 6, 10, 0.3, 4, 0.5, seed=1)
    assert len(edges) == 15000 and features.shape == (3000, 4) and set(labels) == set(range(6))
    inside = (labels[edges.src] == labels[edges.dst]).mean()
    assert abs(inside - (0.7 + 0.3 / 6)) < 0.02  # kept inside, plus mixed edges landing inside by chance
    centroids = np.array([features[labels == k].mean(axis=0) for k in range(6)])
    nearest = ((features[:, None] - centroids[None]) ** 2).sum(axis=2).argmin(axis=1)
    assert (nearest == labels).mean() > 0.9  # little noise: a vertex's features tell its community
    again = gnn_training.planted_partition(3000, 6, 10, 0.3, 4, 0.5, seed=1)
    assert again[0].equals(edges) and np.array_equal(again[2], features)


MINING = os.path.join(REPO, "workflows", "mining")


@pytest.fixture(scope="module")
def mining():
    return load_workflow(MINING)


def _run_on(cluster, out, *settings: str) -> list[str]:
    """A workflow's --set flags for a run on ``cluster`` (CPU) on rmat:7:4 into ``out``, then ``settings``."""
    return [arg for item in [f"cluster.address={cluster.scheduler.address}", "cluster.device=cpu",
                             "graph.path=rmat:7:4", f"output={out}", *settings] for arg in ("--set", item)]


def test_mining_workflow_lists_cliques_and_matches_as_the_api_does(mining, cpu_cluster, tmp_path, capsys):
    assert mining.main(_run_on(cpu_cluster, tmp_path / "cliques", "mining.k=3", "mining.embeddings=true")) == 0
    assert "mining: cliques on 128 vertices" in capsys.readouterr().out
    assert mining.main(_run_on(cpu_cluster, tmp_path / "match", "mining.algorithm=match",
                                   "mining.pattern=[[a, b], [b, c]]", "mining.induced=true")) == 0
    with cpu_cluster.as_current():
        g = gpipe.generators.rmat(7, 4, mode="replicated")
        triangles = gpipe.mining.list_cliques(g, 3)
        paths = gpipe.mining.match(g, [("a", "b"), ("b", "c")], induced=True)
    summary = json.load(open(tmp_path / "cliques" / "summary.json"))
    assert summary["count"] == triangles.count > 0 and summary["stats"]["k"] == 3
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "cliques" / "embeddings.parquet"), triangles.to_frame())
    assert (tmp_path / "cliques" / "embeddings.parquet" / "embeddings-000000.parquet").is_file()  # a file per block
    assert mining.main(_run_on(cpu_cluster, tmp_path / "cliques", "mining.k=3", "mining.embeddings=true",
                               "overwrite=true")) == 0  # its own folder of embeddings, replaced
    summary = json.load(open(tmp_path / "match" / "summary.json"))
    assert summary["count"] == paths.count > 0 and sorted(os.listdir(tmp_path / "match")) == [
        ".gpipe-files.json", "summary.json"]


def test_mining_workflow_writes_the_frequent_patterns_of_randomly_labeled_vertices(mining, cpu_cluster, tmp_path):
    assert mining.main(_run_on(cpu_cluster, tmp_path / "fpm", "mining.algorithm=fpm", "mining.max_edges=2",
                                   "mining.min_support=4", "mining.random_labels=3", "mining.seed=5")) == 0
    with cpu_cluster.as_current():
        g = gpipe.generators.rmat(7, 4, mode="replicated")
        labels = np.random.default_rng(5).integers(0, 3, g.num_vertices)
        want = gpipe.mining.frequent_patterns(g, 2, 4, labels=labels).patterns
    written = pd.read_parquet(tmp_path / "fpm" / "patterns.parquet")
    assert written.code.tolist() == want.code.tolist() and len(want) > 0
    assert written.support.tolist() == want.support.tolist()
    assert [tuple(map(tuple, e)) for e in written.edges] == want.edges.tolist()
    assert json.load(open(tmp_path / "fpm" / "summary.json"))["patterns"] == len(want)


@pytest.mark.parametrize("override, expected", [
    ("mining.algorithm=motifs", ["'mining.algorithm'", "'motifs'"]),
    ("mining.k=2", ["'mining.k' must be an integer >= 3, got 2"]),
    ("mining.max_edges=5", ["'mining.max_edges' must be an integer <= 4, got 5"]),
    ("mining.min_support=0", ["'mining.min_support' must be a positive integer, got 0"]),
    ("mining.pattern=[[0, 1, 2]]", ["'mining.pattern' must be a non-empty list of [u, v] edges"]),
    ("graph.directed=true", ["'graph.directed' must be false"]),
    ("mining.colour=red", ["unknown key 'mining.colour'"]),
])
def test_mining_bad_config_exits_2_naming_the_key(mining, capsys, override, expected):
    code = mining.main(["--set", "cluster.address=tcp://127.0.0.1:1", "--set", override])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("mining: error: ") and "Traceback" not in err
    assert all(text in err for text in expected), err


def test_mining_shipped_config_validates(mining):
    with open(os.path.join(MINING, "config.yaml")) as f:
        config = yaml.safe_load(f)
    assert mining.validate_config(config) == config


DYNAMIC_WALKS = os.path.join(REPO, "workflows", "dynamic_walks")


@pytest.fixture(scope="module")
def dynamic_walks():
    return load_workflow(DYNAMIC_WALKS)


def test_dynamic_walks_applies_a_bingo_log_in_rounds_and_walks_the_graph_it_leaves(dynamic_walks, cpu_cluster,
                                                                                  tmp_path, capsys):
    out = tmp_path / "out"
    assert dynamic_walks.main(_run_on(cpu_cluster, out, "updates.count=60", "updates.rounds=3",
                                           "walks.length=5")) == 0
    assert "dynamic_walks: deepwalk on 128 vertices" in capsys.readouterr().out
    assert sorted(os.listdir(out)) == [".gpipe-files.json", "corpus.txt", "summary.json", "updates.parquet"]
    summary = json.load(open(out / "summary.json"))
    log = pd.read_parquet(out / "updates.parquet")
    assert len(log) == 60 and log.op.value_counts().to_dict() == {"insert": 30, "delete": 30}
    with cpu_cluster.as_current():
        everything = gpipe.dynamic.DynamicGraph.from_graph(gpipe.generators.rmat(7, 4, weighted=True,
                                                                                 mode="partitioned")).edges()
    edges = set(zip(everything.src.tolist(), everything.dst.tolist()))
    deleted = {e for u, v in zip(log.src[log.op == "delete"], log.dst[log.op == "delete"]) for e in ((u, v), (v, u))}
    held_out = len(log[log.op == "insert"])
    assert summary["graph"]["num_edges"] == len(edges) - 2 * held_out
    rounds = summary["rounds"]
    assert [r["updates"] for r in rounds] == [20, 20, 20] and rounds[-1]["num_edges"] == len(edges) - len(deleted)
    for r in rounds:
        assert r["update_seconds"] > 0 and r["steps"] > 0 and r["steps_per_second"] > 0
    walks = [[int(v) for v in line.split()] for line in open(out / "corpus.txt")]
    steps = {(u, v) for w in walks for u, v in zip(w, w[1:])}
    assert len(walks) == 128 and steps <= edges - deleted and steps


def test_dynamic_walks_reads_a_log_file_and_names_a_bad_row(dynamic_walks, cpu_cluster, tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text("op,src,dst,weight\ninsert,0,200,2\ndelete,0,200,\ndelete,0,200,\n")
    code = dynamic_walks.main(_run_on(cpu_cluster, tmp_path / "out", f"updates.path={log}", "updates.rounds=2",
                                           "walks.algorithm=ppr", "walks.params={restart: 0.2}", "walks.length=4"))
    err = capsys.readouterr().err
    assert code == 2 and "update 2: cannot delete edge (0, 200): it is not in the graph" in err
    assert not (tmp_path / "out").exists()
    log.write_text("op,src,dst,weight\ninsert,0,200,2\ndelete,0,200,\n")
    assert dynamic_walks.main(_run_on(cpu_cluster, tmp_path / "out", f"updates.path={log}", "updates.rounds=2",
                                           "walks.algorithm=ppr", "walks.params={restart: 0.2}",
                                           "walks.length=4")) == 0
    summary = json.load(open(tmp_path / "out" / "summary.json"))
    assert [r["num_vertices"] for r in summary["rounds"]] == [201, 201] and summary["updates"]["log"] == str(log)
    assert sorted(os.listdir(tmp_path / "out")) == [".gpipe-files.json", "corpus.txt", "summary.json"]


@pytest.mark.parametrize("override, expected", [
    ("updates.kind=sideways", ["'updates.kind'", "'sideways'"]),
    ("updates.rounds=0", ["'updates.rounds' must be a positive integer, got 0"]),
    ("updates.path=no/such/log.csv", ["'updates.path' must be an existing .parquet or .csv file"]),
    ("walks.algorithm=metropolis_hastings", ["'walks.algorithm'", "'metropolis_hastings'"]),
    ("walks.params={p: 2}", ["unknown key 'walks.params.p'"]),
])
def test_dynamic_walks_bad_config_exits_2_naming_the_key(dynamic_walks, capsys, override, expected):
    code = dynamic_walks.main(["--set", "cluster.address=tcp://127.0.0.1:1", "--set", override])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("dynamic_walks: error: ") and "Traceback" not in err
    assert all(text in err for text in expected), err


def test_dynamic_walks_shipped_config_validates(dynamic_walks):
    with open(os.path.join(DYNAMIC_WALKS, "config.yaml")) as f:
        config = yaml.safe_load(f)
    assert dynamic_walks.validate_config(config) == config


# -- every workflow: an output folder appears complete or not at all ----------------------------

_SMALL_RUN = {"dynamic_walks": ["updates.count=40", "updates.rounds=2", "walks.length=3"],
              "embeddings": ["walks.algorithm=deepwalk", "walks.params={}", "walks.length=3",
                             "walks.walks_per_vertex=1"],
              "graph_sampling": ["seeds=[0, 1]"],
              "gnn_training": ["graph.vertices=64", "train.epochs=1"],
              "mining": ["mining.k=3"]}
_NEEDS = {"gnn_training": pytest.mark.skipif(not _TORCH, reason="gnn_training needs torch")}
_WORKFLOWS = [pytest.param(name, marks=_NEEDS.get(name, ())) for name in _SMALL_RUN]


def _small_run(name: str, cluster_address: str, out, *settings: str) -> list[str]:
    graph = [] if name == "gnn_training" else ["graph.path=rmat:6:4"]  # gnn_training generates its own
    return [arg for item in [f"cluster.address={cluster_address}", "cluster.device=cpu", *graph,
                             *_SMALL_RUN[name], f"output={out}", *settings] for arg in ("--set", item)]


@pytest.mark.parametrize("name", _WORKFLOWS)
def test_an_interrupted_workflow_leaves_no_output_folder(request, cpu_cluster, tmp_path, monkeypatch, name):
    def interrupted(path, obj):
        raise KeyboardInterrupt  # Ctrl-C as the last file is written, once the others are

    monkeypatch.setattr(workflow, "write_json", interrupted)
    with pytest.raises(KeyboardInterrupt):
        request.getfixturevalue(name).main(_small_run(name, cpu_cluster.scheduler.address, tmp_path / "out"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", _WORKFLOWS)
def test_a_workflow_replaces_an_earlier_runs_output_only_when_asked_and_never_other_files(
        request, cpu_cluster, tmp_path, capsys, name):
    module, out = request.getfixturevalue(name), tmp_path / "out"
    assert module.main(_small_run(name, cpu_cluster.scheduler.address, out)) == 0
    earlier = sorted(os.listdir(out))
    assert module.main(_small_run(name, "tcp://127.0.0.1:1", out)) == 2  # refused before connecting
    assert "'output' must be a new or empty folder unless overwrite is set" in capsys.readouterr().err
    assert module.main(_small_run(name, cpu_cluster.scheduler.address, out, "overwrite=true")) == 0
    assert sorted(os.listdir(out)) == earlier and json.load(open(out / "summary.json"))["config"]["overwrite"]
    (out / "notes.txt").write_text("mine")
    assert module.main(_small_run(name, "tcp://127.0.0.1:1", out, "overwrite=true")) == 2
    assert "'notes.txt' is not a file gpipe writes there" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"


# -- gpipe.workflow's helpers, which users call from their own copies of the workflows ---------

def _keep(name, value):
    return value


_GRAPH = {"path": "rmat:6:4", "directed": False, "partitions": None}
_MAIN = dict(prog="demo", description="A demo.", defaults="config.yaml", configure=lambda path, overrides: {},
             run=print)


@pytest.mark.parametrize("call, message", [
    (lambda: workflow.integer(minimum="1"), "'minimum' must be an integer, got '1'"),
    (lambda: workflow.integer(minimum=3, maximum=1), "'maximum' must be at least 'minimum' (3), got 1"),
    (lambda: workflow.one_of("cpu"), "'choices' must be a non-empty iterable of values (not a string), got 'cpu'"),
    (lambda: workflow.one_of([]), "'choices' must be a non-empty iterable of values (not a string), got ()"),
    (lambda: workflow.load_config(None, "walks.length=5", defaults="config.yaml", rules={}),
     "'overrides' must be an iterable of strings, got 'walks.length=5'"),
    (lambda: workflow.load_config(None, [], defaults="config.yaml", rules={"walks.length": 5}),
     "'rules' must map each 'section.key' to a callable rule(key, value), got 'walks.length': 5"),
    (lambda: workflow.check_config({}, [("walks.length", _keep)]),
     "'rules' must be a mapping of 'section.key' to rule(key, value), got [('walks.length', _keep)]"),
    (lambda: workflow.main([], **dict(_MAIN, prog="")), "'prog' must be a non-empty string, got ''"),
    (lambda: workflow.main(["--set", 1], **_MAIN), "'argv' must be an iterable of strings, got 1 among them"),
    (lambda: workflow.main([], **dict(_MAIN, run="print")), "'run' must be callable, got 'print'"),
    (lambda: workflow.load_graph([]), "'section' must be a mapping of keys to values, got []"),
    (lambda: workflow.load_graph({"path": "rmat:6:4", "directed": False}), "missing key 'graph.partitions'"),
    (lambda: workflow.load_graph(dict(_GRAPH, directed="no")), "'graph.directed' must be true or false, got 'no'"),
    (lambda: workflow.load_graph(_GRAPH, weighted=1), "'weighted' must be true or false, got 1"),
    (lambda: workflow.run(["graph_sampling"]), "'workflow' must be a non-empty string, got ['graph_sampling']"),
    (lambda: workflow.run("graph_sampling", "seeds=[0]"),
     "'overrides' must be an iterable of strings, got 'seeds=[0]'"),
    (lambda: workflow.run("graph_sampling", scheduler_file=5), "'scheduler_file' must be a non-empty string, got 5"),
])
def test_workflow_helpers_refuse_a_bad_argument_naming_the_parameter_the_rule_and_the_value(call, message):
    with pytest.raises(GpipeValueError) as raised:
        call()
    assert str(raised.value) == message.replace("_keep", repr(_keep))


@pytest.mark.parametrize("script, message", [
    ("open('ran', 'w').close()\ndef helper(argv):\n    return 0\n",
     "a workflow's run.py must define main(argv) returning an exit status"),
    ("open('ran', 'w').close()\ndef main(argv:\n    return 0\n", "run.py:2: not valid Python: "),
])
def test_a_workflow_script_without_main_is_refused_before_any_of_it_runs(tmp_path, monkeypatch, script, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.py").write_text(script)
    (tmp_path / "wf.yaml").write_text("workflow: run.py\n")
    with pytest.raises(GpipeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        workflow.run(str(tmp_path / "wf.yaml"))
    assert not (tmp_path / "ran").exists()
