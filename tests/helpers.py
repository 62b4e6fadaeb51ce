"""What several test modules share: a page's Python blocks, a folder's files and summary, a workflow's script, a call run in a thread, a
worker lost under a graph or killed mid-run, the steps of walks and their law, a graph of planted communities, the
node2vec paper's scoring of vertex vectors by their labels."""

import importlib.util
import json
import os
import re
import signal
import threading
import time

import numpy as np
import pandas as pd
import scipy.optimize
import scipy.special

import gpipe
from gpipe.errors import WorkerLostError


def python_blocks(markdown: str) -> list[str]:
    """The ```python blocks of a Markdown text, in order, as the code they hold (top-level blocks only: a block
    indented inside a list item is an illustration, not run)."""
    return re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.MULTILINE | re.DOTALL)


def tree(folder) -> dict:
    """Every file under ``folder`` (a Path): its path relative to the folder -> its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def runs_here(dask_worker=None) -> set:
    """The ids of the runs a worker's gpipe store holds (``client.run(runs_here)``)."""
    return set(dask_worker.plugins["gpipe"].runs)


def read_summary(folder) -> dict:
    """The ``summary.json`` that a command or workflow wrote in ``folder``."""
    with open(os.path.join(folder, "summary.json")) as f:
        return json.load(f)


