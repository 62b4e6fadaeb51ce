"""The figure beside each benchmark's JSON: throughput per run, the ceiling and the baselines beside it.

    python benchmarks/figures.py benchmarks/results/*.json

redraws every figure from its JSON (``x.json`` -> ``x.png``); the benchmark
scripts draw theirs when they write the JSON. Each bar is one record, labelled
by its workload and whatever else varies between the records (instances,
GPUs, partitions on the device ...); a walk figure has a line at the ceiling:
the minimal walk kernel's steps/s measured on the same graph in the same run
(``walks.py --ceiling``), else the one measured on a random graph on an H200,
said so. ``stress.py`` draws its own figure. GNN sampling (``gnn.py``) shows
per-batch latency fused and per hop over PGSampler's grid; counting
(``counting.py``) the q-error against the samples drawn, per method; mining
(``mining.py``) seconds per workload beside GAMMA's figures; frequent pattern mining (``fpm.py``) seconds and
patterns per run; dynamic graphs
(``dynamic.py``) seconds per round, dynamic against static rebuilt, beside Bingo's; data in and out
(``io.py``) seconds per stage and input format, gpipe beside the single-process baselines; counting's intervals
(``interval_coverage.py``) their coverage of the exact count per method and sample count, and per cell against
how often ``reliable`` was false; an empty superstep (``superstep.py``) its milliseconds per worker count and exchange;
a partitioned walk's memory (``memory.py``) each worker's over the phases of the call.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from _common import H200_CEILING_STEPS_PER_S

VARYING = ("instances", "walks_per_vertex", "gpus", "graph_mode", "exchange", "device_partitions",
           "read_in_place_below", "select", "bitmap", "partitions")


# GAMMA's figures on one H200 for the R-MAT 18 graph (issue 12): seconds per workload
GAMMA_H200_RMAT18_SECONDS = {"3-cliques": 0.27, "4-cliques": 15.6}


def draw(report: dict, path: str) -> str | None:
    """Draw ``report``'s figure at ``path``; None when matplotlib is missing or the report has no throughput."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    family = {"gnn": _gnn, "counting": _counting, "mining": _mining, "fpm": _fpm, "dynamic": _dynamic,
              "dynamic_updates": _dynamic_updates, "io": _io,
              "interval_coverage": _interval_coverage, "superstep": _superstep, "superstep_kernel": _superstep_kernel,
              "memory": _memory, "first_call": _first_call, "locality": _locality,
              "embeddings": _embeddings, "graphsage": _graphsage, "model": _model}.get(report.get("benchmark"))
    if family is not None:
        fig = family(plt, report)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path
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
    if "baseline" in report:  # mining.py --baseline: the plain triangle count of the same graph
        base = report["baseline"]
        labels += ["plain triangle count (1 thread)", "plain triangle count + orienting"]
        values += [base["seconds"], base["seconds"] + base["orient_seconds"]]
        colors += ["tab:gray"] * 2
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


