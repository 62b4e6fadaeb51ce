"""The superstep engine: worker-side store, walker queues, walker migration and collection.

It knows no algorithm: a workload family hands it a :class:`StepSpec` (its
step function, e.g. made by :func:`step_kernel`, and its own frozen
parameters), and it moves walkers between the partitions until none is left;
what the step output stays on the workers until the family sums it up
(``run_supersteps(..., summarize=...)``) or assembles it into blocks
(:mod:`.results`, or a family's own, e.g. the samplers' ``EdgeSample``).

Its parts, each a door of its own: :mod:`.calls` (the client's calls to the
workers: Dask's by Dask's names, those to a graph's holders, the waits that
name a lost worker), :mod:`.workers` (what a family's functions find on a
worker), :mod:`.results` (a result kept on the workers in blocks) and
:mod:`.exchange` (what the ranks of a run send one another beside walkers).
"""

from . import calls, exchange, results, workers
from ._advance import neighbor_lists, output_totals, step_kernel
from ._driver import check_memory, run_supersteps
from ._run import Run
from ._session import Session, attach, current, workers_info
from ._spec import VERTEX, Grouped, OutputBlocks, Span, StartSet, StepSpec

__all__ = ["VERTEX", "Grouped", "OutputBlocks", "Run", "Session", "Span", "StartSet", "StepSpec", "attach", "calls",
           "check_memory", "current", "exchange", "neighbor_lists", "output_totals", "results", "run_supersteps",
           "step_kernel", "workers", "workers_info"]
