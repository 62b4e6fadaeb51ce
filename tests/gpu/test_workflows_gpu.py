"""The GNN training workflow end to end on a GPU worker: in this process through the loader, and data-parallel on the
workers (torch DDP over nccl) — on the GPU host, where torch is installed (run with -m gpu)."""

import json
import os

import pytest

from gpipe.backend import gpu_problem
from helpers import load_workflow

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)

GNN_TRAINING = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "workflows", "gnn_training")


@pytest.mark.parametrize("on_workers", [False, True])
def test_gnn_training_on_the_gpu_learns_the_planted_communities(gpu_cluster, tmp_path, capsys, on_workers):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    code = load_workflow(GNN_TRAINING).main([
        "--set", f"cluster.address={gpu_cluster.scheduler.address}", "--set", "cluster.device=gpu",
        "--set", "train.epochs=3", "--set", f"train.on_workers={str(on_workers).lower()}", "--set", f"output={out}"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    with open(out / "summary.json") as f:
        training = json.load(f)["training"]
    assert training["mode"] == ("workers" if on_workers else "in_process") and len(training["epochs"]) == 3
    assert training["chance"] < 0.2 and training["accuracy"] > max(0.6, 3 * training["chance"])
    assert training["accuracy"] > training["accuracy_before"] + 0.3
