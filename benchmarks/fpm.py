"""Frequent pattern mining (GAMMA's FPM) on HPRD and a labeled R-MAT: patterns, supports and seconds per run.

    python benchmarks/fpm.py --device gpu --graphs hprd rmat:16 --max-edges 3 4 --supports 50 20 --out fpm_h200.json
    python benchmarks/fpm.py --device cpu --graphs hprd --max-edges 2 3 --supports 50 --out fpm_hprd_cpu2.json

Graphs, replicated on the workers: ``hprd`` (``../shared/data/hprd``: 9,460 vertices, 34,998 edges, 307
labels) and ``rmat:SCALE`` (Graph500's R-MAT, edge factor 16, ``--labels`` uniform random vertex labels drawn
from ``--seed``). For each graph, ``--max-edges`` and ``--supports`` (MNI), one call of
``gpipe.mining.frequent_patterns`` after a compiling warm-up on the smallest setting: its seconds, each level's
candidates, existence checks, rounds, frequent patterns and the workers' check seconds, and every frequent pattern
found (code, MNI support), so that runs on two devices can be compared pattern by pattern. The report is saved after
each run: a run stopped by a time limit keeps what was measured before it.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import gpipe
from _common import environment, write_json
from figures import draw

HPRD = Path(__file__).resolve().parents[2] / "shared" / "data" / "hprd" / "HPRD.graph"


def _graph(name: str, labels: int, seed: int) -> gpipe.Graph:
    if name == "hprd":
        return gpipe.counting.read_graph(HPRD, mode="replicated")
    scale = int(name.split(":")[1])
    g = gpipe.generators.rmat(scale, 16, seed=seed, mode="replicated")
    g.set_labels(np.random.default_rng(seed).integers(0, labels, g.num_vertices))
    return g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--graphs", nargs="+", default=["hprd"], help="hprd or rmat:SCALE, each")
    ap.add_argument("--labels", type=int, default=8, help="R-MAT: vertex labels")
    ap.add_argument("--max-edges", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--supports", type=int, nargs="+", default=[50])
    ap.add_argument("--workers", type=int, default=None, help="local workers (default: one per GPU, else one)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="fpm.json")
    args = ap.parse_args()

    with gpipe.connect(n_workers=args.workers, device=args.device, dashboard_address=":0") as client:
        records = []
        report = {"benchmark": "fpm", **environment(client, args.device), "labels": args.labels, "seed": args.seed,
                  "records": records, "complete": False}
        for name in args.graphs:
            g = _graph(name, args.labels, args.seed)
            report["workers"] = len(g.replicas)
            gpipe.mining.frequent_patterns(g, min(args.max_edges), max(args.supports))  # compile
            for max_edges in args.max_edges:
                for support in args.supports:
                    t0 = time.perf_counter()
                    found = gpipe.mining.frequent_patterns(g, max_edges, support)
                    seconds = time.perf_counter() - t0
                    p = found.patterns
                    records.append({"workload": "fpm", "graph": name, "num_vertices": g.num_vertices,
                                    "num_edges": g.num_edges, "max_edges": max_edges, "min_support": support,
                                    "patterns": len(found), "seconds": seconds,
                                    **{key: found.stats[key] for key in ("candidates", "checks", "rounds",
                                                                         "frequent", "check_seconds")},
                                    "found": [[int(c), int(s)] for c, s in zip(p["code"], p["support"])]})
                    print(f"{name}, max_edges {max_edges}, support {support}: {len(found):,} patterns in "
                          f"{seconds:.2f} s (checks per level {found.stats['checks']})", flush=True)
                    write_json(args.out, report)
            g.release()
        report["complete"] = True
    write_json(args.out, report)
    print(f"wrote {args.out}; figure {draw(report, os.path.splitext(args.out)[0] + '.png')}")


if __name__ == "__main__":
    main()
