"""Beyond one GPU: out-of-memory partitions and multi-GPU scaling.

    python benchmarks/scale.py oom --scale 24 --out oom_rmat24_h200.json           # one GPU
    python benchmarks/scale.py scaling --scale 24 --gpus 1 2 --out scaling_rmat24_2xh200.json

``oom`` (C-SAW Fig. 13): DeepWalk (1 walk per vertex, length 80) and biased
neighbor sampling (NeighborSize 2, depth 2, 2,000 and 8,000 instances) on a
graph of 4 partitions, with every partition on the GPU and with a budget of 2
device partitions (the rest in pinned host memory, copied in when scheduled, or
read in place when few walkers or entries wait for them; the budget runs are
repeated with every partition copied in); per run the partition transfers,
reads in place, bytes moved and achieved host-to-device bandwidth, beside a
plain pinned-memory copy's bandwidth on the same GPU.

``scaling``: the same workloads on 1, 2, ... GPUs (``--gpus``, one worker per
GPU), with the graph partitioned (walkers travel between GPUs) and replicated
(each GPU holds all of it and runs its share of the walks or instances);
``--walks deepwalk node2vec`` (p, q: ``--p``, ``--q``) with ``--walks-per-vertex
1 10`` (a corpus's usual 10), neighbor sampling with ``--fanout`` and
``--depth``. Per run: the speed-up over the fewest GPUs (for walks, of the walk
and of the call until its walks are ready in blocks, ``persist``), where a superstep's
time went (kernel, send, barrier, other) and the walker bytes per superstep,
and the digest of the first repeat's output (``stress.py``'s), which must be
the same for every GPU count and mode (``same_outputs``, ``all_same``). Issue
16's runs, on a 4- or 8-GPU host::

    python benchmarks/scale.py scaling --scale 26 --gpus 1 2 4 8 --walks deepwalk node2vec \
        --walks-per-vertex 1 10 --fanout 8 --depth 3 --instances 16000 128000 --repeat 2

``--append`` adds a call's runs to those already in ``--out`` (the same graph), so GPU counts that do not fit
one call's time limit run in calls of their own and end in one report, the speed-ups over the fewest GPUs of all.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import dask
import numpy as np
from _common import (H200_CEILING_STEPS_PER_S, digest, environment, kept_stats, rmat_graph, rmat_record,
                     seed_vertices, warm_starts, watchdog, write_json)
from figures import draw

import gpipe
from gpipe.sampling import Sampler



WALKS = {"deepwalk": lambda g, args, **kw: gpipe.walks.deepwalk(g, **kw),
         "node2vec": lambda g, args, **kw: gpipe.walks.node2vec(g, p=args.p, q=args.q, **kw)}


def _per_superstep(stats: dict) -> dict:
    """Where a run's time went, per superstep: the busiest partition's kernels, the busiest worker's exchange
    (counts, walkers and the barrier), and the rest (dispatch, bookkeeping); and the walker bytes exchanged."""
    steps = max(1, stats.get("supersteps", 1))
    parts = {k: stats.get(f"{k}_seconds", 0.0) / steps for k in ("kernel", "exchange")}
    parts["other"] = stats["seconds"] / steps - sum(parts.values())
    return {"per_superstep_seconds": parts, "walker_bytes_per_superstep": stats.get("walker_bytes", 0) / steps}


def _walk(g, args, name: str, walks_per_vertex: int) -> dict:
    WALKS[name](g, args, length=2, start=warm_starts(g), seed=99).persist()  # compile
    runs, digest_of_first = [], None
    for r in range(args.repeat):
        with watchdog(g.client, f"{name} x{walks_per_vertex}", args.stall_seconds):
            t0 = time.perf_counter()
            w = WALKS[name](g, args, length=args.length, walks_per_vertex=walks_per_vertex, seed=args.seed + r)
            w.persist()  # the whole call a user waits for: the walks made into blocks on the workers
            ready = time.perf_counter() - t0
        runs.append(dict(w.stats, ready_seconds=ready, ready_steps_per_second=w.stats["steps"] / ready))
        if r == 0:  # the same walks wherever they ran: compared across GPU counts and modes
            digest_of_first = digest(w)
        del w
    best = max(runs, key=lambda s: s["steps_per_second"])
    print(f"  {name} x{walks_per_vertex}: {best['steps']:,} steps in {best['seconds']:.3f} s = "
          f"{best['steps_per_second'] / 1e9:.2f} G steps/s{_moved(best)}, ready (persist) in "
          f"{best['ready_seconds']:.3f} s = {best['ready_steps_per_second'] / 1e9:.2f} G steps/s, "
          f"digest {digest_of_first}", flush=True)
    extra = {"p": args.p, "q": args.q} if name == "node2vec" else {}
    return {"workload": name, "length": args.length, "walks_per_vertex": walks_per_vertex, **extra,
            **kept_stats(best), "ready_seconds": best["ready_seconds"],
            "ready_steps_per_second": best["ready_steps_per_second"],
            "fraction_of_h200_ceiling": best["steps_per_second"] / H200_CEILING_STEPS_PER_S,
            **_per_superstep(best), "digest": digest_of_first}


def _sampling(g, instances: int, args) -> dict:
    degrees = g.degrees().to_numpy()
    seeds = seed_vertices(degrees, instances, args.seed)
    sampler = Sampler(edge_bias="weight", neighbor_size=args.fanout, depth=args.depth)
    sampler.run(g, seeds[:8], seed=99)  # compile
    runs, digest_of_first = [], None
    for r in range(args.repeat):
        with watchdog(g.client, f"neighbor sampling x{instances}", args.stall_seconds):
            sample = sampler.run(g, seeds, seed=args.seed + r)
        runs.append(sample.stats)
        if r == 0:
            digest_of_first = digest(sample)
    best = max(runs, key=lambda s: s["edges_per_second"])
    print(f"  neighbor sampling x{instances}: {best['edges']:,} edges in {best['seconds']:.3f} s = "
          f"{best['edges_per_second'] / 1e6:.2f} M SEPS{_moved(best)}, digest {digest_of_first}", flush=True)
    return {"workload": "neighbor-biased", "instances": instances, "neighbor_size": args.fanout, "depth": args.depth,
            **kept_stats(best), **_per_superstep(best), "digest": digest_of_first}


def _superstep(g, args) -> dict:
    """What a superstep costs with (almost) nothing to do: one walker of ``--superstep-length`` steps from the
    highest-degree vertex, each of its crossings to another GPU's partition a superstep of its own (on one GPU
    the walk is one superstep). Per superstep: the whole call's seconds and the exchange's (its counts, the one
    walker and the barrier)."""
    start = [int(np.argmax(g.degrees().to_numpy()))]
    gpipe.walks.deepwalk(g, length=4, start=start, seed=99).persist()  # compile
    runs = []
    for r in range(args.repeat):
        w = gpipe.walks.deepwalk(g, length=args.superstep_length, start=start, seed=args.seed + r)
        runs.append(dict(w.stats))
    best = min(runs, key=lambda s: s["seconds"] / s["supersteps"])
    supersteps = best["supersteps"]
    record = {"workload": "one-walker", "length": args.superstep_length, **kept_stats(best),
              "seconds_per_superstep": best["seconds"] / supersteps,
              "exchange_seconds_per_superstep": best.get("exchange_seconds", 0.0) / supersteps, "digest": None}
    print(f"  one walker, {args.superstep_length} steps: {supersteps} supersteps, "
          f"{record['seconds_per_superstep'] * 1e3:.3f} ms each ({record['exchange_seconds_per_superstep'] * 1e3:.3f}"
          f" ms of exchange)", flush=True)
    return record


def _moved(stats: dict) -> str:
    if "partition_transfers" not in stats:
        return ""
    return (f" ({stats['partition_transfers']} partition transfers, {stats['bytes_moved'] / 1e9:.2f} GB at "
            f"{stats['host_to_device_bytes_per_second'] / 1e9:.1f} GB/s, "
            f"{stats['partition_reads_in_place']} read in place)")


def _workloads(g, args, walks=("deepwalk",), walks_per_vertex=(1,), superstep: bool = False) -> list[dict]:
    return ([_walk(g, args, name, r) for name in walks for r in walks_per_vertex]
            + [_sampling(g, n, args) for n in args.instances]
            + ([_superstep(g, args)] if superstep and args.superstep_length else []))


def _pinned_copy_bandwidth(nbytes: int = 1 << 30, repeat: int = 5) -> float:
    """Bytes per second of a plain host-to-device copy from pinned memory (cupy, default stream)."""
    import cupy

    pinned = cupy.cuda.alloc_pinned_memory(nbytes)
    host = np.frombuffer(pinned, np.uint8, nbytes)
    host[:] = 1
    device = cupy.empty(nbytes, cupy.uint8)
    best = float("inf")
    for _ in range(repeat):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        device.set(host)
        cupy.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - t0)
    return nbytes / best


def _oom(args) -> dict:
    records = []
    with gpipe.connect(n_workers=1, device=args.device, dashboard_address=":0") as client:
        env = environment(client, args.device)
        plain = client.submit(_pinned_copy_bandwidth, pure=False).result() if args.device == "gpu" else float("nan")
        print(f"plain pinned copy: {plain / 1e9:.1f} GB/s", flush=True)
        for budget in (None, args.budget):
            with dask.config.set({"gpipe.memory.device-partitions": budget}):
                g, built = rmat_graph(args, partitions=args.partitions, mode="partitioned")
            print(f"{g}: device partitions {budget or 'all'} (built in {built:.1f} s)", flush=True)
            for below in ((None,) if budget is None else (args.read_in_place_below, 0.0)):
                if below is not None:
                    print(f" read in place below {below:g} x the partition's vertices", flush=True)
                with dask.config.set({} if below is None else {"gpipe.memory.read-in-place-below": below}):
                    for record in _workloads(g, args):
                        records.append(dict(record, device_partitions=budget or args.partitions,
                                            read_in_place_below=below))
            g.release()
    resident = {(r["workload"], r.get("instances")): r for r in records if r["device_partitions"] == args.partitions}
    ratios = {}
    for r in records:
        if r["device_partitions"] != args.partitions:
            base = resident[(r["workload"], r.get("instances"))]
            name = (r["workload"] + (f" x{r['instances']}" if "instances" in r else "")
                    + (" (always copy in)" if r["read_in_place_below"] == 0 else ""))
            ratios[f"{name}: budget {args.budget} / all resident throughput"] = (
                r["steps_per_second"] / base["steps_per_second"] if r["workload"] == "deepwalk"
                else r["edges_per_second"] / base["edges_per_second"])
            if r["partition_transfers"]:
                ratios[f"{name}: achieved / plain pinned copy bandwidth"] = r["host_to_device_bytes_per_second"] / plain
    return {**env, "benchmark": "oom", "partitions": args.partitions, "budget": args.budget,
            "plain_pinned_copy_bytes_per_second": plain, "records": records, "ratios": ratios}


def _scaling(args) -> dict:
    """The runs on each GPU count in turn; the JSON is rewritten after each graph's runs (``"complete": false``
    until the end), so a run stopped by a time limit leaves the GPU counts it finished. With ``--append``, after the
    runs already in ``--out``."""
    records, env = _earlier_runs(args), None
    for gpus in args.gpus:
        with gpipe.connect(n_workers=gpus, device=args.device, dashboard_address=":0") as client:
            env = env or environment(client, args.device)
            for mode in args.modes:
                g, built = rmat_graph(args, mode=mode)
                print(f"{gpus} GPU(s), {g} (built in {built:.1f} s)", flush=True)
                records += [dict(r, gpus=gpus, graph_mode=mode)
                            for r in _workloads(g, args, args.walks, args.walks_per_vertex, superstep=True)]
                g.release()
                write_json(args.out, dict(_scaling_report(env, records, args), complete=False))
    return dict(_scaling_report(env, records, args), complete=True)


def _earlier_runs(args) -> list[dict]:
    """The runs already in ``--out`` with ``--append`` (of the same graph and walk length), else none: GPU counts run
    in calls of their own (each call of a lent machine has a time limit) end in one report."""
    if not args.append or not os.path.exists(args.out):
        return []
    with open(args.out) as f:
        earlier = json.load(f)
    lengths = {r["length"] for r in earlier.get("records", []) if "length" in r}
    if earlier.get("benchmark") != "scaling" or earlier.get("graph") != rmat_record(args) or lengths - {args.length}:
        raise SystemExit(f"--append: {args.out} holds runs of another benchmark, graph or walk length "
                         f"({earlier.get('benchmark')}, {earlier.get('graph')}, lengths {sorted(lengths)}), not "
                         f"scaling of {rmat_record(args)} with length {args.length}")
    return earlier["records"]


def _scaling_report(env: dict, records: list[dict], args) -> dict:
    ratios, same = {}, {}
    first = min(r["gpus"] for r in records)
    for r in records:
        setting = ("workload", "instances", "walks_per_vertex")
        # one seed, one graph: the same output for every GPU count and graph mode (the 1-GPU replicated run first)
        base = next(o for o in records if all(o.get(k) == r.get(k) for k in setting))
        if r["digest"] is None:  # the one-walker run: a cost, not an output
            continue
        r["same_as_first"] = r["digest"] == base["digest"]
        name = r["workload"] + (f" x{r['instances']}" if "instances" in r else
                                f" {r['walks_per_vertex']} walk(s)/vertex")
        same[f"{name}, {r['graph_mode']}, {r['gpus']} GPU(s)"] = r["same_as_first"]
        if r["gpus"] != first:
            key = "edges_per_second" if "instances" in r else "steps_per_second"
            one = next(o for o in records if o["gpus"] == first and o["graph_mode"] == r["graph_mode"]
                       and all(o.get(k) == r.get(k) for k in setting))
            ratios[f"{name}, {r['graph_mode']}: {r['gpus']} / {first} GPU throughput"] = r[key] / one[key]
            if "ready_steps_per_second" in r:  # the call until the walks are ready (persist)
                ratios[f"{name}, {r['graph_mode']}: {r['gpus']} / {first} GPU throughput until ready"] = (
                    r["ready_steps_per_second"] / one["ready_steps_per_second"])
    different = [k for k, v in same.items() if not v]
    print("the same walks and samples on every GPU count and mode so far" if not different else
          f"DIFFERENT from the first run of the same seed: {different}", flush=True)
    return {**env, "benchmark": "scaling", "graph": rmat_record(args), "records": records, "ratios": ratios,
            "same_outputs": same, "all_same": not different}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmark", choices=["oom", "scaling"])
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu", help="cpu: a dry run of the script")
    ap.add_argument("--scale", type=int, default=24)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--length", type=int, default=80)
    ap.add_argument("--instances", type=int, nargs="+", default=[2000, 8000])
    ap.add_argument("--partitions", type=int, default=4, help="oom: partitions of the graph")
    ap.add_argument("--budget", type=int, default=2, help="oom: partitions on the GPU at once")
    ap.add_argument("--read-in-place-below", type=float, default=0.01,
                    help="oom: gpipe.memory.read-in-place-below of the budget runs (also run with 0: always copy in)")
    ap.add_argument("--gpus", type=int, nargs="+", default=[1, 2], help="scaling: GPU counts")
    ap.add_argument("--modes", nargs="+", default=["replicated", "partitioned"], help="scaling: graph modes")
    ap.add_argument("--walks", nargs="+", choices=list(WALKS), default=["deepwalk"], help="scaling: the walks")
    ap.add_argument("--walks-per-vertex", type=int, nargs="+", default=[1], help="scaling: walks per vertex")
    ap.add_argument("--p", type=float, default=0.5, help="node2vec return parameter")
    ap.add_argument("--q", type=float, default=2.0, help="node2vec in-out parameter")
    ap.add_argument("--fanout", type=int, default=2, help="neighbor sampling: neighbors per vertex (C-SAW's 2)")
    ap.add_argument("--depth", type=int, default=2, help="neighbor sampling: hops")
    ap.add_argument("--superstep-length", type=int, default=400,
                    help="scaling: the one-walker run measuring a superstep's cost (0: none)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--stall-seconds", type=float, default=60,
                    help="print the workers' thread stacks when one run has taken this long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="scale.json")
    ap.add_argument("--append", action="store_true",
                    help="scaling: add these runs to those already in --out (the same graph and length)")
    args = ap.parse_args()
    report = _oom(args) if args.benchmark == "oom" else _scaling(args)
    report["graph"] = rmat_record(args)
    write_json(args.out, report)
    figure = draw(report, os.path.splitext(args.out)[0] + ".png")
    print(f"wrote {args.out}" + (f" and {figure}" if figure else " (no figure: matplotlib is not installed)"))
    print(json.dumps(report["ratios"], indent=1))


if __name__ == "__main__":
    main()
