"""``gpipe info``: the software stack, the GPUs and, when one is named, the cluster."""

from __future__ import annotations

import json

from ..backend import gpu_problem, versions
from ..cluster import ENV_ADDRESS, ENV_SCHEDULER_FILE, connect
from ..workflow import _cluster_info
from ._shared import _running_cluster


def _info(args) -> int:
    stack = versions()
    report = {"versions": stack, "gpu": {"count": stack["gpus"], "problem": gpu_problem()}, "cluster": None}
    if _running_cluster(args):
        with connect(args.scheduler_file, args.address, device=args.device) as client:
            report["cluster"] = _cluster_info(client)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    print(f"gpipe {stack['gpipe']}")
    print("  " + ", ".join(f"{name} {version or '-'}" for name, version in stack.items()
                           if name not in ("gpipe", "gpus", "cuda_visible_devices")))
    gpu = report["gpu"]
    print(f"GPU: {gpu['count']} visible" if gpu["problem"] is None else f"GPU: none usable: {gpu['problem']}")
    cluster = report["cluster"]
    if cluster is None:
        print(f"cluster: none given (--scheduler-file, --address, ${ENV_SCHEDULER_FILE} or ${ENV_ADDRESS})")
        return 0
    print(f"cluster: {cluster['scheduler']}, device {cluster['device']}, dashboard {cluster['dashboard']}")
    for worker in cluster["workers"]:
        print(f"  {worker['address']}  {worker['nthreads']} threads  (name {worker['name']})")
    return 0