def load_workflow(folder: str):
    """``folder/run.py`` (a workflow's script) loaded as a module."""
    spec = importlib.util.spec_from_file_location(f"{os.path.basename(folder)}_workflow", os.path.join(folder, "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def started(call) -> tuple[threading.Thread, dict]:
    """``call()`` running in a thread; the thread and what it gives (``result`` or ``error``) once it ends."""
    outcome = {}

    def target():
        try:
            outcome["result"] = call()
        except Exception as exc:  # what the test checks
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def holder(client, g) -> tuple[int, list[int]]:
    """The process id of the worker holding the graph's last partition, and the partitions it holds."""
    worker = g.placement[-1]
    return client.run(os.getpid, workers=[worker])[worker], [p for p, w in enumerate(g.placement) if w == worker]


def assert_lost(outcome: dict, lost: list[int]) -> None:
    """The call gave no result but a WorkerLostError naming the partitions ``lost``."""
    assert "result" not in outcome, "a call that lost a worker returned a result"
    error = outcome.get("error")
    assert isinstance(error, WorkerLostError), repr(outcome)
    assert error.partitions == lost and f"{', '.join(map(str, lost))} it held" in str(error), str(error)


def walk_steps(walks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(u, v) for every step of every walk (padding excluded)."""
    a, b = walks[:, :-1], walks[:, 1:]
    keep = b >= 0
    return a[keep], b[keep]


def transition_chi2(walks: np.ndarray, degrees: pd.Series) -> tuple[float, int]:
    """The chi-square statistic of every vertex's transition counts in ``walks`` against 1/degree (``degrees`` by
    the walks' vertex ids), and its degrees of freedom: a uniform step's law."""
    u, v = walk_steps(walks)
    counts = pd.DataFrame({"u": u, "v": v}).value_counts()
    chi2, dof = 0.0, 0
    for vertex, group in counts.groupby(level="u"):
        observed = np.zeros(degrees[vertex])
        observed[: len(group)] = group.to_numpy()  # neighbors never visited count 0
        expected = observed.sum() / degrees[vertex]
        chi2 += ((observed - expected) ** 2 / expected).sum()
        dof += degrees[vertex] - 1
    return chi2, dof


def looping(dask_worker) -> bool:
    """Whether a run's superstep loop runs on this worker."""
    return any(run.looping for run in dask_worker.plugins["gpipe"].runs.values())


def run_and_kill(client, work, timeout: float = 120):
    """Run ``work(g)`` on ``client``'s two workers, kill one worker's process once the run's superstep loop runs
    there; (outcome, lost parts)."""
    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=3, partitions=4)
    work(g, warm=True)  # compile first, so that the kill lands in the run
    pid, lost = holder(client, g)
    victim = g.placement[-1]
    thread, outcome = started(lambda: work(g, warm=False))
    while not client.run(looping, workers=[victim])[victim]:
        assert thread.is_alive(), "the run ended before the worker was killed: make it longer"
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout)
    assert not thread.is_alive(), f"the run did not end within {timeout} s of the worker's death"
    return outcome, lost


def routed_first_order(x, teleport: int, alpha: float, lo: int, hi: int, weighted: bool = False,
                       ranks: int = 0, local: tuple = (1, 1, 1)) -> dict:
    """``gp_walk_first_order_routed`` (``x``: numpy for the CPU twin, cupy for CUDA) on 2,000 walkers of a random
    graph of 300 vertices inside partition ``lo..hi-1`` (the second of three; ``local``: which are on this worker),
    as the first of ``ranks`` workers making blocks of 10^5 walks (0: none, every walker writes pieces), a third of
    the walkers arriving with the cells of their sector carried (random ids): its outputs on the host, each
    walker's vertices from its first carried cell on (stored to its row or its pieces, then those its mover
    carries on), whether it wrote to its row, the movers sorted by walk id (their order follows the kernel's
    schedule) with the cells each carries, and the inputs."""
    import importlib

    from gpipe import _alias, _rng
    from gpipe.walks._graphs import PICK_ALIAS, PICK_UNIFORM

    first_order = importlib.import_module("gpipe.walks._first_order")
    rng = np.random.default_rng(1)
    n_v, n = 300, 2000
    degree = rng.integers(0, 6, n_v)
    indptr = np.concatenate([[0], np.cumsum(degree)]).astype(np.int64)
    indices = np.concatenate([np.sort(rng.choice(n_v, d, replace=False)) for d in degree]).astype(np.int32)
    offsets = indptr[lo:hi + 1] - indptr[lo]
    table = np.zeros(1, np.uint64)
    if weighted:  # every 7th vertex's weights all zero: its walkers end there
        weights = rng.random(int(offsets[-1])) * np.repeat(np.arange(lo, hi) % 7 != 0, degree[lo:hi])
        table = _alias.tables(offsets, weights, dead=True)
    carried_cells = rng.integers(0, n_v, (n, 8)).astype(np.int32)  # a sector of int32 ids: 8 cells, 4 words
    words = carried_cells.view(np.uint64)
    inputs = dict(indptr=offsets, indices=indices[indptr[lo]:indptr[hi]], table=table,
                  walk_id=rng.permutation(10**6)[:n].astype(np.int64), vertex=rng.integers(lo, hi, n).astype(np.int64),
                  step=rng.integers(0, 40, n).astype(np.int32), **{f"sector{k}": words[:, k].copy() for k in range(4)})
    inputs["source"] = inputs["vertex"][::-1].copy()
    width, block_rows, stage, per = 41, 10**5, first_order.STAGE, 8
    walk_id, step = inputs["walk_id"], inputs["step"]
    row = (walk_id // block_rows // ranks * block_rows + walk_id % block_rows) if ranks else walk_id
    cell = (row * width + step) % per  # of its sector, whose cells before it it may carry: those of its row only
    inputs["carried"] = ((rng.random(n) < 1 / 3) & (cell <= step)).astype(np.int8)
    owned = len(range(0, 10, ranks)) * block_rows if ranks else 0
    bounds = np.array([0, lo, hi, n_v], np.int64)  # the partition is the second of three (the third maybe empty)
    parts = len(bounds) - 1
    most = n * first_order.most_pieces(per)
    out = dict(rows=np.full(max(1, owned * width), -1, np.int32), piece_walk_id=np.empty(most, np.int64),
               piece_start=np.empty(most, np.int32), piece_len=np.empty(most, np.int32),
               piece_offset=np.empty(most, np.int64), flat=np.empty(n * (stage + per - 1), np.int32), bounds=bounds,
               local=np.array(local, np.int8), mover_walk_id=np.empty(parts * n, np.int64),
               mover_source=np.empty(parts * n, np.int64), mover_vertex=np.empty(parts * n, np.int64),
               mover_step=np.empty(parts * n, np.int32), mover_carried=np.empty(parts * n, np.int8),
               counts=np.zeros(4 + parts, np.uint64), **{f"mover_sector{k}": np.empty(parts * n, np.uint64)
                                                          for k in range(4)})
    on = {k: x.asarray(v) for k, v in {**inputs, **out}.items()}
    first_order.ROUTED.launch(**on, weighted=PICK_ALIAS if weighted else PICK_UNIFORM, lo=lo, hi=hi, num_vertices=n_v,
                              key=np.uint64(_rng.key(7)), length=40, alpha=alpha, teleport=teleport, n=n,
                              keep_source=1, block_rows=block_rows if ranks else 0, ranks=ranks, rank=0, width=width,
                              parts=parts)
    got = {k: np.asarray(v.get() if hasattr(v, "get") else v) for k, v in on.items()}
    moved, kept = int(got["counts"][1]), int(got["counts"][3])
    going = got["counts"][4:].astype(np.int64)  # each partition's movers, at q * n..
    assert going.sum() == moved
    movers = {k: np.concatenate([got[f"mover_{k}"][q * n:q * n + going[q]] for q in range(parts)])
              for k in ("walk_id", "source", "vertex", "step", "carried", *(f"sector{j}" for j in range(4)))}
    owner = np.repeat(np.arange(parts), going)
    assert (np.searchsorted(bounds[1:-1], movers["vertex"], side="right") == owner).all(), "each where it goes"
    home = (walk_id // block_rows % ranks == 0) if ranks else np.zeros(n, bool)
    start = np.where(inputs["carried"] == 1, step - cell, step)  # its first cell's step
    mover_row = dict(zip(walk_id.tolist(), (row * width).tolist()))
    carries = {}  # walk id -> the cells its mover carries on
    for i, w in enumerate(movers["walk_id"].tolist()):
        held = (mover_row[w] + int(movers["step"][i])) % per if movers["carried"][i] else 0
        sector = np.stack([movers[f"sector{j}"][i] for j in range(4)]).view(np.int32)
        carries[w] = sector[:held]
    pieces: dict[int, list] = {}
    for w, s, k, o in zip(*(got[f"piece_{f}"][:kept] for f in ("walk_id", "start", "len", "offset"))):
        pieces.setdefault(int(w), []).append((int(s), got["flat"][o:o + k]))
    vertices = []
    for i, (w, s, at_home) in enumerate(zip(walk_id.tolist(), start.tolist(), home)):
        if at_home:  # its row, from its first cell to the first not written (rows start at -1)
            at = int(row[i]) * width + s
            written = got["rows"][at:at + width - s]
            stored = written[:np.flatnonzero(np.append(written, -1) < 0)[0]]
        else:
            mine = sorted(pieces.pop(w, []), key=lambda piece: piece[0])
            assert all(a[0] + len(a[1]) == b[0] for a, b in zip(mine, mine[1:])), "its pieces one after another"
            assert not mine or mine[0][0] == s, "its first piece at its first cell"
            stored = np.concatenate([p[1] for p in mine]) if mine else np.empty(0, np.int32)
        vertices.append(np.concatenate([stored, carries.get(w, np.empty(0, np.int32))]))
    assert not pieces, "pieces only of walkers not at home"
    order = np.argsort(movers["walk_id"])
    return {"inputs": inputs, "counts": got["counts"], "start": start, "cells": carried_cells, "vertices": vertices,
            "home": home, "movers": {k: v[order] for k, v in movers.items() if not k.startswith("sector")},
            "carries": [carries[w] for w in movers["walk_id"][order].tolist()]}


def hub_partition(ids, lo: int, seed: int, to=np.asarray):
    """A partition of vertices lo.. of 3,000 rows of up to 30 random neighbors (ids of dtype ``ids``) and a hub of
    20,000, its arrays made by ``to`` (``cupy.asarray``: on the GPU)."""
    from gpipe.graph._partition import Partition

    rng = np.random.default_rng(seed)
    degrees = np.concatenate([rng.integers(0, 30, 3000), [20_000]])
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    indices = rng.integers(0, 1 << 20, indptr[-1]).astype(ids)
    hi = lo + degrees.size
    return Partition(0, lo, hi, np.array([0, lo, hi]), to(indptr), to(indices), None)


def planted_partition(blocks: int = 4, size: int = 60, inside: float = 0.25, across: float = 0.01, seed: int = 0):
    """A graph of ``blocks`` communities of ``size`` vertices (an edge within one with probability ``inside``,
    between two with ``across``) and each vertex's community."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(blocks), size)
    u, v = np.triu_indices(blocks * size, 1)
    p = np.where(labels[u] == labels[v], inside, across)
    chosen = rng.random(u.size) < p
    return pd.DataFrame({"src": u[chosen], "dst": v[chosen]}), labels


def centroid_accuracy(vectors: np.ndarray, labels: np.ndarray, seed: int = 0) -> float:
    """Nearest-centroid (cosine) accuracy on half the vertices, trained on the other half."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    train = np.random.default_rng(seed).random(len(labels)) < 0.5
    centroids = np.stack([unit[train & (labels == c)].mean(axis=0) for c in np.unique(labels)])
    predicted = np.argmax(unit[~train] @ centroids.T, axis=1)
    return float((predicted == labels[~train]).mean())


def one_vs_rest_logistic(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The weights (a row per feature, then the bias's; a column per label) of an L2-regularized logistic regression
    for each column of the 0/1 ``labels``, as liblinear fits it with C = 1 and a bias feature of 1 (scikit-learn's
    ``LogisticRegression(solver="liblinear")``): ``w`` minimizes ``0.5 |w|^2 + sum log(1 + exp(-y w.x))``, ``y = +-1``,
    the bias regularized with the rest. The columns' objectives are independent: one L-BFGS run on their sum solves
    them all."""
    x = np.hstack([features, np.ones((len(features), 1))]).astype(np.float64)
    y = np.where(labels, 1.0, -1.0)
    shape = (x.shape[1], y.shape[1])

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        w = flat.reshape(shape)
        margins = y * (x @ w)
        gradient = w - x.T @ (y * scipy.special.expit(-margins))
        return 0.5 * (w * w).sum() + np.logaddexp(0, -margins).sum(), gradient.ravel()

    fit = scipy.optimize.minimize(objective, np.zeros(shape[0] * shape[1]), jac=True, method="L-BFGS-B")
    return fit.x.reshape(shape)


def macro_f1_on_halves(vectors: np.ndarray, labels: np.ndarray, splits: int, seed: int = 0) -> np.ndarray:
    """The node2vec paper's scoring of vertex ``vectors`` by their 0/1 ``labels`` (vertex by label), the Macro-F1 of
    each of ``splits`` random halves of the labeled vertices: :func:`one_vs_rest_logistic` trained on the other half
    gives each vertex as many labels as it has, its top-scored ones (a label neither held nor given scores F1 0)."""
    rng = np.random.default_rng(seed)
    labeled = np.flatnonzero(labels.any(axis=1))
    scores = []
    for _ in range(splits):
        order = rng.permutation(labeled)
        train, test = order[: len(order) // 2], order[len(order) // 2:]
        w = one_vs_rest_logistic(vectors[train], labels[train])
        rank = np.argsort(np.argsort(-(vectors[test] @ w[:-1] + w[-1]), axis=1), axis=1)
        held = labels[test].astype(bool)
        given = rank < held.sum(axis=1, keepdims=True)
        scores.append(np.mean(2 * (given & held).sum(axis=0) / np.maximum(given.sum(axis=0) + held.sum(axis=0), 1)))
    return np.array(scores)