def _gnn(plt, report: dict):
    """Per-batch milliseconds of every (batch size, fanouts) of the grid: fused, per hop, and the loader's."""
    grid = report["grid"]
    labels = [f"{r['batch_size']} x {tuple(r['fanouts'])}" for r in grid]
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(grid) + 2), constrained_layout=True)
    height = 0.27
    for i, (name, values) in enumerate((("fused call", [r["fused"]["call_ms"] for r in grid]),
                                        ("per-hop call", [r["per_hop"]["call_ms"] for r in grid]),
                                        ("fused loader (per batch)", [r["fused"]["loader_ms"] for r in grid]))):
        bars = ax.barh([j + (i - 1) * height for j in range(len(grid))], values, height, label=name)
        ax.bar_label(bars, [f"{v:.2f}" for v in values], padding=2, fontsize=6)
    ax.set_yticks(range(len(grid)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds per mini-batch (sample_blocks, complete on return)")
    note = f"mean fused speedup {report['mean_fused_speedup']:.2f}x"
    if "loader_1024_25_10_ms" in report:
        note += f"; loader at 1,024 seeds (25, 10): {report['loader_1024_25_10_ms']:.2f} ms per batch"
    everyone = report.get("all_vertices_25_10")
    if everyone:
        note += (f"; all {everyone.get('vertices', 0):,} vertices (25, 10): {everyone['seconds']:.2f} s "
                 f"(NextDoor, R-MAT 20, H200: {everyone['nextdoor_rmat20_h200_seconds']} s)")
    ax.legend(fontsize=8, loc="lower right", title=note, title_fontsize=7)
    ax.set_title(_title(report), fontsize=9)
    return fig


def _counting(plt, report: dict):
    """Per (graph, labels), a row: the median over its queries of the q-error (at the first worker count: an
    estimate does not depend on the workers) and of samples/s against the samples drawn, a line per (method,
    inheritance), samples/s per worker count. Below, where measured: gSWORD's Fig. 10, the normalized standard
    deviation of each query's repeated Alley estimates with and without inheritance, by query size; and samples/s
    per worker count at the most samples every worker count drew."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, NullFormatter

    # a single-graph, single-cluster report names its graph and labels once
    records = [{"graph": report.get("graph"), "labels": report.get("labels"), "workers": 1, **r}
               for r in report["records"]]
    workloads = list(dict.fromkeys((r["graph"], r["labels"]) for r in records))
    workers = sorted({r["workers"] for r in records})
    methods = list(dict.fromkeys(r["method"] for r in records))
    color = dict(zip(methods, plt.get_cmap("tab10").colors))
    markers = dict(zip(workers, "os^Dv"))
    panels = ([lambda ax: _count_variance(ax, report["variance"])] if report.get("variance") else []) + (
        [lambda ax: _count_workers(ax, records, color)] if len(workers) > 1 else [])
    fig = plt.figure(figsize=(13, 3.4 * len(workloads) + 4.4 * bool(panels) + 0.6), constrained_layout=True)
    top, bottom = fig.subfigures(2, 1, height_ratios=[3.4 * len(workloads), 4.4]) if panels else (fig, None)
    vertices = {(g["graph"], g["labels"]): g["num_vertices"] for g in report.get("graphs", [])}
    for (left, right), (graph, labels) in zip(top.subplots(len(workloads), 2, squeeze=False), workloads):
        rows = [r for r in records if (r["graph"], r["labels"]) == (graph, labels)]
        queries = len({r["query"] for r in rows})
        for key in dict.fromkeys((r["method"], r["inheritance"], r["workers"]) for r in rows):
            method, inherit, w = key
            by_samples: dict = {}
            for r in rows:
                if (r["method"], r["inheritance"], r["workers"]) == key:
                    by_samples.setdefault(r["samples"], []).append(r)
            x = sorted(by_samples)
            style = {"color": color[method], "linestyle": "-" if inherit else ":", "marker": markers[w],
                     "markersize": 4}
            if w == workers[0]:
                left.plot(x, [_median([r["q_error"] for r in by_samples[n]]) for n in x], **style)
            right.plot(x, [_median([r["samples_per_second"] for r in by_samples[n]]) for n in x], **style)
        n = vertices.get((graph, labels), report.get("num_vertices"))
        left.set_title(f"{graph}, {labels} labels" + (f", {n:,} vertices" if n else "") + f": {queries} queries",
                       fontsize=9, loc="left")
        for ax, label, short in ((left, "q-error (1 = exact), median", "{:.6g}".format),
                                 (right, "samples / s (whole call), median", _si)):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _, short=short: short(v)))
            low, high = ax.get_ylim()  # minor ticks labelled only where few majors fall (crowded across decades)
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _, short=short: short(v)) if high < 20 * low
                                         else NullFormatter())
            ax.set_xlabel("samples", fontsize=8)
            ax.set_ylabel(label, fontsize=8)
            ax.tick_params(labelsize=7)
    handles = ([Line2D([], [], color=color[m], label=m) for m in methods]
               + [Line2D([], [], color="gray", linestyle=ls, label=f"inheritance {on}") for ls, on in
                  (("-", "on"), (":", "off"))]
               + ([Line2D([], [], color="gray", marker=markers[w], linestyle="", label=f"{w} worker(s)")
                   for w in workers] if len(workers) > 1 else []))
    top.axes[1].legend(handles=handles, fontsize=7, loc="best")
    if panels:
        for panel, ax in zip(panels, bottom.subplots(1, len(panels), squeeze=False)[0]):
            panel(ax)
    environment = report.get("environment", {})
    fig.suptitle(f"counting on {environment.get('device_name', environment.get('device'))} "
                 f"({environment.get('date', '')[:10]}){'' if report.get('complete', True) else ', incomplete run'}",
                 fontsize=10)
    return fig


def _count_variance(ax, variance: list[dict]) -> None:
    """gSWORD's Fig. 10: per query, by size, the normalized standard deviation of its Alley estimates over seeds
    with and without inheritance."""
    queries = sorted(dict.fromkeys((v["vertices"], v["graph"], v["labels"], v["query"]) for v in variance))
    value = {(v["graph"], v["labels"], v["query"], v["inheritance"]): v["normalized_std"] for v in variance}
    x, ticks, at = 0.0, [], {}
    for i, (size, graph, labels, name) in enumerate(queries):
        if i and size != queries[i - 1][0]:
            x += 1  # a gap between sizes
        at[graph, labels, name] = x
        ticks.append((x, f"{name}, {labels} labels"))
        x += 1
    for shift, inherit, color in ((-0.2, True, "tab:blue"), (0.2, False, "tab:orange")):
        ax.bar([at[q[1:]] + shift for q in queries],
               [value.get((*q[1:], inherit)) or float("nan") for q in queries], 0.4, color=color,
               label=f"inheritance {'on' if inherit else 'off'}")
    for size in dict.fromkeys(q[0] for q in queries):
        group = [q for q in queries if q[0] == size]
        medians = [_median([value.get((*q[1:], inherit)) for q in group]) for inherit in (True, False)]
        ax.text(sum(at[q[1:]] for q in group) / len(group), 1.01, f"{size} vertices\nmedian {medians[0]:.3g} / "
                f"{medians[1]:.3g}", transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=7)
    ax.set_xticks([t for t, _ in ticks], [label for _, label in ticks], rotation=90, fontsize=6)
    ax.set_yscale("log")
    v = variance[0]
    ax.set_ylabel(f"std / mean of {len(v['estimates'])} Alley estimates ({v['samples']:,} samples)", fontsize=8)
    ax.legend(fontsize=7, loc="upper left")


def _count_workers(ax, records: list[dict], color: dict) -> None:
    """Median samples/s over the queries per worker count, per (graph, labels) and method, at the most samples
    that every worker count drew, inheritance on; the speed-up over the first worker count above each bar."""
    records = [r for r in records if r["inheritance"]]
    workers = sorted({r["workers"] for r in records})
    most = max(set.intersection(*({r["samples"] for r in records if r["workers"] == w} for w in workers)))
    groups = list(dict.fromkeys((r["graph"], r["labels"], r["method"]) for r in records))
    width = 0.8 / len(workers)
    for j, w in enumerate(workers):
        rates = [_median([r["samples_per_second"] for r in records if (r["graph"], r["labels"], r["method"]) == group
                          and r["workers"] == w and r["samples"] == most]) for group in groups]
        if j == 0:
            base = rates
        bars = ax.bar([i + (j - (len(workers) - 1) / 2) * width for i in range(len(groups))], rates, width,
                      color=[color[m] for _, _, m in groups], alpha=1 - 0.6 * j / len(workers),
                      edgecolor="black", linewidth=0.4)
        ax.bar_label(bars, [f"{w}w" + (f" x{r / b:.2f}" if j else "") for r, b in zip(rates, base)],
                     fontsize=6, rotation=90, padding=2)
    ax.set_xticks(range(len(groups)), [f"{g}, {labels} labels: {m}" for g, labels, m in groups], fontsize=6,
                  rotation=90)
    ax.set_yscale("log")
    ax.set_ylabel(f"samples / s at {most:,} samples, median", fontsize=8)
    ax.set_title(f"inheritance on, per worker count (lighter: more); xN: over {workers[0]} worker(s)", fontsize=8)
    ax.margins(y=0.25)


def _superstep(plt, report: dict):
    """An empty superstep (``superstep.py``): its median milliseconds (mean marked) per worker count and exchange
    path, beside issue 37's bound of 0.3 ms."""
    records = report["records"]
    workers = "GPUs" if report["device"] == "gpu" else "workers"
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(records) + 1.5))
    y = np.arange(len(records))
    ax.barh(y, [r["seconds"] * 1e3 for r in records], label="median")
    ax.scatter([r["mean_seconds"] * 1e3 for r in records], y, color="black", zorder=3, s=12, label="mean")
    ax.axvline(0.3, color="gray", linestyle=":", label="0.3 ms (issue 37's bound)")
    ax.set_yticks(y, [f"{r['gpus']} {workers}, {r['exchange']}" for r in records])
    ax.set_xlabel("ms per empty superstep")
    ax.set_title(f"an empty superstep on {report['device_name']} ({report['date'][:10]})")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def _superstep_kernel(plt, report: dict):
    """A GPU's kernel in a partitioned superstep (``superstep.py kernel``): the best run's steps per second of the
    kernels per cut, beside the whole graph's and issue 66's bar of 0.8 of it."""
    best: dict[int, float] = {}
    for r in report["records"]:
        best[r["partitions"]] = max(best.get(r["partitions"], 0.0), r["kernel_steps_per_second"])
    parts = sorted(best)
    fig, ax = plt.subplots(figsize=(6, 0.5 * len(parts) + 1.8))
    y = np.arange(len(parts))
    ax.barh(y, [best[p] / 1e9 for p in parts])
    ax.axvline(0.8 * best[1] / 1e9, color="gray", linestyle=":", label="0.8 of the whole graph's (issue 66)")
    ax.set_yticks(y, ["whole graph" if p == 1 else f"a partition of {p}" for p in parts])
    ax.set_xlabel("G steps/s of the kernels")
    graph = report["graph"]
    ax.set_title(f"DeepWalk on R-MAT {graph['scale']}, {report['device_name']} ({report['date'][:10]})", fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def _locality(plt, report: dict):
    """The fraction of arcs that cross between P partitions (``locality.py``), a panel per P, a bar per graph and
    vertex order, beside (P - 1) / P, what ids in no relation to the structure give."""
    records = report["records"]
    parts = [f["partitions"] for f in records[0]["fractions"]]
    fig, axes = plt.subplots(1, len(parts), figsize=(4 * len(parts), 0.3 * len(records) + 1.5), sharey=True)
    axes, y = np.atleast_1d(axes), np.arange(len(records))
    for i, ax in enumerate(axes):
        ax.barh(y, [r["fractions"][i]["arcs"] for r in records])
        ax.axvline((parts[i] - 1) / parts[i], color="gray", linestyle=":", label="(P - 1) / P")
        ax.set_xlim(0, 1)
        ax.set_xlabel(f"arcs crossing, P = {parts[i]}")
    axes[0].set_yticks(y, [f"{r['graph']}, {r['order']}" for r in records], fontsize=7)
    axes[0].invert_yaxis()
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"crossings by vertex order on {report['device_name']} ({report['date'][:10]})", fontsize=9)
    fig.tight_layout()
    return fig


