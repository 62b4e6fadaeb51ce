"""Walk throughput on an R-MAT graph, for every walk of gpipe.walks, with baselines beside it.

    python benchmarks/walks.py --device gpu --scale 22 --walks all --compare pecanpy --out results.json
    python benchmarks/walks.py --device cpu --scale 18 --walks node2vec --compare pecanpy igraph --out cpu.json

Writes one JSON file: the graph, the device and, per walk, the workload,
parameters, workers, seconds, steps/s and its fraction of the 9.74 G steps/s
ceiling that a minimal uniform walk kernel reached on one H200
(``../shared/gpu/README.md``). ``seconds`` is the walk itself (until every
walk has ended, as path pieces on the workers); ``assemble_seconds`` the
assembly of the walk matrix from them; ``kernel_seconds`` the step kernels;
``ready_seconds`` the whole call a user makes until the result is ready on the
workers (``persist()``), the best run's; with ``--compute``, ``compute_seconds``
and ``compute_ids_per_second``, the walk matrix brought into this process
(ids: its cells, padding too), and ``transfer``, the way its blocks came
(``stats['transfer']``: read from the workers' memory, or the comms), beside
``allocate_seconds``, the floor: a new array of the matrix's shape and type
written once in this process (its pages faulted in) just before, kept while
``compute()`` runs on pages of its own; ``compute_again_seconds``: ``compute()``
once more, on pages this process has just let go of (a virtual machine that
backs a guest's fresh pages lazily, as this project's 2-core one does, costs
about 1 ms a MB for new ones: the floor says how much). ``--graph`` walks a CSR ``.npz``
holding both directions (the peers' graph of ``../shared/gpu/gen_rmat.py``)
instead of generating an R-MAT.

Baselines run on the same graph, with the same p, q and length, in their own
processes (``benchmarks/baselines.py``): PecanPy's node2vec kernel on every
core of this machine and igraph's ``random_walk``; the ``ratios`` compare
gpipe's walk + assembly time per step with theirs.

``--ceiling PATH`` runs ``../shared/gpu/minwalk.py`` (copied to PATH, where the
GPU host sees it) on the same graph, in its own process: the minimal uniform
walk kernel's steps/s on this graph, recorded as ``ceiling`` with each walk's
``fraction_of_ceiling``, and drawn as the line beside the walks in the figure
(a PNG beside the JSON, ``benchmarks/figures.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

import gpipe
from _common import H200_CEILING_STEPS_PER_S, csr_file, environment, rmat_graph, rmat_record, warm_starts
from figures import draw

WALKS = {
    "deepwalk": (gpipe.walks.deepwalk, {}),
    "deepwalk-weighted": (gpipe.walks.deepwalk, {"weighted": True}),
    "node2vec": (gpipe.walks.node2vec, {"p": "P", "q": "Q"}),
    "node2vec-weighted": (gpipe.walks.node2vec, {"p": "P", "q": "Q", "weighted": True}),
    "metropolis-hastings": (gpipe.walks.metropolis_hastings, {}),
    "jump": (gpipe.walks.with_jump, {"jump": 0.1}),
    "ppr": (gpipe.walks.ppr, {"start": "ALL", "restart": 0.15, "walks_per_source": 1}),
}


def _kwargs(template: dict, args, g) -> dict:
    values = {"P": args.p, "Q": args.q, "ALL": g.to_original(np.arange(g.num_vertices))}
    return {k: values.get(v, v) if isinstance(v, str) else v for k, v in template.items()}


def _run_walk(name: str, g, args) -> dict:
    function, template = WALKS[name]
    kwargs = _kwargs(template, args, g)
    function(g, length=2, seed=99, **dict(kwargs, start=warm_starts(g))).persist()  # compile the kernels on every worker
    runs = []
    for r in range(args.repeat):
        called = time.perf_counter()
        w = function(g, length=args.length, seed=args.seed + r, **kwargs).persist()
        runs.append(dict(w.stats, ready_seconds=time.perf_counter() - called))
        if args.compute:  # the floor of making the walk matrix here, the matrix of original ids, then again
            started = time.perf_counter()
            floor = [np.ones(w.shape, np.int64)]  # kept while compute() runs: each on pages of its own
            runs[-1]["allocate_seconds"] = time.perf_counter() - started
            started = time.perf_counter()
            runs[-1].update(computed_ids=w.compute().size, compute_seconds=time.perf_counter() - started,
                            transfer=w.stats["transfer"])
            floor.clear()
            started = time.perf_counter()
            w.compute()  # on the pages the two before let go of
            runs[-1]["compute_again_seconds"] = time.perf_counter() - started
        print(f"{name} run {r}: {w.stats['steps']:,} steps in {w.stats['seconds']:.3f} s = "
              f"{w.stats['steps_per_second'] / 1e9:.3f} G steps/s (+{w.stats['assemble_seconds']:.3f} s assembly; "
              f"the call until ready {runs[-1]['ready_seconds']:.4f} s)", flush=True)
        del w
    best = max(runs, key=lambda s: s["steps_per_second"])
    return {
        "workload": name,
        "parameters": {"length": args.length, "repeat": args.repeat,
                       **{k: v for k, v in kwargs.items() if k != "start"},
                       **({"start": "every vertex"} if "start" in kwargs else {"walks_per_vertex": 1})},
        "walks": best["walks"], "steps": best["steps"], "seconds": best["seconds"],
        "steps_per_second": best["steps_per_second"],
        "fraction_of_h200_ceiling": best["steps_per_second"] / H200_CEILING_STEPS_PER_S,
        "assemble_seconds": best["assemble_seconds"],
        "steps_per_second_with_assembly": best["steps"] / (best["seconds"] + best["assemble_seconds"]),
        "ready_seconds": min(s["ready_seconds"] for s in runs),
        "ready_steps_per_second": best["steps"] / min(s["ready_seconds"] for s in runs),
        "kernel_seconds": best["kernel_seconds"], "supersteps": best["supersteps"],
        "runs": [{k: s[k] for k in ("steps", "seconds", "steps_per_second", "kernel_seconds", "assemble_seconds",
                                    "ready_seconds", "supersteps", "compute_seconds", "allocate_seconds",
                                    "compute_again_seconds") if k in s}
                 for s in runs],
        **({"compute_seconds": min(s["compute_seconds"] for s in runs),
            "median_compute_seconds": float(np.median([s["compute_seconds"] for s in runs])),
            "compute_ids_per_second": best["computed_ids"] / min(s["compute_seconds"] for s in runs),
            "compute_again_ids_per_second": best["computed_ids"] / min(s["compute_again_seconds"] for s in runs),
            "allocate_seconds": min(s["allocate_seconds"] for s in runs),
            "transfer": best["transfer"]} if args.compute else {}),
    }


def _run_frontier(g, args) -> dict:
    """Frontier sampling in C-SAW's setting: sampled edges per second (SEPS) over many instances."""
    kwargs = {"frontier_size": args.frontier_size, "budget": args.budget, "instances": args.instances}
    gpipe.walks.multidimensional(g, frontier_size=args.frontier_size, budget=2, instances=8, seed=99)  # compile
    runs = []
    for r in range(args.repeat):
        s = gpipe.walks.multidimensional(g, seed=args.seed + r, **kwargs)
        runs.append(s.stats)
        print(f"multidimensional run {r}: {s.stats['edges']:,} sampled edges ({s.stats['steps']:,} moves) in "
              f"{s.stats['seconds']:.3f} s = {s.stats['edges_per_second'] / 1e6:.1f} M SEPS", flush=True)
    best = max(runs, key=lambda s: s["edges_per_second"])
    return {"workload": "multidimensional", "parameters": dict(kwargs, repeat=args.repeat),
            **{k: best[k] for k in ("edges", "steps", "seconds", "edges_per_second", "steps_per_second",
                                    "kernel_seconds", "supersteps", "rounds")},
            "runs": [{k: s[k] for k in ("edges", "steps", "seconds", "edges_per_second", "rounds")} for s in runs]}


