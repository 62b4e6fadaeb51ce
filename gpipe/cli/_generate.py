"""``gpipe generate rmat``: a generated graph written to a graph folder."""

from __future__ import annotations

from .. import generators
from ._options import _RUN_FILES
from ._shared import _run


def _generate(args) -> int:
    args.config["graph"]["path"] = f"rmat:{args.scale}:{args.edge_factor}"  # what the run tells it is making
    with _run(args, _RUN_FILES) as run:
        g = run.graph(lambda: generators.rmat(args.scale, args.edge_factor, args.a, args.b, args.c, args.seed,
                                              directed=args.directed, weighted=args.weighted,
                                              partitions=args.partitions, vertex_order=args.vertex_order),
                      lap="generate")
        run.outputs["graph"] = g.to_parquet(run.path("graph"))
        run.lap("write")
        summary = run.finish()
    graph = summary["graph"]
    print(f"{graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges, {graph['num_partitions']} partitions "
          f"-> {summary['outputs']['graph']} ({summary['timings']['total']:.2f} s)")
    return 0
