"""Where a partitioned walk's memory goes, phase by phase: the graph, the walk, its assembly, after.

    python benchmarks/memory.py --gpus 2 --out memory_rmat24_2xh200.json                 # on a 2-GPU host
    python benchmarks/memory.py --device cpu --gpus 2 --scale 13 --out /tmp/memory.json   # a dry run

On one worker per GPU, R-MAT ``--scale`` cut in ``--partitions-per-gpu`` x N
partitions (and a short walk that compiles the kernels), a DeepWalk of
``--walks-per-vertex`` walks per vertex, then its blocks made (``persist``),
then the result let go. A thread on each worker samples every ``--interval``
seconds: CuPy's pool in use (GPU workers), the device memory in use (the
driver's: the pool's held blocks, NCCL's buffers), the process's resident set,
and the run outputs the worker counts (what ``gpipe.memory.output-limit``
bounds). The JSON holds each phase's peaks per worker, the run's stats and, if
a phase failed, its error (the next phase still runs: a failure must give its
memory back); the PNG the samples over time, a panel per worker.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from _common import environment, kept_stats, rmat_graph, rmat_record, write_json
from figures import draw

import gpipe

PHASES = ("graph", "walk", "assembly", "after")


def _sample(interval: float, dask_worker=None) -> None:
    """Start this worker's sampler (``client.run``): ``(time, pool in use, device in use, resident set, outputs)``
    every ``interval`` seconds until :func:`_samples` stops it."""
    import psutil

    from gpipe.runtime._store import PLUGIN_NAME

    plugin = dask_worker.plugins[PLUGIN_NAME]
    process = psutil.Process()
    gpu = plugin.device == "gpu"
    if gpu:
        import cupy

        pool = cupy.get_default_memory_pool()
    samples: list[tuple] = []
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            outputs = sum(run.held for run in list(plugin.runs.values()))
            if gpu:
                free, total = cupy.cuda.runtime.memGetInfo()
                device = (pool.used_bytes(), total - free)
            else:
                device = (0, 0)
            samples.append((time.time(), *device, process.memory_info().rss, outputs))
            stop.wait(interval)

    threading.Thread(target=loop, name="gpipe-memory-sampler", daemon=True).start()
    dask_worker._gpipe_memory = (samples, stop)


def _samples(stop: bool = False, dask_worker=None) -> list[tuple]:
    """The samples taken since the last call (``client.run``), the sampler stopped if ``stop``."""
    samples, stopping = dask_worker._gpipe_memory
    taken = samples[:]
    del samples[:len(taken)]
    if stop:
        stopping.set()
    return taken


def _peaks(samples: list[tuple]) -> dict:
    """A phase's peaks on one worker, in bytes."""
    names = ("pool_in_use", "device_in_use", "resident", "outputs_counted")
    return {name: max((s[i + 1] for s in samples), default=0) for i, name in enumerate(names)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--gpus", type=int, default=2, help="workers (one per GPU)")
    ap.add_argument("--scale", type=int, default=24)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--partitions-per-gpu", type=int, default=2)
    ap.add_argument("--length", type=int, default=80)
    ap.add_argument("--walks-per-vertex", type=int, default=10)
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
    ap.add_argument("--out", default="memory.json")
    args = ap.parse_args()
    with gpipe.connect(n_workers=args.gpus, device=args.device, dashboard_address=":0") as client:
        env = environment(client, args.device)
        client.run(_sample, args.interval)
        times, phases, errors, stats = {}, {}, {}, {}
        g, built = rmat_graph(args, partitions=args.gpus * args.partitions_per_gpu, mode="partitioned")
        gpipe.walks.deepwalk(g, length=args.length, seed=args.seed + 1).compute()  # compiled before the samples

        def phase(name: str, work) -> None:
            t0 = time.perf_counter()
            try:
                work()
            except Exception as exc:  # the next phase still runs: a failure must give its memory back
                errors[name] = f"{type(exc).__name__}: {exc}"
            times[name] = time.perf_counter() - t0
            phases[name] = client.run(_samples, name == PHASES[-1])
            print(f"{name}: {times[name]:.2f} s" + (f", FAILED: {errors[name]}" if name in errors else ""), flush=True)
            for worker, samples in phases[name].items():
                print(f"  {worker}: " + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in _peaks(samples).items()),
                      flush=True)

        held = {}
        phase("graph", lambda: None)
        phase("walk", lambda: held.update(walks=gpipe.walks.deepwalk(g, length=args.length, seed=args.seed + 2,
                                                                         walks_per_vertex=args.walks_per_vertex)))
        if "walks" in held:
            stats.update(kept_stats(held["walks"].stats))
        if "walks" in held:
            phase("assembly", lambda: held["walks"].persist())
        else:
            errors["assembly"] = "not run: the walk failed"
        phase("after", lambda: (held.clear(), time.sleep(1.0)))
    report = {**env, "benchmark": "memory", "graph": rmat_record(args), "graph_seconds": built,
              "parameters": {"workers": args.gpus, "partitions": args.gpus * args.partitions_per_gpu,
                             "length": args.length, "walks_per_vertex": args.walks_per_vertex,
                             "interval": args.interval},
              "stats": stats, "seconds": times, "errors": errors,
              "peaks": {name: {w: _peaks(s) for w, s in by_worker.items()} for name, by_worker in phases.items()},
              "samples": {name: {w: [list(s) for s in samples] for w, samples in by_worker.items()}
                          for name, by_worker in phases.items()}}
    write_json(args.out, report)
    figure = draw(report, os.path.splitext(args.out)[0] + ".png")
    print(f"wrote {args.out}" + (f" and {figure}" if figure else ""), flush=True)


if __name__ == "__main__":
    main()
