"""GNN mini-batch sampling (PGSampler's grid): fused vs per-hop, per-batch latency and sampled edges per second.

    python benchmarks/gnn.py --device gpu --scale 22 --out gnn_rmat22_h200.json
    python benchmarks/gnn.py --device cpu --scale 14 --batch-sizes 1024 --repeat 3 --out gnn_rmat14_cpu2.json

The graph (R-MAT, both directions stored) is built on the cluster and its CSR
gathered once into this process (``gpipe.gnn``'s in-process mode); the seeds
of each batch size are drawn once among the vertices with out-edges. For every
batch size and fanout tuple of PGSampler's grid, in both modes:
``sample_blocks`` alone (``call_ms``: the median of ``--repeat`` calls, each
complete on return), and a ``NeighborLoader`` epoch of ``--batches`` batches
(``loader_ms``: per batch, from its iterator, the next batch prepared while
this one is taken). ``edges_per_second`` counts the sampled edges of the
median call. Per-hop is the bulk-synchronous pipeline of DGL's
``NeighborSampler`` (``fused=False``: per hop a sampling kernel over the
frontier, then a unique numbers the new vertices; the same blocks).
``fused_speedup`` is per-hop / fused ``call_ms``, with its mean
over the grid. ``loader_1024_25_10_ms``: the loader's per-batch time at 1,024 seeds
and (25, 10) (issue 17's latency target), after a warm-up epoch. ``--all-vertices`` adds one epoch of (25, 10) over every vertex
(NextDoor's k-hop: 16.07 s at R-MAT 20 on an H200) of ``--peer-graph`` (the
peers' R-MAT 20, ``gen_rmat.py``'s ``.npz``: ``../shared/gpu/README.md``) or,
without it, of the benchmark's graph, and, where
torch_geometric is installed, its ``NeighborLoader`` runs the same grid on the
same CSR (``pyg_loader_ms``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
from _common import environment, rmat_record, seed_vertices
from figures import draw

import gpipe

BATCH_SIZES = (2048, 4096, 8192, 10240)
FANOUTS = ((10, 10, 10), (15, 15, 15), (20, 20, 20), (25, 10))


def _median_call(g, seeds, fanouts, fused: bool, repeat: int) -> tuple[float, int]:
    """Median seconds of a ``sample_blocks`` call, and its sampled edges."""
    times, edges = [], 0
    for r in range(repeat):
        t0 = time.perf_counter()
        blocks = gpipe.gnn.sample_blocks(g, seeds, list(fanouts), fused=fused, seed=r)
        times.append(time.perf_counter() - t0)
        edges = sum(blocks.num_sampled_edges)
    return statistics.median(times), edges


def _loader_epoch(g, seeds, fanouts, batch_size: int, fused: bool) -> tuple[float, int, int]:
    """Seconds of one loader epoch over ``seeds``, its batches and its sampled edges."""
    loader = gpipe.gnn.NeighborLoader(g, seeds, list(fanouts), batch_size=batch_size, fused=fused, seed=1)
    t0 = time.perf_counter()
    edges = sum(sum(batch.num_sampled_edges) for batch in loader)
    return time.perf_counter() - t0, len(loader), edges


def _pyg_loader(indptr, indices, n: int, seeds, fanouts, batch_size: int, device: str) -> float | None:
    """Seconds per batch of torch_geometric's NeighborLoader over the same CSR, or None where it is not installed."""
    try:  # torch_geometric, and its sampling backend (pyg-lib or torch-sparse) when the loader first samples
        import torch
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader

        src = np.repeat(np.arange(n), np.diff(indptr))
        data = Data(edge_index=torch.from_numpy(np.stack([indices.astype(np.int64), src])), num_nodes=n)
        loader = NeighborLoader(data, num_neighbors=list(fanouts), batch_size=batch_size,
                                input_nodes=torch.from_numpy(seeds), shuffle=True)
        t0 = time.perf_counter()
        batches = 0
        for batch in loader:  # sampled on the CPU, as PyG does; then moved to the GPU the trainer uses
            if device == "gpu":
                batch = batch.to("cuda", non_blocking=True)
            batches += 1
        if device == "gpu":
            torch.cuda.synchronize()
    except ImportError:
        return None
    return (time.perf_counter() - t0) / max(batches, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--edge-factor", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES))
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--batches", type=int, default=20, help="batches of the timed loader epoch")
    parser.add_argument("--pyg-batches", type=int, default=3,
                        help="batches of torch_geometric's loader per grid point (its CPU sampler is slow)")
    parser.add_argument("--all-vertices", action="store_true")
    parser.add_argument("--peer-graph", help="the graph of --all-vertices: a CSR .npz as gen_rmat.py writes")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with gpipe.connect(n_workers=1, device=args.device, dashboard_address=":0") as client, client.as_current():
        device = args.device
        t0 = time.perf_counter()
        g = gpipe.generators.rmat(scale=args.scale, edge_factor=args.edge_factor, seed=args.seed)
        build = time.perf_counter() - t0
        degrees = g.degrees().to_numpy()
        t0 = time.perf_counter()
        gpipe.gnn.sample_blocks(g, [int(np.argmax(degrees))], [2])  # gathers the CSR, compiles the kernel
        fetch = time.perf_counter() - t0
        target = np.unique(seed_vertices(degrees, 1024 * args.batches, args.seed))
        _loader_epoch(g, target, (25, 10), 1024, True)  # warms the loader's stream and its memory pool
        seconds, batches, _ = _loader_epoch(g, target, (25, 10), 1024, True)
        latency_ms = seconds / batches * 1e3
        print(f"loader, 1,024 seeds, (25, 10): {latency_ms:.2f} ms per batch", flush=True)
        rows = []
        for batch_size, fanouts in [(b, f) for b in args.batch_sizes for f in FANOUTS]:
            seeds = np.unique(seed_vertices(degrees, batch_size * args.batches, args.seed))
            row = {"batch_size": batch_size, "fanouts": list(fanouts)}
            for mode, fused in (("fused", True), ("per_hop", False)):
                call, edges = _median_call(g, seeds[:batch_size], fanouts, fused, args.repeat)
                epoch, batches, epoch_edges = _loader_epoch(g, seeds, fanouts, batch_size, fused)
                row[mode] = {"call_ms": call * 1e3, "edges": edges, "edges_per_second": edges / call,
                             "loader_ms": epoch / batches * 1e3, "loader_edges_per_second": epoch_edges / epoch}
            row["fused_speedup"] = row["per_hop"]["call_ms"] / row["fused"]["call_ms"]
            rows.append(row)
            print(f"batch {batch_size} fanouts {fanouts}: fused {row['fused']['call_ms']:.2f} ms, per-hop "
                  f"{row['per_hop']['call_ms']:.2f} ms ({row['fused_speedup']:.2f}x), loader "
                  f"{row['fused']['loader_ms']:.2f} ms/batch", flush=True)
        record = {"benchmark": "gnn", **environment(client, device), "graph": {**rmat_record(args), "weights": None},
                  "graph_seconds": build, "fetch_and_compile_seconds": fetch, "repeat": args.repeat,
                  "loader_batches": args.batches, "loader_1024_25_10_ms": latency_ms, "grid": rows,
                  "mean_fused_speedup": statistics.mean(r["fused_speedup"] for r in rows)}
        _save(record, args.out)  # the grid stands even if the baseline below does not finish
        local = gpipe.gnn._local.local_graph(g).part  # the CSR gathered above (private: a benchmark's baseline only)
        indptr, indices = gpipe.backend.to_host(local.indptr), gpipe.backend.to_host(local.indices)
        pyg = {f"{b}-{'-'.join(map(str, f))}": _pyg_loader(indptr, indices, g.num_vertices,
                                                            np.unique(seed_vertices(degrees, b * args.pyg_batches,
                                                                                    args.seed)), f, b, device)
               for b in args.batch_sizes for f in FANOUTS}
        record["pyg_loader_ms"] = None if None in pyg.values() else {k: v * 1e3 for k, v in pyg.items()}
        if args.all_vertices:
            peer = g if args.peer_graph is None else gpipe.read_edges(args.peer_graph, directed=True)
            everyone = np.arange(peer.num_vertices)
            gpipe.gnn.sample_blocks(peer, everyone[:1], [2])  # gathers the CSR
            seconds, batches, edges = _loader_epoch(peer, everyone, (25, 10), max(args.batch_sizes), True)
            record["all_vertices_25_10"] = {"graph": args.peer_graph or "the grid's", "vertices": peer.num_vertices,
                                            "arcs": peer.num_edges, "seconds": seconds, "batches": batches,
                                            "edges": edges, "nextdoor_rmat20_h200_seconds": 16.07}
            print(f"all {peer.num_vertices:,} vertices, (25, 10): {seconds:.2f} s", flush=True)
    _save(record, args.out)


def _save(record: dict, out: str) -> None:
    with open(out, "w") as f:
        json.dump(record, f, indent=2)
    print(f"wrote {out}: mean fused speedup {record['mean_fused_speedup']:.2f}x; figure "
          f"{draw(record, os.path.splitext(out)[0] + '.png')}", flush=True)


if __name__ == "__main__":
    main()