def _model(plt, report: dict):
    """The planning model (``model.py``): speedup over one GPU against the link's bandwidth, a line per GPU count,
    on R-MAT's crossings, at the measured kernel fraction (solid) and at issue 66's bar of 0.8 (dashed)."""
    records = [r for r in report["records"] if r["crossings"].startswith("R-MAT")]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, p in enumerate(sorted({r["gpus"] for r in records})):
        for fraction, style in (("measured", "-"), ("issue 66's bar", "--")):
            line = sorted((r["link_bytes_per_second"], r["speedup"]) for r in records
                          if r["gpus"] == p and r["kernel_fraction"] == fraction)
            ax.plot([b / 1e9 for b, _ in line], [v for _, v in line], style, color=f"C{i}", marker="o", markersize=3,
                    label=f"{p} GPUs" + (", kernel at 0.8" if style == "--" else ""))
    ax.axhline(1.0, color="gray", linestyle=":", label="one GPU")
    ax.set_xscale("log")
    ax.set_xlabel("link GB/s out of each GPU")
    ax.set_ylabel("speedup over one GPU (model)")
    params = report["parameters"]
    ax.set_title(f"partitioned DeepWalk, R-MAT 24 x10 (model from the committed figures; kernel at "
                 f"{params['kernel_fractions']['measured']:.2f} of whole)", fontsize=8)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def _first_call(plt, report: dict):
    """``first_call.py``: each call's seconds to ready, per warm-up, each in a fresh process and kernel cache."""
    records = report["records"]
    fig, ax = plt.subplots(figsize=(7, 0.9 * len(records) + 1.5))
    calls = len(records[0]["calls"])
    height = 0.8 / calls
    for c in range(calls):
        y = np.arange(len(records)) + c * height
        rects = ax.barh(y, [r["calls"][c]["seconds"] for r in records], height, label=f"call {c + 1}")
        ax.bar_label(rects, [f"{r['calls'][c]['seconds']:.2f} s ({r['calls'][c]['compiled']} compiled)"
                             for r in records], fontsize=7, padding=2)
    ax.set_yticks(np.arange(len(records)) + 0.4 - height / 2,
                  [f"warm-up: {r['warmup']} ({r['warmup_seconds']:.0f} s)" for r in records])
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the call to the walks ready (persist)")
    ax.set_xlim(right=max(c["seconds"] for r in records for c in r["calls"]) * 1.5)
    ax.set_title(_title(report), fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def _embeddings(plt, report: dict):
    """Vertex embeddings (``embeddings.py``): per graph and trainer, Macro- and Micro-F1 (the node2vec paper's
    DeepWalk Macro-F1 marked) where the records were scored, and training tokens per second."""
    records = report["records"]
    if any(r["trainer"] == "pyg_node2vec" for r in records):
        return _time_to_f1(plt, report)
    scored = [r for r in records if "macro_f1" in r]
    panels = 2 if scored else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 0.5 * len(records) + 2), squeeze=False)
    labels = [f"{r['graph']} {r.get('walk', '')}: {r['trainer']}"
              + (f" ({r['workers']} worker{'s' * (r['workers'] != 1)}, {r['mode']}"
                 + (f", sync {r['sync']}" if r["workers"] > 1 and "sync" in r else "") + ")" if "workers" in r
                 else f" ({r.get('threads', '?')} threads)") for r in records]
    if scored:
        ax, y = axes[0, 0], np.arange(len(scored))
        for offset, key, name in ((-0.2, "macro_f1", "Macro-F1"), (0.2, "micro_f1", "Micro-F1")):
            rects = ax.barh(y + offset, [r[key] for r in scored], 0.4, xerr=[r[f"{key}_std"] for r in scored],
                            label=name)
            ax.bar_label(rects, [f"{r[key]:.3f}" for r in scored], fontsize=7, padding=3)
        for i, r in enumerate(scored):
            if r.get("paper_deepwalk_macro_f1"):
                ax.plot([r["paper_deepwalk_macro_f1"]] * 2, [i - 0.4, i], color="black", linestyle=":")
        ax.set_yticks(y, [labels[records.index(r)] for r in scored], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("F1 over 10 splits (dotted: the node2vec paper's DeepWalk Macro-F1)")
        ax.set_xlim(right=max(r["micro_f1"] for r in scored) * 1.35)
        ax.legend(loc="upper right", fontsize=8)
    ax = axes[0, panels - 1]
    rects = ax.barh(np.arange(len(records)), [r["tokens_per_second"] for r in records],
                    color=["tab:blue" if r["trainer"] == "gpipe" else "tab:gray" for r in records])
    ax.bar_label(rects, [_si(r["tokens_per_second"]) for r in records], fontsize=7, padding=3)
    ax.set_yticks(np.arange(len(records)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("training tokens / s")
    ax.set_xlim(right=max(r["tokens_per_second"] for r in records) * 1.25)
    ax.xaxis.set_major_formatter(lambda v, _: _si(v))
    fig.suptitle(_title(report), fontsize=9)
    fig.tight_layout()
    return fig


def _time_to_f1(plt, report: dict):
    """``embeddings.py pyg``: PyG's Node2Vec's Macro-F1 epoch by epoch against its training seconds, gpipe's (from
    the edges to the vectors) a point, its Macro-F1 the line to reach."""
    gpipe_record, *pyg = report["records"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.axhline(gpipe_record["macro_f1"], color="tab:blue", linestyle=":")
    ax.plot([gpipe_record["seconds"]], [gpipe_record["macro_f1"]], "o", color="tab:blue", label="gpipe (walk + train)")
    epochs = [r for r in pyg if "epoch" in r]
    if epochs:
        ax.plot([r["seconds"] for r in epochs], [r["macro_f1"] for r in epochs], "s-", color="tab:gray",
                label=f"PyG Node2Vec {epochs[0]['version']} (training, per epoch)")
    else:
        ax.set_title(f"PyG Node2Vec did not run: {pyg[0].get('error', '?')}"[:90], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("seconds")
    ax.set_ylabel(f"Macro-F1 ({gpipe_record['graph']}, {gpipe_record['splits']} splits)")
    ax.legend(fontsize=8)
    fig.suptitle(_title(report), fontsize=9)
    fig.tight_layout()
    return fig


def _graphsage(plt, report: dict):
    """``graphsage.py``: per loader, an epoch's seconds split into waiting on the loader (sampling) and training."""
    records = report["records"]
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(records) + 1.6))
    y = np.arange(len(records))
    ran = [r for r in records if "error" not in r]
    sampling = [r.get("sampling_seconds", 0.0) for r in records]
    training = [r.get("training_seconds", 0.0) for r in records]
    ax.barh(y, sampling, color="tab:orange", label="waiting on the loader (sampling)")
    rects = ax.barh(y, training, left=sampling, color="tab:blue", label="training steps")
    ax.bar_label(rects, [f"{r['seconds']:.2f} s, sampling {r['sampling_share']:.0%}" if "error" not in r
                         else f"did not run: {r['error']}"[:60] for r in records], fontsize=7, padding=3)
    ax.set_yticks(y, [r["loader"] for r in records])
    ax.invert_yaxis()
    ax.set_xlabel(f"seconds per epoch ({report['parameters']['seeds']:,} seeds, batches of "
                  f"{report['parameters']['batch_size']:,}, fanouts {report['parameters']['fanouts']})")
    ax.set_xlim(right=max([r["seconds"] for r in ran] or [1.0]) * 1.6)
    ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(_title(report), fontsize=9)
    fig.tight_layout()
    return fig


def _memory(plt, report: dict):
    """A partitioned walk's memory (``memory.py``): per worker, the device memory in use, CuPy's pool in use, the
    resident set and the outputs counted against ``output-limit``, over the phases (built, walk, assembly, after)."""
    workers = sorted({w for by_worker in report["samples"].values() for w in by_worker})
    fig, axes = plt.subplots(len(workers), 1, figsize=(10, 3.2 * len(workers)), squeeze=False, sharex=True)
    start = min(s[0] for by_worker in report["samples"].values() for samples in by_worker.values() for s in samples)
    series = ((2, "device in use"), (1, "CuPy pool in use"), (3, "resident set (host)"), (4, "outputs counted"))
    colors = ("tab:red", "tab:orange", "tab:blue", "tab:green")
    if report["device"] != "gpu":
        series, colors = series[2:], colors[2:]
    for ax, worker in zip(axes[:, 0], workers):
        for name, by_worker in report["samples"].items():
            samples = np.asarray(by_worker.get(worker, []), dtype=float)
            if not len(samples):
                continue
            for (column, label), color in zip(series, colors):
                ax.plot(samples[:, 0] - start, samples[:, column] / 1e9, color=color,
                        label=label if name == "graph" else None)
            ax.axvline(samples[0, 0] - start, color="gray", linestyle=":")
            ax.text(samples[0, 0] - start, ax.get_ylim()[1] * 0.02, f" {name}", fontsize=8, color="gray")
        ax.set_ylabel("GB")
        ax.set_title(f"worker {worker}", fontsize=9)
    axes[0, 0].legend(loc="upper left", fontsize=8)
    axes[-1, 0].set_xlabel("seconds")
    failed = "; ".join(f"{k} failed" for k in report.get("errors", {}))
    fig.suptitle(f"a partitioned DeepWalk x{report['parameters']['walks_per_vertex']} on R-MAT "
                 f"{report['graph']['scale']}, {report['device_name']} ({report['date'][:10]})"
                 + (f"; {failed}" if failed else ""), fontsize=10)
    fig.tight_layout()
    return fig


def _interval_coverage(plt, report: dict):
    """Interval coverage (``interval_coverage.py``): per method and sample count, the share of estimates whose interval
    covers the exact count (the normal interval of before, the skewness-corrected one, and it over the estimates
    flagged reliable) against the nominal level, the share flagged above each group; below, per cell, its coverage
    against the share of its estimates flagged unreliable."""
    rows = report["summary"]["per_method_and_samples"] if "summary" in report else []
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 9), constrained_layout=True)
    bars = (("normal_coverage", "normal interval (before)", "tab:gray"),
            ("coverage", "skewness-corrected interval", "tab:blue"),
            ("coverage_reliable", "the same, estimates flagged reliable", "tab:green"))
    for j, (field, label, color) in enumerate(bars):
        top.bar([i + (j - 1) * 0.27 for i in range(len(rows))], [r[field] or 0 for r in rows], 0.27, color=color,
                label=label)
    for i, r in enumerate(rows):
        top.text(i, 1.005, f"flagged {r['flagged']:.0%}", ha="center", va="bottom", fontsize=7)
    top.axhline(report["nominal"], color="black", linestyle="--", linewidth=0.8, label=f"nominal {report['nominal']}")
    top.set_xticks(range(len(rows)), [f"{r['method']}\n{r['samples']:,} samples ({r['cells']} cells)" for r in rows],
                   fontsize=7)
    top.set_ylim(0.4, 1.06)
    top.set_ylabel("share of estimates covering the exact count", fontsize=8)
    top.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=4)
    methods = list(dict.fromkeys(c["method"] for c in report["cells"]))
    color = dict(zip(methods, plt.get_cmap("tab10").colors))
    marker = dict(zip(report["samples"], "os^Dv"))
    for c in report["cells"]:
        bottom.scatter(c["coverage"], c["flagged"], color=color[c["method"]], marker=marker.get(c["samples"], "o"),
                       s=18, alpha=0.6)
    first = report["cells"][0] if report["cells"] else None
    for c in report["cells"]:  # the case (the first query), WanderJoin
        if first and (c["graph"], c["query"], c["method"]) == (first["graph"], first["query"], "wanderjoin"):
            bottom.annotate(f"issue's case, {c['samples']:,}", (c["coverage"], c["flagged"]), fontsize=7,
                            textcoords="offset points", xytext=(6, -10))
    bottom.axvline(report["nominal"], color="black", linestyle="--", linewidth=0.8)
    handles = [plt.Line2D([], [], color=color[m], marker="o", linestyle="", label=m) for m in methods] + [
        plt.Line2D([], [], color="gray", marker=marker[n], linestyle="", label=f"{n:,} samples")
        for n in report["samples"]]
    bottom.legend(handles=handles, fontsize=7, loc="center left")
    bottom.set_xlabel("coverage of the cell's intervals (skewness-corrected)", fontsize=8)
    bottom.set_ylabel("share of the cell's estimates flagged unreliable", fontsize=8)
    environment = report.get("environment", {})
    pooled = report["summary"]["all"][0] if "summary" in report else None
    fig.suptitle(f"95% intervals of gpipe.counting.estimate, {len(report['cells'])} cells (graph, query, method, "
                 f"samples) x {'/'.join(map(str, report['seeds']))} seeds, on "
                 f"{environment.get('device_name', environment.get('device'))} ({environment.get('date', '')[:10]})"
                 f"{'' if report.get('complete', True) else ', incomplete run'}" + (
                     f"\nall cells: normal {pooled['normal_coverage']:.3f}, skewness-corrected "
                     f"{pooled['coverage']:.3f}, over the {1 - pooled['flagged']:.0%} flagged reliable "
                     f"{pooled['coverage_reliable']:.3f}" if pooled else ""), fontsize=9)
    return fig


