"""What every benchmark script records beside its figures: the device it ran on and the versions."""

from __future__ import annotations

import datetime
import os
import platform

import numpy as np

from gpipe.backend import versions


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
