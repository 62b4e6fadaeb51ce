"""``gpipe demo``: DeepWalk on an R-MAT graph in one command."""

from __future__ import annotations

from ._options import _Rmat
from ._walk import _run_walk


def _demo(args) -> int:
    args.graph = _Rmat(args.scale)
    summary = _run_walk(args)
    graph, cluster, stats = summary["graph"], summary["cluster"], summary["walk"]
    print(f"gpipe demo: DeepWalk on an R-MAT graph (scale {args.scale}, edge factor {args.graph.edge_factor})\n"
          f"  graph      {graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges, "
          f"{graph['num_partitions']} partitions\n"
          f"  cluster    {len(cluster['workers'])} worker(s) on {cluster['device']} ({cluster['scheduler']})\n"
          f"  walks      {stats['walks']:,} of length {stats['length']}: {stats['steps']:,} steps in "
          f"{stats['seconds']:.3f} s = {stats['steps_per_second']:,.0f} steps/s\n"
          f"  corpus     {summary['outputs']['corpus']}\n"
          f"  summary    {summary['outputs']['summary']}\n"
          f"  dashboard  {cluster['dashboard']}")
    return 0
