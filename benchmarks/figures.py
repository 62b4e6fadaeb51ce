"""The figure beside each benchmark's JSON: throughput per run, the ceiling and the baselines beside it.

    python benchmarks/figures.py benchmarks/results/*.json

redraws every figure from its JSON (``x.json`` -> ``x.png``); the benchmark
scripts draw theirs when they write the JSON. Each bar is one record, labelled
by its workload and whatever else varies between the records (instances,
GPUs, partitions on the device ...); a walk figure has a line at the ceiling:
the minimal walk kernel's steps/s measured on the same graph in the same run
(``walks.py --ceiling``), else the one measured on a random graph on an H200,
said so. ``stress.py`` draws its own figure.
"""

from __future__ import annotations

import json
import os
import sys

from _common import H200_CEILING_STEPS_PER_S

VARYING = ("instances", "walks_per_vertex", "gpus", "graph_mode", "exchange", "device_partitions",
           "read_in_place_below", "select", "bitmap", "partitions")


def draw(report: dict, path: str) -> str | None:
    """Draw ``report``'s figure at ``path``; None when matplotlib is missing or the report has no throughput."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    records = [r for r in report.get("records", []) if "steps_per_second" in r or "edges_per_second" in r]
    if not records or "peer_copy_bytes_per_second" in report:
        return None
    sampled = ["edges_per_second" in r for r in records]  # a sampler's or frontier walk's SEPS, else steps/s
    edges = all(sampled)
    unit = "sampled edges / s (SEPS)" if edges else "steps / s" if not any(sampled) else "steps / s; SEPS where said"
    labels = [label + (" (SEPS)" if by_edges and not edges else "")
              for label, by_edges in zip(_labels(records), sampled)]
    values = [r["edges_per_second"] if by_edges else r["steps_per_second"] for r, by_edges in zip(records, sampled)]
    colors = ["tab:blue"] * len(values)
    for b in report.get("baselines", []):
        if "steps_per_second" in b and not edges:
            labels.append(f"{b['baseline']} {b.get('version', '')} ({b.get('threads', '?')} threads)")
            values.append(b["steps_per_second"])
            colors.append("tab:gray")
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(values) + 1.8), constrained_layout=True)
    bars = ax.barh(range(len(values)), values, color=colors)
    ax.bar_label(bars, [_si(v) for v in values], padding=3, fontsize=7)
    ax.set_yticks(range(len(values)), labels, fontsize=8)
    ax.invert_yaxis()
    if max(values) > 100 * min(v for v in values if v > 0):
        ax.set_xscale("log")
    ax.set_xlabel(unit)
    ceiling = report.get("ceiling")
    if ceiling:
        ax.axvline(ceiling["steps_per_second"], color="black", linestyle="--",
                   label=f"ceiling on this graph: minimal uniform walk, {_si(ceiling['steps_per_second'])}")
    elif not all(sampled) and report.get("device") == "gpu":
        ax.axvline(H200_CEILING_STEPS_PER_S, color="gray", linestyle=":",
                   label="minimal walk on a random graph (16M vertices) on an H200, 9.74 G: not this graph")
    if ceiling or (not all(sampled) and report.get("device") == "gpu"):
        ax.legend(fontsize=8, loc="lower right")
    ax.set_title(_title(report), fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _si(value: float) -> str:
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.3g} {prefix}"
    return f"{value:.3g}"


def _labels(records: list[dict]) -> list[str]:
    """Each record's workload and the fields that vary between records (parameters included)."""
    def fields(r: dict) -> dict:
        return {**r.get("parameters", {}), **r}

    varying = [k for k in VARYING if len({str(fields(r).get(k)) for r in records}) > 1]
    return [" ".join([r["workload"], *(f"{k}={fields(r)[k]}" for k in varying if fields(r).get(k) is not None)])
            for r in records]


def _title(report: dict) -> str:
    graph = report.get("graph", {})
    described = ", ".join(f"{k} {graph[k]:,}" if isinstance(graph[k], int) else f"{k} {graph[k]}"
                          for k in ("generator", "scale", "num_vertices", "num_edges") if k in graph)
    return f"{report.get('benchmark', 'gpipe')} on {report.get('device_name', report.get('device'))} " \
           f"({report.get('date', '')[:10]})\n{described}"


def main(paths: list[str]) -> None:
    for path in paths:
        with open(path) as f:
            figure = draw(json.load(f), os.path.splitext(path)[0] + ".png")
        print(f"{path}: {figure or 'no figure (no throughput records, or matplotlib missing)'}")


if __name__ == "__main__":
    main(sys.argv[1:])
