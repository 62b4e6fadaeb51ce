"""What a partitioned superstep costs: the exchange that ends it (``empty``) and the kernel that advances it
(``kernel``).

    python benchmarks/superstep.py --gpus 2 4 --out superstep_2xh200.json      # on a host with 4 GPUs
    python benchmarks/superstep.py --device cpu --gpus 2 --out /tmp/superstep.json   # CPU workers: the comms
    python benchmarks/superstep.py kernel --scale 24 --partitions 2 4 --out superstep_kernel_rmat24_h200.json

``empty``: for each worker count of ``--gpus`` (one worker per GPU) and each exchange
path (``nccl`` and ``comms`` on GPU workers, ``comms`` on CPU workers), every
worker ends ``--rounds`` supersteps with nothing to send, as the ranks of a run
do once they have no walker left (``runtime/_exchange.py``: its header of walker
counts to every peer, and the barrier). A communicator is made before the
timed rounds, as a run's first superstep does; the median and the mean of the
slowest worker's rounds go to the JSON, with a PNG beside it.

``kernel`` (issue 66): a GPU's kernel in a partitioned superstep against the whole-graph kernel, on one GPU.
DeepWalk (``--walks-per-vertex``, ``--length``) on an R-MAT graph whole on one worker (one partition: one
launch walks every walker to its end), then cut in each of ``--partitions`` partitions, all on the same worker,
each advanced on its own as each GPU of a run over that many GPUs advances its own: the walkers of a partition
until they leave it, written to their rows, the leavers grouped for their partitions. (A worker joins the
partitions it holds into one span where walkers may cross freely; here that is turned off on the worker, so the
walkers that leave a partition wait in the next's inbox, which the worker drains as it would a peer's arrivals.)
Per run: the whole call's seconds, the kernels' (``kernel_seconds``, each advance until its leavers are counted
on the host; ``superstep_kernels``: each superstep's steps and seconds), their steps per second
(``kernel_steps_per_second``) and its ratio to the whole graph's, the crossings per step, and the walks' digest,
which must be the same for every cut. ``launches``: each kernel's launches and their seconds on the device
(CUDA events around each launch on a GPU worker, the clock around the twin's call on a CPU one), and
``launch_steps_per_second``, the steps over them: ``kernel_seconds`` less these is the host's work around the
kernels (R-MAT 23 cut in 2 on one H100: 0.334 s of the kernels' 0.465).
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import numpy as np
from _common import digest, environment, write_json
from figures import draw

import gpipe
from gpipe.runtime import _nccl
from gpipe.runtime._exchange import CommsTransport, Exchange, NcclTransport, Watch


def _rounds(run_id: str, workers: list[str], nccl: tuple | None, rounds: int) -> list[float]:
    """On a worker: the seconds of each of ``rounds`` empty superstep ends of a run of its own."""
    from gpipe.runtime._store import store

    st = store()
    run = st.run(run_id)
    rank = workers.index(st.worker_address)
    watch = Watch(run, [w for w in workers if w != st.worker_address])
    if nccl is None:
        transport = CommsTransport(run, workers, rank)
    else:
        transport = NcclTransport(st.communicators.get(*nccl, len(workers), rank, watch), workers, rank)
    bounds = np.arange(len(workers) + 1, dtype=np.int64) * 1000  # a partition per worker
    exchange = Exchange(run, transport, workers, tuple(workers), bounds, None, st.device)
    nothing = np.zeros(len(workers), np.int64)
    seconds = []
    try:
        for superstep in range(rounds):
            t0 = time.perf_counter()
            exchange.end_superstep(superstep, nothing, {}, False)
            seconds.append(time.perf_counter() - t0)
    finally:
        run.close()
    return seconds


def _measure(client, path: str, rounds: int) -> dict:
    workers = sorted(client.nthreads())
    run_id = uuid.uuid4().hex[:12]

    def on_every_worker(nccl):
        futures = [client.submit(_rounds, run_id, workers, nccl, rounds, workers=[w], pure=False) for w in workers]
        return np.max(np.array(client.gather(futures)), axis=0)  # a superstep ends when its slowest worker's does

    if path == "nccl":
        with _nccl.lease(client, workers) as nccl:
            seconds = on_every_worker(nccl)
    else:
        seconds = on_every_worker(None)
    return {"workload": "empty-superstep", "gpus": len(workers), "exchange": path, "rounds": rounds,
            "seconds": float(np.median(seconds)), "mean_seconds": float(seconds.mean()),
            "p90_seconds": float(np.quantile(seconds, 0.9))}


def _own_partitions_apart() -> None:
    """On a worker: never join the partitions it holds into a span (see the module's docstring)."""
    from gpipe.runtime import _partitions

    _partitions.Partitions.span = lambda self, graph_id, parts: None


def _time_launches() -> None:
    """On a worker: time each launch of every declared kernel on its device, kept until :func:`_launches`."""
    import threading

    from gpipe import kernels

    if hasattr(kernels.Kernel, "_untimed"):
        return
    timed: list = []
    lock = kernels._timed_lock = threading.Lock()
    untimed = kernels.Kernel._untimed = kernels.Kernel.launch

    def launch(self, **values):
        arrays = [v for v in values.values() if hasattr(v, "__cuda_array_interface__")]
        if not arrays:
            t0 = time.perf_counter()
            untimed(self, **values)
            with lock:
                timed.append((self.name, time.perf_counter() - t0))
            return
        import cupy

        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        untimed(self, **values)
        end.record()
        with lock:
            timed.append((self.name, (start, end)))

    kernels.Kernel.launch = launch
    kernels._timed = timed


def _launches() -> dict:
    """On a worker: each kernel's launches since the last call, and their seconds (:func:`_time_launches`)."""
    from gpipe import kernels

    out: dict = {}
    with kernels._timed_lock:
        taken, kernels._timed[:] = list(kernels._timed), []
    for name, spent in taken:
        if isinstance(spent, tuple):  # CUDA events
            spent[1].synchronize()
            spent = _elapsed(*spent)
        count, seconds = out.get(name, (0, 0.0))
        out[name] = (count + 1, seconds + spent)
    return {name: {"count": c, "seconds": t} for name, (c, t) in out.items()}


def _elapsed(start, end) -> float:
    """Seconds between two recorded CUDA events."""
    import cupy

    return cupy.cuda.get_elapsed_time(start, end) / 1e3


def _kernel(client, args) -> list[dict]:
    records = []
    client.run(_own_partitions_apart)
    client.run(_time_launches)
    for parts in [1, *args.partitions]:
        g = gpipe.generators.rmat(scale=args.scale, edge_factor=args.edge_factor, seed=args.seed, partitions=parts,
                                  mode="partitioned")
        for repeat in range(args.repeat):
            client.run(_launches)  # (the graph's own: not the walk's)
            t0 = time.perf_counter()
            w = gpipe.walks.deepwalk(g, length=args.length, walks_per_vertex=args.walks_per_vertex, seed=args.seed)
            seconds = time.perf_counter() - t0
            stats = w.stats
            launches = next(iter(client.run(_launches).values()))
            launch_seconds = sum(k["seconds"] for k in launches.values())
            record = {"workload": "deepwalk", "partitions": parts, "repeat": repeat, "length": args.length,
                      "walks_per_vertex": args.walks_per_vertex, "seconds": seconds, "steps": stats["steps"],
                      "steps_per_second": stats["steps"] / seconds, "kernel_seconds": stats["kernel_seconds"],
                      "kernel_steps_per_second": stats["kernel_steps_per_second"],
                      "crossings_per_step": stats.get("crossings_per_step", 0.0), "batches": stats["batches"],
                      "device_memory_peak": stats["device_memory_peak"],
                      "superstep_kernels": stats.get("superstep_kernels"),  # each superstep's steps and seconds
                      "launches": launches, "launch_seconds": launch_seconds,
                      "launch_steps_per_second": stats["steps"] / launch_seconds if launch_seconds else 0.0}
            if repeat == args.repeat - 1:
                record["digest"] = digest(w)
            del w
            records.append(record)
            print(f"{parts} partition(s): {seconds:.3f} s, kernels {record['kernel_seconds']:.3f} s, "
                  f"{record['kernel_steps_per_second'] / 1e9:.2f} G steps/s in the kernels "
                  f"({record['launch_steps_per_second'] / 1e9:.2f} on the device), "
                  f"{record['crossings_per_step']:.3f} crossings a step", flush=True)
        del g
    whole = [r for r in records if r["partitions"] == 1]
    best = max(r["kernel_steps_per_second"] for r in whole)
    best_launches = max(r["launch_steps_per_second"] for r in whole)
    for r in records:
        r["of_whole_graph_kernel"] = r["kernel_steps_per_second"] / best
        r["launches_of_whole_graph"] = r["launch_steps_per_second"] / best_launches if best_launches else 0.0
        r["same_as_whole"] = r.get("digest", whole[-1]["digest"]) == whole[-1]["digest"]
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", nargs="?", choices=["empty", "kernel"], default="empty")
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--gpus", type=int, nargs="+", default=[2], help="worker counts (one worker per GPU)")
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--scale", type=int, default=24, help="kernel: the R-MAT graph's scale")
    ap.add_argument("--edge-factor", type=int, default=16, help="kernel: its edges per vertex")
    ap.add_argument("--seed", type=int, default=0, help="kernel: the graph's and the walks' seed")
    ap.add_argument("--partitions", type=int, nargs="+", default=[2, 4], help="kernel: the cuts, on one worker")
    ap.add_argument("--walks-per-vertex", type=int, default=10, help="kernel")
    ap.add_argument("--length", type=int, default=80, help="kernel")
    ap.add_argument("--repeat", type=int, default=2, help="kernel: runs of each cut (the last one's digest)")
    ap.add_argument("--out", default="superstep.json")
    args = ap.parse_args()
    if args.workload == "kernel":
        with gpipe.connect(n_workers=1, device=args.device, dashboard_address=":0") as client:
            env = environment(client, args.device)
            gpipe.warmup(client)
            records = _kernel(client, args)
        graph = {"generator": "rmat", "scale": args.scale, "edge_factor": args.edge_factor, "seed": args.seed}
        report = {**env, "benchmark": "superstep_kernel", "graph": graph,
                  "parameters": {k: v for k, v in vars(args).items() if k not in ("out", "gpus", "rounds")},
                  "records": records}
        write_json(args.out, report)
        figure = draw(report, os.path.splitext(args.out)[0] + ".png")
        print(f"wrote {args.out}" + (f" and {figure}" if figure else " (no figure: matplotlib is not installed)"))
        return
    records, env = [], None
    for count in args.gpus:
        with gpipe.connect(n_workers=count, device=args.device, dashboard_address=":0") as client:
            env = env or environment(client, args.device)
            for path in (("nccl", "comms") if args.device == "gpu" else ("comms",)):
                records.append(_measure(client, path, args.rounds))
                r = records[-1]
                print(f"{count} workers, {path}: {r['seconds'] * 1e3:.3f} ms median, {r['mean_seconds'] * 1e3:.3f} "
                      f"ms mean, {r['p90_seconds'] * 1e3:.3f} ms p90 per empty superstep", flush=True)
    report = {**env, "benchmark": "superstep", "parameters": {k: v for k, v in vars(args).items() if k != "out"},
              "records": records}
    write_json(args.out, report)
    figure = draw(report, os.path.splitext(args.out)[0] + ".png")
    print(f"wrote {args.out}" + (f" and {figure}" if figure else " (no figure: matplotlib is not installed)"))


if __name__ == "__main__":
    main()
