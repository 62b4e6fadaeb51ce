"""The client's calls to the workers: Dask's own by Dask's names (``submit``, ``scatter``, ``run``, ``gather``,
``compute``, ``replicate``, ``who_has``, ``cancel``, ``as_current``; ``Future``, what ``submit`` returns; ``dumps``
and ``loads``, Dask's pickle, for a result sent as bytes), calls to the workers holding a graph (``on_holders``,
``on_partitions``, ``on_each``, ``spread``), waits that name what a lost worker held (``gather_pinned``,
``wait_pinned``, ``call_workers``), and the ends of runs and graphs. Past the runtime, nothing calls a client or
imports ``distributed`` itself (``tests/test_boundaries.py``)."""

from .._watch import WATCH_SECONDS, call_workers, check_held, gather_pinned, wait_pinned
from .._wire import dumps, loads
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
from ._tasks import (
    Future,
    as_current,
    cancel,
    compute,
    gather,
    gather_in_background,
    replicate,
    run,
    scatter,
    submit,
    who_has,
)

__all__ = ["WATCH_SECONDS", "Future", "as_current", "call_workers", "cancel", "check_held", "compute", "dumps",
           "end_graph", "end_graph_later", "end_later", "end_run", "gather", "gather_in_background", "gather_pinned",
           "holder_workers", "loads", "on_each", "on_holders", "on_partitions", "replicate", "run", "scatter",
           "spread", "submit", "wait_pinned", "who_has"]
