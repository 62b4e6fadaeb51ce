"""Subgraph-count estimators: samples per second and q-error against the number of samples.

    python benchmarks/counting.py --device gpu --graph hprd --queries 20 --samples 1e4 1e5 1e6 1e7 --out counting_hprd_h200.json
    python benchmarks/counting.py --device cpu --graph hprd --queries 5 --samples 1e4 1e5 1e6 --out counting_hprd_cpu2.json
    python benchmarks/counting.py --device gpu --workers 1 2 --graph rmat:18 rmat:20 --labels 8 32 --sizes 4 8 16 \
        --samples 1e4 1e5 1e6 1e7 1e8 --repeats 10 --out counting_grid_2xh200.json
    python benchmarks/counting.py --device gpu --workers 1 2 --graph rmat:18 rmat:20 --labels 8 32 --sizes 4 8 16 \
        --samples 1e4 1e6 1e8 --scaling-samples 1e8 --methods wanderjoin alley --repeats 5 \
        --out counting_grid_2xh200.json

HPRD (``../shared/data/hprd``): its dense 16-vertex queries and their exact
counts. R-MAT (``rmat:SCALE``, edge factor 16, ``--labels`` uniform random
labels): per size in ``--sizes`` a dense and a sparse query extracted by a
random walk from the data graph (the walk's vertices with every edge among
them, or only the edges by which the walk first reached each, taken only while
every vertex keeps degree < 3: gSWORD's sparse query), so each has an
embedding; its exact count is computed only with ``--exact`` (it can take very
long), else the q-error is taken against the estimate of the largest sample
count with Alley and another seed. Per query, method (``--methods`` of
WanderJoin, Alley, PartialRefine alpha 0.1) and inheritance on and off: the
estimate, its standard error, the valid fraction, samples/s and seconds of the
whole call (after one compiling call per graph), the seconds of it that built
the candidate graph, and samples/s of the sampling alone (the call without the
candidate graph).

gSWORD's evaluation grid (issue 14) in one run: per worker count in
``--workers`` (a cluster each), per graph in ``--graph`` and label count in
``--labels``. The labels, queries and reference counts are found once and
reused at every worker count, and an estimate depends on its seed and sample
count alone, so the worker counts differ in samples/s only; those after the
first measure ``--scaling-samples``. ``--repeats K`` (at the first worker
count): per query Alley with inheritance on and off, K seeds at
``--repeat-samples`` (gSWORD's Fig. 10: 10 runs of 10^6 samples), the
estimates' mean, standard deviation (ddof 1) and normalized standard deviation,
under ``variance``. The JSON is saved after every query (``complete`` false
until the end), the figure at the end. Each estimate call builds its
candidate graph again, on the GPU where the graph is (11-17 ms on R-MAT 20
with 8 labels on an H200).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _common import environment, write_json
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


def workloads(graph: str, args, found: dict):
    """Per label count of ``graph``: the label count, the graph labelled and its queries [(name, query, exact count
    or None)]. R-MAT labels and queries are drawn once per (graph, labels) from the seed alone and kept in
    ``found``, so that every worker count runs the same ones."""
    if graph == "hprd":
        g, queries = hprd_workload(args.queries)
        yield len(np.unique(g.labels)), g, queries
    else:
        scale = int(graph.split(":")[1])
        g = gpipe.generators.rmat(scale, 16, seed=args.seed)  # the same graph for any number of workers
        adjacency = None
        for labels in args.labels:
            if (graph, labels) not in found:
                adjacency = adjacency or _adjacency(g)
                found[graph, labels] = rmat_queries(*adjacency, scale, labels, args.sizes, args.seed)
            vertex_labels, queries = found[graph, labels]
            g.set_labels(vertex_labels)
            yield labels, g, queries
    g.release()


def _adjacency(g: gpipe.Graph) -> tuple[np.ndarray, np.ndarray]:
    """The graph's CSR (indptr, indices) on the client, to walk for queries."""
    with tempfile.TemporaryDirectory() as folder:
        edges = pd.read_parquet(g.to_parquet(os.path.join(folder, "g"))).sort_values(["src", "dst"])
    indptr = np.concatenate([[0], np.cumsum(np.bincount(edges["src"], minlength=g.num_vertices))])
    return indptr, edges["dst"].to_numpy()


