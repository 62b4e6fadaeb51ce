"""``gpipe count estimate|exact``: embeddings of a labeled query graph in a labeled data graph."""

from __future__ import annotations

import time
from dataclasses import asdict

from .. import counting
from ._options import _RUN_FILES
from ._shared import _run


def _count(args) -> int:
    """Read the labeled graph, count (or estimate) the query's embeddings in it, write summary.json."""
    query = counting.Query.from_file(args.query)  # before any work: a malformed query names its file and line
    with _run(args, _RUN_FILES) as run:
        g = run.graph(lambda: counting.read_graph(args.graph, partitions=args.partitions))
        if args.algorithm == "exact":
            started = time.perf_counter()
            section = {"count": counting.count_exact(g, query), "seconds": time.perf_counter() - started}
        else:
            options = {"method": args.method, "alpha": args.alpha, "seed": args.seed,
                       "inheritance": args.inheritance}
            counting.estimate(g, query, samples=1, **options)  # compile the kernels: one group
            run.lap("compile")
            section = asdict(counting.estimate(g, query, samples=args.samples, **options))
        run.lap("count")
        summary = run.finish(count=section)
    result = summary["count"]
    if args.algorithm == "exact":
        print(f"exact count: {result['count']:,} embeddings in {result['seconds']:.3f} s")
    else:
        print(f"{result['method']}: {result['estimate']:,.6g} +- {result['std_error']:.3g} (95% "
              f"{result['confidence_interval'][0]:,.6g} .. {result['confidence_interval'][1]:,.6g}) from "
              f"{result['samples']:,} samples, {result['valid_fraction']:.3f} valid, "
              f"{result['samples_per_second']:,.0f} samples/s over the call, {result['candidate_seconds']:.3f} s of it "
              "building the candidate graph")
    return 0
