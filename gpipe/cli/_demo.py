"""``gpipe demo``: DeepWalk on an R-MAT graph in one command."""

from __future__ import annotations

from .. import generators
from ._config import configured
from ._options import _default
from ._walk import _run_walk


def _demo(args) -> int:
    """``gpipe walk deepwalk`` on ``rmat:SCALE`` with the demo's flags, the walk's defaults for the others."""
    edge_factor = _default(generators.rmat, "edge_factor")
    given = {"graph.path": f"rmat:{args.scale}:{edge_factor}", "length": args.length, "output": args.out,
             "overwrite": args.overwrite, "quiet": args.quiet, "cluster": args.config["cluster"]}
    walk = configured("walk", "deepwalk", values=given, command_line=args.command_line)
    walk.command = "demo"
    summary = _run_walk(walk)
    graph, cluster, stats = summary["graph"], summary["cluster"], summary["walk"]
    print(f"gpipe demo: DeepWalk on an R-MAT graph (scale {args.scale}, edge factor {edge_factor})\n"
          f"  graph      {graph['num_vertices']:,} vertices, {graph['num_edges']:,} edges, "
          f"{graph['num_partitions']} partitions\n"
          f"  cluster    {len(cluster['workers'])} worker(s) on {cluster['device']} ({cluster['scheduler']})\n"
          f"  walks      {stats['walks']:,} of length {stats['length']}: {stats['steps']:,} steps in "
          f"{stats['seconds']:.3f} s = {stats['steps_per_second']:,.0f} steps/s\n"
          f"  corpus     {summary['outputs']['corpus']}\n"
          f"  summary    {summary['outputs']['summary']}\n"
          f"  dashboard  {cluster['dashboard']}")
    return 0
