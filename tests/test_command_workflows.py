"""The ``gpipe walk|sample|mine|count`` commands are the workflows ``walk``, ``sample``, ``mine`` and ``count`` with
flags: a flag is a key of the workflow's config, checked by the one loader under the one rule (the same error but for
the name, the flag's or the key's), and a command's summary is what ``gpipe run`` gives for the same config."""

import json

import pytest
import yaml

from gpipe.cli import main

NOWHERE = ["--address", "tcp://127.0.0.1:1"]  # a cluster that is not there: the errors come before connecting


def _error(capsys, argv) -> str:
    """The one line ``gpipe`` prints for ``argv``, from its message on (after ``PROG: error: ``)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.split(": error: ", 1)[1]


def _config(tmp_path, config: dict) -> str:
    path = tmp_path / f"{config['workflow']}-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


# command, algorithm, the flags it needs, the same as keys, then the bad flag, its key and its value as text and in
# YAML
BAD = [
    ("walk", "deepwalk", [], {}, "--walks-per-vertex", "walks_per_vertex", "0", 0),
    ("walk", "node2vec", [], {}, "--p", "p", "-1", -1),
    ("walk", "ppr", [], {}, "--start", "start", "1,,2", "1,,2"),
    ("walk", "deepwalk", [], {}, "--format", "format", "xml", "xml"),
    ("sample", "neighbor", ["--seeds", "0"], {"seeds": [0]}, "--fanouts", "fanouts", "0", 0),
    ("sample", "forest-fire", ["--seeds", "0"], {"seeds": [0]}, "--p-forward", "p_forward", "1", 1),
    ("sample", "snowball", ["--seeds", "0"], {"seeds": [0]}, "--depth", "depth", "x", "x"),
    ("mine", "cliques", [], {}, "--k", "k", "2", 2),
    ("mine", "fpm", ["--min-support", "1"], {"min_support": 1}, "--max-edges", "max_edges", "5", 5),
    ("mine", "cliques", ["--k", "3"], {"k": 3}, "--device-budget", "device_budget", "big", "big"),
    ("count", "estimate", ["--query", "q"], {"query": "q"}, "--samples", "samples", "0", 0),
    ("count", "estimate", ["--query", "q"], {"query": "q"}, "--alpha", "alpha", "0", 0),
    ("count", "estimate", ["--query", "q"], {"query": "q"}, "--method", "method", "exact", "exact"),
]


@pytest.mark.parametrize("command, algorithm, needed, needed_keys, flag, key, text, value", BAD,
                         ids=[f"{row[0]}-{row[1]}-{row[4]}" for row in BAD])
def test_a_bad_flag_and_the_same_bad_key_in_a_config_file_give_the_same_error(
        capsys, tmp_path, command, algorithm, needed, needed_keys, flag, key, text, value):
    out = [] if command == "mine" else ["--out", str(tmp_path / "never")]
    by_flag = _error(capsys, [command, algorithm, "--graph", "rmat:8", *out, *needed, flag, text, *NOWHERE])
    config = {"workflow": command, "algorithm": algorithm, "graph": {"path": "rmat:8"}, **needed_keys, key: value}
    if out:
        config["output"] = str(tmp_path / "never")
    by_key = _error(capsys, ["run", _config(tmp_path, config), *NOWHERE])
    assert by_flag.startswith(f"'{flag}' must ") and by_key.startswith(f"'{key}' must ")
    assert by_flag.replace(f"'{flag}'", "NAME") == by_key.replace(f"'{key}'", "NAME")


def test_an_unknown_key_in_a_commands_config_names_the_keys_it_takes(capsys, tmp_path):
    config = {"workflow": "walk", "algorithm": "deepwalk", "graph": {"path": "rmat:8"}, "p": 0.5, "output": "o"}
    error = _error(capsys, ["run", _config(tmp_path, config), *NOWHERE])
    assert error.startswith(f"{tmp_path / 'walk-0.yaml'}: unknown key 'p': the config takes ")
    assert "walks_per_vertex" in error and "length" in error


def _timeless(summary: dict) -> dict:
    """``summary`` without what differs from run to run: times, rates, where the outputs went, the command line."""
    if isinstance(summary, dict):
        return {k: _timeless(v) for k, v in summary.items() if "second" not in k and k not in (
            "timings", "outputs", "command_line", "out", "summary")}
    return [_timeless(v) for v in summary] if isinstance(summary, list) else summary


def _labeled_graph(tmp_path) -> tuple[str, str]:
    graph, query = tmp_path / "g.graph", tmp_path / "q.graph"
    graph.write_text("t 4 4\nv 0 0 2\nv 1 0 2\nv 2 1 3\nv 3 1 1\ne 0 1\ne 1 2\ne 2 0\ne 2 3\n")
    query.write_text("t 3 2\nv 0 0 1\nv 1 0 2\nv 2 1 1\ne 0 1\ne 1 2\n")
    return str(graph), str(query)


# command, algorithm, flags and the same config's keys (the graph and the output apart)
SAME = [
    ("walk", "node2vec", ["--length", "3", "--p", "0.5", "--start", "0,5", "--seed", "7"],
     {"length": 3, "p": 0.5, "start": "0,5", "seed": 7}),
    ("sample", "neighbor", ["--seeds", "0,1,2", "--fanouts", "3,1", "--seed", "4"],
     {"seeds": "0,1,2", "fanouts": [3, 1], "seed": 4}),
    ("mine", "cliques", ["--k", "3"], {"k": 3}),
    ("count", "exact", [], {}),
]


@pytest.mark.parametrize("command, algorithm, flags, keys", SAME, ids=[row[0] for row in SAME])
def test_each_command_is_the_workflow_of_its_name_with_flags(capsys, cpu_cluster, tmp_path, command, algorithm,
                                                             flags, keys):
    cluster = ["--address", cpu_cluster.scheduler.address, "--device", "cpu"]
    graph = "rmat:7:4"
    if command == "count":
        graph, query = _labeled_graph(tmp_path)
        flags, keys = ["--query", query], {"query": query}
    summaries = {}
    for way in ("flags", "config"):
        out = tmp_path / way
        where = (["--summary", str(out) + ".json"], {"summary": str(out) + ".json"}) if command == "mine" else \
            (["--out", str(out)], {"output": str(out)})
        if way == "flags":
            code = main([command, algorithm, "--graph", graph, *flags, *where[0], "--quiet", *cluster])
        else:
            config = {"workflow": command, "algorithm": algorithm, "graph": {"path": graph}, "quiet": True, **keys,
                      **where[1]}
            code = main(["run", _config(tmp_path, config), *cluster])
        assert code == 0, capsys.readouterr().err
        summaries[way] = json.loads((out / "summary.json" if command != "mine" else tmp_path / f"{way}.json")
                                    .read_text())
    capsys.readouterr()
    assert summaries["flags"]["command_line"].startswith(f"gpipe {command} {algorithm} ")
    assert summaries["config"]["command_line"].startswith("gpipe run ")
    assert _timeless(summaries["flags"]) == _timeless(summaries["config"])
    if command == "walk":
        assert (tmp_path / "flags" / "walks.txt").read_text() == (tmp_path / "config" / "walks.txt").read_text()