def _median(values: list) -> float:
    present = [v for v in values if v is not None]
    return float(np.median(present)) if present else float("nan")


def _space_batch_label(key: str) -> str:
    """The bar of a ``space_batch_<size>_[device_]updates_per_second`` rate: from host or from the GPU's memory."""
    where = "the GPU's" if key.endswith("_device_updates_per_second") else "host"
    return f"batches of {int(key.split('_')[2]):,}, one space (from {where} memory)"


def _dynamic_updates(plt, report: dict):
    """Updates/s of a dynamic graph: one at a time (through the cluster, and one space alone) and in batches."""
    rates = {"single updates, through the cluster": report["single_updates_per_second"],
             "single updates, one space (no cluster)": report["space_single_updates_per_second"],
             **{f"batches of {int(k.split('_')[1]):,}": v for k, v in report.items()
                if k.startswith("batch_") and k.endswith("_updates_per_second")},
             **{_space_batch_label(k): v for k, v in report.items()
                if k.startswith("space_batch_") and k.endswith("_updates_per_second")}}
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rates) + 1.6), constrained_layout=True)
    bars = ax.barh(range(len(rates)), list(rates.values()))
    ax.bar_label(bars, [_si(v) for v in rates.values()], padding=3, fontsize=8)
    ax.set_yticks(range(len(rates)), list(rates), fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("updates / s (to the graph ready to walk)")
    ax.set_title(f"dynamic updates on {report.get('device_name', report.get('device'))}: R-MAT {report['scale']}, "
                 f"{report['edges']:,} stored edges, {report['partitions']} partition(s)"
                 f"{chr(10) + report['code'] if 'code' in report else ''}", fontsize=9)
    return fig


def _mining(plt, report: dict):
    """Seconds per workload and device budget, GAMMA's seconds beside where it reported the workload."""
    records = report["records"]
    labels = [f"{r['workload']} (budget {r['device_budget']}{', spilled' if r['spilled_bytes'] else ''})"
              for r in records]
    values = [r["seconds"] for r in records]
    colors = ["tab:blue"] * len(values)
    graph = report.get("graph", {})
    if graph.get("scale") == 18:
        for workload, seconds in GAMMA_H200_RMAT18_SECONDS.items():
            labels.append(f"GAMMA {workload} (H200, its R-MAT 18)")
            values.append(seconds)
            colors.append("tab:gray")
    if "baseline" in report:  # mining.py --baseline: the plain triangle count of the same graph
        base = report["baseline"]
        labels += ["plain triangle count (1 thread)", "plain triangle count + orienting"]
        values += [base["seconds"], base["seconds"] + base["orient_seconds"]]
        colors += ["tab:gray"] * 2
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(values) + 1.8), constrained_layout=True)
    bars = ax.barh(range(len(values)), values, color=colors)
    ax.bar_label(bars, [f"{v:.3g} s" for v in values], padding=3, fontsize=7)
    ax.set_yticks(range(len(values)), labels, fontsize=8)
    ax.invert_yaxis()
    if max(values) > 100 * min(v for v in values if v > 0):
        ax.set_xscale("log")
    ax.set_xlabel("seconds (the whole call)")
    ax.set_title(_title(report), fontsize=9)
    return fig


