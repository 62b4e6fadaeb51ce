"""What every benchmark script records beside its figures: the device it ran on and the versions."""

from __future__ import annotations

import datetime
import json
import os
import platform
import time

import numpy as np

import gpipe
from gpipe.backend import versions

# A minimal uniform walk kernel on one H200 on a random graph (16M vertices, 256M edges), ../shared/gpu/README.md:
# the ceiling quoted where a run did not measure its own graph's (walks.py --ceiling)
H200_CEILING_STEPS_PER_S = 9.74e9

# The run statistics a benchmark keeps, where the run reports them.
KEPT_STATS = ("steps", "edges", "seconds", "steps_per_second", "edges_per_second", "kernel_seconds", "supersteps",
              "partitions", "workers", "mode", "device_partitions", "schedule", "partition_transfers",
              "send_seconds", "barrier_seconds", "walker_bytes_ipc", "walker_bytes_comms",
              "partition_reads_in_place", "bytes_moved", "transfer_seconds", "host_to_device_bytes_per_second")


def device_name(client, device: str) -> str:
    """The GPU's name on the workers, or this machine's CPU model and core count."""
    if device == "gpu":
        def name():
            import cupy

            return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()

        return sorted(set(client.run(name).values()))[0]
    with open("/proc/cpuinfo") as f:
        models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    return f"{models[0] if models else platform.processor()} ({os.cpu_count()} cores)"


def environment(client, device: str) -> dict:
    """The device, its name, the package versions and the date, for a benchmark's JSON."""
    return {"device": device, "device_name": device_name(client, device),
            "versions": {k: v for k, v in versions().items() if v is not None},
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def warm_starts(g) -> np.ndarray:
    """Start vertices for a compiling warm-up run: some on every partition, and enough for every replica."""
    dense = np.unique(np.concatenate([g.bounds[:-1], np.arange(min(64, g.num_vertices))]))
    return g.to_original(dense)


def kept_stats(stats: dict) -> dict:
    """The :data:`KEPT_STATS` of a run's ``stats``."""
    return {k: stats[k] for k in KEPT_STATS if k in stats}


def rmat_graph(args, **kwargs):
    """The weighted R-MAT graph of ``args.scale``, ``args.edge_factor`` and ``args.seed``, and seconds to build it."""
    t0 = time.perf_counter()
    g = gpipe.generators.rmat(scale=args.scale, edge_factor=args.edge_factor, seed=args.seed, weighted=True,
                              **kwargs)
    return g, time.perf_counter() - t0


def rmat_record(args) -> dict:
    """The JSON description of :func:`rmat_graph`'s graph."""
    return {"generator": "rmat", "scale": args.scale, "edge_factor": args.edge_factor, "seed": args.seed,
            "weights": "uniform in (0, 1]"}


def seed_vertices(degrees: np.ndarray, count: int, seed: int) -> np.ndarray:
    """``count`` seeds drawn uniformly (with replacement) among the vertices with out-edges."""
    return np.random.default_rng(seed).choice(np.flatnonzero(degrees > 0), size=count)


def write_json(path: str, report: dict) -> None:
    """Write ``report`` to ``path`` whole or not at all (a file beside it, then renamed): a script that saves its
    report as it goes leaves a complete JSON of the runs so far when it is stopped."""
    partial = f"{path}.partial"
    with open(partial, "w") as f:
        json.dump(report, f, indent=2)
    os.replace(partial, path)
