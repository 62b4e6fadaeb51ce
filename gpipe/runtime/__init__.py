"""The superstep engine: worker-side store, walker queues, walker migration and collection.

It knows no algorithm: a workload family hands it a :class:`StepSpec` (its
step function, e.g. made by :func:`step_kernel`, and its own frozen
parameters), and it moves walkers between the partitions until none is left;
what the step output stays on the workers until the family sums it up
(``run_supersteps(..., summarize=...)``) or assembles it into blocks (:func:`assemble_blocks`, or a family's own,
e.g. the samplers' ``EdgeSample``).
"""

from ._advance import neighbor_lists, output_totals, step_kernel
from ._collective import Summing, summing
from ._driver import check_memory, run_supersteps
from ._held_result import HeldResult
from ._kept import kept_blocks
from ._lent import LentLists
from ._output_blocks import assemble_blocks, id_dtype, output_blocks
from ._reach import (
                     end_graph,
                     end_graph_later,
                     end_here,
                     end_later,
                     end_run,
                     fetch_partitions,
                     graph_array,
                     held_partition,
                     holder_workers,
                     holds_partition,
                     keep_arrays,
                     keep_partition,
                     on_each,
                     on_holders,
                     on_partitions,
                     output_on_device,
                     partition,
                     replica,
                     run_going,
                     run_outputs,
                     run_state,
                     spread,
                     worker_address,
                     worker_memory,
)
from ._run import Run
from ._session import Session, attach, current, run_later, workers_info
from ._spec import VERTEX, Grouped, OutputBlocks, Span, StartSet, StepSpec
from ._store import call_peer, drop_graph, drop_run, kept_for_clients, store
from ._superstep import failing, worker_device, worker_xp
from ._tasks import gather_in_background, run, scatter, submit
from ._watch import WATCH_SECONDS, call_workers, check_held, gather_pinned, wait_pinned

__all__ = ["VERTEX", "WATCH_SECONDS", "Grouped", "HeldResult", "LentLists", "OutputBlocks", "Run", "Session", "Span",
           "StartSet", "StepSpec",
           "assemble_blocks", "attach", "call_peer", "call_workers", "check_held", "check_memory", "current",
           "drop_graph", "drop_run", "end_graph", "end_graph_later", "end_here", "end_later", "end_run", "failing",
           "fetch_partitions", "gather_in_background", "gather_pinned", "graph_array", "held_partition",
           "holder_workers", "holds_partition", "id_dtype", "keep_arrays",
           "keep_partition", "kept_blocks", "kept_for_clients", "neighbor_lists", "on_each",
           "on_holders", "on_partitions", "output_blocks", "output_on_device",
           "output_totals", "partition", "replica", "scatter", "run", "run_going", "run_later", "run_outputs", "run_state",
           "run_supersteps", "spread", "step_kernel", "store", "submit", "summing", "Summing", "wait_pinned", "worker_address",
           "worker_device",
           "worker_memory", "worker_xp", "workers_info"]
