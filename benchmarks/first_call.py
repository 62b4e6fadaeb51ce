"""The first full-size call in a new process on a fresh GPU host, against the second (issue 39).

    python benchmarks/first_call.py --scale 24 --walks-per-vertex 10 --out first_call_rmat24_h200.json

Each setting runs in a process of its own with an empty CuPy kernel cache of its own (a fresh host's), one GPU
worker: after ``--warmups`` ``none`` (no warm-up), ``process`` (``gpipe.warmup()`` in the client's process: the
kernels alone, into the host's cache the worker reads too) or ``cluster`` (``gpipe.warmup(client)``: the kernels
on each worker, then every walk and the neighbor sampler once on a tiny graph), it generates R-MAT ``--scale``
and runs DeepWalk (``--walks-per-vertex``, length 80) three times, each to ready (``persist()``), and records
each call's seconds and the walk's own (``stats['seconds']``), the warm-up's seconds, and the CuPy kernels
compiled during each call (files the cache gained). The figure draws the calls' seconds per setting.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import gpipe
from _common import environment, write_json
from figures import draw

CALLS = 3


def _cached(folder: str) -> int:
    return sum(len(files) for _, _, files in os.walk(folder))


def child(args) -> dict:
    """One setting, in this process (its CuPy cache: ``CUPY_CACHE_DIR``, set by the parent)."""
    cache = os.environ["CUPY_CACHE_DIR"]
    with gpipe.connect(device="gpu", dashboard_address=":0") as client:
        t0 = time.perf_counter()
        if args.child == "process":
            gpipe.warmup(device="gpu")
        elif args.child == "cluster":
            gpipe.warmup(client)
        warmup = time.perf_counter() - t0
        g = gpipe.generators.rmat(scale=args.scale, edge_factor=16, seed=0)
        g.degrees()
        calls = []
        for i in range(CALLS):
            before = _cached(cache)
            t0 = time.perf_counter()
            w = gpipe.walks.deepwalk(g, length=args.length, walks_per_vertex=args.walks_per_vertex, seed=i).persist()
            seconds = time.perf_counter() - t0
            calls.append({"call": i + 1, "seconds": seconds, "walk_seconds": w.stats["seconds"],
                          "steps": w.stats["steps"], "compiled": _cached(cache) - before})
            del w
        return {"warmup": args.child, "warmup_seconds": warmup, "calls": calls,
                "num_vertices": g.num_vertices, "num_edges": g.num_edges, **environment(client, "gpu")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=24)
    ap.add_argument("--walks-per-vertex", type=int, default=10)
    ap.add_argument("--length", type=int, default=80)
    ap.add_argument("--warmups", nargs="+", default=["none", "process", "cluster"],
                    choices=["none", "process", "cluster"])
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds each setting may take")
    ap.add_argument("--out", default="first_call.json")
    ap.add_argument("--child", choices=["none", "process", "cluster"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    records, report = [], None
    for warmup in args.warmups:
        with tempfile.TemporaryDirectory(prefix="cupy-cache-") as cache:
            command = [sys.executable, __file__, "--child", warmup, "--scale", str(args.scale),
                       "--walks-per-vertex", str(args.walks_per_vertex), "--length", str(args.length)]
            done = subprocess.run(command, env={**os.environ, "CUPY_CACHE_DIR": cache}, capture_output=True,
                                  text=True, timeout=args.timeout, check=True)
        found = json.loads(done.stdout.strip().splitlines()[-1])
        first, second = found["calls"][0]["seconds"], found["calls"][1]["seconds"]
        print(f"warm-up {warmup}: {found['warmup_seconds']:.1f} s; calls " +
              ", ".join(f"{c['seconds']:.3f} s ({c['compiled']} compiled)" for c in found["calls"]) +
              f"; first / second {first / second:.2f}", flush=True)
        environment_keys = ("device", "device_name", "versions", "date")
        report = report or {"benchmark": "first_call",
                            "graph": {"generator": "rmat", "scale": args.scale, "edge_factor": 16, "seed": 0,
                                      "num_vertices": found["num_vertices"], "num_edges": found["num_edges"]},
                            "parameters": {"walks_per_vertex": args.walks_per_vertex, "length": args.length},
                            **{k: found[k] for k in environment_keys}, "workers": 1, "records": records}
        records.append({"workload": "deepwalk", "warmup": warmup, "warmup_seconds": found["warmup_seconds"],
                        "calls": found["calls"], "first_over_second": first / second,
                        "seconds": first, "steps_per_second": found["calls"][0]["steps"] / first})
        write_json(args.out, report)
    print(f"wrote {args.out}; figure {draw(report, os.path.splitext(args.out)[0] + '.png')}")


if __name__ == "__main__":
    main()
