"""Walk throughput on an R-MAT graph: writes a JSON record (workload, graph, parameters, device, seconds, steps/s).

    python benchmarks/walks.py --device gpu --scale 22 --edge-factor 16 --length 80 --out results.json

``seconds`` is the walk itself (until every walk has ended, its path pieces on
the workers); ``assemble_seconds`` the assembly of the walk matrix from them on
the workers, which ``compute``/``to_corpus``/``to_parquet`` start with.
Throughput is also given as a fraction of the 9.74 G steps/s ceiling that a
minimal hand-written uniform walk kernel reached on one H200
(``../shared/gpu/README.md``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time

import gpipe
from gpipe.backend import versions

H200_CEILING_STEPS_PER_S = 9.74e9


def _device_name(client, device: str) -> str:
    if device == "gpu":
        def name():
            import cupy

            return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()

        return sorted(set(client.run(name).values()))[0]
    with open("/proc/cpuinfo") as f:
        models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    return f"{models[0] if models else platform.processor()} ({os.cpu_count()} cores)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--scale", type=int, default=18)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--length", type=int, default=80)
    ap.add_argument("--walks-per-vertex", type=int, default=1)
    ap.add_argument("--workers", type=int, default=None, help="local workers (default: one per GPU, or gpipe's CPU default)")
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="walks.json")
    args = ap.parse_args()

    with gpipe.connect(n_workers=args.workers, device=args.device, dashboard_address=":0") as client:
        t0 = time.perf_counter()
        g = gpipe.generators.rmat(scale=args.scale, edge_factor=args.edge_factor, seed=args.seed,
                                  partitions=args.partitions)
        generate_s = time.perf_counter() - t0
        gpipe.walks.deepwalk(g, length=args.length, start=list(range(1024)), seed=args.seed + 1)  # compile kernels
        runs = []
        for r in range(args.repeat):
            w = gpipe.walks.deepwalk(g, length=args.length, walks_per_vertex=args.walks_per_vertex, seed=args.seed + r)
            runs.append(w.persist().stats)
            print(f"run {r}: {w.stats['steps']:,} steps in {w.stats['seconds']:.3f} s = "
                  f"{w.stats['steps_per_second'] / 1e9:.3f} G steps/s (then {w.stats['assemble_seconds']:.3f} s "
                  "to assemble the walk matrix on the workers)", flush=True)
            del w
        best = max(runs, key=lambda s: s["steps_per_second"])
        record = {
            "workload": "deepwalk",
            "graph": {"generator": "rmat", "scale": args.scale, "edge_factor": args.edge_factor, "seed": args.seed,
                      "num_vertices": g.num_vertices, "num_edges": g.num_edges, "partitions": g.num_partitions,
                      "generate_seconds": generate_s},
            "parameters": {"length": args.length, "walks_per_vertex": args.walks_per_vertex, "repeat": args.repeat},
            "device": args.device,
            "device_name": _device_name(client, g.device),
            "workers": len(set(g.placement)),
            "walks": best["walks"],
            "steps": best["steps"],
            "seconds": best["seconds"],
            "steps_per_second": best["steps_per_second"],
            "fraction_of_h200_ceiling": best["steps_per_second"] / H200_CEILING_STEPS_PER_S,
            "assemble_seconds": best["assemble_seconds"],
            "steps_per_second_with_assembly": best["steps"] / (best["seconds"] + best["assemble_seconds"]),
            "kernel_seconds": best["kernel_seconds"],
            "kernel_steps_per_second": best["steps"] / best["kernel_seconds"],
            "runs": [{k: s[k] for k in ("steps", "seconds", "steps_per_second", "kernel_seconds", "assemble_seconds",
                                        "supersteps")}
                     for s in runs],
            "versions": {k: v for k, v in versions().items() if v is not None},
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    with open(args.out, "w") as f:
        json.dump(record, f, indent=2)
    print(json.dumps({k: record[k] for k in ("device_name", "steps_per_second", "fraction_of_h200_ceiling")}))


if __name__ == "__main__":
    main()
