"""``gpipe run WORKFLOW.yaml``: a workflow run on a cluster."""

from __future__ import annotations

from .. import workflow
from ._config import COMMAND_WORKFLOWS


def _run_workflow(args) -> int:
    """``gpipe run``: the workflow's own exit status (it prints its report, or its one-line error)."""
    overrides = [*args.overrides, *([f"cluster.device={args.device}"] if args.device else [])]
    return workflow.run(args.workflow, overrides, scheduler_file=args.scheduler_file, address=args.address,
                        wait_for_workers=args.wait_for_workers, wait_timeout=args.wait_timeout,
                        commands=COMMAND_WORKFLOWS)
