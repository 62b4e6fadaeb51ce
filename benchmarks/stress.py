"""GPU stress suite: every walk and sampler over N GPUs, each output compared by digest with a reference run.

    python benchmarks/stress.py --gpus 2 --out stress_rmat24_2xh200.json                # on a 2-GPU host
    python benchmarks/stress.py --device cpu --scale 12 --gpus 1 2 --repeat 1 --out /tmp/stress.json  # dry run

Run it before calling a multi-GPU change done. References first: every
workload, once per seed it will run with, with the graph replicated on
``--reference-gpus`` GPUs (default the most of ``--gpus``): each GPU runs its
share of the walks or instances on its own copy, so no walker or frontier entry
ever leaves its GPU. ``--reference-gpus 1`` is the strictest reference, for
smaller runs: one H200 cannot assemble the 54 GB walk matrix of R-MAT 24 with
10 walks per vertex (it runs out of device memory, and of host memory with
``gpipe.memory.output-limit`` at 16 GB), nor partition it on one GPU, so
``--gpus 1`` is for smaller runs too. Then, for each GPU count N of ``--gpus``
(one worker per GPU), on the R-MAT graph cut in ``--partitions-per-gpu`` x N
partitions, all of them on the GPUs (``partitioned``) and with
``--device-partitions`` per GPU at once, the rest in pinned host memory
(``oom``); on each, through each exchange path of ``--exchanges`` (``auto``:
NCCL between GPU workers that have it; ``nccl``; ``comms``: Dask's comms; none
when N is 1): ``--repeat`` rounds (seed + round) of every workload, then of
the ``--concurrent`` workloads submitted at once from threads (the i-th with
seed + round + i).

A digest is a blake2b: of a walk matrix, of a 64-bit hash of each row in walk
order, computed on the workers block by block on the block's device (the
corpus never comes to the client); of sampled edges, of the frame sorted by
all its columns. A run fails when its digest differs from its reference or
when its exchange was not the one asked (under ``auto``, anything but NCCL
between GPU workers). The JSON holds per run the workload, parameters, where
it ran, seconds, throughput, digests, the stats ``exchange`` /
``walker_bytes`` / ``wire`` (a walker's bytes and its fields' bits on the wire) /
``exchange_seconds`` / ``opening_seconds`` (the slowest
worker's time before its first superstep) / ``worker_seconds`` (its time in
all: ``seconds`` less it is the client's and the calls') / ``host_memory_peak`` /
``device_memory_peak``, and the walker bytes per second of the exchange (all
walker bytes over the busiest worker's ``exchange_seconds``, which includes
waiting at the barrier) beside a plain peer-to-peer copy's from GPU 0 to GPU 1
of the same host; a PNG figure beside it when matplotlib is installed.
Each cluster is warmed up first (``gpipe.warmup``: its seconds in ``warmup_seconds``), so no run
times a compile (a workload's first run may still pay other first-use costs).
The JSON is rewritten after every run (``"complete": false`` until the
end), so a run stopped by a time limit leaves the runs it finished. The defaults
take longer than one call of a lent machine: ``--append`` adds a call's runs (of
its ``--workloads``, its ``--concurrent`` ones or none) to those ``--out`` holds
already, of the same graph and sizes (compared with the references made before,
made again only where missing), and ``missing`` in the JSON lists the runs
of the defaults (every workload, mode and exchange, ``--repeat`` rounds, and the
default concurrent pair) still to make on its GPU counts: none, and
``"covers_defaults": true``, once the calls together made them all.
The script exits with status 1, listing every failed run, if any failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import dask
import numpy as np
from _common import digest, environment, kept_stats, rmat_graph, rmat_record, seed_vertices, watchdog, write_json

import gpipe
from gpipe.sampling import Sampler

WALKS = ("deepwalk", "deepwalk-weighted", "node2vec", "metropolis-hastings", "jump", "ppr", "multidimensional")
SAMPLERS = ("neighbor", "neighbor-weighted", "forest-fire", "snowball", "layer", "random-node", "random-edge",
            "sampler-degree")
MODES, EXCHANGES, CONCURRENT = ("partitioned", "oom"), ("auto", "comms"), ("deepwalk", "deepwalk")  # the defaults
STALL_SECONDS = 180  # a run taking longer prints the workers' thread stacks (R-MAT 24 DeepWalk x10 partitioned: 37 s)
# Sizes left unset, by device: the CPU's for a dry run of the script on a small graph, on a 2-core machine.
SIZES = {"gpu": {"length": 80, "instances": 20000, "frontier_instances": 1000},
         "cpu": {"length": 20, "instances": 500, "frontier_instances": 20}}


def _prefer_hubs(table):
    return table["degree"] ** 2


def _hub_sampler(g, seeds, seed: int, **options):
    """C-SAW's example: a degree vertex bias, an edge bias of the degree squared (vectorized: numpy or cupy)."""
    return Sampler(edge_bias=_prefer_hubs, **options).run(g, seeds, seed=seed)


