"""Baselines run beside gpipe on the same graph: PecanPy's node2vec, igraph's random_walk and a plain triangle count.

    python benchmarks/baselines.py pecanpy GRAPH.npz --p 1 --q 1 --length 80 --threads 16
    python benchmarks/baselines.py igraph GRAPH.npz --length 80 --walks 65536
    python benchmarks/baselines.py triangles GRAPH.npz

GRAPH.npz is a CSR graph (indptr, indices, data), as ``benchmarks/walks.py``
writes it. Prints one JSON object: steps, seconds, steps/s (walks), or count and seconds (triangles). Each runs
in its own process (``walks.py`` and ``mining.py`` start it), so its threads and imports stay its own.

``triangles`` is the textbook count a clique miner is held against (issue 40): each edge oriented from the lower
to the higher (degree, id), rows sorted, and per oriented edge (v, u) one merge of v's later out-neighbors with
u's, single-threaded numba. ``orient_seconds`` is the orientation, ``seconds`` the count (each the best of 3).

PecanPy 2.0.9 imports ``nptyping`` for type annotations only (nptyping 2.5
fails to import under NumPy 2: ``np.bool8`` is gone) and gensim's Word2Vec for
its embedding step only; where either cannot be imported, this script gives
PecanPy an inert stand-in for those names, which changes nothing its walks run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types

import numpy as np


class _Inert:
    def __class_getitem__(cls, item):
        return cls


def _stand_ins() -> None:
    """Inert modules for the names PecanPy imports but its walks never use, where the real ones fail."""
    for module, names in (("nptyping", ("Bool", "Float32", "NDArray", "Shape", "UInt32", "UInt64")),
                          ("gensim.models", ("Word2Vec",))):
        try:
            __import__(module)
        except Exception:
            for name in (module, module.split(".")[0]):
                sys.modules.pop(name, None)
            stand_in = types.ModuleType(module)
            for name in names:
                setattr(stand_in, name, _Inert)
            sys.modules[module] = stand_in
            sys.modules.setdefault(module.split(".")[0], types.ModuleType(module.split(".")[0]))


def _starts(n: int, walks: int | None) -> np.ndarray:
    """Start vertices: every vertex, or a seeded random subset of ``walks`` of them, in random order."""
    starts = np.random.default_rng(0).permutation(n).astype(np.uint32)
    return starts if walks is None else starts[:walks]


def pecanpy(path: str, p: float, q: float, length: int, threads: int, walks: int | None) -> dict:
    """PecanPy's own walk kernel (``_random_walks``, numba, parallel), compiled first, then timed."""
    _stand_ins()
    import numba
    from numba_progress import ProgressBar
    from pecanpy import pecanpy as pp

    numba.set_num_threads(threads)
    graph = pp.SparseOTF(p=p, q=q, workers=threads, verbose=False, random_state=0)
    graph.read_npz(path, weighted=False, implicit_ids=True)
    graph._preprocess_transition_probs()
    move_forward, has_nbrs = graph.get_move_forward(), graph.get_has_nbrs()
    starts = _starts(graph.num_nodes, walks)  # shuffled as simulate_walks does, for load balance
    with ProgressBar(total=starts.size, disable=True) as progress:
        graph._random_walks(64, 2, 0, starts[:64], has_nbrs, move_forward, progress)  # compile
        t0 = time.perf_counter()
        walks = graph._random_walks(starts.size, length, 0, starts, has_nbrs, move_forward, progress)
        seconds = time.perf_counter() - t0
    steps = int((walks[:, -1].astype(np.int64) - 1).sum())
    return {"baseline": "pecanpy", "mode": "SparseOTF", "version": _version("pecanpy"), "threads": threads,
            "p": p, "q": q, "length": length, "walks": int(starts.size), "steps": steps, "seconds": seconds,
            "steps_per_second": steps / seconds}


