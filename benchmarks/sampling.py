"""Sampled edges per second (SEPS, C-SAW's metric) of the traversal samplers, and the SELECT ablation.

    python benchmarks/sampling.py --device gpu --scale 22 --instances 2000 16000 --out sampling_rmat22_h200.json
    python benchmarks/sampling.py --device cpu --scale 18 --instances 2000 16000 --out sampling_rmat18_cpu2.json
    python benchmarks/sampling.py --device gpu --scale 22 --samplers neighbor neighbor-biased --neighbor-size 8 \
        --depth 3 --instances 16000 --repeat 10 --no-ablation --out sampling_neighbor_rmat22_h200.json

C-SAW's setting (section VI): one random seed per instance (a vertex with
out-edges), NeighborSize 2 and depth 2 — forest fire with p_f = 0.7, layer
sampling with 2 edges per layer and instance. Per sampler and instance count,
the best of ``--repeat`` runs: seconds from the first superstep until every
instance is done (edges on the workers, before they are collected), SEPS,
the step kernels' seconds (``kernel_seconds``: the busiest partition's per
superstep, summed) and SELECT's mean iterations per pick, beside the medians of the runs' seconds;
``ready_seconds``, the whole call until the sample is ready on the workers (``persist()``), and with
``--compute`` the seconds of its ``compute()`` into a pandas frame and the way its blocks came (``transfer``:
read from the workers' memory, or the comms; on a GPU, also of ``compute(device=True)``, its columns on this
process's GPU).

The ablation (C-SAW Fig. 10/11) runs in two ways, with every SELECT method
(``repeated``, ``updated``, ``bipartite``) with and without the strided
bitmap: (1) end to end, the four samplers at the largest instance count; (2)
SELECT alone, on one worker, on the out-edges of many frontier vertices
(drawn in proportion to degree, as a depth-1 frontier is) with uniform,
weight and skewed (the head's out-degree: "prefer high-degree neighbors")
biases and 2 or 8 picks per vertex — time and iterations per pick.
``ratios`` gives repeated / bipartite time per workload.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

import numpy as np
from _common import environment, rmat_graph, rmat_record, seed_vertices
from figures import draw

import gpipe
from gpipe.sampling import Sampler

SAMPLERS = {
    "neighbor-biased": {"edge_bias": "weight", "neighbor_size": 2, "select": "alias"},  # as gpipe.sampling.neighbor
    "forest-fire": {"update": "unvisited", "neighbor_size": ("geometric", 0.7)},
    "layer": {"neighbor_size": 2, "neighbor_pool": "frontier"},
    "neighbor": {"neighbor_size": 2},
}
METHODS = ("repeated", "updated", "bipartite", "alias")


def _run(g, name: str, seeds: np.ndarray, args, **options) -> dict:
    settings = dict(SAMPLERS[name], **options)
    if args.neighbor_size is not None and isinstance(settings["neighbor_size"], int):
        settings["neighbor_size"] = args.neighbor_size
    sampler = Sampler(depth=args.depth, **settings)
    runs = []
    for r in range(args.repeat):
        called = time.perf_counter()
        sample = sampler.run(g, seeds, seed=args.seed + r).persist()
        stats = dict(sample.stats, ready_seconds=time.perf_counter() - called)
        if args.compute:
            started = time.perf_counter()
            stats["computed_edges"] = len(sample.compute())
            stats["compute_seconds"] = time.perf_counter() - started
            stats["transfer"] = sample.stats["transfer"]
            if args.device == "gpu":  # the same columns on this process's GPU, written there by the workers
                started = time.perf_counter()
                len(sample.compute(device=True)["src"])
                stats["compute_device_seconds"] = time.perf_counter() - started
        runs.append(stats)
        del sample
    best = max(runs, key=lambda s: s["edges_per_second"])
    print(f"{name} {options or ''} {len(seeds):,} instances: {best['edges']:,} edges in {best['seconds']:.3f} s = "
          f"{best['edges_per_second'] / 1e6:.2f} M SEPS, {best['iterations_per_pick']:.3f} iterations/pick",
          flush=True)
    return {"workload": name, "instances": len(seeds),
            "parameters": {"depth": args.depth, **settings, "repeat": args.repeat},
            **{k: best[k] for k in ("edges", "seconds", "edges_per_second", "kernel_seconds", "supersteps",
                                    "iterations_per_pick", "select", "bitmap")},
            "median_seconds": float(np.median([s["seconds"] for s in runs])),
            "median_kernel_seconds": float(np.median([s["kernel_seconds"] for s in runs])),
            "ready_seconds": min(s["ready_seconds"] for s in runs),
            "median_ready_seconds": float(np.median([s["ready_seconds"] for s in runs])),
            **({"compute_seconds": min(s["compute_seconds"] for s in runs),
                "compute_edges_per_second": best["computed_edges"] / min(s["compute_seconds"] for s in runs),
                "median_compute_seconds": float(np.median([s["compute_seconds"] for s in runs])),
                "transfer": best["transfer"]}
               if args.compute else {}),
            **({"compute_device_seconds": min(s["compute_device_seconds"] for s in runs)}
               if args.compute and args.device == "gpu" else {})}


def _select_alone(graph_id: str, part: int, degrees, frontier: str, segments: int, picks: int, bias: str,
                  method: str, bitmap: bool, repeat: int, seed: int) -> dict:
    """SELECT on this worker, on the out-edges of ``segments`` vertices of partition ``part``: drawn by degree
    (``frontier='degree'``, as a depth-1 frontier is), or uniformly among those with more than ``picks``."""
    from gpipe.runtime.workers import store, worker_xp
    from gpipe._select import select

    x = worker_xp()
    p = store().partitions.get(graph_id, part)
    indptr = p.indptr.astype(x.int64)
    rng = np.random.default_rng(seed)
    if frontier == "degree":  # the sources of uniform edges
        local = x.searchsorted(indptr[1:], x.asarray(rng.integers(0, int(indptr[-1]), size=segments)), side="right")
    else:
        eligible = x.flatnonzero(indptr[1:] - indptr[:-1] > picks)
        local = eligible[x.asarray(rng.integers(0, eligible.shape[0], size=segments))]
    start, end = indptr[local], indptr[local + 1]
    offsets = x.zeros(segments + 1, dtype=x.int64)
    x.cumsum(end - start, out=offsets[1:])
    total = int(offsets[-1])
    segment = x.searchsorted(offsets[1:], x.arange(total), side="right")
    candidate = p.indices[start[segment] + x.arange(total) - offsets[segment]]
    values = {"uniform": lambda: x.ones(total, x.float64), "weight": lambda: p.weights.astype(x.float64)[
        start[segment] + x.arange(total) - offsets[segment]], "degree": lambda: x.asarray(degrees)[candidate]}[bias]()
    values = values.astype(x.float64)
    want = x.full(segments, picks, dtype=x.int64)
    streams = x.arange(segments, dtype=x.int64)
    best = None
    for r in range(repeat + 1):  # the first compiles
        _sync(x)
        t0 = time.perf_counter()
        pick_offsets, _, iterations = select(values, offsets, want, streams, np.uint64(seed + r), 0, method=method,
                                                 bitmap=bitmap)
        _sync(x)
        seconds = time.perf_counter() - t0
        if r and (best is None or seconds < best):
            best = seconds
    picked = int(pick_offsets[-1])
    return {"seconds": best, "picks": picked, "candidates": total, "picks_per_second": picked / best,
            "iterations_per_pick": int(iterations.sum()) / picked}


def _sync(x) -> None:
    if x is not np:
        x.cuda.get_current_stream().synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--scale", type=int, default=18)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--instances", type=int, nargs="+", default=[2000, 16000])
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--neighbor-size", type=int, default=None,
                    help="picks per vertex of the samplers that take a number (default: C-SAW's 2)")
    ap.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=list(SAMPLERS))
    ap.add_argument("--segments", type=int, default=None,
                    help="SELECT alone: frontier vertices (default: 200,000 on a GPU, 20,000 on a CPU)")
    ap.add_argument("--no-ablation", action="store_true")
    ap.add_argument("--compute", action="store_true", help="also time each sample's compute() (a pandas frame)")
    ap.add_argument("--workers", type=int, default=None, help="local workers (default: one per GPU, else one)")
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="sampling.json")
    args = ap.parse_args()
    segments = args.segments or (200_000 if args.device == "gpu" else 20_000)

    with gpipe.connect(n_workers=args.workers, device=args.device, dashboard_address=":0") as client:
        g, generate_s = rmat_graph(args, partitions=args.partitions)
        degrees = g.degrees().to_numpy()
        for name in args.samplers:  # compile the kernels on every worker
            Sampler(depth=1, **SAMPLERS[name]).run(g, seed_vertices(degrees, 4 * g.num_partitions, 99))
        records = [_run(g, name, seed_vertices(degrees, count, args.seed), args)
                   for count in args.instances for name in args.samplers]
        report = {"graph": {**rmat_record(args), "num_vertices": g.num_vertices, "num_edges": g.num_edges,
                            "partitions": g.num_partitions, "generate_seconds": generate_s},
                  **environment(client, g.device), "workers": len(set(g.placement)), "records": records}
        if not args.no_ablation:
            seeds = seed_vertices(degrees, max(args.instances), args.seed)
            report["ablation_end_to_end"] = [_run(g, name, seeds, args, select=method, bitmap=bitmap)
                                             for name in args.samplers for method in METHODS
                                             for bitmap in (True, False)]
            shared = client.scatter(degrees, broadcast=True)
            alone = []
            for frontier, bias, picks, method, bitmap in itertools.product(
                    ("degree", "uniform"), ("uniform", "weight", "degree"), (2, 8), METHODS, (True, False)):
                record = client.submit(_select_alone, g.graph_id, 0, shared, frontier, segments, picks, bias, method,
                                       bitmap, args.repeat, args.seed, workers=[g.placement[0]], pure=False).result()
                record.update(frontier=frontier, bias=bias, picks_per_vertex=picks, method=method, bitmap=bitmap,
                              segments=segments)
                print(f"SELECT {frontier} frontier, {bias} bias, k={picks}, {method}, bitmap={bitmap}: "
                      f"{record['seconds']:.4f} s, {record['iterations_per_pick']:.3f} iterations/pick", flush=True)
                alone.append(record)
            report["ablation_select"] = alone
            same = ("frontier", "bias", "picks_per_vertex")
            report["ratios"] = {
                f"repeated / bipartite time, {r['frontier']} frontier, {r['bias']} bias, {r['picks_per_vertex']} "
                "picks": next(o["seconds"] for o in alone if o["method"] == "repeated" and o["bitmap"]
                              and all(o[k] == r[k] for k in same)) / r["seconds"]
                for r in alone if r["method"] == "bipartite" and r["bitmap"]}
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    figure = draw(report, os.path.splitext(args.out)[0] + ".png")
    print(f"wrote {args.out}" + (f" and {figure}" if figure else " (no figure: matplotlib is not installed)"))
    print(json.dumps({"ratios": report.get("ratios", {}),
                      **{f"{r['workload']} x{r['instances']}": r["edges_per_second"] for r in records}}))


if __name__ == "__main__":
    main()