def rmat_queries(indptr, indices, scale: int, labels: int, sizes: list[int], seed: int) -> tuple[np.ndarray, list]:
    """Uniform random vertex labels and per size a dense and a sparse query, from ``seed`` alone."""
    rng = np.random.default_rng(seed)
    vertex_labels = rng.integers(labels, size=len(indptr) - 1)
    return vertex_labels, [(f"rmat{scale}_{shape}_{size}",
                            _walk_query(indptr, indices, vertex_labels, size, shape == "dense", rng), None)
                           for size in sizes for shape in ("dense", "sparse")]


def _walk_query(indptr, indices, labels, size: int, dense: bool, rng) -> Query:
    """A connected query of ``size`` vertices from a random walk, as gSWORD's: dense, the walk's vertices and every
    edge among them, drawn again until some degree is >= 3; sparse (every degree < 3, a path), the edges by which
    the walk first reached each vertex, a step to a new vertex taken only from a vertex of degree < 2."""
    while True:
        v = int(rng.integers(len(labels)))
        vertices, tree, degree = [v], [], [0]
        for _ in range(100 * size):
            if len(vertices) == size or indptr[v + 1] == indptr[v]:
                break
            u = int(indices[rng.integers(indptr[v], indptr[v + 1])])
            if u not in vertices:
                parent = vertices.index(v)
                if not dense and degree[parent] == 2:
                    continue  # stay at v and draw again
                tree.append((parent, len(vertices)))
                degree[parent] += 1
                degree.append(1)
                vertices.append(u)
            v = u
        if len(vertices) < size:
            continue
        if not dense:
            return Query.from_edges(tree, labels[vertices])
        index = {w: i for i, w in enumerate(vertices)}
        edges = [(i, index[int(w)]) for i, u in enumerate(vertices)
                 for w in indices[indptr[u]:indptr[u + 1]] if int(w) in index and index[int(w)] > i]
        if np.bincount(np.ravel(edges), minlength=size).max() >= 3:
            return Query.from_edges(edges, labels[vertices])


def sweep(g, query, where: dict, reference: float, methods, samples: list[int], seed: int) -> list[dict]:
    """Per method, inheritance on and off and sample count: the estimate and its speed."""
    records = []
    for method, alpha in methods:
        for inheritance in (True, False):
            for n in samples:
                r = gpipe.counting.estimate(g, query, method=method, alpha=alpha, samples=n, seed=seed,
                                            inheritance=inheritance)
                q_error = (max(r.estimate / reference, reference / r.estimate)
                           if r.estimate > 0 and reference > 0 else None)
                records.append({**where, "reference": reference, "q_error": q_error, "estimate": r.estimate,
                                "std_error": r.std_error, "method": method, "alpha": r.alpha,
                                "inheritance": inheritance, "samples": r.samples, "valid_fraction": r.valid_fraction,
                                "samples_per_second": r.samples_per_second, "seconds": r.seconds,
                                "candidate_seconds": r.candidate_seconds,
                                "sampling_samples_per_second": r.samples / (r.seconds - r.candidate_seconds)})
                print(f"{where['workers']} worker(s) {where['graph']}/{where['labels']} {where['query']} {method} "
                      f"inheritance={inheritance} {r.samples:,} samples: {r.estimate:,.6g} (q-error {q_error}) "
                      f"{r.samples_per_second / 1e6:.2f} M samples/s ({r.candidate_seconds:.3f} s of "
                      f"{r.seconds:.3f} s building the candidate graph)", flush=True)
    return records


