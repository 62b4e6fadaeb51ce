"""Tests of the ``gpipe`` command line, run in-process against the session's two-worker cluster."""

import argparse
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe import _progress
from gpipe.cli import _parser
from gpipe.cli import main
from helpers import read_summary, tree

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(capsys, cluster, *args):
    """``main(args)`` against ``cluster`` on the CPU: (exit status, stdout, stderr)."""
    code = main([*args, "--address", cluster.scheduler.address, "--device", "cpu"])
    out, err = capsys.readouterr()
    return code, out, err


def _edges(graph_folder) -> set:
    frame = pd.concat(pd.read_parquet(os.path.join(graph_folder, f))
                      for f in os.listdir(graph_folder) if f.startswith("part-"))
    return set(zip(frame["src"].tolist(), frame["dst"].tolist()))


def _walks(corpus) -> list[list[int]]:
    with open(corpus) as f:
        return [[int(v) for v in line.split()] for line in f]


@pytest.fixture(scope="module")
def rmat_7_4(cpu_cluster, tmp_path_factory):
    """The edges of ``rmat:7:4`` and of ``rmat:7:4`` with ``--weighted``: {weighted: set of (src, dst)}."""
    edges = {}
    for weighted in (False, True):
        folder = tmp_path_factory.mktemp("rmat") / "graph"
        with cpu_cluster.as_current():
            g = gpipe.generators.rmat(7, 4, weighted=weighted)
            g.to_parquet(folder)
            g.release()
        edges[weighted] = _edges(folder)
    return edges


@pytest.fixture(scope="module")
def generated(cpu_cluster, tmp_path_factory):
    """``gpipe generate rmat --scale 8 --edge-factor 4`` on the session cluster: (out folder, exit status)."""
    out = tmp_path_factory.mktemp("generated")
    code = main(["generate", "rmat", "--scale", "8", "--edge-factor", "4", "--seed", "3", "--out", str(out),
                 "--address", cpu_cluster.scheduler.address, "--device", "cpu"])
    return out, code


def test_info_json_reports_versions_and_the_cluster(capsys, cpu_cluster):
    code, out, _ = _run(capsys, cpu_cluster, "info", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["versions"]["gpipe"] == gpipe.__version__
    assert report["versions"]["dask"] and report["versions"]["numba"]
    assert set(report["gpu"]) == {"count", "problem"}
    cluster = report["cluster"]
    assert cluster["scheduler"] == cpu_cluster.scheduler.address and cluster["device"] == "cpu"
    assert len(cluster["workers"]) == 2 and all(w["nthreads"] == 1 for w in cluster["workers"])


def test_info_finds_the_cluster_in_the_environment(capsys, cpu_cluster, monkeypatch):
    monkeypatch.setenv("GPIPE_SCHEDULER_ADDRESS", cpu_cluster.scheduler.address)
    assert main(["info", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert f"cluster: {cpu_cluster.scheduler.address}, device cpu" in out
    assert out.count("1 threads") == 2


def test_info_without_a_cluster_starts_none(capsys, monkeypatch):
    monkeypatch.delenv("GPIPE_SCHEDULER_FILE", raising=False)
    monkeypatch.delenv("GPIPE_SCHEDULER_ADDRESS", raising=False)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"gpipe {gpipe.__version__}" in out and "GPU:" in out and "cluster: none given" in out


def test_generate_rmat_writes_the_graph_and_summary(generated, cpu):
    out, code = generated
    assert code == 0
    summary = read_summary(out)
    assert summary["status"] == "ok" and summary["command"] == "generate"
    assert summary["graph"]["num_vertices"] == 256 and not summary["graph"]["directed"]
    assert summary["parameters"]["scale"] == 8 and summary["parameters"]["edge_factor"] == 4
    assert summary["outputs"]["graph"] == str(out / "graph")
    assert summary["cluster"]["device"] == "cpu" and len(summary["cluster"]["workers"]) == 2
    g = gpipe.read_edges(out / "graph")
    assert (g.num_vertices, g.num_edges) == (256, summary["graph"]["num_edges"])


def test_walk_deepwalk_on_a_graph_folder(capsys, cpu_cluster, generated, tmp_path):
    graph = generated[0] / "graph"
    code, out, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", str(graph), "--length", "5",
                          "--seed", "11", "--out", str(tmp_path))
    assert code == 0, err
    walks, edges = _walks(tmp_path / "walks.txt"), _edges(graph)
    assert len(walks) == 256 and all(1 <= len(w) <= 6 for w in walks)
    assert all((u, v) in edges for w in walks for u, v in zip(w, w[1:]))
    summary = read_summary(tmp_path)
    assert summary["status"] == "ok" and summary["parameters"]["algorithm"] == "deepwalk"
    assert summary["walk"]["steps"] > 0 and summary["walk"]["walks"] == 256
    assert summary["graph"]["num_vertices"] == 256
    assert set(summary["outputs"]) == {"corpus", "summary"}
    assert set(summary["timings"]) == {"connect", "graph", "compile", "walk", "write", "total"}
    assert "steps/s" in out and cpu_cluster.dashboard_link in err
    assert "walks [" in err and "100%" in err  # the progress line, printed at the end when stderr is no TTY
    # reading and writing told as they start and end (stderr is no TTY: no line redrawn in place)
    assert re.search(rf"reading {re.escape(str(graph))} \(.+B\): 256 vertices, [\d,]+ edges \([\d,]+ edges/s\) in "
                     r"[\d.]+ s", err), err
    assert re.search(rf"writing {re.escape(str(tmp_path))}: .+B \(.+B/s\) in [\d.]+ s", err), err
    assert "\r" not in err


def test_a_long_phase_says_it_is_still_going(capsys, monkeypatch):
    monkeypatch.setattr(_progress._Phase, "tick", 0.01)
    monkeypatch.setattr(_progress._Phase, "interval", 0.05)
    with _progress._Phase(argparse.Namespace(quiet=False), "reading big.el (1 GB)") as phase:
        time.sleep(0.3)
        phase.done("3 edges")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "reading big.el (1 GB) ..." and re.fullmatch(r"reading big.el \(1 GB\): 3 edges in 0\.\d s",
                                                                     lines[-1]), lines
    assert len(lines) >= 4 and all(re.fullmatch(r"reading big.el \(1 GB\) \.\.\. \d+ s", x) for x in lines[1:-1])
    with pytest.raises(ZeroDivisionError), _progress._Phase(argparse.Namespace(quiet=False), "writing out"):
        1 / 0
    assert capsys.readouterr().err.splitlines()[-1].startswith("writing out: failed in ")
    with _progress._Phase(argparse.Namespace(quiet=True), "reading x"):
        pass
    assert capsys.readouterr().err == ""


def test_walk_deepwalk_on_a_generated_graph_in_both_formats(capsys, cpu_cluster, tmp_path):
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", "rmat:7:4", "--length", "4",
                        "--walks-per-vertex", "2", "--format", "both", "--quiet", "--out", str(tmp_path))
    assert code == 0 and err == ""
    corpus = _walks(tmp_path / "walks.txt")
    assert len(corpus) == 2 * 128
    table = pd.concat(pd.read_parquet(tmp_path / "walks.parquet" / f)
                      for f in sorted(os.listdir(tmp_path / "walks.parquet")) if f != ".gpipe-files.json")
    steps = table[[f"step_{j}" for j in range(5)]].to_numpy()
    assert [list(row[row >= 0]) for row in steps] == corpus
    summary = read_summary(tmp_path)
    assert summary["graph"]["num_vertices"] == 128 and summary["parameters"]["graph"] == "rmat:7:4"
    assert summary["walk"]["steps"] > 0


def test_walk_node2vec_steps_along_edges(capsys, cpu_cluster, rmat_7_4, tmp_path):
    code, _, err = _run(capsys, cpu_cluster, "walk", "node2vec", "--graph", "rmat:7:4", "--p", "0.5", "--q", "2",
                        "--length", "6", "--quiet", "--out", str(tmp_path))
    assert code == 0, err
    walks = _walks(tmp_path / "walks.txt")
    assert len(walks) == 128 and all(1 <= len(w) <= 7 for w in walks)
    assert all((u, v) in rmat_7_4[False] for w in walks for u, v in zip(w, w[1:]))
    summary = read_summary(tmp_path)
    assert summary["status"] == "ok" and summary["walk"]["algorithm"] == "node2vec"
    assert summary["parameters"]["p"] == 0.5 and summary["parameters"]["q"] == 2.0


def test_walk_with_a_vertex_order_steps_along_the_graphs_edges_in_its_ids(capsys, cpu_cluster, rmat_7_4, tmp_path):
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", "rmat:7:4", "--vertex-order", "rcmk",
                        "--partitions", "2", "--length", "6", "--quiet", "--out", str(tmp_path))
    assert code == 0, err
    walks = _walks(tmp_path / "walks.txt")
    assert sorted(w[0] for w in walks) == list(range(128))
    assert all((u, v) in rmat_7_4[False] for w in walks for u, v in zip(w, w[1:]))
    assert read_summary(tmp_path)["parameters"]["vertex_order"] == "rcmk"


