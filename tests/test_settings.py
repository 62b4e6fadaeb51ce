"""Every ``gpipe.*`` setting is checked where it is read (``gpipe.config.get``): a bad one is an error naming the
key and the value, never an empty graph or a raw exception further on."""

import re
from pathlib import Path

import dask.config
import pandas as pd
import pytest
import yaml

import gpipe
from gpipe import config
from gpipe.errors import GpipeValueError

PACKAGE = Path(gpipe.__file__).resolve().parent

# a bad value of each setting of gpipe.yaml
BAD = {
    "device": "tpu",
    "partitions-per-worker": 0,
    "exchange": "pigeon",
    "exchange-chunks": 0,
    "graph.chunk-edges": -5,
    "graph.read-bytes": 0,
    "graph.mode": "copy",
    "graph.replicate-fraction": 0.0,
    "memory.device-partitions": 0,
    "memory.schedule": "fifo",
    "memory.read-in-place-below": 2.5,
    "memory.output-limit": -1,
    "memory.sort-budget": "lots",
    "dynamic.dense-fraction": 1.5,
    "mining.ranges": 0,
    "mining.chunk-embeddings": "big",
    "mining.device-budget": -1,
    "mining.host-budget": "1e400",
    "mining.spill-directory": 5,
    "results.transfer": "pigeon",
    "walks.block-size": 0,
    "sampling.block-size": -1,
    "sampling.fused": "yes",
    "sampling.candidate-budget": "lots",
    "kernels.threads-per-block": 2048,
    "cluster.scheduler-file": "",
    "cluster.address": 7,
    "cluster.n-workers": 0,
    "cluster.wait-for-workers": True,
    "cluster.wait-timeout": -1,
}


def _keys(section: dict, prefix: str = "") -> list[str]:
    return [key for name, value in section.items()
            for key in (_keys(value, f"{prefix}{name}.") if isinstance(value, dict) else [f"{prefix}{name}"])]


def test_every_key_of_gpipe_yaml_has_a_rule_and_a_bad_value_here():
    keys = _keys(yaml.safe_load((PACKAGE / "gpipe.yaml").read_text())["gpipe"])
    assert sorted(keys) == sorted(config.RULES) == sorted(BAD)


def test_the_defaults_pass_their_rules():
    for key in config.RULES:
        config.get(key)


@pytest.mark.parametrize("key", sorted(BAD))
def test_a_bad_setting_is_an_error_naming_the_key_and_the_value(key):
    with dask.config.set({f"gpipe.{key}": BAD[key]}), pytest.raises(GpipeValueError) as error:
        config.get(key)
    assert f"'gpipe.{key}' must" in str(error.value) and f"got {BAD[key]!r}" in str(error.value)


def test_a_relative_spill_directory_is_made_absolute_where_the_client_reads_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with dask.config.set({"gpipe.mining.spill-directory": "spill"}):
        assert config.get("mining.spill-directory") == str(tmp_path / "spill")


def test_no_module_reads_a_gpipe_setting_but_through_config_get():
    for path in PACKAGE.rglob("*.py"):
        if path.name != "config.py":
            assert not re.search(r"""dask\.config\.get\(f?["']gpipe\.""", path.read_text()), \
                f"{path.relative_to(PACKAGE)} reads a gpipe.* setting around gpipe.config.get, which checks it"


@pytest.mark.parametrize("key, value, call", [
    ("graph.chunk-edges", -5, lambda: gpipe.generators.rmat(scale=5, seed=1)),
    ("partitions-per-worker", 0, lambda: gpipe.from_edges(pd.DataFrame({"src": [0, 1], "dst": [1, 2]}))),
])
def test_a_bad_setting_builds_no_empty_graph(cpu, key, value, call):
    with dask.config.set({f"gpipe.{key}": value}), pytest.raises(GpipeValueError,
                                                                  match=rf"'gpipe\.{key}' must .*, got {value}"):
        call()


def test_a_walk_block_size_of_zero_is_refused_by_name(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1], "dst": [1, 2]}))
    with dask.config.set({"gpipe.walks.block-size": 0}), pytest.raises(
            GpipeValueError, match=r"'gpipe\.walks\.block-size' must be a positive integer, got 0"):
        gpipe.walks.deepwalk(g, length=3, seed=1)
