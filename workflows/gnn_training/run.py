"""GraphSAGE training on sampled mini-batches: a batch workflow to copy and adapt.

    python workflows/gnn_training/run.py [config.yaml] [--set key.sub=value ...]
    gpipe run config.yaml [--scheduler-file F] [--set key.sub=value ...]   # config.yaml: workflow: gnn_training

Built like ``workflows/embeddings/run.py``: the config is merged over ``config.yaml``
next to this script, then ``--set`` overrides are applied (values read as YAML), and
the result is checked before connecting (:mod:`gpipe.workflow`). The workflow connects with
:func:`gpipe.connect`, generates a planted-partition graph whose vertices' labels are
their communities and whose features are noisy community centroids, trains a GraphSAGE
model (torch_geometric's ``SAGEConv`` when installed, else the same layer in plain torch)
on mini-batches of :mod:`gpipe.gnn` (in this process, or data-parallel on every worker
with ``train.on_workers``), and writes ``summary.json`` to ``output``: the test accuracy
before training and after each epoch, beside chance. Needs torch (``pip install 'gpipe[gnn]'``).
A bad config, or no torch, exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from itertools import pairwise

import numpy as np
import pandas as pd

import gpipe
from gpipe import workflow
from gpipe.errors import GpipeError, GpipeValueError

DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.yaml")
# The files the workflow writes in its output folder: `overwrite` replaces a folder that holds no other.
OUTPUT_FILES = r"summary\.json"


def _needs_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        raise GpipeError("this workflow trains with PyTorch, which is not installed: `pip install 'gpipe[gnn]'`")


def _number(low: float, high: float | None = None, *, open_low: bool = False):
    """The rule of a number in ``low..high`` (``high`` None: no upper bound; ``open_low``: above ``low``)."""
    def rule(name: str, value):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or value < low or (open_low and value == low) or (high is not None and value > high):
            bounds = f"{'>' if open_low else '>='} {low}" + ("" if high is None else f" and <= {high}")
            raise GpipeValueError(f"'{name}' must be a number {bounds}, got {value!r}")
        return value
    return rule


def _fanouts(name: str, value) -> list:
    if not isinstance(value, list) or not value or not all(
            isinstance(f, int) and not isinstance(f, bool) and (f > 0 or f == -1) for f in value):
        raise GpipeValueError(f"'{name}' must be a non-empty list of positive ints or -1 (every neighbor), "
                              f"got {value!r}")
    return value


_positive = workflow.integer(minimum=1)

# Every key of the config and its rule: gpipe.workflow.RULES but the graph's path and direction (this workflow
# generates its graph), and the workflow's own; a new key is one entry here and one in config.yaml.
_RULES = {
    **{key: rule for key, rule in workflow.RULES.items() if key not in ("graph.path", "graph.directed")},
    "graph.vertices": workflow.integer(minimum=2),
    "graph.communities": workflow.integer(minimum=2),
    "graph.degree": _number(0, open_low=True),
    "graph.mixing": _number(0, 1),
    "graph.seed": workflow.seed,
    "features.dim": _positive,
    "features.noise": _number(0),
    "train.fraction": _number(0, 1, open_low=True),
    "train.fanouts": _fanouts,
    "train.batch_size": _positive,
    "train.hidden": _positive,
    "train.epochs": _positive,
    "train.lr": _number(0, open_low=True),
    "train.seed": workflow.seed,
    "train.on_workers": workflow.boolean,
}

WORKFLOW = workflow.Workflow("gnn_training", __doc__.splitlines()[0], DEFAULTS, _RULES,
                             run=lambda config: _report(_run(config)))
# The script's door (``gpipe run`` calls main): main(argv) -> exit status; the config checked before connecting.
main, load_config, validate_config = WORKFLOW.main, WORKFLOW.load_config, WORKFLOW.validate_config


# -- the data: a planted partition ---------------------------------------------------------------

def planted_partition(vertices: int, communities: int, degree: float, mixing: float, dim: int, noise: float,
                      seed: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Edges, labels and features of a stochastic block model with a community per label.

    ``vertices * degree / 2`` edges: each from a random vertex, to a random vertex of its community, or (with
    probability ``mixing``) to any random vertex. A vertex's features are its community's centroid (standard
    normal, in ``dim`` dimensions) plus Gaussian noise of standard deviation ``noise``.
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, communities, vertices)
    edges = max(1, round(vertices * degree / 2))
    src, dst = rng.integers(0, vertices, edges), rng.integers(0, vertices, edges)
    inside = rng.random(edges) >= mixing
    members = np.argsort(labels, kind="stable")  # the vertices of each community, one run each
    starts = np.searchsorted(labels[members], np.arange(communities + 1))
    community = labels[src[inside]]
    size = starts[community + 1] - starts[community]
    has_members = size > 0
    picks = starts[community] + (rng.random(community.size) * size).astype(np.int64)
    dst[np.flatnonzero(inside)[has_members]] = members[picks[has_members]]
    centroids = rng.standard_normal((communities, dim))
    features = (centroids[labels] + noise * rng.standard_normal((vertices, dim))).astype(np.float32)
    return pd.DataFrame({"src": src, "dst": dst}), labels, features


# -- the model and its training (torch imported here only) -------------------------------------

def _model(in_dim: int, hidden: int, classes: int, layers: int):
    """GraphSAGE with mean aggregation: one layer per hop, ReLU between them."""
    import torch

    try:
        from torch_geometric.nn import SAGEConv
    except ImportError:
        SAGEConv = None

    class Sage(torch.nn.Module):
        """PyG's SAGEConv in plain torch: ``lin_l(mean of the sources) + lin_r(destination)``."""

        def __init__(self, n_in: int, n_out: int):
            super().__init__()
            self.lin_l, self.lin_r = torch.nn.Linear(n_in, n_out), torch.nn.Linear(n_in, n_out, bias=False)

        def forward(self, x: tuple, edge_index):
            h_src, h_dst = x
            src, dst = edge_index
            total = torch.zeros(h_dst.shape[0], h_src.shape[1], dtype=h_src.dtype, device=h_src.device)
            total.index_add_(0, dst, h_src[src])
            count = torch.bincount(dst, minlength=h_dst.shape[0]).clamp(min=1).unsqueeze(1)
            return self.lin_l(total / count) + self.lin_r(h_dst)

    class GraphSAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            widths = [in_dim] + [hidden] * (layers - 1) + [classes]
            conv = SAGEConv if SAGEConv is not None else Sage
            self.convs = torch.nn.ModuleList(conv(a, b) for a, b in pairwise(widths))

        def forward(self, x, blocks: list):
            """``blocks``: per layer, input layer first, ``(edge_index, num_dst_nodes)`` in the layer's local ids."""
            for i, (edge_index, num_dst) in enumerate(blocks):
                x = self.convs[i]((x, x[:num_dst]), edge_index)
                if i < len(blocks) - 1:
                    x = torch.relu(x)
            return x

    return GraphSAGE()


