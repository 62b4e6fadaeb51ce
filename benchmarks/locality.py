"""How many walker steps cross between partitions, with and without a locality-aware vertex order (issue 66, item 4).

    python benchmarks/locality.py --out benchmarks/results/locality_cpu.json
    python benchmarks/locality.py --scales 20 22 --parts 2 4 8 --out /tmp/locality.json

A partition owns a contiguous range of dense ids, cut edge-balanced; a walker
stepping along an arc whose ends lie in different ranges crosses to another
worker. For each graph and each ``--orders`` (``none``: the input's order;
``rcmk``, ``metis``: the builders' ``vertex_order``; ``metis`` only where pymetis
is installed), the graph is built on one worker with that order, and the
crossing fractions at each ``--parts`` P are measured on it
(``gpipe.graph._order.crossing_fractions``): the fraction of arcs that cross
(a uniform DeepWalk step from a uniformly drawn arc), and the mean over
vertices with arcs of each one's fraction (from a uniformly drawn vertex).
With ids in no relation to the structure both are about (P - 1) / P.
``order_seconds`` is the order computed once more, alone, on the worker (the
symmetric CSR it builds from the edges, and the order) on the graph in the
input's order; ``build_seconds`` is the whole build with the order (without
one for ``none``, the first graph built of its size), from the call.

The graphs: ``../shared/data/realgraphs``' BlogCatalog, PPI and Wikipedia POS
(the ``network`` matrix of the ``.mat`` files, undirected) and yeast
(``e u v`` lines of ``yeast.graph``), and R-MAT of each ``--scales``
(``gpipe.generators.rmat``, edge factor 16, seed 1, ids scrambled as Graph500's).
The fractions are the graph's and the order's, the same on any device;
``--device gpu`` times the orders on a GPU worker.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.io
import scipy.sparse as sp
from _common import environment, write_json
from figures import draw

import gpipe
from gpipe.backend import device_of, segments, xp
from gpipe.counting._inputs import _parse as parse_labeled_graph
from gpipe.graph._order import crossing_fractions, order_of
from gpipe.runtime.workers import partition

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "realgraphs"
MAT_GRAPHS = {"blogcatalog": "blogcatalog.mat", "ppi": "ppi_Homo_sapiens.mat", "wikipedia_pos": "wikipedia_POS.mat"}


def _mat_edges(path: str) -> pd.DataFrame:
    """The upper triangle of a ``.mat`` file's symmetric ``network`` matrix: each undirected edge once."""
    upper = sp.triu(sp.coo_matrix(scipy.io.loadmat(path)["network"]), k=1).tocoo()
    return pd.DataFrame({"src": upper.row.astype(np.int64), "dst": upper.col.astype(np.int64)})


def _graphs(real: str, scales: list[int]) -> dict:
    """name -> a function building that graph with a given vertex order (on one partition)."""
    graphs = {}
    for name, file in MAT_GRAPHS.items():
        edges = _mat_edges(os.path.join(real, file))
        graphs[name] = lambda order, edges=edges: gpipe.from_edges(edges, partitions=1, vertex_order=order)
    labels, pairs = parse_labeled_graph(os.path.join(real, "yeast.graph"))  # as gpipe.counting.read_graph reads it
    yeast = pd.DataFrame({"src": pairs[:, 0], "dst": pairs[:, 1]})
    graphs["yeast"] = lambda order: gpipe.from_edges(yeast, partitions=1, vertex_order=order,
                                                     num_vertices=len(labels))
    for scale in scales:
        graphs[f"rmat{scale}"] = lambda order, scale=scale: gpipe.generators.rmat(scale, seed=1, partitions=1,
                                                                                   vertex_order=order)
    return graphs


def _order_seconds(graph_id: str, kind: str, n: int) -> float:
    """On the worker holding the one partition of ``graph_id``: the seconds ``order_of`` takes on its arcs (on its
    device: the order comes back to the host, as the builders take it)."""
    p = partition(graph_id, 0)
    x = xp(device_of(p.indptr))
    chunk = {"src": segments(x, p.indptr[1:] - p.indptr[:-1])[0] + p.lo, "dst": p.indices.astype(x.int64)}
    t0 = time.perf_counter()
    order_of(kind, n, False, chunk)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                    help="the workers' device: where the orders and the graphs are computed (default: %(default)s)")
    ap.add_argument("--scales", type=int, nargs="+", default=[20], help="R-MAT scales")
    ap.add_argument("--parts", type=int, nargs="+", default=[2, 4, 8], help="partition counts P")
    ap.add_argument("--orders", nargs="+", default=["none", "rcmk", "metis"], choices=["none", "rcmk", "metis"])
    ap.add_argument("--metis-max-scale", type=int, default=20,
                    help="no metis order on R-MAT above this scale: on R-MAT 22 it took more than the 23 GB of the "
                         "2-core machine of the committed run, whose worker was stopped (default: %(default)s)")
    ap.add_argument("--real", default=REAL, help="the folder of the real graphs")
    ap.add_argument("--out", default="locality_cpu.json")
    args = ap.parse_args()
    try:
        import pymetis  # noqa: F401
    except ImportError:
        print("pymetis is not installed: no 'metis' order")
        args.orders = [o for o in args.orders if o != "metis"]
    records = []
    with gpipe.connect(n_workers=1, device=args.device, dashboard_address=":0") as client:
        env = environment(client, args.device)
        for name, make in _graphs(args.real, args.scales).items():
            t0 = time.perf_counter()
            plain = make(None)
            plain_seconds = time.perf_counter() - t0
            for order in args.orders:
                if order == "metis" and name.startswith("rmat") and int(name[4:]) > args.metis_max_scale:
                    continue
                kind = None if order == "none" else order
                t0 = time.perf_counter()
                g = plain if kind is None else make(kind)
                build_seconds = plain_seconds if kind is None else time.perf_counter() - t0
                record = {"workload": "crossing-fraction", "graph": name, "vertices": g.num_vertices,
                          "edges": g.num_edges, "order": order, "build_seconds": build_seconds}
                if kind is not None:
                    record["order_seconds"] = client.submit(_order_seconds, plain.graph_id, kind, plain.num_vertices,
                                                            workers=[plain.placement[0]], pure=False).result()
                record["fractions"] = []
                for parts in args.parts:
                    arcs, vertices = crossing_fractions(g, parts)
                    record["fractions"].append({"partitions": parts, "arcs": arcs, "vertices": vertices,
                                                "uniform": (parts - 1) / parts})
                if g is not plain:
                    g.release()
                records.append(record)
                print(f"{name} ({g.num_vertices} vertices, {g.num_edges} edges), {order}: "
                      + ", ".join(f"P={f['partitions']} {f['arcs']:.3f} ({f['vertices']:.3f} by vertex)"
                                  for f in record["fractions"])
                      + (f"; order {record['order_seconds']:.2f} s" if kind else "") + f"; build {build_seconds:.2f} s",
                      flush=True)
                report = {**env, "benchmark": "locality",
                          "parameters": {k: v for k, v in vars(args).items() if k not in ("out", "real")},
                          "records": records}
                write_json(args.out, report)
            plain.release()
    figure = draw(report, os.path.splitext(args.out)[0] + ".png")
    print(f"wrote {args.out}" + (f" and {figure}" if figure else " (no figure: matplotlib is not installed)"))


if __name__ == "__main__":
    main()
