"""Subgraph-count estimators: samples per second and q-error against the number of samples.

    python benchmarks/counting.py --device gpu --graph hprd --queries 20 --samples 1e4 1e5 1e6 1e7 --out counting_hprd_h200.json
    python benchmarks/counting.py --device gpu --graph rmat:20 --labels 8 --sizes 4 8 16 --samples 1e6 1e8 --out counting_rmat20_h200.json
    python benchmarks/counting.py --device cpu --graph hprd --queries 5 --samples 1e4 1e5 1e6 --out counting_hprd_cpu2.json

HPRD (``../shared/data/hprd``): its dense 16-vertex queries and their exact
counts. R-MAT (``rmat:SCALE``, edge factor 16, ``--labels`` uniform random
labels): per size in ``--sizes`` a dense and a sparse query extracted by a
random walk from the data graph (the walk's vertices with every edge among
them, or only the walk's first-visit edges), so each has an embedding; its
exact count is computed only with ``--exact`` (it can take very long), else
the q-error is taken against the estimate of the largest sample count with
Alley. Per query, method (WanderJoin, Alley, PartialRefine alpha 0.1) and
inheritance on and off: the estimate, its standard error, the valid fraction,
samples/s and seconds of the whole call (after one compiling call), the seconds
of it that built the candidate graph, and samples/s of the sampling alone
(the call without the candidate graph).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _common import environment
from figures import draw

import gpipe
from gpipe.counting import Query

HPRD = Path(__file__).resolve().parents[2] / "shared" / "data" / "hprd"
METHODS = (("wanderjoin", None), ("alley", None), ("partial_refine", 0.1))


def hprd_workload(queries: int) -> tuple[gpipe.Graph, list]:
    expected = dict(line.split(":") for line in (HPRD / "expected_counts.txt").read_text().split())
    names = sorted(expected, key=lambda name: int(name.rsplit("_", 1)[1]))[:queries]
    g = gpipe.counting.read_graph(HPRD / "HPRD.graph")
    return g, [(name, Query.from_file(HPRD / "queries" / f"{name}.graph"), int(expected[name])) for name in names]


def rmat_workload(scale: int, labels: int, sizes: list[int], seed: int, exact: bool) -> tuple[gpipe.Graph, list]:
    g = gpipe.generators.rmat(scale, 16, seed=seed)
    rng = np.random.default_rng(seed)
    g.set_labels(rng.integers(labels, size=g.num_vertices))
    with tempfile.TemporaryDirectory() as folder:  # the edges on the client, to walk for queries
        edges = pd.read_parquet(g.to_parquet(os.path.join(folder, "g")))
    edges = edges.sort_values(["src", "dst"])
    indptr = np.concatenate([[0], np.cumsum(np.bincount(edges["src"], minlength=g.num_vertices))])
    indices = edges["dst"].to_numpy()
    workload = []
    for size in sizes:
        for shape in ("dense", "sparse"):
            query = _walk_query(indptr, indices, g.labels, size, shape == "dense", rng)
            count = gpipe.counting.count_exact(g, query) if exact else None
            workload.append((f"rmat{scale}_{shape}_{size}", query, count))
    return g, workload


def _walk_query(indptr, indices, labels, size: int, dense: bool, rng) -> Query:
    """A connected query of ``size`` vertices from a random walk: its vertices and every edge among them (dense),
    or the edges by which the walk first reached each (sparse)."""
    while True:
        v = int(rng.integers(len(labels)))
        vertices, tree = [v], []
        for _ in range(100 * size):
            if len(vertices) == size or indptr[v + 1] == indptr[v]:
                break
            u = int(indices[rng.integers(indptr[v], indptr[v + 1])])
            if u not in vertices:
                tree.append((vertices.index(v), len(vertices)))
                vertices.append(u)
            v = u
        if len(vertices) == size:
            break
    if dense:
        index = {w: i for i, w in enumerate(vertices)}
        tree = [(i, index[int(w)]) for i, u in enumerate(vertices)
                for w in indices[indptr[u]:indptr[u + 1]] if int(w) in index and index[int(w)] > i]
    return Query.from_edges(tree, labels[vertices])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "gpu"), default="gpu")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--graph", default="hprd", help="hprd or rmat:SCALE")
    parser.add_argument("--queries", type=int, default=20, help="HPRD queries (the first ones by number)")
    parser.add_argument("--labels", type=int, default=8)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--samples", type=float, nargs="+", default=[1e4, 1e5, 1e6])
    parser.add_argument("--exact", action="store_true", help="R-MAT: exact counts (may take very long)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    samples = [int(s) for s in args.samples]
    with gpipe.connect(n_workers=args.workers, device=args.device) as client:
        started = time.perf_counter()
        if args.graph == "hprd":
            g, workload = hprd_workload(args.queries)
        else:
            g, workload = rmat_workload(int(args.graph.split(":")[1]), args.labels, args.sizes, args.seed,
                                        args.exact)
        setup = time.perf_counter() - started
        records = []
        for name, query, exact in workload:
            reference = exact
            if reference is None:
                reference = gpipe.counting.estimate(g, query, method="alley", samples=max(samples),
                                                    seed=args.seed + 1).estimate
            for method, alpha in METHODS:
                for inheritance in (True, False):
                    gpipe.counting.estimate(g, query, method=method, alpha=alpha, samples=1,
                                            inheritance=inheritance)  # compile
                    for n in samples:
                        r = gpipe.counting.estimate(g, query, method=method, alpha=alpha, samples=n,
                                                    seed=args.seed, inheritance=inheritance)
                        q_error = (max(r.estimate / reference, reference / r.estimate)
                                   if r.estimate > 0 and reference > 0 else None)
                        records.append({"query": name, "vertices": query.num_vertices, "edges": query.num_edges,
                                        "exact": exact, "reference": reference, "q_error": q_error,
                                        "estimate": r.estimate, "std_error": r.std_error, "method": method,
                                        "alpha": r.alpha, "inheritance": inheritance, "samples": r.samples,
                                        "valid_fraction": r.valid_fraction,
                                        "samples_per_second": r.samples_per_second, "seconds": r.seconds,
                                        "candidate_seconds": r.candidate_seconds,
                                        "sampling_samples_per_second":
                                            r.samples / (r.seconds - r.candidate_seconds)})
                        print(f"{name} {method} inheritance={inheritance} {r.samples:,} samples: "
                              f"{r.estimate:,.6g} (q-error {q_error}) {r.samples_per_second / 1e6:.2f} M samples/s "
                              f"({r.candidate_seconds:.3f} s of {r.seconds:.3f} s building the candidate graph)",
                              flush=True)
        result = {"benchmark": "counting", "graph": args.graph, "num_vertices": g.num_vertices,
                  "num_edges": g.num_edges, "labels": int(len(np.unique(g.labels))), "setup_seconds": setup,
                  "environment": environment(client, args.device), "records": records}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}; figure {draw(result, os.path.splitext(args.out)[0] + '.png')}")


if __name__ == "__main__":
    main()
