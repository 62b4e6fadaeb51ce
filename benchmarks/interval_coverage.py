"""How often the 95% intervals of gpipe.counting.estimate cover the exact count, and what ``reliable`` says (issue 36
item 7).

    python benchmarks/interval_coverage.py --device cpu --samples 8192 65536 --seeds 200 \
        --out benchmarks/results/interval_coverage_cpu2.json

Per case (a data graph, a labeled query and its exact count from ``count_exact``), method (WanderJoin, Alley,
PartialRefine alpha 0.1, inheritance on) and sample count: ``--seeds`` estimates of seeds 0, 1, ... (one figure
per sample count, or one for all), each drawn through ``prepare`` as a user would. Per cell: the share of seeds
whose interval covers the exact count (``coverage``, the nominal level being 0.95), that of the normal interval
``estimate +- 1.96 std_error`` which ``estimate`` gave before (``normal_coverage``), the share flagged unreliable
(``flagged``) and the coverage over the estimates flagged reliable and over the others; the median effective group
count and skewness, and the estimates' spread over the exact count. ``summary`` pools the cells per method and
sample count, and per method.

The cases were made to be hard: graphs whose degrees follow a power law (networkx's power-law clustered and
Barabasi-Albert graphs, R-MAT) have sample values that are mostly 0 with rare huge ones, beside light-tailed ones
(Watts-Strogatz, G(n, p)) and HPRD's dense 16-vertex queries (``../shared/data/hprd``, with their published
counts). The first case is the issue's: ``networkx.powerlaw_cluster_graph(1500, 4, 0.6, seed=13)`` with 3 random
labels and a diamond. The thresholds of ``reliable`` (30 effective groups, Cochran's 25 x skewness squared) are
textbook values, not fitted to these cases. The JSON is saved after every cell (``complete`` false until the end),
the figure beside it at the end (``figures.py``). (Not named ``coverage.py``: numba imports the ``coverage``
package, which a script of that name would shadow on its own path, in this process and in the workers.)
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
from _common import environment, write_json
from figures import draw

import gpipe
from gpipe.counting import Query

HPRD = Path(__file__).resolve().parents[2] / "shared" / "data" / "hprd"
METHODS = (("wanderjoin", None), ("alley", None), ("partial_refine", 0.1))
NOMINAL = 0.95
Z95 = 1.959963984540054
SHAPES = {"triangle": [(0, 1), (1, 2), (0, 2)], "square": [(0, 1), (1, 2), (2, 3), (3, 0)],
          "diamond": [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)], "tailed_triangle": [(0, 1), (1, 2), (0, 2), (2, 3)],
          "clique4": [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], "path4": [(0, 1), (1, 2), (2, 3)],
          "star4": [(0, 1), (0, 2), (0, 3)], "house": [(0, 1), (1, 2), (2, 3), (3, 0), (0, 4), (1, 4)]}
# (graph name, its generator (networkx's, or gpipe's R-MAT), label count and seed of the uniform random labels,
# [(shape, query labels)])
SYNTHETIC = [
    ("powerlaw_cluster(1500, 4, 0.6, seed=13)", lambda: nx.powerlaw_cluster_graph(1500, 4, 0.6, seed=13), 3,
     [("diamond", [0, 1, 2, 0]), ("diamond", [0, 0, 1, 1]), ("tailed_triangle", [2, 2, 0, 1]),
      ("square", [1, 2, 1, 0])]),
    ("powerlaw_cluster(2500, 3, 0.5, seed=31)", lambda: nx.powerlaw_cluster_graph(2500, 3, 0.5, seed=31), 2,
     [("triangle", [0, 0, 1]), ("square", [0, 1, 0, 1]), ("clique4", [0, 0, 0, 1]), ("path4", [0, 1, 1, 0])]),
    ("barabasi_albert(1200, 5, seed=17)", lambda: nx.barabasi_albert_graph(1200, 5, seed=17), 3,
     [("diamond", [0, 1, 1, 2]), ("star4", [0, 1, 2, 2]), ("house", [0, 1, 2, 0, 1]), ("triangle", [0, 1, 2])]),
    ("rmat(11, 8, seed=3)", lambda: gpipe.generators.rmat(11, 8, seed=3), 4,
     [("triangle", [0, 0, 1]), ("diamond", [0, 1, 2, 3]), ("square", [0, 1, 2, 1]), ("path4", [3, 0, 1, 2])]),
    ("watts_strogatz(800, 8, 0.1, seed=5)", lambda: nx.connected_watts_strogatz_graph(800, 8, 0.1, seed=5), 2,
     [("diamond", [0, 0, 1, 1]), ("square", [0, 1, 0, 1]), ("triangle", [0, 1, 1])]),
    ("gnp(500, 0.03, seed=8)", lambda: nx.gnp_random_graph(500, 0.03, seed=8), 2,
     [("house", [0, 1, 0, 1, 1]), ("path4", [0, 1, 1, 0])]),
]


def on_cluster(graph, label_count: int, seed: int) -> gpipe.Graph:
    """``graph`` (networkx's, or already gpipe's) on the cluster with uniform random labels."""
    if isinstance(graph, nx.Graph):
        edges = np.array(graph.edges, np.int64).reshape(-1, 2)
        graph = gpipe.from_edges(pd.DataFrame({"src": edges[:, 0], "dst": edges[:, 1]}), renumber=False,
                                 num_vertices=graph.number_of_nodes())
    graph.set_labels(np.random.default_rng(seed).integers(label_count, size=graph.num_vertices))
    return graph


def cases(hprd_queries: int):
    """Per data graph: its description and [(query name, query, exact count)], the graph on the cluster."""
    for name, make, label_count, queries in SYNTHETIC:
        seed = int(name.rsplit("seed=", 1)[1].rstrip(")"))
        g = on_cluster(make(), label_count, seed)
        found = []
        for shape, labels in queries:
            query = Query.from_edges(SHAPES[shape], labels)
            found.append((f"{shape} {labels}", query, gpipe.counting.count_exact(g, query)))
        yield {"graph": name, "labels": label_count, "label_seed": seed, "num_vertices": g.num_vertices,
               "num_edges": g.num_edges}, g, found
        g.release()
    if hprd_queries:
        expected = dict(line.split(":") for line in (HPRD / "expected_counts.txt").read_text().split())
        names = sorted(expected, key=lambda name: int(name.rsplit("_", 1)[1]))[:hprd_queries]
        g = gpipe.counting.read_graph(HPRD / "HPRD.graph")
        yield {"graph": "hprd", "labels": int(len(np.unique(g.labels))), "num_vertices": g.num_vertices,
               "num_edges": g.num_edges}, g, [(name, Query.from_file(HPRD / "queries" / f"{name}.graph"),
                                               int(expected[name])) for name in names]
        g.release()


def cell(prepared, method: str, alpha, samples: int, seeds: int, exact: int) -> dict:
    """``seeds`` estimates and how their intervals fared."""
    started = time.perf_counter()
    runs = [prepared.estimate(method=method, alpha=alpha, samples=samples, seed=seed) for seed in range(seeds)]
    covered = np.array([r.confidence_interval[0] <= exact <= r.confidence_interval[1] for r in runs])
    normal = np.array([abs(r.estimate - exact) <= Z95 * r.std_error for r in runs])
    reliable = np.array([r.reliable for r in runs])
    estimates = np.array([r.estimate for r in runs])

    def share(values: np.ndarray):
        return float(values.mean()) if len(values) else None

    return {"method": method, "alpha": runs[0].alpha, "samples": runs[0].samples, "seeds": seeds,
            "nominal": NOMINAL, "coverage": share(covered), "normal_coverage": share(normal),
            "flagged": share(~reliable), "reliable": int(reliable.sum()),
            "coverage_reliable": share(covered[reliable]), "coverage_flagged": share(covered[~reliable]),
            "normal_coverage_reliable": share(normal[reliable]),
            "median_effective_groups": float(np.median([r.effective_groups for r in runs])),
            "median_skewness": float(np.median([r.skewness for r in runs])),
            "mean_over_exact": float(estimates.mean() / exact), "spread_over_exact": float(estimates.std() / exact),
            "valid_fraction": float(np.mean([r.valid_fraction for r in runs])),
            "seconds": time.perf_counter() - started}


def summary(cells: list[dict], keys: tuple) -> list[dict]:
    """The cells pooled (each seed one estimate) per value of ``keys``."""
    pooled = []
    for values in dict.fromkeys(tuple(c[k] for k in keys) for c in cells):
        group = [c for c in cells if tuple(c[k] for k in keys) == values]
        seeds = sum(c["seeds"] for c in group)
        reliable = sum(c["reliable"] for c in group)

        def over(field: str, weight: str) -> float | None:
            total = sum(c[weight] for c in group if c[field] is not None)
            return sum(c[field] * c[weight] for c in group if c[field] is not None) / total if total else None

        pooled.append({**dict(zip(keys, values)), "cells": len(group), "estimates": seeds, "nominal": NOMINAL,
                       "coverage": over("coverage", "seeds"), "normal_coverage": over("normal_coverage", "seeds"),
                       "coverage_reliable": over("coverage_reliable", "reliable"),
                       "flagged": 1 - reliable / seeds,
                       "cells_normal_below_90": sum(c["normal_coverage"] < 0.90 for c in group),
                       "cells_below_90": sum(c["coverage"] < 0.90 for c in group),
                       "cells_below_90_flagged_mostly": sum(c["coverage"] < 0.90 and c["flagged"] >= 0.5
                                                            for c in group)})
    return pooled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--samples", type=int, nargs="+", default=[8192])
    parser.add_argument("--seeds", type=int, nargs="+", default=[200],
                        help="estimates per cell: one figure, or one per sample count")
    parser.add_argument("--hprd-queries", type=int, default=3, help="HPRD's first queries by number (0: none)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if len(args.seeds) not in (1, len(args.samples)) or min(args.seeds) < 2:
        parser.error(f"--seeds must be one count >= 2 or one per sample count, got {args.seeds}")
    seeds = dict(zip(args.samples, args.seeds * len(args.samples) if len(args.seeds) == 1 else args.seeds))
    report = {"benchmark": "interval_coverage", "nominal": NOMINAL, "samples": args.samples, "seeds": args.seeds,
              "rule": "reliable: effective_groups >= 30 and groups >= 25 x skewness ** 2 (Cochran)",
              "interval": "Hall's skewness-corrected 95% interval; normal_coverage: estimate +- 1.96 std_error",
              "graphs": [], "cells": [], "complete": False}
    started = time.perf_counter()
    with gpipe.connect(n_workers=args.workers, device=args.device, dashboard_address=":0") as client:
        report["environment"] = environment(client, args.device)
        for described, g, queries in cases(args.hprd_queries):
            report["graphs"].append(described)
            for name, query, exact in queries:
                with gpipe.counting.prepare(g, query) as prepared:
                    prepared.estimate(method="alley", samples=32)  # compile once, outside any cell's seconds
                    for method, alpha in METHODS:
                        for samples in args.samples:
                            found = cell(prepared, method, alpha, samples, seeds[samples], exact)
                            report["cells"].append({"graph": described["graph"], "query": name, "exact": exact,
                                                    "query_vertices": query.num_vertices, **found})
                            print(f"{described['graph']} {name} (exact {exact:,}) {method} {samples:,}: coverage "
                                  f"{found['coverage']:.3f} (normal {found['normal_coverage']:.3f}), flagged "
                                  f"{found['flagged']:.3f}, over reliable {found['coverage_reliable']} "
                                  f"[{found['seconds']:.1f} s]", flush=True)
                            write_json(args.out, report)
    report["summary"] = {"per_method_and_samples": summary(report["cells"], ("method", "samples")),
                         "per_method": summary(report["cells"], ("method",)),
                         "all": summary([{**c, "all": "all"} for c in report["cells"]], ("all",))}
    report["seconds"] = time.perf_counter() - started
    report["complete"] = True
    write_json(args.out, report)
    for row in report["summary"]["per_method_and_samples"] + report["summary"]["all"]:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})
    print(f"wrote {args.out}; figure {draw(report, os.path.splitext(args.out)[0] + '.png')}")


if __name__ == "__main__":
    main()
