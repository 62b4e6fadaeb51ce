"""The client's calls to the workers: Dask's own by Dask's names (``submit``, ``scatter``, ``run``), calls to the
workers holding a graph (``on_holders``, ``on_partitions``, ``on_each``, ``spread``), waits that name what a lost
worker held (``gather_pinned``, ``wait_pinned``, ``call_workers``), and the ends of runs and graphs."""

from .._watch import WATCH_SECONDS, call_workers, check_held, gather_pinned, wait_pinned
from ._reach import (
    end_graph,
    end_graph_later,
    end_later,
    end_run,
    holder_workers,
    on_each,
    on_holders,
    on_partitions,
    spread,
)
from ._tasks import gather_in_background, run, scatter, submit

__all__ = ["WATCH_SECONDS", "call_workers", "check_held", "end_graph", "end_graph_later", "end_later", "end_run",
           "gather_in_background", "gather_pinned", "holder_workers", "on_each", "on_holders", "on_partitions", "run",
           "scatter", "spread", "submit", "wait_pinned"]
