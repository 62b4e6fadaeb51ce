"""``gpipe sample ALGORITHM``: sampled edges (and vertices) written as parquet."""

from __future__ import annotations

from typing import Any

from ._options import _NODE_SAMPLERS, _RUN_FILES, _SAMPLERS
from ._shared import _check_graph_flags, _reading, _run, _typed_as_ids_of


def _sample(args) -> int:
    """Load or generate ``args.graph``, sample it, write edges.parquet (and nodes.parquet) and summary.json."""
    function, extra = _SAMPLERS[args.algorithm]
    options = {"seed": args.seed, **{flag.dest: getattr(args, flag.dest) for flag in extra}}
    if "seeds" in args:
        options["seeds"] = args.seeds
    tiny: dict[str, Any] = {k: 1 for k in ("depth", "instances") if k in options}
    if isinstance(options.get("fanouts"), list):  # one depth: the first
        tiny.update(fanouts=options["fanouts"][:1], depth=None)
    _check_graph_flags(args)
    with _run(args, _RUN_FILES) as run:
        g = run.graph(weighted=options.get("weighted", False), **_reading(args))
        options = _typed_as_ids_of(g, options)
        if "seeds" in options:
            tiny["seeds"] = options["seeds"][:1]
        function(g, **dict(options, **tiny))  # compile the kernels: a tiny sample
        run.lap("compile")
        result = function(g, **options)
        result.stats["algorithm"] = function.__name__
        run.lap("sample")
        with run.phase(f"writing {args.out}") as phase:
            outputs = {"edges": result.to_parquet(run.path("edges.parquet"))}
            if args.algorithm in _NODE_SAMPLERS:
                outputs["nodes"] = result.to_parquet(run.path("nodes.parquet"), nodes=True)
            run.written(phase, outputs)
        run.lap("write")
        summary = run.finish(sample=result.stats)
    stats, written = summary["sample"], ", ".join(summary["outputs"][k] for k in outputs)
    print(f"{stats['algorithm']}: {stats['edges']:,} edges in {stats['instances']:,} instances in "
          f"{stats['seconds']:.3f} s, {stats['edges_per_second']:,.0f} edges/s -> {written}")
    return 0
