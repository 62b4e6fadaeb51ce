"""What runs on a worker finds there: a run's state and outputs, a graph's partitions and arrays as they are held,
the worker's device, array module, memory and address, its peers (``call_peer``), and gpipe's store itself."""

from .._store import call_peer, drop_graph, drop_run, kept_for_clients, store
from .._superstep import failing, worker_device, worker_xp
from ._here import (
    end_here,
    fetch_partitions,
    graph_array,
    held_partition,
    holds_partition,
    keep_arrays,
    keep_partition,
    output_on_device,
    partition,
    replica,
    run_going,
    run_outputs,
    run_state,
    worker_address,
    worker_memory,
)

__all__ = ["call_peer", "drop_graph", "drop_run", "end_here", "failing", "fetch_partitions", "graph_array",
           "held_partition", "holds_partition", "keep_arrays", "keep_partition", "kept_for_clients",
           "output_on_device", "partition", "replica", "run_going", "run_outputs", "run_state", "store",
           "worker_address", "worker_device", "worker_memory", "worker_xp"]
