"""What an empty superstep costs: the exchange that ends every superstep of a partitioned run, with no walker to send.

    python benchmarks/superstep.py --gpus 2 4 --out superstep_2xh200.json      # on a host with 4 GPUs
    python benchmarks/superstep.py --device cpu --gpus 2 --out /tmp/superstep.json   # CPU workers: the comms

For each worker count of ``--gpus`` (one worker per GPU) and each exchange
path (``nccl`` and ``comms`` on GPU workers, ``comms`` on CPU workers), every
worker ends ``--rounds`` supersteps with nothing to send, as the ranks of a run
do once they have no walker left (``runtime/_exchange.py``: its header of walker
counts to every peer, and the barrier). A communicator is made before the
timed rounds, as a run's first superstep does; the median and the mean of the
slowest worker's rounds go to the JSON, with a PNG beside it.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import numpy as np
from _common import environment, write_json
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--gpus", type=int, nargs="+", default=[2], help="worker counts (one worker per GPU)")
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--out", default="superstep.json")
    args = ap.parse_args()
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
