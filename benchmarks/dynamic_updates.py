"""Updates/s of a dynamic graph: one update at a time (streaming) and batches, from the client's call to the graph
ready to walk, on an R-MAT graph split as Bingo splits it (a mixed log: insertions held out, deletions of the graph).

    python benchmarks/dynamic_updates.py --device cpu --scale 14 --single 300 --batches 10000 100000

Each update is applied both ways (the graph is undirected). ``single``: ``--single`` updates, one ``apply`` each;
then each size of ``--batches`` as ``--repeat`` batches of that size. The ``SamplingSpace`` rows time the same on
one space without a cluster (the commit's own cost, without the round trips). ``--space-batches``: one space on
``--device`` holding the initial graph whole (both ways), then batches of those sizes from a mixed log of their own
(each update both ways), timed from the checked batch in host memory, as it reaches a worker, to the space ready to
walk (``apply_batch``, the device synchronized); ``space_batch_<size>_apply_seconds`` adds the batch's
checks (``apply``); on a GPU, ``space_batch_<size>_device_seconds`` times the next ``--space-device-batches``
batches of that size from the GPU's memory (Bingo's setting: its batches are on the device; the least, and every
one in ``..._device_seconds_each``). Bingo's 10^7-update batches need R-MAT 20 or more
(R-MAT 18 has 3.7 M distinct edges):

    python benchmarks/dynamic_updates.py --device gpu --scale 20 --single 100 --batches 100000 \
        --space-batches 1000000 10000000 --space-repeat 1 --space-device-batches 2 --out dynamic_updates_rmat20_h200.json

With ``--out``, the JSON and its figure (``benchmarks/figures.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import numpy as np
from _common import environment
from figures import draw

import gpipe
from gpipe.backend import xp
from gpipe.dynamic import UPDATE_COLUMNS, DynamicGraph, SamplingSpace, update_log
from gpipe.dynamic._space import Batch, check_batch


def _rate(updates: int, call) -> float:
    started = time.perf_counter()
    call()
    return updates / (time.perf_counter() - started)


def _both_ways(op, src, dst, weight) -> tuple:
    """Each update, then its reverse (an undirected graph's)."""
    return (None if op is None else np.repeat(op, 2), np.stack([src, dst], 1).ravel(), np.stack([dst, src], 1).ravel(),
            np.repeat(weight, 2))


def _space_batches(edges, n: int, args) -> dict:
    """Batches of ``--space-batches`` updates on one space on ``--device``: seconds from the checked batch to the
    space ready to walk, and of the whole ``apply``."""
    x = xp(args.device)
    count = args.space_repeat * sum(args.space_batches) * (1 if args.device == "cpu" else 1 + args.space_device_batches)
    initial, log = update_log(edges, count, "mixed", args.seed + 1)
    space = SamplingSpace(n, device=args.device)
    _, src, dst, weight = _both_ways(None, initial.src.to_numpy(), initial.dst.to_numpy(), initial.weight.to_numpy())
    space.apply_batch(Batch.inserts(src.astype(np.int64), dst.astype(np.int64), weight.astype(np.float64)))
    columns = [log[c].to_numpy() for c in UPDATE_COLUMNS]
    out, at = {"space_initial_edges": int(space.num_edges)}, 0
    for size in args.space_batches:
        seconds, checked, resident = [], [], []
        for _ in range(args.space_repeat):
            updates = _both_ways(*(c[at:at + size] for c in columns))
            started = time.perf_counter()
            batch = check_batch(*updates)
            checking = time.perf_counter() - started
            x.cuda.Device().synchronize() if x is not np else None
            started = time.perf_counter()
            space.apply_batch(batch)
            x.cuda.Device().synchronize() if x is not np else None
            seconds.append(time.perf_counter() - started)
            checked.append(seconds[-1] + checking)
            at += size
            for _ in range(args.space_device_batches if x is not np else 0):  # the next, already in the GPU's memory
                updates = _both_ways(*(c[at:at + size] for c in columns))
                on = Batch(None, *(x.asarray(a) for a in dataclasses.astuple(check_batch(*updates))[1:5]), None)
                x.cuda.Device().synchronize()
                started = time.perf_counter()
                space.apply_batch(on)
                x.cuda.Device().synchronize()
                resident.append(time.perf_counter() - started)
                at += size
        best = int(np.argmin(seconds))
        out[f"space_batch_{size}_seconds"] = seconds[best]
        out[f"space_batch_{size}_apply_seconds"] = checked[best]
        out[f"space_batch_{size}_updates_per_second"] = size / seconds[best]
        if resident:
            out[f"space_batch_{size}_device_seconds"] = min(resident)
            out[f"space_batch_{size}_device_updates_per_second"] = size / min(resident)
            out[f"space_batch_{size}_device_seconds_each"] = resident
        print(f"space batch of {size:,} updates (each both ways) on {args.device}: {seconds[best]:.4f} s "
              f"= {size / seconds[best] / 1e6:.1f} M updates/s ({checked[best]:.3f} s with the checks"
              + (f"; from the GPU's memory {min(resident):.4f} s)" if resident else ")"), flush=True)
    out["space_bytes_per_edge"] = space.nbytes / space.num_edges
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--scale", type=int, default=14)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--single", type=int, default=300)
    ap.add_argument("--batches", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--space-batches", type=int, nargs="*", default=[])
    ap.add_argument("--space-repeat", type=int, default=3)
    ap.add_argument("--space-device-batches", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    with gpipe.connect(n_workers=1, device=args.device, dashboard_address=":0") as client, client.as_current():
        g = gpipe.generators.rmat(scale=args.scale, edge_factor=args.edge_factor, seed=args.seed, mode="partitioned",
                                  partitions=args.partitions)
        stored = DynamicGraph.from_graph(g).edges()
        n, partitions = g.num_vertices, g.num_partitions
        g.release()
        edges = stored[stored.src < stored.dst].reset_index(drop=True)
        edges = edges.assign(weight=np.bincount(stored.src.to_numpy(), minlength=n)[edges.dst.to_numpy()] + 1.0)
        count = args.single + args.repeat * sum(args.batches)
        initial, log = update_log(edges, count, "mixed", args.seed)
        start = gpipe.from_edges(initial, weight="weight", directed=False, num_vertices=n, partitions=partitions,
                                 mode="partitioned", keep_duplicates=True)
        dg = DynamicGraph.from_graph(start)
        columns = [log[c].to_numpy() for c in UPDATE_COLUMNS]
        dg.apply(*(c[:1] for c in columns))  # compile
        at = 1
        record = {"benchmark": "dynamic_updates", **environment(client, args.device), "scale": args.scale,
                  "partitions": partitions, "edges": int(dg.num_edges)}
        started = time.perf_counter()
        for i in range(at, at + args.single - 1):
            dg.apply(*(c[i:i + 1] for c in columns), first=i)
        record["single_updates_per_second"] = (args.single - 1) / (time.perf_counter() - started)
        at += args.single - 1
        for size in args.batches:
            rates = []
            for _ in range(args.repeat):
                rates.append(_rate(size, lambda: dg.apply(*(c[at:at + size] for c in columns), first=at)))
                at += size
            record[f"batch_{size}_updates_per_second"] = float(np.median(rates))
        # one space, no cluster: the commit itself (the whole graph in one space, each update one way)
        both = stored
        space = SamplingSpace(n)
        space.apply(np.full(len(both), "insert"), both.src.to_numpy(), both.dst.to_numpy(), np.ones(len(both)))
        ins = np.random.default_rng(args.seed).integers(0, n, (2, args.single))
        started = time.perf_counter()
        for s, d in ins.T:
            space.apply(["insert"], [s], [d], [2.0])
        record["space_single_updates_per_second"] = args.single / (time.perf_counter() - started)
        if args.space_batches:
            record.update(_space_batches(edges, n, args))
    print(json.dumps(record, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)
        print(f"figure {draw(record, os.path.splitext(args.out)[0] + '.png')}")


if __name__ == "__main__":
    main()
