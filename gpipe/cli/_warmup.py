"""``gpipe warmup``: compile the kernels ahead of the first call, here or on a named cluster's workers."""

from __future__ import annotations

import json
import sys

from ..cluster import connect, warmup
from ._shared import _running_cluster


def _warmup(args) -> int:
    if _running_cluster(args):
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