def igraph_walks(path: str, length: int, walks: int | None) -> dict:
    import igraph
    import scipy.sparse as sp

    raw = np.load(path)
    n = raw["indptr"].size - 1
    coo = sp.csr_matrix((np.ones(raw["indices"].size), raw["indices"], raw["indptr"]), shape=(n, n)).tocoo()
    keep = coo.row < coo.col  # stored in both directions: one undirected edge each
    graph = igraph.Graph(n=n, edges=np.column_stack([coo.row[keep], coo.col[keep]]).tolist(), directed=False)
    t0 = time.perf_counter()
    steps = 0
    starts = _starts(n, walks).tolist()
    for v in starts:
        steps += len(graph.random_walk(v, length, stuck="return")) - 1
    seconds = time.perf_counter() - t0
    return {"baseline": "igraph.random_walk", "version": igraph.__version__, "threads": 1, "length": length,
            "walks": len(starts), "steps": steps, "seconds": seconds, "steps_per_second": steps / seconds}


def triangles(path: str) -> dict:
    import numba

    @numba.njit(cache=False)
    def oriented(indptr, indices):
        n = indptr.size - 1
        degree = indptr[1:] - indptr[:-1]
        rank = np.empty(n, np.int64)
        rank[np.argsort(degree * n + np.arange(n), kind="mergesort")] = np.arange(n)
        out = np.zeros(n + 1, np.int64)
        for v in range(n):
            for e in range(indptr[v], indptr[v + 1]):
                out[rank[v] + 1] += rank[indices[e]] > rank[v]
        out = np.cumsum(out)
        heads, fill = np.empty(out[-1], np.int64), out[:-1].copy()
        for v in range(n):
            for e in range(indptr[v], indptr[v + 1]):
                if rank[indices[e]] > rank[v]:
                    heads[fill[rank[v]]] = rank[indices[e]]
                    fill[rank[v]] += 1
        for r in range(n):
            heads[out[r]:out[r + 1]] = np.sort(heads[out[r]:out[r + 1]])
        return out, heads

    @numba.njit(cache=False)
    def count(indptr, indices):
        found = 0
        for v in range(indptr.size - 1):
            for e in range(indptr[v], indptr[v + 1]):
                a, b, u = e + 1, indptr[indices[e]], indices[e]
                while a < indptr[v + 1] and b < indptr[u + 1]:
                    if indices[a] < indices[b]:
                        a += 1
                    elif indices[b] < indices[a]:
                        b += 1
                    else:
                        found, a, b = found + 1, a + 1, b + 1
        return found

    graph = np.load(path)
    indptr, indices = graph["indptr"].astype(np.int64), graph["indices"].astype(np.int64)
    count(*oriented(np.array([0, 1, 2]), np.array([1, 0])))  # compile, on an edge
    orient_s, count_s, found = [], [], 0
    for _ in range(3):
        t0 = time.perf_counter()
        rows = oriented(indptr, indices)
        t1 = time.perf_counter()
        found = count(*rows)
        orient_s.append(t1 - t0)
        count_s.append(time.perf_counter() - t1)
    return {"baseline": "triangles", "count": int(found), "seconds": min(count_s), "orient_seconds": min(orient_s),
            "threads": 1, "versions": {"numba": numba.__version__}}


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", choices=["pecanpy", "igraph", "triangles"])
    ap.add_argument("graph")
    ap.add_argument("--p", type=float, default=1.0)
    ap.add_argument("--q", type=float, default=1.0)
    ap.add_argument("--length", type=int, default=80)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--walks", type=int, default=None, help="walks from a random subset of this many vertices")
    args = ap.parse_args()
    if args.which == "pecanpy":
        record = pecanpy(args.graph, args.p, args.q, args.length, args.threads, args.walks)
    elif args.which == "triangles":
        record = triangles(args.graph)
    else:
        record = igraph_walks(args.graph, args.length, args.walks)
    print(json.dumps(record))


if __name__ == "__main__":
    main()