def _workloads(g, args) -> dict:
    """Each workload's function and its keyword arguments but the seed."""
    seeds = seed_vertices(g.degrees().to_numpy(), args.instances, args.seed)
    walk = {"length": args.length, "walks_per_vertex": args.walks_per_vertex}
    subgraphs = {"instances": args.subgraph_instances}
    return {
        "deepwalk": (gpipe.walks.deepwalk, walk),
        "deepwalk-weighted": (gpipe.walks.deepwalk, {**walk, "weighted": True}),
        "node2vec": (gpipe.walks.node2vec, {**walk, "p": args.p, "q": args.q}),
        "metropolis-hastings": (gpipe.walks.metropolis_hastings, walk),
        "jump": (gpipe.walks.with_jump, {**walk, "jump": 0.1}),
        "ppr": (gpipe.walks.ppr, {"start": g.to_original(np.arange(g.num_vertices)), "restart": 0.15,
                                  "walks_per_source": args.walks_per_vertex, "length": args.length}),
        "multidimensional": (gpipe.walks.multidimensional, {"frontier_size": args.frontier_size,
                                                            "budget": args.budget,
                                                            "instances": args.frontier_instances}),
        "neighbor": (gpipe.sampling.neighbor, {"seeds": seeds, "fanout": 2, "depth": 2}),
        "neighbor-weighted": (gpipe.sampling.neighbor, {"seeds": seeds, "fanout": 2, "depth": 2, "weighted": True}),
        "forest-fire": (gpipe.sampling.forest_fire, {"seeds": seeds, "p_forward": 0.7, "depth": 2}),
        "snowball": (gpipe.sampling.snowball, {"seeds": seeds, "depth": 2, "max_per_vertex": 10}),
        "layer": (gpipe.sampling.layer, {"seeds": seeds, "layer_size": 8, "depth": 2}),
        "random-node": (gpipe.sampling.random_node, {"n": args.subgraph_size, **subgraphs}),
        "random-edge": (gpipe.sampling.random_edge, {"m": args.subgraph_size, **subgraphs}),
        "sampler-degree": (_hub_sampler, {"seeds": seeds, "vertex_bias": "degree", "frontier_size": 4,
                                          "neighbor_size": 3, "update": "unvisited", "depth": 3}),
    }


