"""``gpipe generate rmat``: a generated graph written to a graph folder."""

from __future__ import annotations

import os

from .. import generators
from ._progress import _Stopwatch
from ._shared import _cluster, _out_folder, _write_summary


def _generate(args) -> int:
    watch = _Stopwatch()
    with _out_folder(args) as folder, _cluster(args) as client:
        watch.lap("connect")
        g = generators.rmat(args.scale, args.edge_factor, args.a, args.b, args.c, args.seed, directed=args.directed,
                            weighted=args.weighted, partitions=args.partitions, vertex_order=args.vertex_order)
        watch.lap("generate")
        outputs = {"graph": g.to_parquet(os.path.join(folder, "graph"))}
        watch.lap("write")
        summary = _write_summary(args, folder, client, g, outputs, watch)
        g.release()  # on a shared cluster, nothing would free it once this client is closed
    graph = summary["graph"]
    print(f"{graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges, {graph['num_partitions']} partitions "
          f"-> {summary['outputs']['graph']} ({summary['timings']['total']:.2f} s)")
    return 0
