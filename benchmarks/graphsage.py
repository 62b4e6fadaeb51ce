"""One epoch of 2-layer GraphSAGE through gpipe's PyG-style loader beside PyG's own ``NeighborLoader``.

    python benchmarks/graphsage.py --device gpu --scale 22 --out results/graphsage_rmat22_h100.json
    python benchmarks/graphsage.py --device cpu --scale 12 --out /tmp/graphsage.json

The graph: R-MAT (``--scale``, directed), random 128-float features and
``--classes`` random labels per vertex; the training seeds a random
``--train-fraction`` of the vertices with in-edges. The model: PyG's
``SAGEConv`` 128 -> 256 -> classes (mean aggregation, ReLU between), Adam at
0.01. Both loaders sample the edges into each vertex (``edge_dir='in'``) with
fanouts (25, 10) and batches of 1,024 seeds, shuffled, and hand over PyG's
``Data``: ``gpipe.gnn.pyg.NeighborLoader`` over the gpipe graph (sampled where
the graph is, its features gathered there), PyG's over the same edges in
``edge_index`` (sampled on the CPU, as PyG does, then moved to the GPU the
model is on). Each epoch is timed whole, and split into the time spent waiting
on the loader for the next batch (``sampling_seconds``: its share of the
epoch) and the training steps (synchronized, so the split is true). A warm-up
epoch of ``--warmup-batches`` comes first for each. PyG's loader needs
``pyg-lib`` or ``torch-sparse``; where it cannot run, its record says why.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import environment, rmat_record, write_json
from figures import draw

import gpipe
from gpipe.gnn.pyg import NeighborLoader

FANOUTS = [25, 10]
BATCH = 1024
DIM = 128


def _model(torch, classes: int, device: str):
    from torch_geometric.nn import SAGEConv

    class GraphSAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.second = SAGEConv(DIM, 256), SAGEConv(256, classes)

        def forward(self, x, edge_index):
            return self.second(torch.relu(self.first(x, edge_index)), edge_index)

    torch.manual_seed(0)
    model = GraphSAGE().to(device)
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


def _epoch(torch, loader, classes: int, device: str, most: int | None = None) -> dict:
    """One epoch (or its first ``most`` batches): seconds in all, waiting on the loader, and training."""
    model, optimizer = _model(torch, classes, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    waiting = training = 0.0
    batches = seen = 0
    losses = []
    sync()
    start = time.perf_counter()
    batches_of = iter(loader)
    while most is None or batches < most:
        t0 = time.perf_counter()
        batch = next(batches_of, None)
        if batch is None:
            break
        batch = batch.to(device, non_blocking=True)
        sync()
        t1 = time.perf_counter()
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = torch.nn.functional.cross_entropy(out, batch.y[:batch.batch_size].long())
        loss.backward()
        optimizer.step()
        sync()
        waiting += t1 - t0
        training += time.perf_counter() - t1
        batches += 1
        seen += int(batch.batch_size)
        losses.append(float(loss.detach()))
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "sampling_seconds": waiting, "training_seconds": training,
            "sampling_share": waiting / seconds if seconds else 0.0, "batches": batches, "seeds": seen,
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--scale", type=int, default=22)
    parser.add_argument("--edge-factor", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--train-fraction", type=float, default=0.1)
    parser.add_argument("--warmup-batches", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import torch
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader as PygNeighborLoader

    device = "cuda" if args.device == "gpu" else "cpu"
    report: dict = {}
    with gpipe.connect(n_workers=1, device=args.device, dashboard_address=":0") as client, client.as_current():
        g = gpipe.generators.rmat(scale=args.scale, edge_factor=args.edge_factor, seed=args.seed, directed=True)
        n = g.num_vertices
        rng = np.random.default_rng(args.seed)
        features = rng.random((n, DIM), dtype=np.float32)
        labels = rng.integers(0, args.classes, n)
        local = gpipe.gnn._local.local_graph(g).part  # the CSR (private: a benchmark's baseline only)
        indptr, indices = gpipe.backend.to_host(local.indptr), gpipe.backend.to_host(local.indices)
        src = np.repeat(np.arange(n), np.diff(indptr))
        has_in = np.bincount(indices, minlength=n) > 0
        seeds = rng.permutation(np.flatnonzero(has_in))[:max(BATCH, int(args.train_fraction * has_in.sum()))]
        report = {"benchmark": "graphsage", **environment(client, args.device),
                  "graph": {**rmat_record(args), "weights": None, "directed": True, "vertices": n,
                            "edges": int(indices.shape[0])},
                  "parameters": {"fanouts": FANOUTS, "batch_size": BATCH, "features": DIM, "classes": args.classes,
                                 "seeds": int(seeds.shape[0]), "edge_dir": "in", "model": "SAGEConv 128-256-classes"},
                  "records": []}

        def run(name: str, make) -> None:
            try:
                _epoch(torch, make(), args.classes, device, most=args.warmup_batches)
                record = {"loader": name, **_epoch(torch, make(), args.classes, device)}
            except ImportError as e:  # PyG's loader without its sampling backend
                record = {"loader": name, "error": str(e)}
            report["records"].append(record)
            print(record, flush=True)
            write_json(args.out, report)  # the records so far stand if a later one does not finish

        run("gpipe", lambda: NeighborLoader(g, FANOUTS, input_nodes=seeds, batch_size=BATCH, shuffle=True,
                                            edge_dir="in", features=features, labels=labels))
        data = Data(x=torch.from_numpy(features), y=torch.from_numpy(labels),
                    edge_index=torch.from_numpy(np.stack([src, indices.astype(np.int64)])), num_nodes=n)
        run("pyg", lambda: PygNeighborLoader(data, num_neighbors=FANOUTS, input_nodes=torch.from_numpy(seeds),
                                             batch_size=BATCH, shuffle=True))
    ours, theirs = report["records"]
    if "error" not in ours and "error" not in theirs:
        report["speedup_over_pyg"] = theirs["seconds"] / ours["seconds"]
    write_json(args.out, report)
    print("figure:", draw(report, args.out[:-5] + ".png"))


if __name__ == "__main__":
    main()
