"""Vertex embeddings: gpipe.embeddings.word2vec's quality and speed, beside gensim's Word2Vec on the same walks.

    python benchmarks/embeddings.py quality --graph blogcatalog --out results/embeddings_blogcatalog_cpu.json
    python benchmarks/embeddings.py quality --graph ppi_Homo_sapiens wikipedia_POS --device gpu --walk node2vec
    python benchmarks/embeddings.py speed --scale 20 --device gpu --write /tmp/vectors \
        --out results/embeddings_rmat20_h200.json
    python benchmarks/embeddings.py speed --scale 24 --device gpu --edges /tmp/rmat24 --write /tmp/vectors
    python benchmarks/embeddings.py pyg --graph blogcatalog --device gpu --out results/embeddings_pyg_h200.json

``quality``: the node2vec paper's protocol on the labeled graphs of
``../shared/data/realgraphs`` (``.mat``: ``network`` the adjacency, ``group``
the vertex-by-label matrix): d 128, 10 walks per vertex of 80 steps, window
10, 5 negatives, one epoch; then one-vs-rest L2 logistic regression
(scikit-learn's liblinear) trained on a random 50 % of the vertices, each test
vertex given as many labels as it has, ranked by the classifiers' scores (the
DeepWalk paper's scoring), Macro- and Micro-F1 averaged over 10 splits. With
``--gensim`` (the default), gensim's ``Word2Vec`` (``sg=1, hs=0``, the same
parameters, every core of the host) is trained on the same walks and scored on
the same splits. ``speed``: tokens per second of the training alone, and the
whole call from the R-MAT graph's generation to the embeddings in hand (and
written, with ``--write``), beside gensim on the first ``--baseline-walks`` of
the same walks on every core of the host. ``pyg``: the time to equal Macro-F1 against PyG's ``Node2Vec`` on the
same GPU (see :func:`pyg`). scikit-learn and gensim are the benchmark's, not gpipe's, dependencies
(``pip install gensim scikit-learn``).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import dask
import numpy as np
from _common import environment, write_json
from figures import draw

import gpipe

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "realgraphs"
PAPER_DEEPWALK_MACRO_F1 = {"blogcatalog": 0.2110, "ppi_Homo_sapiens": 0.1768, "wikipedia_POS": 0.1274}
PAPER_NODE2VEC_MACRO_F1 = {"blogcatalog": 0.2581, "ppi_Homo_sapiens": 0.1791, "wikipedia_POS": 0.1552}


def labeled_graph(name: str, folder: Path):
    """The edges (each once, ``src < dst``; a ``weight`` column where the graph's are not all 1: Wikipedia's
    co-occurrence counts), the label matrix (dense 0/1, vertex by label) and the vertex count."""
    import pandas as pd
    import scipy.io
    import scipy.sparse

    mat = scipy.io.loadmat(folder / f"{name}.mat")
    network = scipy.sparse.coo_matrix(mat["network"])
    keep = network.row < network.col
    edges = pd.DataFrame({"src": network.row[keep].astype(np.int64), "dst": network.col[keep].astype(np.int64)})
    if (network.data != 1).any():
        edges["weight"] = network.data[keep].astype(np.float64)
    labels = scipy.sparse.csr_matrix(mat["group"]).toarray().astype(bool)
    return edges, labels, network.shape[0]


def scores(vectors: np.ndarray, labels: np.ndarray, splits: int, seed: int) -> dict:
    """Macro- and Micro-F1 (mean and standard deviation over ``splits`` random halves)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.multiclass import OneVsRestClassifier

    macro, micro = [], []
    warnings.filterwarnings("ignore", message="Label not .* is present in all training examples")  # a rare label
    rng = np.random.default_rng(seed)
    has = labels.any(axis=1)
    for _ in range(splits):
        order = rng.permutation(np.flatnonzero(has))
        train, test = order[:len(order) // 2], order[len(order) // 2:]
        model = OneVsRestClassifier(LogisticRegression(solver="liblinear"), n_jobs=-1)
        model.fit(vectors[train], labels[train])
        ranked = np.argsort(-model.decision_function(vectors[test]), axis=1)
        predicted = np.zeros((len(test), labels.shape[1]), bool)
        for i, k in enumerate(labels[test].sum(axis=1)):
            predicted[i, ranked[i, :k]] = True
        macro.append(f1_score(labels[test], predicted, average="macro", zero_division=0))
        micro.append(f1_score(labels[test], predicted, average="micro", zero_division=0))
    return {"macro_f1": float(np.mean(macro)), "macro_f1_std": float(np.std(macro)),
            "micro_f1": float(np.mean(micro)), "micro_f1_std": float(np.std(micro)), "splits": splits}


def walked(g, args, weighted: bool = False):
    """The walks of ``args.walk``, biased by the edge weights where the graph has them (as the node2vec paper's)."""
    if args.walk == "node2vec":
        return gpipe.walks.node2vec(g, p=args.p, q=args.q, length=args.length, walks_per_vertex=args.walks,
                                    weighted=weighted, seed=args.seed)
    return gpipe.walks.deepwalk(g, length=args.length, walks_per_vertex=args.walks, weighted=weighted, seed=args.seed)


def trained(walks, args, sync: int | str, table: str) -> tuple:
    t0 = time.perf_counter()
    emb = gpipe.embeddings.word2vec(walks, dim=args.dim, window=args.window, negative=args.negative,
                                    epochs=args.epochs, sample=args.sample, seed=args.seed, mode=args.mode,
                                    table=table, sync=sync)
    vectors = emb.compute()
    return emb, vectors, time.perf_counter() - t0


def by_vertex(vectors: np.ndarray, ids: np.ndarray, n: int) -> np.ndarray:
    """The rows of ``vectors`` (one per id of ``ids``) in vertex order ``0 .. n-1`` (zeros for a vertex absent)."""
    out = np.zeros((n, vectors.shape[1]), np.float32)
    out[np.asarray(ids, np.int64)] = vectors
    return out


def gensim_vectors(walk_rows: np.ndarray, args, n: int) -> tuple[np.ndarray, float, str]:
    """gensim's Word2Vec on the same walks and parameters, on every core: the vectors in vertex order, the
    seconds of its training, and its version."""
    import gensim
    from gensim.models import Word2Vec

    sentences = [[str(v) for v in row[row >= 0]] for row in walk_rows]
    t0 = time.perf_counter()
    model = Word2Vec(sentences=sentences, vector_size=args.dim, window=args.window, negative=args.negative,
                     epochs=args.epochs, sample=args.sample, min_count=0, sg=1, hs=0, workers=os.cpu_count(),
                     seed=args.seed)
    seconds = time.perf_counter() - t0
    out = np.zeros((n, args.dim), np.float32)
    for v in range(n):
        if str(v) in model.wv.key_to_index:
            out[v] = model.wv[str(v)]
    return out, seconds, gensim.__version__


def quality(client, args) -> list[dict]:
    records = []
    for name in args.graph:
        edges, labels, n = labeled_graph(name, Path(args.data))
        weighted = "weight" in edges
        g = gpipe.from_edges(edges, weight="weight" if weighted else None)
        walks = walked(g, args, weighted)
        walks.persist()
        for table, sync in ((t, s) for t in args.table for s in args.sync):
            emb, vectors, seconds = trained(walks, args, sync, table)
            record = {"graph": name, "walk": args.walk, "weighted": weighted, "trainer": "gpipe",
                      "workers": emb.stats["workers"], "mode": args.mode, "table": table,
                      "shards": emb.stats["shards"], "sync": sync,
                      "rounds_per_epoch": emb.stats["rounds_per_epoch"], "seconds": seconds,
                      "tokens": emb.stats["tokens"], "tokens_per_second": emb.stats["tokens"] / seconds,
                      "train_seconds": emb.stats["seconds"], "loss": emb.stats["loss"],
                      "paper_deepwalk_macro_f1": PAPER_DEEPWALK_MACRO_F1.get(name),
                      "paper_node2vec_macro_f1": PAPER_NODE2VEC_MACRO_F1.get(name),
                      **scores(by_vertex(vectors, emb.ids, n), labels, args.splits, args.seed)}
            records.append(record)
            print(record, flush=True)
        if args.gensim:
            rows = walks.compute()
            vectors, seconds, version = gensim_vectors(rows, args, n)
            record = {"graph": name, "walk": args.walk, "weighted": weighted, "trainer": "gensim", "version": version,
                      "threads": os.cpu_count(), "seconds": seconds, "tokens": emb.stats["tokens"],
                      "tokens_per_second": emb.stats["tokens"] / seconds,
                      **scores(vectors, labels, args.splits, args.seed)}
            records.append(record)
            print(record, flush=True)
        write_json(args.out, {**report_head(client, args), "records": records})
    return records


def speed(client, args) -> list[dict]:
    """Tokens/s of the training alone, and the whole call: the R-MAT graph generated on the workers (or read from
    its Parquet edges, with ``--edges``), walked, trained, the vectors in hand (and written, with ``--write``);
    gensim beside it on ``--baseline-walks`` of the same walks, on every core of this host."""
    records = []
    if args.edges and not Path(args.edges).exists():
        gpipe.generators.rmat(args.scale, edge_factor=16, seed=args.seed).to_parquet(args.edges)
    t0 = time.perf_counter()
    g = (gpipe.read_edges(args.edges) if args.edges
         else gpipe.generators.rmat(args.scale, edge_factor=16, seed=args.seed))
    walks = walked(g, args)
    walks.persist()
    walked_seconds = time.perf_counter() - t0
    for _ in range(args.repeat):
        emb, vectors, seconds = trained(walks, args, args.sync[0], args.table[0])
        record = {"graph": f"rmat{args.scale}", "source": "read_edges" if args.edges else "generated",
                  "walk": args.walk, "trainer": "gpipe", "workers": emb.stats["workers"],
                  "mode": args.mode, "table": args.table[0], "shards": emb.stats["shards"],
                  "rounds_per_epoch": emb.stats["rounds_per_epoch"], "walk_seconds": walked_seconds,
                  "seconds": seconds, "train_seconds": emb.stats["seconds"], "tokens": emb.stats["tokens"],
                  "tokens_per_second": emb.stats["tokens_per_second"], "end_to_end_seconds": walked_seconds + seconds,
                  "loss": emb.stats["loss"]}
        if args.write:
            t1 = time.perf_counter()
            emb.to_parquet(args.write, overwrite=True)
            record["write_seconds"] = time.perf_counter() - t1
            record["end_to_end_seconds"] += record["write_seconds"]
        records.append(record)
        print(record, flush=True)
    if args.gensim:
        rows = walks.compute()[:args.baseline_walks]
        vectors, seconds, version = gensim_vectors(rows, args, g.num_vertices)
        tokens = int((rows >= 0).sum()) * args.epochs
        records.append({"graph": f"rmat{args.scale}", "walk": args.walk, "trainer": "gensim", "version": version,
                        "threads": os.cpu_count(), "walks": len(rows), "seconds": seconds, "tokens": tokens,
                        "tokens_per_second": tokens / seconds})
        print(records[-1], flush=True)
    return records


PYG_EPOCHS = 30  # pyg: the most epochs PyG's Node2Vec is given to reach gpipe's Macro-F1


def pyg(client, args) -> list[dict]:
    """Time to equal Macro-F1 on ``--graph``'s first graph: gpipe from the edges to the vectors (walked and
    trained at the run's parameters), then PyG's ``Node2Vec`` on the same GPU with its example's settings (walks of
    20, context 10, 10 walks per vertex, one negative walk, ``SparseAdam`` at 0.01, batches of 128 walks) trained
    epoch by epoch, each scored as gpipe's vectors are, until its Macro-F1 reaches gpipe's (at most
    ``PYG_EPOCHS``). PyG's seconds are its training's alone, its scoring left out. Where PyG's ``Node2Vec`` cannot
    run (it needs ``pyg_lib`` or ``torch_cluster`` for its walks), the record says why."""
    import torch
    import torch_geometric
    from torch_geometric.nn import Node2Vec

    name = args.graph[0]
    edges, labels, n = labeled_graph(name, Path(args.data))
    t0 = time.perf_counter()
    g = gpipe.from_edges(edges)
    emb, vectors, _ = trained(walked(g, args), args, args.sync[0], args.table[0])
    seconds = time.perf_counter() - t0
    target = scores(by_vertex(vectors, emb.ids, n), labels, args.splits, args.seed)
    records = [{"graph": name, "trainer": "gpipe", "seconds": seconds, "epochs": args.epochs, **target}]
    print(records[-1], flush=True)
    torch.manual_seed(args.seed)
    src, dst = edges["src"].to_numpy(), edges["dst"].to_numpy()
    edge_index = torch.as_tensor(np.stack([np.r_[src, dst], np.r_[dst, src]]), device="cuda")
    try:
        model = Node2Vec(edge_index, embedding_dim=args.dim, walk_length=20, context_size=10, walks_per_node=10,
                         num_negative_samples=1, p=args.p, q=args.q, sparse=True, num_nodes=n).cuda()
    except ImportError as e:
        records.append({"graph": name, "trainer": "pyg_node2vec", "version": torch_geometric.__version__,
                        "error": str(e)})
        print(records[-1], flush=True)
        return records
    loader = model.loader(batch_size=128, shuffle=True, num_workers=min(8, os.cpu_count()))
    optimizer = torch.optim.SparseAdam(list(model.parameters()), lr=0.01)
    training, got = 0.0, {"macro_f1": -1.0}
    for epoch in range(1, PYG_EPOCHS + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.train()
        for pos, neg in loader:
            optimizer.zero_grad()
            loss = model.loss(pos.cuda(), neg.cuda())
            loss.backward()
            optimizer.step()
        torch.cuda.synchronize()
        training += time.perf_counter() - t0
        with torch.no_grad():
            got = scores(model().detach().cpu().numpy(), labels, args.splits, args.seed)
        records.append({"graph": name, "trainer": "pyg_node2vec", "version": torch_geometric.__version__,
                        "epoch": epoch, "seconds": training, "loss": float(loss), **got})
        print(records[-1], flush=True)
        if got["macro_f1"] >= target["macro_f1"]:
            break
    reached = got["macro_f1"] >= target["macro_f1"]
    records[0]["pyg_seconds_to_equal_f1"] = training if reached else None
    records[0]["speedup_over_pyg"] = training / seconds if reached else None
    return records


def report_head(client, args) -> dict:
    return {"benchmark": "embeddings", **environment(client, args.device),
            "parameters": {k: getattr(args, k) for k in ("dim", "window", "negative", "epochs", "sample", "length",
                                                          "walks", "walk", "p", "q", "mode", "table", "sync",
                                                          "seed")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=["quality", "speed", "pyg"])
    ap.add_argument("--graph", nargs="+", default=["blogcatalog"], choices=sorted(PAPER_DEEPWALK_MACRO_F1))
    ap.add_argument("--data", default=str(DATA), help="the folder of the labeled graphs' .mat files")
    ap.add_argument("--scale", type=int, default=20, help="speed: the R-MAT graph's scale")
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--workers", type=int, default=None, help="local workers (default: one per GPU, else one)")
    ap.add_argument("--walk", choices=["deepwalk", "node2vec"], default="deepwalk")
    ap.add_argument("--p", type=float, default=1.0)
    ap.add_argument("--q", type=float, default=1.0)
    ap.add_argument("--length", type=int, default=80)
    ap.add_argument("--walks", type=int, default=10)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--negative", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--sample", type=float, default=0.0)
    ap.add_argument("--mode", choices=["fast", "serialized"], default="fast")
    ap.add_argument("--table", choices=["replicated", "sharded"], nargs="+", default=["replicated"],
                    help="quality: where the tables are kept (each trained in turn)")
    ap.add_argument("--sync", type=lambda v: v if v == "auto" else int(v), nargs="+", default=["auto"],
                    help="rounds per epoch between merges of the workers' replicas, or auto (several: a training "
                    "each, on the same walks)")
    ap.add_argument("--block-size", type=int, default=None,
                    help="gpipe.walks.block-size: walks per block (smaller: blocks, and training, on more workers)")
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--no-gensim", dest="gensim", action="store_false")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write", help="speed: write the vectors to this folder (to_parquet), timed in the call")
    ap.add_argument("--edges", help="speed: read the R-MAT graph's Parquet edges from this folder (written there "
                    "first, untimed, where it is absent): the call then starts at read_edges")
    ap.add_argument("--baseline-walks", type=int, default=100_000, help="speed: gensim's walks (the first ones)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="embeddings.json")
    args = ap.parse_args()
    settings = {} if args.block_size is None else {"gpipe.walks.block-size": args.block_size}
    with dask.config.set(settings), gpipe.connect(n_workers=args.workers, device=args.device,
                                                  dashboard_address=":0") as client:
        records = {"quality": quality, "speed": speed, "pyg": pyg}[args.part](client, args)
        report = {**report_head(client, args), "records": records}
    write_json(args.out, report)
    print("figure:", draw(report, args.out[:-5] + ".png"))


if __name__ == "__main__":
    main()