def _fpm(plt, report: dict):
    """Seconds per FPM run (graph, max edges, MNI support), each bar labeled with the frequent patterns found."""
    records = report["records"]
    labels = [f"{r['graph']}, {r['max_edges']} edges, support {r['min_support']}" for r in records]
    values = [r["seconds"] for r in records]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(values) + 1.8), constrained_layout=True)
    bars = ax.barh(range(len(values)), values, color="tab:blue")
    ax.bar_label(bars, [f"{v:.3g} s, {r['patterns']:,} patterns" for v, r in zip(values, records)], padding=3,
                 fontsize=7)
    ax.set_yticks(range(len(values)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (the whole call)")
    ax.set_title(f"frequent pattern mining on {report.get('device_name', report.get('device'))} "
                 f"({report.get('date', '')[:10]})", fontsize=9)
    return fig


def _dynamic(plt, report: dict):
    """Per workload (log kind, bias): seconds of the rounds' updates and walks, dynamic against a static graph
    rebuilt each round; Bingo's 10-round mixed DeepWalk beside where the graph is its R-MAT 18; updates/s and
    bytes per edge on the right."""
    records = report["records"]
    walks = list(records[0]["total_seconds"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 0.5 * len(records) * len(walks) + 2.5),
                                      constrained_layout=True)
    labels, dynamic, static = [], [], []
    for r in records:
        for walk in walks:
            labels.append(f"{r['workload']} {walk}")
            dynamic.append(r["total_seconds"][walk])
            static.append(r["static_total_seconds"][walk])
    if report.get("graph", {}).get("scale") == 18:
        labels.append("Bingo mixed deepwalk, 10 rounds (H200, its code)")
        dynamic.append(report["bingo"]["mixed_10_rounds_seconds_h200_rmat18"])
        static.append(float("nan"))
    height = 0.4
    for i, (name, values) in enumerate((("dynamic: updates + walks", dynamic),
                                        ("static: rebuild + walks", static))):
        bars = left.barh([j + (i - 0.5) * height for j in range(len(values))], values, height, label=name)
        left.bar_label(bars, [f"{v:.3g} s" for v in values], padding=2, fontsize=6)
    left.set_yticks(range(len(labels)), labels, fontsize=7)
    left.invert_yaxis()
    left.set_xlabel(f"seconds over {report['rounds']} rounds of {report['updates_per_round']:,} updates")
    left.legend(fontsize=7, loc="lower right")
    names = [r["workload"] for r in records]
    rate = [sum(x["updates"] for x in r["rounds"]) / sum(x["update_seconds"] for x in r["rounds"]) for r in records]
    bars = right.barh(range(len(records)), rate, color="tab:green")
    right.bar_label(bars, [f"{_si(v)}/s, {r['rounds'][-1]['bytes_per_edge']:.0f} B/edge" for v, r in
                           zip(rate, records)], padding=2, fontsize=6)
    right.set_yticks(range(len(records)), names, fontsize=7)
    right.invert_yaxis()
    right.set_xscale("log")
    right.set_xlabel(f"batched updates / s (Bingo, A100: {_si(report['bingo']['batched_updates_per_second_a100'])})")
    fig.suptitle(_title(report), fontsize=9)
    return fig


def _io(plt, report: dict):
    """Seconds per stage of each input format, gpipe's bar with the single-process baselines' beside it, each
    labelled with its seconds and throughput."""
    rows = [(f"{r['format']}: {s['stage']}", s) for r in report["records"] for s in r["stages"]]
    fig, ax = plt.subplots(figsize=(11, 0.42 * sum(1 + len(s["baselines"]) for _, s in rows) + 2.2),
                           constrained_layout=True)
    y, ticks, values = 0.0, [], []
    colors = ("tab:gray", "silver", "darkgray")
    for label, stage in rows:
        bars = [("gpipe", stage, "tab:blue")] + [(b["baseline"], b, colors[i % len(colors)])
                                                  for i, b in enumerate(stage["baselines"])]
        ticks.append((y + 0.4 * (len(bars) - 1) / 2, label))
        for name, bar, color in bars:
            rect = ax.barh(y, bar["seconds"], 0.38, color=color)
            rate = f", {_si(bar['rate'])} {bar['unit']}" if bar.get("rate") else ""
            ax.bar_label(rect, [f"{bar['seconds']:.3g} s{rate}" + ("" if name == "gpipe" else f" ({name})")],
                         padding=3, fontsize=6)
            values.append(bar["seconds"])
            y += 0.4
        y += 0.35
    ax.set_yticks([t for t, _ in ticks], [label for _, label in ticks], fontsize=7)
    ax.invert_yaxis()
    positive = [v for v in values if v > 0]
    if positive and max(positive) > 100 * min(positive):
        ax.set_xscale("log")
    ax.set_xlim(right=max(values) * (8 if ax.get_xscale() == "log" else 1.6))
    ax.set_xlabel("seconds (the call, until it returns); blue: gpipe, gray: one process alone")
    p = report.get("parameters", {})
    ax.set_title(_title(report) + f"; DeepWalk 1 walk/vertex, length {p.get('length')}; neighbor "
                 f"{p.get('seeds', 0):,} seeds, fanout {p.get('fanout')}, depth {p.get('depth')}", fontsize=9)
    return fig


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
                          for k in ("generator", "file", "scale", "num_vertices", "num_edges") if k in graph)
    return f"{report.get('benchmark', 'gpipe')} on {report.get('device_name', report.get('device'))} " \
           f"({report.get('date', '')[:10]})\n{described}"


def main(paths: list[str]) -> None:
    for path in paths:
        with open(path) as f:
            figure = draw(json.load(f), os.path.splitext(path)[0] + ".png")
        print(f"{path}: {figure or 'no figure (no throughput records, or matplotlib missing)'}")


if __name__ == "__main__":
    main(sys.argv[1:])