def test_walk_ppr_writes_scores_that_sum_to_one_per_source(capsys, cpu_cluster, rmat_7_4, tmp_path):
    code, out, err = _run(capsys, cpu_cluster, "walk", "ppr", "--graph", "rmat:7:4", "--start", "0,5",
                          "--walks-per-source", "10", "--length", "8", "--quiet", "--out", str(tmp_path))
    assert code == 0, err
    walks = _walks(tmp_path / "walks.txt")
    assert len(walks) == 20 and [w[0] for w in walks] == [0, 5] * 10
    scores = pd.read_parquet(tmp_path / "scores.parquet")  # a folder, a file per range of sources
    assert list(scores.columns) == ["source", "vertex", "score"]
    assert all(p.name.startswith("scores-") or p.name == ".gpipe-files.json"  # and the list of what was written
               for p in (tmp_path / "scores.parquet").iterdir())
    assert set(scores["source"]) == {0, 5} and (scores["score"] > 0).all()
    assert scores.groupby("source")["score"].sum().to_numpy() == pytest.approx([1.0, 1.0])
    summary = read_summary(tmp_path)
    assert summary["status"] == "ok" and summary["walk"]["walks"] == 20
    assert summary["outputs"]["scores"] == str(tmp_path / "scores.parquet") and "scores.parquet" in out
    assert summary["parameters"]["start"] == "0,5" and summary["parameters"]["walks_per_source"] == 10


def test_walk_ppr_still_takes_sources_for_start_warning_and_walking_the_same(capsys, cpu_cluster, tmp_path):
    runs = {}
    for flag in ("--start", "--sources"):
        code, _, err = _run(capsys, cpu_cluster, "walk", "ppr", "--graph", "rmat:7:4", flag, "0,5",
                            "--walks-per-source", "3", "--length", "4", "--quiet", "--out", str(tmp_path / flag))
        assert code == 0, err
        runs[flag] = (tmp_path / flag / "walks.txt").read_text(), err
    assert runs["--sources"][0] == runs["--start"][0] and runs["--start"][1] == ""
    assert runs["--sources"][1] == ("gpipe walk ppr: warning: --sources is deprecated, it is now --start; --sources "
                                    "goes in the next release\n")


@pytest.mark.parametrize("algorithm, flags, name", [("metropolis-hastings", [], "metropolis_hastings"),
                                                   ("jump", ["--jump", "0.3"], "with_jump")])
def test_walk_metropolis_hastings_and_jump_run(capsys, cpu_cluster, tmp_path, algorithm, flags, name):
    code, _, err = _run(capsys, cpu_cluster, "walk", algorithm, "--graph", "rmat:7:4", "--length", "5", *flags,
                        "--quiet", "--out", str(tmp_path))
    assert code == 0, err
    assert len(_walks(tmp_path / "walks.txt")) == 128
    summary = read_summary(tmp_path)
    assert summary["status"] == "ok" and summary["walk"]["steps"] > 0
    assert summary["walk"]["algorithm"] == name and summary["parameters"]["algorithm"] == algorithm


