"""The superstep engine: worker-side store, walker queues, walker migration and collection.

It knows no algorithm: a workload family hands it a :class:`StepSpec` (its
step function, e.g. made by :func:`step_kernel`, and its own frozen
parameters), and it moves walkers between the partitions until every walk has
ended.
"""

from ._advance import neighbor_lists, step_kernel, worker_xp
from ._driver import check_memory, collect_outputs, run_supersteps, run_walks
from ._result import EdgeSample, WalkResult
from ._run import Run
from ._session import Session, attach, current, run_later, workers_info
from ._spec import StepSpec
from ._store import drop_graph, store
from ._watch import call_workers, gather_pinned

__all__ = ["EdgeSample", "Run", "Session", "StepSpec", "WalkResult", "attach", "call_workers", "check_memory",
           "collect_outputs", "current", "drop_graph", "gather_pinned", "neighbor_lists", "run_later", "run_supersteps",
           "run_walks", "step_kernel", "store", "worker_xp", "workers_info"]