def variance(g, query, where: dict, repeats: int, samples: int, seed: int) -> list[dict]:
    """gSWORD's Fig. 10: Alley with inheritance on and off, ``repeats`` estimates of different seeds."""
    records = []
    for inheritance in (True, False):
        runs = [gpipe.counting.estimate(g, query, method="alley", samples=samples, seed=seed + i,
                                        inheritance=inheritance) for i in range(repeats)]
        estimates = np.array([r.estimate for r in runs])
        mean, std = float(estimates.mean()), float(estimates.std(ddof=1))
        records.append({**where, "method": "alley", "inheritance": inheritance, "samples": runs[0].samples,
                        "seeds": [seed, seed + repeats - 1], "estimates": estimates.tolist(), "mean": mean,
                        "std": std, "normalized_std": std / mean if mean > 0 else None,
                        "std_error": float(np.mean([r.std_error for r in runs])),
                        "samples_per_second": float(np.mean([r.samples_per_second for r in runs]))})
        print(f"{where['graph']}/{where['labels']} {where['query']} alley inheritance={inheritance}: normalized "
              f"std {records[-1]['normalized_std']} over {repeats} seeds", flush=True)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "gpu"), default="gpu")
    parser.add_argument("--workers", type=int, nargs="+", default=[None],
                        help="worker counts, a cluster each (default: one cluster of gpipe.connect's count)")
    parser.add_argument("--graph", nargs="+", default=["hprd"], help="hprd or rmat:SCALE, each")
    parser.add_argument("--queries", type=int, default=20, help="HPRD queries (the first ones by number)")
    parser.add_argument("--labels", type=int, nargs="+", default=[8], help="R-MAT: label counts")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--samples", type=float, nargs="+", default=[1e4, 1e5, 1e6])
    parser.add_argument("--scaling-samples", type=float, nargs="+", default=None,
                        help="the sample counts at the worker counts after the first (default: --samples)")
    parser.add_argument("--methods", nargs="+", choices=[m for m, _ in METHODS], default=[m for m, _ in METHODS])
    parser.add_argument("--repeats", type=int, default=0, help="Alley estimates per query and inheritance, 0 or >= 2")
    parser.add_argument("--repeat-samples", type=float, default=1e6)
    parser.add_argument("--exact", action="store_true", help="R-MAT: exact counts (may take very long)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.repeats == 1 or args.repeats < 0:
        parser.error(f"--repeats must be 0 or at least 2 (a standard deviation), got {args.repeats}")
    samples = [int(s) for s in args.samples]
    scaling_samples = [int(s) for s in args.scaling_samples or args.samples]
    if not set(scaling_samples) <= set(samples):
        parser.error(f"--scaling-samples must be among --samples (the first worker count's are their base), got "
                     f"{scaling_samples} for {samples}")
    methods = [(m, alpha) for m, alpha in METHODS if m in args.methods]
    report = {"benchmark": "counting", "graphs": [], "records": [], "variance": [], "complete": False}
    found: dict = {}  # (graph, labels): R-MAT labels and queries
    references: dict = {}  # (graph, labels, query): its exact count or None, and the count q-errors are taken against
    for i, n_workers in enumerate(args.workers):
        first = i == 0
        with gpipe.connect(n_workers=n_workers, device=args.device, dashboard_address=":0") as client:
            report.setdefault("environment", environment(client, args.device))
            workers = len(client.nthreads())
            for graph in args.graph:
                started = time.perf_counter()
                for labels, g, queries in workloads(graph, args, found):
                    report["graphs"].append({"graph": graph, "labels": labels, "workers": workers,
                                             "num_vertices": g.num_vertices, "num_edges": g.num_edges,
                                             "setup_seconds": time.perf_counter() - started})
                    # compile on every worker (a group of 32 samples each), once: no kernel is specialized per query
                    gpipe.counting.estimate(g, queries[0][1], method="alley", samples=32 * workers)
                    for name, query, exact in queries:
                        key = (graph, labels, name)
                        if key not in references:
                            if exact is None and args.exact:
                                exact = gpipe.counting.count_exact(g, query)
                            references[key] = exact, exact if exact is not None else gpipe.counting.estimate(
                                g, query, method="alley", samples=max(samples), seed=args.seed + 1).estimate
                        exact, reference = references[key]
                        where = {"graph": graph, "labels": labels, "workers": workers, "query": name,
                                 "vertices": query.num_vertices, "edges": query.num_edges, "exact": exact}
                        report["records"] += sweep(g, query, where, reference, methods,
                                                   samples if first else scaling_samples, args.seed)
                        if first and args.repeats:
                            report["variance"] += variance(g, query, where, args.repeats, int(args.repeat_samples),
                                                           args.seed)
                        write_json(args.out, report)
                    started = time.perf_counter()
    report["complete"] = True
    write_json(args.out, report)
    print(f"wrote {args.out}; figure {draw(report, os.path.splitext(args.out)[0] + '.png')}")


if __name__ == "__main__":
    main()