def test_walk_deepwalk_weighted_generates_a_weighted_rmat(capsys, cpu_cluster, rmat_7_4, tmp_path):
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--weighted", "--graph", "rmat:7:4", "--length", "5",
                        "--quiet", "--out", str(tmp_path))
    assert code == 0, err
    walks = _walks(tmp_path / "walks.txt")
    assert len(walks) == 128 and all((u, v) in rmat_7_4[True] for w in walks for u, v in zip(w, w[1:]))
    summary = read_summary(tmp_path)
    assert summary["graph"]["weighted"] and summary["parameters"]["weighted"]


def test_walk_weighted_on_a_graph_without_weights_exits_2(capsys, cpu_cluster, generated, tmp_path):
    code, _, err = _run(capsys, cpu_cluster, "walk", "node2vec", "--weighted", "--graph", str(generated[0] / "graph"),
                        "--quiet", "--out", str(tmp_path / "o"))
    assert code == 2 and "'weighted'" in err and "Traceback" not in err
    assert not (tmp_path / "o" / "summary.json").exists()


def test_walk_start_from_a_file(capsys, cpu_cluster, tmp_path):
    starts = tmp_path / "starts.txt"
    starts.write_text("3\n\n17\n")
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", "rmat:7:4", "--start", f"@{starts}",
                        "--walks-per-vertex", "2", "--length", "3", "--quiet", "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert [w[0] for w in _walks(tmp_path / "o" / "walks.txt")] == [3, 17, 3, 17]
    assert read_summary(tmp_path / "o")["parameters"]["start"] == f"@{starts}"


def test_walk_start_with_string_ids(capsys, cpu_cluster, tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("a b\nb c\nc a\nc d\n")
    code, _, err = _run(capsys, cpu_cluster, "walk", "metropolis-hastings", "--graph", str(path), "--start", "d,a",
                        "--length", "4", "--quiet", "--out", str(tmp_path / "o"))
    assert code == 0, err
    walks = (tmp_path / "o" / "walks.txt").read_text().split("\n")
    assert [w.split()[0] for w in walks if w] == ["d", "a"]


def test_start_and_seeds_are_read_as_the_graph_reads_its_ids(capsys, cpu_cluster, tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("007 a\na 1\n1 007\n")  # ids read as strings: '007' is not 7, and '1' is not 1
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", str(path), "--start", "1,007",
                        "--length", "2", "--quiet", "--out", str(tmp_path / "walk"))
    assert code == 0, err
    assert [line.split()[0] for line in (tmp_path / "walk" / "walks.txt").read_text().splitlines()] == ["1", "007"]
    code, _, err = _run(capsys, cpu_cluster, "sample", "neighbor", "--graph", str(path), "--seeds", "1", "--depth", "1",
                        "--quiet", "--out", str(tmp_path / "sample"))
    assert code == 0, err
    assert set(pd.read_parquet(tmp_path / "sample" / "edges.parquet")["src"]) == {"1"}
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", "rmat:7", "--start", "9" * 20,
                        "--quiet", "--out", str(tmp_path / "huge"))
    assert code == 2 and "'start' must hold integer vertex ids of this graph" in err and err.count("\n") == 1


def test_walk_reads_the_weight_column_of_a_csv(capsys, cpu_cluster, tmp_path):
    path = tmp_path / "edges.csv"
    path.write_text("src,dst,w\n0,1,1\n0,2,0\n1,0,1\n2,0,1\n")
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", str(path), "--weight-column", "w",
                        "--weighted", "--directed", "--start", "0", "--walks-per-vertex", "20", "--length", "1",
                        "--quiet", "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert _walks(tmp_path / "o" / "walks.txt") == [[0, 1]] * 20  # never along the edge of weight 0
    assert read_summary(tmp_path / "o")["graph"]["weighted"]


def test_walk_fmt_reads_a_file_whose_extension_says_nothing(capsys, cpu_cluster, tmp_path):
    path = tmp_path / "edges.dat"
    path.write_text("0 1\n1 2\n2 0\n")
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", str(path), "--quiet",
                        "--out", str(tmp_path / "unread"))
    assert code == 2 and "fmt" in err and err.count("\n") == 1
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", str(path), "--fmt", "snap", "--length", "2",
                        "--quiet", "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert len(_walks(tmp_path / "o" / "walks.txt")) == 3