def _baseline(which: str, csr: str, args) -> dict:
    command = [sys.executable, os.path.join(os.path.dirname(__file__), "baselines.py"), which, csr,
               "--p", str(args.p), "--q", str(args.q), "--length", str(args.length), "--threads",
               str(os.cpu_count())] + (["--walks", str(args.baseline_walks)] if args.baseline_walks else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.baseline_timeout)
    if done.returncode != 0:
        return {"baseline": which, "error": done.stderr.strip().splitlines()[-1:]}
    record = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"baseline {which}: {record['steps']:,} steps in {record['seconds']:.3f} s = "
          f"{record['steps_per_second'] / 1e6:.2f} M steps/s", flush=True)
    return record


def _ceiling(minwalk: str, csr: str, timeout: float) -> dict:
    """The minimal uniform walk kernel's steps/s on the graph in ``csr`` (one walk per vertex, length 80)."""
    done = subprocess.run([sys.executable, minwalk, csr], capture_output=True, text=True, timeout=timeout)
    found = re.search(r"sec=([\d.]+) Gsteps_per_s=([\d.]+)", done.stdout)
    if done.returncode != 0 or not found:
        raise SystemExit(f"{minwalk} failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    print(f"ceiling: {found.group(2)} G steps/s (minimal uniform walk on this graph)", flush=True)
    return {"kernel": os.path.basename(minwalk), "seconds": float(found.group(1)),
            "steps_per_second": float(found.group(2)) * 1e9}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--scale", type=int, default=18)
    ap.add_argument("--graph", help="a CSR .npz holding both directions, as ../shared/gpu/gen_rmat.py writes (the "
                                    "peers' graph), instead of --scale's R-MAT")
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--length", type=int, default=80)
    ap.add_argument("--walks", nargs="+", default=["deepwalk"], choices=[*WALKS, "multidimensional", "all"])
    ap.add_argument("--frontier-size", type=int, default=2000, help="multidimensional: pool per instance")
    ap.add_argument("--budget", type=int, default=2000, help="multidimensional: sampled edges per instance")
    ap.add_argument("--instances", type=int, default=4000, help="multidimensional: instances")
    ap.add_argument("--p", type=float, default=0.5, help="node2vec return parameter")
    ap.add_argument("--q", type=float, default=2.0, help="node2vec in-out parameter")
    ap.add_argument("--compare", nargs="*", default=[], choices=["pecanpy", "igraph"])
    ap.add_argument("--baseline-timeout", type=float, default=900)
    ap.add_argument("--ceiling", metavar="MINWALK_PY", help="minwalk.py: measure the walk ceiling on this graph")
    ap.add_argument("--baseline-walks", type=int, default=None,
                    help="baselines walk from a random subset of this many vertices (steps/s is what is compared)")
    ap.add_argument("--workers", type=int, default=None, help="local workers (default: one per GPU, else one)")
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--compute", action="store_true",
                    help="also time each walk's compute() (the matrix of original ids in this process)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="walks.json")
    args = ap.parse_args()
    names = [*WALKS, "multidimensional"] if "all" in args.walks else args.walks

    with gpipe.connect(n_workers=args.workers, device=args.device, dashboard_address=":0") as client:
        if args.graph:
            started = time.perf_counter()
            g = gpipe.read_edges(args.graph, weight=True, directed=True, partitions=args.partitions)
            graph, generate_s = {"file": os.path.basename(args.graph)}, time.perf_counter() - started
        else:
            (g, generate_s), graph = rmat_graph(args, partitions=args.partitions), rmat_record(args)
        records = [_run_frontier(g, args) if name == "multidimensional" else _run_walk(name, g, args)
                   for name in names]
        report = {
            "graph": {**graph, "num_vertices": g.num_vertices, "num_edges": g.num_edges,
                      "partitions": g.num_partitions, "generate_seconds": generate_s},
            **environment(client, g.device),
            "workers": len(set(g.placement)),
            "records": records,
        }
        if args.compare or args.ceiling:
            with tempfile.TemporaryDirectory() as folder:
                csr = csr_file(g, folder)
                report["baselines"] = [_baseline(which, csr, args) for which in args.compare]
                if args.ceiling:
                    report["ceiling"] = _ceiling(args.ceiling, csr, args.baseline_timeout)
                    for r in records:
                        r["fraction_of_ceiling"] = r["steps_per_second"] / report["ceiling"]["steps_per_second"]
    ours = {r["workload"]: r["steps"] / (r["seconds"] + r["assemble_seconds"]) for r in records
            if "assemble_seconds" in r}
    report["ratios"] = {
        f"gpipe {name} / {b['baseline']}": ours[name] / b["steps_per_second"]
        for b in report.get("baselines", []) if "steps_per_second" in b
        for name in (["node2vec"] if b["baseline"] == "pecanpy" else ["deepwalk"]) if name in ours
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    figure = draw(report, os.path.splitext(args.out)[0] + ".png")
    print(json.dumps({"ratios": report["ratios"], **{r["workload"]: r["steps_per_second"] for r in records}}))
    print(f"wrote {args.out}" + (f" and {figure}" if figure else " (no figure: matplotlib is not installed)"))


if __name__ == "__main__":
    main()