def _parameters(kwargs: dict) -> dict:
    return {k: f"{len(v):,} vertices" if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


def _run(workload: tuple, g, seed: int) -> tuple[dict, str | None, str | None]:
    """The run's stats and digest, or the error that stopped it (a failed run: the suite goes on)."""
    function, kwargs = workload
    try:
        with watchdog(g.client, f"{getattr(function, '__name__', 'a run')} seed {seed}", STALL_SECONDS):
            result = function(g, seed=seed, **kwargs)
        return result.stats, digest(result), None
    except Exception as exc:  # a CUDA error outside a run included: recorded, and the suite goes on
        return {}, None, f"{type(exc).__name__}: {exc}"


def _throughput(stats: dict) -> tuple[float | None, str | None]:
    for key, unit in (("edges_per_second", "edges/s"), ("steps_per_second", "steps/s")):
        if key in stats:
            return stats[key], unit
    return None, None


def _outcome(stats: dict, error: str | None) -> str:
    if error:
        return f"FAILED: {error}"
    throughput, unit = _throughput(stats)
    scale, prefix = (1e9, "G") if throughput >= 1e9 else (1e6, "M")
    return f"{stats['seconds']:.3f} s, {throughput / scale:.2f} {prefix} {unit}"


def _references(g, table: dict, needed: set) -> dict:
    references = {}
    for name, seed in sorted(needed):
        stats, digest, error = _run(table[name], g, seed)
        throughput, unit = _throughput(stats)
        references[(name, seed)] = {"workload": name, "seed": seed, "digest": digest, "error": error,
                                    "seconds": stats.get("seconds"), "throughput": throughput,
                                    "throughput_unit": unit}
        print(f"  reference {name} seed {seed}: {_outcome(stats, error)}, digest {digest}", flush=True)
    return references


def _record(name: str, kwargs: dict, seed: int, run: tuple, reference: str | None, where: dict,
            device: str) -> dict:
    stats, digest, error = run
    moved, path = stats.get("walker_bytes", 0), stats.get("exchange")
    asked = {"auto": "comms" if device == "cpu" else "nccl"}.get(where["exchange"], where["exchange"])
    throughput, unit = _throughput(stats)
    record = {"workload": name, "parameters": _parameters(kwargs), "seed": seed, **kept_stats(stats), **where,
              "exchange_used": path,
              "throughput": throughput, "throughput_unit": unit, "digest": digest, "reference_digest": reference,
              "equal": digest is not None and digest == reference, "error": error,
              "path_as_asked": error is not None or path == (asked if where["gpus"] > 1 else "none"),
              "walker_bytes_per_second": moved / stats["exchange_seconds"] if stats.get("exchange_seconds") else None}
    sent = (f", walkers {moved / 1e9:.3f} GB ({stats['wire']['bytes_per_walker']} B each) through {path} in "
            f"{stats['exchange_seconds']:.3f} s of exchanges" if moved else "")
    verdict = "equal" if record["equal"] else f"DIFFERENT: digest {digest} != reference {reference}"
    if not record["path_as_asked"]:
        verdict += f"; THE EXCHANGE WAS {path!r}, not the {where['exchange']!r} asked"
    print(f"    {name} seed {seed}{' (concurrent)' if where['concurrent'] else ''}: {_outcome(stats, error)}"
          f"{sent}{'' if error else ': ' + verdict}", flush=True)
    return record


def _stress(g, table: dict, references: dict, args, where: dict, records: list, save) -> None:
    """Every workload ``--repeat`` times and the concurrent runs, through each exchange path, added to
    ``records``; ``save()`` after each run."""
    for exchange in args.exchanges if where["gpus"] > 1 else ["auto"]:
        print(f"  exchange {exchange}", flush=True)
        with dask.config.set({"gpipe.exchange": exchange}):  # read by the client when a run starts
            for r in range(args.repeat):
                for name in args.workloads:
                    seed = args.seed + r
                    records.append(_record(name, table[name][1], seed, _run(table[name], g, seed),
                                           references[(name, seed)]["digest"],
                                           dict(where, exchange=exchange, concurrent=False), args.device))
                    save()
                if not args.concurrent:
                    continue
                seeds = [args.seed + r + i for i in range(len(args.concurrent))]
                with ThreadPoolExecutor(len(args.concurrent)) as pool:
                    runs = list(pool.map(_run, [table[name] for name in args.concurrent], [g] * len(seeds), seeds))
                for name, seed, run in zip(args.concurrent, seeds, runs):
                    records.append(_record(name, table[name][1], seed, run,
                                           references[(name, seed)]["digest"],
                                           dict(where, exchange=exchange, concurrent=True), args.device))
                save()


def _peer_copy_bandwidth(nbytes: int = 1 << 30, repeat: int = 5) -> float:
    """Bytes per second of a plain copy from this process's GPU 0 to its GPU 1, peer access on (best of ``repeat``)."""
    import cupy

    runtime = cupy.cuda.runtime
    with cupy.cuda.Device(0):
        try:
            runtime.deviceEnablePeerAccess(1)
        except runtime.CUDARuntimeError as exc:
            if exc.status != 704:  # cudaErrorPeerAccessAlreadyEnabled
                raise
        source = cupy.ones(nbytes, cupy.uint8)
    with cupy.cuda.Device(1):
        target = cupy.empty(nbytes, cupy.uint8)
    best = float("inf")
    for _ in range(repeat):
        for device in (0, 1):
            cupy.cuda.Device(device).synchronize()
        t0 = time.perf_counter()
        runtime.memcpyPeer(target.data.ptr, 1, source.data.ptr, 0, nbytes)
        cupy.cuda.Device(1).synchronize()
        best = min(best, time.perf_counter() - t0)
    del source, target
    cupy.get_default_memory_pool().free_all_blocks()
    return nbytes / best


SIZED = ("device", "scale", "edge_factor", "partitions_per_gpu", "device_partitions", "length", "walks_per_vertex",
         "p", "q", "frontier_size", "budget", "frontier_instances", "instances", "subgraph_size",
         "subgraph_instances", "seed")  # what makes two calls' runs comparable, to --append one to the other


def _earlier(args) -> tuple[list, dict | None, float | None, list]:
    """With ``--append``: the records, environment, peer copy rate and references of ``--out`` (refused if its graph
    or sizes are not this call's); else nothing."""
    if not args.append or not os.path.exists(args.out):
        return [], None, None, []
    with open(args.out) as f:
        earlier = json.load(f)
    theirs = earlier.get("parameters", {})
    differ = [k for k in SIZED if theirs.get(k) != getattr(args, k)]
    if earlier.get("benchmark") != "stress" or earlier.get("graph") != rmat_record(args) or differ:
        raise SystemExit(f"--append: {args.out} holds runs of another benchmark, graph or sizes "
                         f"({', '.join(differ) or earlier.get('benchmark')}), not this call's")
    env = {k: earlier[k] for k in ("device", "device_name", "versions", "date") if k in earlier}
    return earlier["records"], env, earlier.get("peer_copy_bytes_per_second"), earlier.get("references", [])


def _missing(records: list, args) -> list[str]:
    """The runs of the defaults on ``--gpus`` that ``records`` do not hold (equal or not): each workload of
    every mode and exchange path (``auto`` alone on one GPU) in ``--repeat`` rounds, and the default concurrent
    pair after each round."""
    made = {(r["workload"], r["gpus"], r["graph_mode"], r["exchange"], r["concurrent"], r["seed"]) for r in records}
    missing = []
    for gpus in args.gpus:
        for mode in MODES:
            for exchange in EXCHANGES if gpus > 1 else ("auto",):
                for r in range(args.repeat):
                    wanted = [(name, False, args.seed + r) for name in (*WALKS, *SAMPLERS)]
                    wanted += [(name, True, args.seed + r + i) for i, name in enumerate(CONCURRENT)]
                    missing += [f"{name}{' (concurrent)' if concurrent else ''} seed {seed}, {gpus} GPU(s), {mode}, "
                                f"{exchange}" for name, concurrent, seed in wanted
                                if (name, gpus, mode, exchange, concurrent, seed) not in made]
    return missing


def _gpus(count: int, device: str) -> str:
    return f"{count} {device.upper()}{'s' * (count > 1)}"


def _setting(record: dict) -> str:
    gpus = record["gpus"]
    return f"{gpus} GPU{'s' * (gpus > 1)}, {record['graph_mode']}, {record['exchange']}"


def _figure(report: dict, path: str) -> str | None:
    """Walker bytes/s per workload beside the peer-to-peer copy, and the runs equal per workload and setting."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    records, peer = report["records"], report["peer_copy_bytes_per_second"]
    names = list(dict.fromkeys(r["workload"] for r in records))
    settings = list(dict.fromkeys(_setting(r) for r in records))
    fig, (rates, verdicts) = plt.subplots(2, 1, figsize=(12, 11), constrained_layout=True)
    sending = [s for s in settings if any(_setting(r) == s and r["walker_bytes_per_second"] for r in records)]
    for k, setting in enumerate(sending):
        runs = [r for r in records if _setting(r) == setting and r["walker_bytes_per_second"]]
        offset = (k - (len(sending) - 1) / 2) * 0.8 / len(sending)
        rates.scatter([names.index(r["workload"]) + offset for r in runs],
                      [r["walker_bytes_per_second"] / 1e9 for r in runs], s=18, label=setting)
    if peer:
        rates.axhline(peer / 1e9, color="black", linestyle="--", label="plain peer-to-peer copy, GPU 0 -> 1")
    rates.set_xticks(range(len(names)), names, rotation=30, ha="right")
    rates.set_yscale("log")
    rates.set_ylabel("walker GB/s while sending")
    if sending or peer:
        rates.legend(fontsize=8)
    rates.set_title(f"Walker bytes / the busiest worker's send seconds, per run ({report['device_name']})")
    rows = list(dict.fromkeys(_row(r) for r in records))
    for x, setting in enumerate(settings):
        for y, row in enumerate(rows):
            runs = [r["equal"] and r["path_as_asked"] for r in records if _setting(r) == setting and _row(r) == row]
            if runs:
                verdicts.scatter(x, y, s=500, marker="s", color="tab:green" if all(runs) else "tab:red")
                verdicts.text(x, y, f"{sum(runs)}/{len(runs)}", ha="center", va="center", fontsize=7)
    verdicts.set_xticks(range(len(settings)), settings, rotation=15, ha="right")
    verdicts.set_yticks(range(len(rows)), rows)
    verdicts.set_xlim(-0.5, len(settings) - 0.5)
    verdicts.set_ylim(len(rows) - 0.5, -0.5)
    failed = report["failed"]
    verdicts.set_title(f"Runs equal to their reference (red: not all): {report['runs'] - failed} of "
                       f"{report['runs']}")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _row(record: dict) -> str:
    return record["workload"] + (" (concurrent)" if record["concurrent"] else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu", help="cpu: a dry run (gpus = CPU workers)")
    ap.add_argument("--workloads", nargs="+", choices=[*WALKS, *SAMPLERS], default=[*WALKS, *SAMPLERS])
    ap.add_argument("--concurrent", nargs="*", choices=[*WALKS, *SAMPLERS], default=list(CONCURRENT),
                    help="workloads run at once from threads after each round (none: no such runs)")
    ap.add_argument("--scale", type=int, default=24)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--gpus", type=int, nargs="+", default=[2], help="GPU counts (one worker per GPU)")
    ap.add_argument("--reference-gpus", type=int,
                    help="GPUs of the replicated reference runs (default: the most of --gpus; 1 GPU cannot "
                         "assemble R-MAT 24's 10 walks per vertex)")
    ap.add_argument("--partitions-per-gpu", type=int, default=2)
    ap.add_argument("--device-partitions", type=int, default=1, help="oom: partitions on each GPU at once")
    ap.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    ap.add_argument("--exchanges", nargs="+", choices=["auto", "nccl", "comms"], default=list(EXCHANGES))
    ap.add_argument("--length", type=int, help="walk length (default: GPU 80, CPU 20)")
    ap.add_argument("--walks-per-vertex", type=int, default=10, help="walks (ppr: walks per source, every vertex)")
    ap.add_argument("--p", type=float, default=0.5, help="node2vec return parameter")
    ap.add_argument("--q", type=float, default=2.0, help="node2vec in-out parameter")
    ap.add_argument("--frontier-size", type=int, default=2000, help="multidimensional: pool per instance")
    ap.add_argument("--budget", type=int, default=2000, help="multidimensional: sampled edges per instance")
    ap.add_argument("--frontier-instances", type=int, help="multidimensional: instances (default: GPU 1000, CPU 20)")
    ap.add_argument("--instances", type=int,
                    help="samplers from seeds: instances, one seed each (default: GPU 20,000, CPU 500)")
    ap.add_argument("--subgraph-size", type=int, default=1000, help="random-node / random-edge: vertices / edges")
    ap.add_argument("--subgraph-instances", type=int, default=64, help="random-node / random-edge: instances")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0, help="graph seed, and the first run seed")
    ap.add_argument("--out", default="stress.json")
    ap.add_argument("--append", action="store_true",
                    help="add this call's runs to those --out holds (the same graph and sizes)")
    args = ap.parse_args()
    for name, size in SIZES[args.device].items():
        if getattr(args, name) is None:
            setattr(args, name, size)
    if args.device_partitions >= args.partitions_per_gpu:
        ap.error(f"--device-partitions must be below --partitions-per-gpu ({args.partitions_per_gpu}) to leave "
                 f"partitions off the GPU, got {args.device_partitions}")
    needed = {(name, args.seed + r) for name in args.workloads for r in range(args.repeat)} | {
        (name, args.seed + r + i) for i, name in enumerate(args.concurrent) for r in range(args.repeat)}
    reference_gpus = args.reference_gpus or max(args.gpus)
    records, env, peer, earlier_references = _earlier(args)
    # an --append call compares with the references made before (digests depend on graph, parameters and seed only)
    references = {(r["workload"], r["seed"]): r for r in earlier_references if r["digest"] is not None}
    table = None
    warmups = {}  # GPU count -> seconds of gpipe.warmup on that cluster

    def report(complete: bool) -> dict:
        for r in records:
            r["fraction_of_peer_copy"] = (r["walker_bytes_per_second"] / peer
                                          if r["walker_bytes_per_second"] and peer else None)
        failed = [r for r in records if not (r["equal"] and r["path_as_asked"])]
        missing = _missing(records, args)
        return {**env, "benchmark": "stress", "graph": rmat_record(args),
                "parameters": {k: v for k, v in vars(args).items() if k not in ("out", "append")},
                "peer_copy_bytes_per_second": peer, "warmup_seconds": warmups,
                "references": list(references.values()), "records": records,
                "runs": len(records), "failed": len(failed), "complete": complete, "missing": missing,
                "covers_defaults": not missing}

    for gpus in [reference_gpus, *sorted(set(args.gpus) - {reference_gpus})]:
        if gpus not in args.gpus and not needed - set(references):
            continue
        with gpipe.connect(n_workers=gpus, device=args.device, dashboard_address=":0") as client:
            env = env or environment(client, args.device)
            # every kernel, and the array code around them, compiled before a run is timed (46 s on a fresh 2-H200
            # host). The first partitioned DeepWalk of R-MAT 24 there still took 14.7 s after it, 1.3-3.0 s after:
            # a first-use cost that is not a compile the warm-up reaches (not yet found)
            t0 = time.perf_counter()
            gpipe.warmup(client)
            warmups[gpus] = time.perf_counter() - t0
            print(f"warm-up, {_gpus(gpus, args.device)}: {warmups[gpus]:.1f} s (gpipe.warmup)", flush=True)
            if gpus == reference_gpus and needed - set(references):
                g, built = rmat_graph(args, mode="replicated")
                print(f"references, {_gpus(gpus, args.device)}, replicated (no walker leaves its worker): {g} "
                      f"(built in {built:.1f} s)", flush=True)
                table = _workloads(g, args)
                references.update(_references(g, table, needed - set(references)))
                g.release()
            elif gpus == reference_gpus:
                print(f"references: all {len(needed)} made before, in {args.out}", flush=True)
            if gpus not in args.gpus:
                continue
            if args.device == "gpu" and gpus > 1 and peer is None:
                worker = sorted(client.nthreads())[0]  # it sees every GPU, its own as GPU 0
                try:
                    peer = client.submit(_peer_copy_bandwidth, workers=[worker], pure=False).result()
                    print(f"plain peer-to-peer copy, GPU 0 -> 1: {peer / 1e9:.1f} GB/s", flush=True)
                except Exception as exc:  # a yardstick only: the stress runs go on without it
                    print(f"plain peer-to-peer copy not measured: {exc!r}", flush=True)
            partitions = args.partitions_per_gpu * gpus
            for mode in args.modes:
                budget = args.device_partitions if mode == "oom" else None
                with dask.config.set({"gpipe.memory.device-partitions": budget}):
                    g, built = rmat_graph(args, mode="partitioned", partitions=partitions)
                table = table or _workloads(g, args)  # the same on any partitioning of the graph
                print(f"{_gpus(gpus, args.device)}, {mode}: {g}"
                      f"{f', {budget} partition(s) per GPU at once' if budget else ''} (built in {built:.1f} s)",
                      flush=True)
                _stress(g, table, references, args, {"gpus": gpus, "graph_mode": mode, "partitions": partitions,
                                                     "device_partitions": budget},
                        records, lambda: write_json(args.out, report(complete=False)))
                g.release()
    final = report(complete=True)
    failed = [r for r in records if not (r["equal"] and r["path_as_asked"])]
    write_json(args.out, final)
    figure = _figure(final, os.path.splitext(args.out)[0] + ".png")
    print(f"wrote {args.out}" + (f" and {figure}" if figure else " (no figure: matplotlib is not installed)"))
    if failed:
        print(f"\n{'!' * 80}\nSTRESS FAILED: {len(failed)} of {len(records)} runs failed, differ from their "
              "reference or went through another exchange than asked:", file=sys.stderr)
        for r in failed:
            print(f"  {r['workload']} seed {r['seed']}, {_setting(r)}"
                  f"{', concurrent' if r['concurrent'] else ''}: "
                  + (r["error"] or f"digest {r['digest']} vs reference {r['reference_digest']}"
                     + ("" if r["path_as_asked"] else f", exchange {r['exchange_used']!r}")),
                  file=sys.stderr)
        print("!" * 80, file=sys.stderr)
        sys.exit(1)
    print(f"stress passed: all {len(records)} runs equal to their reference"
          + (f"; {len(final['missing'])} runs of the defaults still to make (--append)" if final["missing"] else
             "; every run of the defaults made"))


if __name__ == "__main__":
    main()
