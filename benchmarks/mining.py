"""Pattern mining (GAMMA's workloads) and the external multi-merge sort, in and beyond the device budget.

    python benchmarks/mining.py --device gpu --scale 18 --budgets auto "2 GB" --out mining_rmat18_h200.json
    python benchmarks/mining.py --device gpu --graph rmat18.npz --scale 18 --k 3 4 --patterns --out mining_rmat18_h200.json
    python benchmarks/mining.py --device cpu --scale 12 --k 3 4 --out mining_rmat12_cpu2.json

The graph is Graph500's R-MAT (seeded, symmetrized, self-loops and duplicates
dropped), replicated on the workers; or, with ``--graph``, a CSR ``.npz`` as
``gen_rmat.py`` writes it (the graph GAMMA's figures were measured on:
``../shared/gpu/README.md``; ``--scale`` then only labels it). Per device budget of the embedding
table (``auto``: half the GPU's free memory; a smaller one makes the table
spill to host memory and disk): k-cliques for each ``--k`` and the matches
of a 4-cycle, a diamond and a tailed triangle (edge-preserving), each the
best of ``--repeat`` runs after a compiling warm-up (on a tiny graph) — seconds of the call,
embeddings (every column's, summed) per second, the peak table bytes per
tier, the bytes spilled off the device and the seconds per primitive. GAMMA
on one H200, R-MAT 18: 3-cliques 0.27 s, 4-cliques 15.6 s with a 34.5 GB
table. Then ``external_sort`` of random 64-bit keys at 1/2x and 4x
``--sort-budget`` against one in-memory sort of the same keys where they fit
(``numpy.sort`` on the CPU, ``cupy.sort`` on the GPU). ``--baseline`` runs a plain single-threaded
degree-ordered triangle count of the same graph (``baselines.py triangles``) and records each 3-clique run's
ratio to it (issue 40's CPU figure: ``--device cpu --workers 1 --scale 16 --k 3 --patterns --baseline``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd
from dask.utils import parse_bytes

import gpipe
from _common import csr_file, environment, write_json
from figures import draw

PATTERNS = {"4-cycle": [(0, 1), (1, 2), (2, 3), (3, 0)], "diamond": [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)],
            "tailed triangle": [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4)]}


def _warm_up(workers: int) -> None:
    """Compile the mining kernels on every worker, on a complete graph too small to take any time (the benchmark
    graph's own 3-cliques and diamonds take minutes on R-MAT 18): vertex ``i`` is range ``i``, on worker
    ``i % workers``, and each of the first ``workers`` has later neighbors to extend by both kernels."""
    n = 4 * workers + 4
    edges = pd.DataFrame(list(itertools.combinations(range(n), 2)), columns=["src", "dst"])
    tiny = gpipe.from_edges(edges, mode="replicated")
    gpipe.mining.count_cliques(tiny, 3)
    gpipe.mining.match(tiny, PATTERNS["diamond"])
    tiny.release()


def _best(run, repeat: int) -> tuple[float, object]:
    best = None
    for _ in range(repeat):
        result = run()
        if best is None or result.stats["seconds"] < best.stats["seconds"]:
            best = result
    return best.stats["seconds"], best


def _record(workload: str, budget: str, seconds: float, result) -> dict:
    embeddings = sum(result.stats["embeddings"])
    record = {"workload": workload, "device_budget": budget, "count": result.count, "seconds": seconds,
              "embeddings": embeddings, "embeddings_per_second": embeddings / seconds if seconds else 0.0,
              "table_bytes": result.stats["bytes"], "spilled_bytes": result.stats["spilled_bytes"],
              "primitive_seconds": result.stats["primitive_seconds"]}
    print(f"{workload}, device budget {budget}: {result.count:,} in {seconds:.3f} s, "
          f"{record['embeddings_per_second']:,.0f} embeddings/s, spilled {result.stats['spilled_bytes']:,} B",
          flush=True)
    return record


def _triangles(g, graph_file: str | None) -> dict:
    """The plain triangle count of ``g`` (``baselines.py triangles``), in its own process."""
    with tempfile.TemporaryDirectory() as folder:
        path = graph_file or csr_file(g, folder)
        done = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "baselines.py"), "triangles",
                               path], capture_output=True, text=True, check=True)
    record = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"baseline triangles: {record['count']:,} in {record['seconds']:.3f} s (+{record['orient_seconds']:.3f} s "
          f"orienting)", flush=True)
    return record


def _sorts(device: str, budget: int, seed: int) -> list[dict]:
    x = gpipe.backend.xp(device)
    gpipe.sort.external_sort(np.arange(4096)[::-1].copy(), budget=4096 * 10, device=device)  # compile: 4 runs merged
    records = []
    for factor in (0.5, 4):
        keys = np.random.default_rng(seed).integers(0, 2**63, int(factor * budget) // 8)
        t0 = time.perf_counter()
        out = gpipe.sort.external_sort(keys, budget=budget, device=device)
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        try:
            reference = gpipe.backend.to_host(x.sort(x.asarray(keys)))
            in_memory = time.perf_counter() - t0
        except MemoryError:  # cupy's OutOfMemoryError is one
            reference, in_memory = np.sort(keys), None
        assert (out == reference).all()
        records.append({"keys": keys.size, "budget_bytes": budget, "factor": factor, "seconds": seconds,
                        "in_memory_seconds": in_memory})
        print(f"external_sort of {keys.size:,} keys ({factor}x the budget): {seconds:.3f} s; in memory: "
              f"{in_memory if in_memory is None else round(in_memory, 3)} s", flush=True)
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--graph", help="a CSR .npz as gen_rmat.py writes (the peers' graph) instead of --scale's")
    ap.add_argument("--scale", type=int, default=18)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=int, nargs="+", default=[3, 4, 5])
    ap.add_argument("--patterns", nargs="*", default=list(PATTERNS), choices=list(PATTERNS),
                    help="the patterns to match (default: all; --patterns alone: none)")
    ap.add_argument("--budgets", nargs="+", default=["auto"], help="device budgets of the table ('auto', '2 GB')")
    ap.add_argument("--sort-budget", default="1 GB")
    ap.add_argument("--workers", type=int, default=None, help="local workers (default: one per GPU, else one)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--baseline", action="store_true", help="a plain degree-ordered triangle count beside 3-cliques")
    ap.add_argument("--out", default="mining.json")
    args = ap.parse_args()

    with gpipe.connect(n_workers=args.workers, device=args.device, dashboard_address=":0") as client:
        t0 = time.perf_counter()
        if args.graph:
            g = gpipe.read_edges(args.graph, mode="replicated")  # both directions stored: read as undirected
            graph = {"file": os.path.basename(args.graph), "scale": args.scale}
        else:
            g = gpipe.generators.rmat(scale=args.scale, edge_factor=args.edge_factor, seed=args.seed,
                                      mode="replicated")
            graph = {"generator": "rmat", "scale": args.scale, "edge_factor": args.edge_factor, "seed": args.seed}
        generate_s = time.perf_counter() - t0
        _warm_up(len(g.replicas))
        records = []
        report = {"benchmark": "mining",
                  "graph": {**graph, "num_vertices": g.num_vertices, "num_edges": g.num_edges,
                            "generate_seconds": generate_s},
                  **environment(client, g.device), "workers": len(g.replicas), "records": records,
                  "complete": False}

        def add(record: dict) -> None:  # saved as it goes: a run stopped by a time limit keeps what it measured
            records.append(record)
            write_json(args.out, report)

        if args.baseline:
            report["baseline"] = _triangles(g, args.graph)
        for budget in args.budgets:
            for k in args.k:
                seconds, result = _best(lambda: gpipe.mining.count_cliques(g, k, device_budget=budget), args.repeat)
                record = _record(f"{k}-cliques", budget, seconds, result)
                if k == 3 and args.baseline:
                    base = report["baseline"]
                    assert result.count == base["count"], (result.count, base["count"])
                    record.update(over_baseline=seconds / base["seconds"],
                                  over_baseline_with_orienting=seconds / (base["seconds"] + base["orient_seconds"]))
                add(record)
            for name in args.patterns:
                seconds, result = _best(lambda: gpipe.mining.match(g, PATTERNS[name], device_budget=budget),
                                        args.repeat)
                add(_record(name, budget, seconds, result))
        report.update(sort=_sorts(args.device, parse_bytes(args.sort_budget), args.seed), complete=True)
    write_json(args.out, report)
    print(f"wrote {args.out}; figure {draw(report, os.path.splitext(args.out)[0] + '.png')}")


if __name__ == "__main__":
    main()
