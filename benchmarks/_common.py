"""What every benchmark script records beside its figures: the device it ran on and the versions."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import platform
import threading
import time

import numpy as np
import pandas as pd

import gpipe
from gpipe._rng import GOLDEN, mix64
from gpipe.backend import to_device, to_host, versions, xp

# A minimal uniform walk kernel on one H200 on a random graph (16M vertices, 256M edges), ../shared/gpu/README.md:
# the ceiling quoted where a run did not measure its own graph's (walks.py --ceiling)
H200_CEILING_STEPS_PER_S = 9.74e9

# The run statistics a benchmark keeps, where the run reports them.
KEPT_STATS = ("steps", "edges", "seconds", "steps_per_second", "edges_per_second", "kernel_seconds", "supersteps",
              "partitions", "workers", "mode", "device_partitions", "schedule", "partition_transfers",
              "exchange", "exchange_seconds", "opening_seconds", "worker_seconds", "walker_bytes", "wire", "lent_bytes",
              "host_memory_peak", "device_memory_peak",
              "memory_peaks", "partition_reads_in_place", "bytes_moved", "transfer_seconds",
              "host_to_device_bytes_per_second", "gathered", "gather_seconds", "gathered_bytes", "rows",
              "assemble_seconds")


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
    """The device, its name, the host, the package versions and the date, for a benchmark's JSON."""
    return {"device": device, "device_name": device_name(client, device), "host": host(),
            "versions": {k: v for k, v in versions().items() if v is not None},
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def host() -> dict:
    """This host's CPU, its cores, and how long a small numpy call takes here (``numpy_call_us``, the median of
    2,000 ``np.arange(1000).sum()``): on one GPU the call around the kernel is Python on the host, and the same code
    was a millisecond or two slower through the call on one H200 host than on another whose kernels ran as fast."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    times = []
    for _ in range(2000):
        t0 = time.perf_counter()
        np.arange(1000).sum()
        times.append(time.perf_counter() - t0)
    return {"cpu": model, "cores": os.cpu_count(), "numpy_call_us": float(np.median(times)) * 1e6}


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


def csr_file(g, folder: str) -> str:
    """The graph as a CSR .npz (indptr, indices, data) for the baselines."""
    edges = pd.read_parquet(g.to_parquet(os.path.join(folder, "graph")), columns=["src", "dst"])
    counts = np.bincount(edges.src.to_numpy(), minlength=g.num_vertices)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    path = os.path.join(folder, "graph.npz")
    np.savez(path, indptr=indptr, indices=edges.dst.to_numpy(np.int64), data=np.ones(len(edges), np.float32))
    return path


def seed_vertices(degrees: np.ndarray, count: int, seed: int) -> np.ndarray:
    """``count`` seeds drawn uniformly (with replacement) among the vertices with out-edges."""
    return np.random.default_rng(seed).choice(np.flatnonzero(degrees > 0), size=count)


def _thread_stacks() -> str:
    """Every thread's Python stack in this process (run on each worker by :func:`watchdog`)."""
    import sys
    import threading
    import traceback

    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(f"--- thread {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame))
                     for ident, frame in sys._current_frames().items())


@contextlib.contextmanager
def watchdog(client, what: str, seconds: float):
    """Around one run: if it has not ended after ``seconds``, print every worker's thread stacks (once), so a
    stalled run under a time limit says where it waits."""
    done = threading.Event()

    def watch():
        if not done.wait(seconds):
            print(f"!!! {what} still running after {seconds:g} s; the workers' stacks:", flush=True)
            for worker, stacks in client.run(_thread_stacks).items():
                print(f"=== worker {worker}\n{stacks}", flush=True)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()


def write_json(path: str, report: dict) -> None:
    """Write ``report`` to ``path`` whole or not at all (a file beside it, then renamed): a script that saves its
    report as it goes leaves a complete JSON of the runs so far when it is stopped."""
    partial = f"{path}.partial"
    with open(partial, "w") as f:
        json.dump(report, f, indent=2)
    os.replace(partial, path)


DIGEST_SLICE = 1 << 30  # bytes of a walk block hashed at once


def _block_digest(block, _ids, _first_row: int) -> bytes:
    """blake2b of a 64-bit hash of each row of a walk block, hashed on the worker's device (a block kept in host
    memory goes there in slices of rows; only the row hashes come to host)."""
    from gpipe.runtime.workers import store

    device = store().device
    x = xp(device)
    rows = max(1, DIGEST_SLICE // max(1, block.shape[1] * block.itemsize))
    h = hashlib.blake2b(digest_size=16)
    for lo in range(0, block.shape[0], rows):
        part = to_device(block[lo:lo + rows], device)
        z = part.astype(x.uint64) ^ (x.arange(1, part.shape[1] + 1, dtype=x.uint64) * GOLDEN)
        z = mix64.py_func(z)  # gpipe's splitmix64 finalizer, as plain Python: it takes numpy and cupy arrays alike
        h.update(to_host(z.sum(axis=1, dtype=x.uint64)).tobytes())
    return h.digest()


def digest(result) -> str:
    """The digest of a run's output: its walks, row by row in walk order, or its edges in canonical order."""
    h = hashlib.blake2b(digest_size=16)
    if isinstance(result, gpipe.WalkResult):
        h.update(repr(result.shape).encode())
        # The raw blocks, on their devices: to_dask would bring every block to host memory as int64 first.
        for block in result._map_blocks(_block_digest):
            h.update(block.result())
    else:
        frame = result.compute()
        for name, column in frame.sort_values(list(frame.columns), ignore_index=True).items():
            h.update(name.encode())
            h.update(np.ascontiguousarray(column.to_numpy()).tobytes())
    return h.hexdigest()