def test_a_file_whose_extension_says_nothing_is_refused_before_connecting_naming_the_flags(capsys, tmp_path):
    path = tmp_path / "edges.dat"
    path.write_text("0 1\n")
    code = main(["walk", "deepwalk", "--graph", str(path), "--out", str(tmp_path / "o"),
                 "--address", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("gpipe: error: 'graph' must end in one of .txt") and err.count("\n") == 1
    assert f"pass --fmt one of 'snap', 'csv', 'parquet', 'npz', 'mtx' to force a format; got {str(path)!r}" in err
    assert "fmt=" not in err


def _negative_weight(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("0 1 0.5\n1 2 -0.5\n")
    return path, f"{path}:2: weight '-0.5' is negative"


def _uint64_ids(tmp_path):
    path = tmp_path / "edges.parquet"
    pd.DataFrame({"src": np.array([1, 2**64 - 1], np.uint64), "dst": np.array([2, 3], np.uint64)}).to_parquet(path)
    return path, f"{path}: column 'src' holds id {2**64 - 1}"


@pytest.mark.parametrize("edges", [_negative_weight, _uint64_ids])
def test_walk_reports_what_is_wrong_in_an_edge_file_in_one_line(capsys, cpu_cluster, tmp_path, edges):
    path, message = edges(tmp_path)
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", str(path), "--quiet",
                        "--out", str(tmp_path / "o"))
    assert code == 2 and err.startswith("gpipe: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_walk_reports_a_malformed_edge_file(capsys, cpu_cluster, tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("0 1\n1 2\n2\n")
    code, _, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", str(path), "--out", str(tmp_path / "o"))
    assert code == 2
    assert err.splitlines()[-1].startswith("gpipe: error: ") and f"{path}:3" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, name", [
    (["--length", "0"], "gpipe: error: '--length' must be a positive integer, got 0\n"),
    (["--graph", "rmat:x"], "'--graph' must be"),
    (["--graph", "rmat:²"], "'--graph' must be"),  # a digit to str.isdigit, not to int
    (["--graph", "rmat:8:4:2"], "'--graph' must be"),
    (["--graph", "no/such/edges.txt"], "no/such/edges.txt"),
    (["--format", "xml"], "--format"),
    (["--seed", "-1"], "'--seed' must be"),
    (["--fmt", "xml"], "--fmt"),
    (["--fmt", "csv"], "'fmt' must be given with an edge file only"),
    (["--weight-column", "w"], "'weight_column' must be given with an edge file only"),
    (["--vertex-order", "rcm"], "--vertex-order"),
])
def test_walk_rejects_bad_flags_before_connecting(capsys, args, name):
    code = main(["walk", "deepwalk", "--graph", "rmat:8", "--out", "never", "--address", "tcp://127.0.0.1:1", *args])
    err = capsys.readouterr().err
    assert code == 2 and name in err and "Traceback" not in err


@pytest.mark.parametrize("args, name", [
    (["node2vec", "--p", "0"], "'--p' must be a positive finite number, got 0"),
    (["node2vec", "--q", "inf"], "'--q' must be a positive finite number, got inf"),
    (["ppr", "--start", "0", "--restart", "1"], "'--restart' must be in [0, 1), got 1.0"),
    (["ppr", "--start", "0", "--walks-per-source", "0"], "'--walks-per-source' must be a positive integer, got 0"),
    (["ppr"], "--start"),
    (["ppr", "--start", "1,,2"], "'--start' must be ID,ID,... with no empty id, got '1,,2'"),
    (["ppr", "--start", "0", "--sources", "1"], "argument --sources: not allowed with argument --start"),
    (["jump", "--jump", "1.5"], "'--jump' must be in [0, 1], got 1.5"),
    (["deepwalk", "--start", "@no/such/starts.txt"], "'--start' must be ID,ID,... or @FILE"),
    (["metropolis-hastings", "--weighted"], "--weighted"),
])
def test_walk_rejects_bad_values_of_each_walk(capsys, args, name):
    algorithm, *flags = args
    code = main(["walk", algorithm, "--graph", "rmat:8", "--out", "never", "--address", "tcp://127.0.0.1:1", *flags])
    err = capsys.readouterr().err
    assert code == 2 and name in err and "Traceback" not in err


def test_demo_runs_on_its_own_local_cluster(tmp_path):
    out = tmp_path / "demo"
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("GPIPE_SCHEDULER_FILE", None)
    env.pop("GPIPE_SCHEDULER_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-m", "gpipe", "demo", "--scale", "8", "--length", "5", "--out", str(out), "--workers", "1",
         "--device", "cpu", "--quiet"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len((out / "walks.txt").read_text().splitlines()) == 256
    summary = read_summary(out)
    assert summary["status"] == "ok" and summary["command"] == "demo"
    assert summary["graph"]["num_vertices"] == 256 and summary["cluster"]["device"] == "cpu"
    assert len(summary["cluster"]["workers"]) == 1 and summary["walk"]["steps"] > 0
    assert "steps/s" in done.stdout and str(out / "walks.txt") in done.stdout and "dashboard" in done.stdout


def test_walk_multidimensional_writes_sampled_edges(capsys, cpu_cluster, rmat_7_4, tmp_path):
    code, _, err = _run(capsys, cpu_cluster, "walk", "multidimensional", "--graph", "rmat:7:4", "--frontier-size", "8",
                        "--budget", "20", "--instances", "3", "--quiet", "--out", str(tmp_path))
    assert code == 0, err
    edges = pd.read_parquet(tmp_path / "edges.parquet")
    assert edges.groupby("instance").size().tolist() == [20, 20, 20]
    assert set(zip(edges.src, edges.dst)) <= rmat_7_4[False]
    summary = read_summary(tmp_path)
    assert summary["status"] == "ok" and summary["walk"]["edges"] == 60
    assert set(summary["outputs"]) == {"edges", "summary"}


def _update_log(path, rows) -> str:
    frame = pd.DataFrame(rows, columns=["op", "src", "dst", "weight"])
    if str(path).endswith(".csv"):
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path)
    return str(path)


def test_walk_applies_an_update_log_in_rounds_walking_after_each(capsys, cpu_cluster, rmat_7_4, tmp_path):
    deleted = sorted((u, v) for u, v in rmat_7_4[True] if u < v)[:40]
    inserted = [(u, 130 + u % 7, 2.5) for u in range(0, 128, 3)]  # to vertices past the last: they are added
    rows = [("delete", u, v, None) for u, v in deleted] + [("insert", u, v, w) for u, v, w in inserted]
    rows += [("update", u, v, 9.0) for u, v, _ in inserted[:5]]
    log = _update_log(tmp_path / "log.parquet", rows)
    code, out, err = _run(capsys, cpu_cluster, "walk", "deepwalk", "--graph", "rmat:7:4", "--weighted",
                          "--updates", log, "--rounds", "3", "--length", "6", "--quiet", "--out", str(tmp_path / "o"))
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    summary = read_summary(tmp_path / "o")
    assert summary["rounds"] == lines and [r["round"] for r in lines] == [1, 2, 3]
    assert sum(r["updates"] for r in lines) == len(rows)
    for r in lines:
        assert r["update_seconds"] > 0 and r["updates_per_second"] == pytest.approx(r["updates"] / r["update_seconds"])
        assert r["walk_seconds"] > 0 and r["steps_per_second"] == pytest.approx(r["steps"] / r["walk_seconds"])
    assert lines[-1]["num_vertices"] == 137
    final = (rmat_7_4[True] - {e for u, v in deleted for e in ((u, v), (v, u))}) \
        | {e for u, v, _ in inserted for e in ((u, v), (v, u))}
    assert lines[-1]["num_edges"] == len(final)
    walks = _walks(tmp_path / "o" / "walks.txt")  # the last round's: on the graph the whole log leaves
    assert len(walks) == 137 and all((u, v) in final for w in walks for u, v in zip(w, w[1:]))
    assert summary["parameters"]["updates"] == log and summary["parameters"]["rounds"] == 3


def test_a_bad_update_log_names_its_row_and_leaves_no_output(capsys, cpu_cluster, tmp_path):
    log = _update_log(tmp_path / "log.csv", [("insert", 0, 200, 1.0), ("insert", 1, 2, 1.0),
                                             ("delete", 0, 200, None), ("delete", 0, 200, None)])
    code, _, err = _run(capsys, cpu_cluster, "walk", "ppr", "--graph", "rmat:7:4", "--start", "0",
                        "--updates", log, "--rounds", "2", "--quiet", "--out", str(tmp_path / "o"))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"{log}: round 2: update 3: cannot delete edge (0, 200): it is not in the graph" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("rows, flags, message", [
    ([("insert", 0, 1, 1.0), ("insert", 0, 2, -1.0)], [], "log.csv: update 1: the weight of an insert must be "
                                                         "a positive finite number, got -1.0"),
    ([("insert", 0, 1, 1.0), ("remove", 0, 1, None)], [], "log.csv: update 1: 'op' must be one of"),
    ([("insert", 0, 1, 1.0), ("insert", None, 1, 1.0)], [], "log.csv: update 1: 'src' must hold non-negative "
                                                           "integer vertex ids, got nan"),
    ([("insert", 0, 1, 1.0)], ["--rounds", "2"], "'rounds' must be at most the log's 1 updates, got 2"),
    ([("insert", 0, 1, 1.0)], ["--algorithm", "metropolis-hastings"], "'updates' must be given with deepwalk, "
                                                                      "node2vec, jump, ppr"),
    (None, ["--rounds", "2"], "'rounds' must be given with --updates only"),
])
def test_walk_refuses_a_bad_update_log_before_connecting(capsys, tmp_path, rows, flags, message):
    algorithm = flags[1] if flags[:1] == ["--algorithm"] else "deepwalk"
    flags = [] if flags[:1] == ["--algorithm"] else flags
    updates = [] if rows is None else ["--updates", _update_log(tmp_path / "log.csv", rows)]
    code = main(["walk", algorithm, "--graph", "rmat:7", "--out", str(tmp_path / "o"), "--address",
                 "tcp://127.0.0.1:1", *updates, *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_sample_neighbor_writes_edges_of_the_graph_at_most_each_depths_fanout_per_vertex(capsys, cpu_cluster, rmat_7_4,
                                                                                        tmp_path):
    code, out, err = _run(capsys, cpu_cluster, "sample", "neighbor", "--graph", "rmat:7:4", "--seeds", "0,1,2",
                          "--fanouts", "3,1", "--quiet", "--out", str(tmp_path))
    assert code == 0, err
    edges = pd.read_parquet(tmp_path / "edges.parquet")
    assert list(edges.columns) == ["instance", "depth", "src", "dst"] and len(edges) > 0
    assert set(zip(edges.src, edges.dst)) <= rmat_7_4[False]
    per_vertex = edges.groupby(["instance", "depth", "src"]).size().groupby("depth").max()
    assert set(edges.instance) <= {0, 1, 2} and per_vertex.to_dict() == {0: 3, 1: 1}
    summary = read_summary(tmp_path)
    assert summary["status"] == "ok" and summary["command"] == "sample"
    assert summary["sample"]["edges"] == len(edges) and summary["sample"]["algorithm"] == "neighbor"
    assert summary["parameters"]["seeds"] == "0,1,2" and summary["parameters"]["fanouts"] == [3, 1]
    assert set(summary["outputs"]) == {"edges", "summary"}
    assert set(summary["timings"]) == {"connect", "graph", "compile", "sample", "write", "total"}
    assert "edges/s" in out


@pytest.mark.parametrize("algorithm, flags", [("forest-fire", ["--p-forward", "0.5"]),
                                              ("snowball", ["--max-per-vertex", "3"]),
                                              ("layer", ["--layer-size", "5"])])
def test_sample_forest_fire_snowball_and_layer_run(capsys, cpu_cluster, rmat_7_4, tmp_path, algorithm, flags):
    code, _, err = _run(capsys, cpu_cluster, "sample", algorithm, "--graph", "rmat:7:4", "--seeds", "0,3", *flags,
                        "--depth", "2", "--quiet", "--out", str(tmp_path))
    assert code == 0, err
    edges = pd.read_parquet(tmp_path / "edges.parquet")
    assert set(zip(edges.src, edges.dst)) <= rmat_7_4[False]
    summary = read_summary(tmp_path)
    assert summary["status"] == "ok" and summary["parameters"]["algorithm"] == algorithm
    assert summary["sample"]["algorithm"] == algorithm.replace("-", "_")


@pytest.mark.parametrize("algorithm, flags, per_instance", [("random-node", ["--n", "40", "--by-degree"], None),
                                                            ("random-edge", ["--m", "7"], 7)])
def test_sample_random_nodes_and_edges_need_no_seeds(capsys, cpu_cluster, rmat_7_4, tmp_path, algorithm, flags,
                                                      per_instance):
    code, _, err = _run(capsys, cpu_cluster, "sample", algorithm, "--graph", "rmat:7:4", "--instances", "3", *flags,
                        "--quiet", "--out", str(tmp_path))
    assert code == 0, err
    edges = pd.read_parquet(tmp_path / "edges.parquet")
    assert set(zip(edges.src, edges.dst)) <= rmat_7_4[False] and set(edges.instance) == {0, 1, 2}
    if per_instance:
        assert edges.groupby("instance").size().eq(per_instance).all()
    assert read_summary(tmp_path)["sample"]["instances"] == 3


@pytest.mark.parametrize("args, name", [
    (["neighbor", "--fanouts", "0"], "'--fanouts' must be a non-empty list of positive ints or -1"),
    (["neighbor", "--fanouts", "2,x"], "'--fanouts' must be a non-empty list of positive ints or -1"),
    (["layer", "--layer-size", "0"], "'--layer-size' must be a positive integer, got 0"),
    (["neighbor", "--depth", "0"], "'--depth' must be a positive integer, got 0"),
    (["forest-fire", "--p-forward", "1"], "'--p-forward' must be in [0, 1), got 1.0"),
    (["snowball", "--max-per-vertex", "x"], "'--max-per-vertex' must be an integer, got 'x'"),
    (["neighbor", "--seeds", "1,,2"], "'--seeds' must be ID,ID,... with no empty id"),
])
def test_sample_rejects_bad_values_before_connecting(capsys, args, name):
    algorithm, *flags = args
    code = main(["sample", algorithm, "--graph", "rmat:8", "--seeds", "0", "--out", "never",
                 "--address", "tcp://127.0.0.1:1", *flags])
    err = capsys.readouterr().err
    assert code == 2 and name in err and "Traceback" not in err


def test_sample_needs_seeds(capsys):
    code = main(["sample", "snowball", "--graph", "rmat:8", "--out", "never", "--address", "tcp://127.0.0.1:1"])
    assert code == 2 and "--seeds" in capsys.readouterr().err


def _walk_into(capsys, cluster, out, seed, *flags):
    return _run(capsys, cluster, "walk", "deepwalk", "--graph", "rmat:7:4", "--length", "3", "--seed", str(seed),
                "--quiet", "--out", str(out), *flags)


def test_a_rerun_into_an_earlier_run_is_refused_before_connecting(capsys, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text('{"status": "ok"}\n')
    code = main(["walk", "deepwalk", "--graph", "rmat:7", "--out", str(out), "--address", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2 and "'out' must be a new or empty folder unless overwrite is set" in err and "Traceback" not in err
    assert tree(out) == {"summary.json": b'{"status": "ok"}\n'}


def test_overwrite_replaces_the_whole_earlier_run(capsys, cpu_cluster, tmp_path):
    out = tmp_path / "run"
    assert _walk_into(capsys, cpu_cluster, out, 1, "--format", "both")[0] == 0
    code, _, err = _walk_into(capsys, cpu_cluster, out, 2, "--overwrite")
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [".gpipe-files.json", "summary.json", "walks.txt"]  # no walks.parquet
    summary = read_summary(out)
    assert summary["parameters"]["seed"] == 2 and summary["outputs"]["corpus"] == str(out / "walks.txt")
    assert not list(tmp_path.glob(".*tmp*"))


def test_an_interrupted_rerun_says_so_in_one_line_and_leaves_the_earlier_run_whole(capsys, cpu_cluster, tmp_path, monkeypatch):
    out = tmp_path / "run"
    assert _walk_into(capsys, cpu_cluster, out, 1, "--format", "both")[0] == 0
    before = tree(out)

    def interrupted(self, path, overwrite=False):
        raise KeyboardInterrupt  # after walks.txt was written, before walks.parquet and summary.json

    monkeypatch.setattr(gpipe.walks.WalkResult, "to_parquet", interrupted)
    code, _, err = _walk_into(capsys, cpu_cluster, out, 2, "--format", "both", "--overwrite")
    assert code == 128 + signal.SIGINT  # as a shell reports a command that Ctrl-C stopped
    assert err.splitlines()[-1] == "gpipe: interrupted (Ctrl-C); unfinished outputs were removed"
    assert "Traceback" not in err
    assert tree(out) == before and read_summary(out)["parameters"]["seed"] == 1
    assert not list(tmp_path.glob(".*tmp*"))


def _a_file(tmp_path):
    (tmp_path / "run").write_text("")
    return tmp_path / "run"


def _under_a_file(tmp_path):
    return _a_file(tmp_path) / "run"


def _read_only(tmp_path):
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o555)
    return folder / "run"


@pytest.mark.parametrize("out, problem", [
    (_a_file, "a file of that name exists"),
    (_under_a_file, "run' is a file, not a folder"),
    pytest.param(lambda tmp_path: "/sys/gpipe-run", "Operation not permitted",
                 marks=pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs Linux's read-only /sys")),
    pytest.param(_read_only, "Permission denied",
                 marks=pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")),
])
def test_an_out_that_cannot_be_written_is_refused_before_connecting(capsys, tmp_path, out, problem):
    code = main(["walk", "deepwalk", "--graph", "rmat:7", "--out", str(out(tmp_path)), "--address", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("gpipe: error: 'out' must be a folder") and problem in err
    assert err.count("\n") == 1 and "tmp" not in err.replace(str(tmp_path), "")
    assert not list(tmp_path.glob(".*tmp*"))


def test_an_error_message_of_several_lines_is_printed_on_one(capsys, monkeypatch):
    def failing(args):
        raise gpipe.errors.GpipeError("the first line\nand the second")

    monkeypatch.setattr(_parser, "_info", failing)  # the command the parser sends "info" to
    assert main(["info"]) == 2
    assert capsys.readouterr().err == "gpipe: error: the first line and the second\n"


def test_an_error_raised_on_the_workers_of_a_local_cluster_is_printed_once_in_one_line(capfd, tmp_path):
    """The workers share the command's terminal: Dask's log of the failed task is not printed as well."""
    cut = tmp_path / "edges.txt.gz"
    cut.write_bytes(gzip.compress(b"0 1\n1 2\n2 3\n" * 100)[:40])
    code = main(["walk", "deepwalk", "--graph", str(cut), "--out", str(tmp_path / "out"), "--workers", "1",
                 "--device", "cpu", "--quiet"])
    err = capfd.readouterr().err
    assert code == 2 and f"gpipe: error: {cut}:" in err and "not readable as .gz data" in err
    assert "Traceback" not in err and "Compute Failed" not in err, err


def test_a_terminated_run_removes_its_unfinished_outputs(tmp_path):
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPIPE_SCHEDULER")}
    run = subprocess.Popen(
        [sys.executable, "-m", "gpipe", "walk", "deepwalk", "--graph", "rmat:11", "--length", "1000", "--out", str(out),
         "--workers", "1", "--device", "cpu", "--quiet"],
        cwd=tmp_path, env=dict(env, PYTHONPATH=REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while run.poll() is None and time.monotonic() < deadline:  # until it writes into its temporary --out
            if any(os.listdir(folder) for folder in tmp_path.glob(".run.tmp-*")):
                break
            time.sleep(0.01)
        assert run.poll() is None, "the walk ended before it could be terminated"
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 128 + signal.SIGTERM, err
    assert err.splitlines()[-1] == "gpipe: terminated (SIGTERM); unfinished outputs were removed"
    assert os.listdir(tmp_path) == []


def test_overwrite_keeps_a_folder_that_holds_other_files(capsys, cpu_cluster, tmp_path):
    out = tmp_path / "run"
    (out / "walks.parquet").mkdir(parents=True)  # names gpipe writes, holding a file it does not
    (out / "summary.json").write_text("{}\n")
    (out / "walks.parquet" / "notes.md").write_text("my notes\n")
    before = tree(out)
    code, _, err = _walk_into(capsys, cpu_cluster, out, 1, "--overwrite")
    assert code == 2 and "'out' must hold only gpipe's output to be overwritten" in err
    assert "'walks.parquet/notes.md' is not a file gpipe writes there" in err and tree(out) == before


def test_overwrite_keeps_a_users_own_summary_and_walks_and_names_them(capsys, tmp_path):
    """Files of the names gpipe writes, but not written by gpipe (no run listed them): the user's, kept."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text('{"mine": true}\n')
    (out / "walks.txt").write_text("my walks\n")
    before = tree(out)
    code = main(["walk", "deepwalk", "--graph", "rmat:7", "--out", str(out), "--overwrite",
                 "--address", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "'out' must hold only gpipe's output to be overwritten" in err
    assert "'summary.json' is not a file gpipe wrote there" in err and tree(out) == before


# -- gpipe mine ----------------------------------------------------------------------------------------------------
def test_gpipe_mine_cliques_and_match_print_their_counts_and_write_the_embeddings(capsys, cpu_cluster, tmp_path):
    code, out, _ = _run(capsys, cpu_cluster, "mine", "cliques", "--graph", "rmat:8", "--k", "4", "--quiet")
    summary = json.loads(out)
    with cpu_cluster.as_current():
        g = gpipe.generators.rmat(8, mode="replicated")
        cliques = gpipe.mining.list_cliques(g, 4)
        paths = gpipe.mining.match(g, [(0, 1), (1, 2)], induced=True, embeddings=True)
    assert code == 0 and (summary["algorithm"], summary["count"]) == ("cliques", cliques.count) and cliques.count > 0
    assert summary["stats"]["embeddings"][-1] == cliques.count and summary["graph"]["num_vertices"] == 256
    code, _, _ = _run(capsys, cpu_cluster, "mine", "cliques", "--graph", "rmat:8", "--k", "4", "--quiet",
                      "--embeddings", str(tmp_path / "cliques.parquet"), "--summary", str(tmp_path / "c.json"))
    assert code == 0 and json.loads((tmp_path / "c.json").read_text())["outputs"]["embeddings"].endswith(
        "cliques.parquet")
    np.testing.assert_array_equal(pd.read_parquet(tmp_path / "cliques.parquet").to_numpy(), cliques.embeddings)
    assert {p.name for p in (tmp_path / "cliques.parquet").iterdir()} == {  # a folder, a file per block, their list
        ".gpipe-files.json", *(f"embeddings-{b:06d}.parquet" for b in range(len(cliques._listed.blocks)))}
    code, out, _ = _run(capsys, cpu_cluster, "mine", "match", "--graph", "rmat:8", "--pattern", "a-b,b-c",
                        "--induced", "--quiet", "--embeddings", str(tmp_path / "paths.parquet"))
    assert code == 0 and json.loads(out)["count"] == paths.count > 0
    listed = pd.read_parquet(tmp_path / "paths.parquet")
    assert list(listed.columns) == ["a", "b", "c"]
    np.testing.assert_array_equal(listed.to_numpy(), paths.embeddings)


def test_gpipe_mine_refuses_an_embeddings_folder_holding_other_files_before_any_work(capsys, cpu_cluster,
                                                                                     tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.md").write_text("my notes\n")
    code, _, err = _run(capsys, cpu_cluster, "mine", "cliques", "--graph", "rmat:8", "--k", "3", "--quiet",
                        "--embeddings", str(tmp_path / "mine"), "--summary", str(tmp_path / "c.json"))
    assert code == 2 and "'embeddings' must be a new or empty folder" in err and "notes.md" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"] and tree(tmp_path / "mine") == {
        "notes.md": b"my notes\n"}
    code, _, err = _run(capsys, cpu_cluster, "mine", "cliques", "--graph", "rmat:8", "--k", "3", "--quiet",
                        "--overwrite", "--embeddings", str(tmp_path / "mine"))  # not even with --overwrite
    assert code == 2 and "must hold only gpipe's output to be overwritten" in err and "notes.md" in err


def test_gpipe_mine_overwrite_replaces_an_earlier_runs_embeddings(capsys, cpu_cluster, tmp_path):
    folder = str(tmp_path / "cliques")
    for k, overwrite in ((3, ()), (4, ("--overwrite",))):
        code, out, err = _run(capsys, cpu_cluster, "mine", "cliques", "--graph", "rmat:8", "--k", str(k), "--quiet",
                              *overwrite, "--embeddings", folder)
        assert code == 0, err
        assert len(pd.read_parquet(folder).columns) == k and len(pd.read_parquet(folder)) == json.loads(out)["count"]
    code, _, err = _run(capsys, cpu_cluster, "mine", "cliques", "--graph", "rmat:8", "--k", "3", "--quiet",
                        "--embeddings", folder)
    assert code == 2 and "'embeddings' must be a new or empty folder unless overwrite is set" in err


def test_gpipe_mine_fpm_reads_a_labeled_graph_and_writes_the_patterns(capsys, cpu_cluster, tmp_path):
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (3, 4), (4, 5)]
    labels = [0, 1, 0, 1, 0, 1]
    graph = tmp_path / "g.graph"
    degree = np.bincount(np.ravel(edges))
    graph.write_text(f"t 6 {len(edges)}\n" + "".join(f"v {v} {label} {degree[v]}\n" for v, label in enumerate(labels))
                     + "".join(f"e {u} {v}\n" for u, v in edges))
    code, _, _ = _run(capsys, cpu_cluster, "mine", "fpm", "--graph", str(graph), "--max-edges", "3",
                      "--min-support", "2", "--quiet", "--summary", str(tmp_path / "s.json"),
                      "--patterns", str(tmp_path / "p.parquet"))
    summary = json.loads((tmp_path / "s.json").read_text())
    with cpu_cluster.as_current():
        g = gpipe.from_edges(pd.DataFrame(edges, columns=["src", "dst"]), mode="replicated")
        want = gpipe.mining.frequent_patterns(g, 3, 2, labels=labels).patterns
    assert code == 0 and len(want) > 0
    assert [(p["code"], p["support"]) for p in summary["patterns"]] == list(zip(want.code, want.support))
    written = pd.read_parquet(tmp_path / "p.parquet")
    assert written.code.tolist() == want.code.tolist() and written.labels.map(tuple).tolist() == want.labels.tolist()
    code, out, _ = _run(capsys, cpu_cluster, "mine", "fpm", "--graph", "rmat:7", "--max-edges", "2",
                        "--min-support", "3", "--random-labels", "3", "--quiet")
    assert code == 0 and json.loads(out)["stats"]["max_edges"] == 2


@pytest.mark.parametrize("args, message", [
    (["cliques", "--graph", "rmat:6", "--k", "2"], "'--k' must be an integer >= 3, got 2"),
    (["match", "--graph", "rmat:6", "--pattern", "0-1,2"], "'--pattern' must be edges such as 0-1,1-2,2-0, got '0-1,2'"),
    (["fpm", "--graph", "rmat:6", "--max-edges", "0", "--min-support", "1"],
     "'--max-edges' must be a positive integer, got 0"),
    (["fpm", "--graph", "rmat:6", "--max-edges", "5", "--min-support", "1"],
     "'--max-edges' must be an integer <= 4, got 5"),
    (["fpm", "--graph", "rmat:6", "--max-edges", "2", "--min-support", "0"],
     "'--min-support' must be a positive integer, got 0"),
    (["fpm", "--graph", "rmat:6", "--max-edges", "2", "--min-support", "1"],
     "'labels' must come with the graph: give --random-labels L or a t/v/e graph"),
    (["cliques", "--graph", "rmat:6", "--k", "3", "--device-budget", "big"],
     "'--device-budget' must be a byte count such as 1000000 or '4 GB', got 'big'"),
    (["cliques", "--graph", "rmat:6", "--k", "3", "--host-budget", "1e400"],
     "'--host-budget' must be a byte count such as 1000000 or '4 GB', got '1e400'"),
])
def test_gpipe_mine_refuses_bad_input_by_name(capsys, args, message):
    code = main(["mine", *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err


@pytest.mark.parametrize("pattern, message", [
    ("0-0", "'pattern' must have no self-loops, got [(0, 0)]"),
    ("0-1,2-3", "'pattern' must be connected"),
    ("0-1,1-a", "'pattern' vertices must be of one kind that sorts (all integers or all strings), got 0 and 'a'"),
])
def test_gpipe_mine_match_refuses_a_bad_pattern_before_connecting(capsys, pattern, message):
    code = main(["mine", "match", "--graph", "rmat:6", "--pattern", pattern, "--address", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err


def test_warmup_compiles_here_and_prints_its_summary(capsys, monkeypatch):
    monkeypatch.delenv("GPIPE_SCHEDULER_FILE", raising=False)
    monkeypatch.delenv("GPIPE_SCHEDULER_ADDRESS", raising=False)
    assert main(["warmup", "--device", "cpu"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["device"] == "cpu" and report["kernels"] == len(gpipe.kernels.declared()) + sum(
        k.templated for k in gpipe.kernels.declared())
    assert f"compiled {report['kernels']}/{report['kernels']} " in err


@pytest.mark.parametrize("flags, message", [
    (["--address", "x"], "gpipe: error: 'address' must be a scheduler address such as tcp://HOST:PORT, got 'x': "),
    (["--scheduler-file", "/typo"], "gpipe: error: 'scheduler_file' must be the scheduler file of a running cluster, "
                                    "got '/typo': no such file"),
])
def test_warmup_on_a_cluster_that_is_not_there_says_so_at_once_in_one_line(capsys, flags, message):
    started = time.monotonic()
    assert main(["warmup", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert time.monotonic() - started < 5


def test_warmup_on_a_cluster_compiles_on_every_worker(capsys, cpu_cluster):
    code, out, _ = _run(capsys, cpu_cluster, "warmup")
    assert code == 0
    workers = json.loads(out)["workers"]
    assert set(workers) == set(cpu_cluster.scheduler_info()["workers"]) and len(workers) == 2
    assert all(w["device"] == "cpu" and w["kernels"] > 0 and w["calls_seconds"] > 0 for w in workers.values())
    with pytest.raises(gpipe.GpipeError, match="pass neither 'device' nor 'progress' with a client"):
        gpipe.warmup(cpu_cluster, device="gpu")