def _inputs(torch, batch, device):
    """A batch's features, labels and per-layer ``(edge_index, num_dst_nodes)`` as torch tensors on ``device``
    (numpy or cupy arrays in; cupy's are taken through the CUDA array interface, not copied to the host)."""
    def tensor(array, dtype):
        return torch.as_tensor(array, device=device).to(dtype)

    blocks = [(torch.stack([tensor(b.src, torch.int64), tensor(b.dst, torch.int64)]), b.num_dst_nodes)
              for b in batch.blocks]
    return tensor(batch.features, torch.float32), tensor(batch.labels, torch.int64), blocks


def train(loader, rank: int, world_size: int, *, model_args: dict, epochs: int, lr: float, seed: int, device: str,
          distributed: bool) -> dict:
    """Train on ``loader``'s mini-batches for ``epochs``: each epoch's mean loss and (rank 0) the weights after it.

    With ``distributed``, one rank of torch DDP (``gpipe.gnn.run_on_workers`` has put the rendezvous in the
    environment): gloo on CPU, nccl on the worker's GPU; the ranks start from the same weights and average their
    gradients at every batch.
    """
    import torch

    device = _torch_device(torch, device)
    torch.manual_seed(seed)
    model = _model(**model_args).to(device)
    if distributed:
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank,
                                             world_size=world_size)
    try:
        net = torch.nn.parallel.DistributedDataParallel(model) if distributed else model
        optimizer = torch.optim.Adam(net.parameters(), lr=lr)
        states, losses = [], []
        for _ in range(epochs):
            net.train()
            total, batches = 0.0, 0
            for batch in loader:
                x, y, blocks = _inputs(torch, batch, device)
                loss = torch.nn.functional.cross_entropy(net(x, blocks), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total, batches = total + float(loss.detach()), batches + 1
            losses.append(total / max(batches, 1))
            if rank == 0:
                states.append({name: value.detach().cpu().clone() for name, value in model.state_dict().items()})
        return {"states": states, "losses": losses}
    finally:
        if distributed:
            torch.distributed.destroy_process_group()


def _torch_device(torch, device: str):
    """The torch device of gpipe's ``device``: this process's current GPU (a dask-cuda worker's own) or the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if device == "gpu" else torch.device("cpu")


def accuracy(g, seeds, state, *, model_args: dict, fanouts, batch_size: int, features, labels, seed: int) -> float:
    """The fraction of ``seeds`` whose label the model with weights ``state`` (None: its initial ones) predicts."""
    import torch

    device = _torch_device(torch, g.device)
    torch.manual_seed(seed)
    model = _model(**model_args).to(device)
    if state is not None:
        model.load_state_dict(state)
    model.eval()
    right = 0
    loader = gpipe.gnn.NeighborLoader(g, seeds, fanouts, batch_size, shuffle=False, seed=seed, features=features,
                                      labels=labels)
    with torch.no_grad():
        for batch in loader:
            x, y, blocks = _inputs(torch, batch, device)
            right += int((model(x, blocks).argmax(1) == y).sum())
    return right / len(seeds)


# -- the run ----------------------------------------------------------------------------------

def _run(config: dict) -> dict:
    """Train and evaluate, write summary.json into ``output`` (whole once the run has succeeded); return the
    summary. Without torch, say what to install before connecting."""
    _needs_torch()
    graph, data, opts = config["graph"], config["features"], config["train"]
    edges, labels, features = planted_partition(graph["vertices"], graph["communities"], graph["degree"],
                                                graph["mixing"], data["dim"], data["noise"], graph["seed"])
    order = np.random.default_rng(graph["seed"]).permutation(graph["vertices"])
    cut = max(1, min(graph["vertices"] - 1, round(opts["fraction"] * graph["vertices"])))
    train_seeds, test_seeds = order[:cut], np.sort(order[cut:])
    model_args = {"in_dim": data["dim"], "hidden": opts["hidden"], "classes": graph["communities"],
                  "layers": len(opts["fanouts"])}
    loader_args = {"fanouts": opts["fanouts"], "batch_size": opts["batch_size"], "seed": opts["seed"],
                   "features": features, "labels": labels}
    train_args = {"model_args": model_args, "epochs": opts["epochs"], "lr": opts["lr"], "seed": opts["seed"]}
    with workflow.Run(config, owned=OUTPUT_FILES, prog="gnn_training") as run:
        g = run.graph(lambda: gpipe.from_edges(edges, partitions=graph["partitions"], num_vertices=graph["vertices"]))
        train_args["device"] = g.device
        started = time.perf_counter()
        if opts["on_workers"]:
            ranks = gpipe.gnn.run_on_workers(train, g, train_seeds, **loader_args,
                                             kwargs=dict(train_args, distributed=True))
        else:
            ranks = [train(gpipe.gnn.NeighborLoader(g, train_seeds, **loader_args), 0, 1, **train_args,
                           distributed=False)]
        seconds = time.perf_counter() - started
        run.lap("train")
        evaluate = dict(model_args=model_args, fanouts=opts["fanouts"], batch_size=opts["batch_size"],
                        features=features, labels=labels, seed=opts["seed"])
        before = accuracy(g, test_seeds, None, **evaluate)
        after = [accuracy(g, test_seeds, state, **evaluate) for state in ranks[0]["states"]]
        run.lap("evaluate")
        return run.finish(training={
            "mode": "workers" if opts["on_workers"] else "in_process",
            "world_size": len(ranks),
            "train_vertices": int(train_seeds.size),
            "test_vertices": int(test_seeds.size),
            "chance": float(np.bincount(labels[test_seeds]).max() / test_seeds.size),
            "accuracy_before": before,
            "accuracy": after[-1],
            "epochs": [{"epoch": e + 1, "loss": float(np.mean([r["losses"][e] for r in ranks])),
                        "test_accuracy": a} for e, a in enumerate(after)],
            "seconds": seconds,
        })


def _report(summary: dict) -> None:
    graph, training = summary["graph"], summary["training"]
    epochs = "  ".join(f"{e['test_accuracy']:.3f}" for e in training["epochs"])
    print(f"gnn_training: GraphSAGE on {graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges, "
          f"{training['mode']} ({training['world_size']} rank(s)), {training['seconds']:.1f} s\n"
          f"  test accuracy  {training['accuracy_before']:.3f} before, then by epoch {epochs} "
          f"(chance {training['chance']:.3f})\n"
          f"  summary        {summary['outputs']['summary']}")


if __name__ == "__main__":
    sys.exit(main())
