"""``gpipe sample ALGORITHM``: sampled edges (and vertices) written as parquet."""

from __future__ import annotations

import os
from typing import Any

from ._options import _NODE_SAMPLERS, _SAMPLERS, _dest
from ._progress import _Phase, _Stopwatch, _written
from ._shared import _check_graph_flags, _cluster, _load_graph, _out_folder, _typed_as_ids_of, _write_summary


def _sample(args) -> int:
    """Load or generate ``args.graph``, sample it, write edges.parquet (and nodes.parquet) and summary.json."""
    function, extra = _SAMPLERS[args.algorithm]
    options = {"seed": args.seed, **{_dest(flag): getattr(args, _dest(flag)) for flag, _ in extra}}
    if "seeds" in args:
        options["seeds"] = args.seeds
    tiny: dict[str, Any] = {k: 1 for k in ("depth", "instances") if k in options}
    if isinstance(options.get("fanouts"), list):  # one depth: the first
        tiny.update(fanouts=options["fanouts"][:1], depth=None)
    _check_graph_flags(args)
    watch = _Stopwatch()
    with _out_folder(args) as folder, _cluster(args) as client:
        watch.lap("connect")
        g = _load_graph(args, weighted=options.get("weighted", False))
        options = _typed_as_ids_of(g, options)
        if "seeds" in options:
            tiny["seeds"] = options["seeds"][:1]
        watch.lap("graph")
        function(g, **dict(options, **tiny))  # compile the kernels: a tiny sample
        watch.lap("compile")
        result = function(g, **options)
        result.stats["algorithm"] = function.__name__
        watch.lap("sample")
        with _Phase(args, f"writing {args.out}") as phase:
            outputs = {"edges": result.to_parquet(os.path.join(folder, "edges.parquet"))}
            if args.algorithm in _NODE_SAMPLERS:
                outputs["nodes"] = result.to_parquet(os.path.join(folder, "nodes.parquet"), nodes=True)
            _written(phase, outputs)
        watch.lap("write")
        summary = _write_summary(args, folder, client, g, outputs, watch, sample=result.stats)
        g.release()  # on a shared cluster, nothing would free it once this client is closed
    stats, written = summary["sample"], ", ".join(summary["outputs"][k] for k in outputs)
    print(f"{stats['algorithm']}: {stats['edges']:,} edges in {stats['instances']:,} instances in "
          f"{stats['seconds']:.3f} s, {stats['edges_per_second']:,.0f} edges/s -> {written}")
    return 0
