"""Baselines run beside gpipe on the same graph: PecanPy's node2vec and igraph's random_walk.

    python benchmarks/baselines.py pecanpy GRAPH.npz --p 1 --q 1 --length 80 --threads 16
    python benchmarks/baselines.py igraph GRAPH.npz --length 80

GRAPH.npz is a CSR graph (indptr, indices, data), as ``benchmarks/walks.py``
writes it. Prints one JSON object: steps, seconds, steps/s. Each runs in its
own process (``walks.py`` starts it), so its threads and imports stay its own.

PecanPy 2.0.9 imports ``nptyping`` for type annotations only, and nptyping 2.5
fails to import under NumPy 2 (``np.bool8`` is gone); this script gives it an
inert stand-in for those annotation names, which changes nothing PecanPy runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types

import numpy as np


def _annotation_stand_in() -> None:
    try:
        import nptyping  # noqa: F401
    except Exception:
        sys.modules.pop("nptyping", None)
        stand_in = types.ModuleType("nptyping")

        class _Annotation:
            def __class_getitem__(cls, item):
                return cls

        for name in ("Bool", "Float32", "NDArray", "Shape", "UInt32", "UInt64"):
            setattr(stand_in, name, _Annotation)
        sys.modules["nptyping"] = stand_in


def pecanpy(path: str, p: float, q: float, length: int, threads: int) -> dict:
    """PecanPy's own walk kernel (``_random_walks``, numba, parallel), compiled first, then timed."""
    _annotation_stand_in()
    import numba
    from numba_progress import ProgressBar
    from pecanpy import pecanpy as pp

    numba.set_num_threads(threads)
    graph = pp.SparseOTF(p=p, q=q, workers=threads, verbose=False, random_state=0)
    graph.read_npz(path, weighted=False, implicit_ids=True)
    graph._preprocess_transition_probs()
    move_forward, has_nbrs = graph.get_move_forward(), graph.get_has_nbrs()
    starts = np.arange(graph.num_nodes, dtype=np.uint32)
    np.random.seed(0)
    np.random.shuffle(starts)  # as simulate_walks does, for load balance
    with ProgressBar(total=starts.size, disable=True) as progress:
        graph._random_walks(64, 2, 0, starts[:64], has_nbrs, move_forward, progress)  # compile
        t0 = time.perf_counter()
        walks = graph._random_walks(starts.size, length, 0, starts, has_nbrs, move_forward, progress)
        seconds = time.perf_counter() - t0
    steps = int((walks[:, -1].astype(np.int64) - 1).sum())
    return {"baseline": "pecanpy", "mode": "SparseOTF", "version": _version("pecanpy"), "threads": threads,
            "p": p, "q": q, "length": length, "walks": int(starts.size), "steps": steps, "seconds": seconds,
            "steps_per_second": steps / seconds}


def igraph_walks(path: str, length: int) -> dict:
    import igraph
    import scipy.sparse as sp

    raw = np.load(path)
    n = raw["indptr"].size - 1
    coo = sp.csr_matrix((np.ones(raw["indices"].size), raw["indices"], raw["indptr"]), shape=(n, n)).tocoo()
    keep = coo.row < coo.col  # stored in both directions: one undirected edge each
    graph = igraph.Graph(n=n, edges=np.column_stack([coo.row[keep], coo.col[keep]]).tolist(), directed=False)
    t0 = time.perf_counter()
    steps = 0
    for v in range(n):
        steps += len(graph.random_walk(v, length, stuck="return")) - 1
    seconds = time.perf_counter() - t0
    return {"baseline": "igraph.random_walk", "version": igraph.__version__, "threads": 1, "length": length,
            "walks": n, "steps": steps, "seconds": seconds, "steps_per_second": steps / seconds}


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", choices=["pecanpy", "igraph"])
    ap.add_argument("graph")
    ap.add_argument("--p", type=float, default=1.0)
    ap.add_argument("--q", type=float, default=1.0)
    ap.add_argument("--length", type=int, default=80)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if args.which == "pecanpy":
        record = pecanpy(args.graph, args.p, args.q, args.length, args.threads)
    else:
        record = igraph_walks(args.graph, args.length)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
