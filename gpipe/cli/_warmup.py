"""``gpipe warmup``: compile the kernels ahead of the first call, here or on a named cluster's workers."""

from __future__ import annotations

import json
import os
import sys

from .. import config
from ..cluster import ENV_ADDRESS, ENV_SCHEDULER_FILE, connect, warmup


def _warmup(args) -> int:
    named = (args.scheduler_file, args.address, os.environ.get(ENV_SCHEDULER_FILE), os.environ.get(ENV_ADDRESS),
             config.get("cluster.scheduler-file"), config.get("cluster.address"))
    if any(named):
        with connect(args.scheduler_file, args.address, device=args.device) as client:
            report = {"workers": warmup(client)}
    else:
        report = warmup(device=args.device, progress=None if args.quiet else _told)
        if not args.quiet:
            print(file=sys.stderr)
    print(json.dumps(report, indent=2))
    return 0


def _told(done: int, total: int, kernel: str) -> None:
    print(f"\rcompiled {done}/{total} {kernel:<60.60}", end="", file=sys.stderr, flush=True)
