"""Resources bounded before work starts: runs larger than the workers' memory refused, a worker's death of
memory said, node2vec's trials at a step (extreme p, q against exact probabilities, fixed seeds, a false-alarm
rate of 1e-3 per test), and the workers' loops stopped when the client is interrupted."""

import signal
import sys
import threading
import time
import traceback
from collections import defaultdict

import dask
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import gpipe
from gpipe.errors import GpipeValueError, WorkerLostError
from test_walk_family import ALPHA, _adjacency, _node2vec_exact, _transitions

EXTREME = [(1e4, 1e-4), (1e300, 1e-300)]


def _ring(n: int = 40) -> pd.DataFrame:
    return pd.DataFrame({"src": np.arange(n), "dst": (np.arange(n) + 1) % n})


@pytest.mark.parametrize("run, names", [
    (lambda g: gpipe.walks.deepwalk(g, length=10**9), r"'length' x the number of walks \(40 walks of 1000000000"),
    (lambda g: gpipe.walks.node2vec(g, length=2**30, walks_per_vertex=100), "'length' x the number of walks"),
    (lambda g: gpipe.walks.ppr(g, [0, 1], walks_per_source=10**9, length=100), "'length' x the number of walks"),
    (lambda g: gpipe.walks.multidimensional(g, frontier_size=10, budget=2**31 - 1, instances=10**5),
     "'instances' x 'budget'"),
    (lambda g: gpipe.sampling.neighbor(g, seeds=np.arange(40), fanouts=10**7, depth=3, replace=True),
     r"'instances' x the seeds x 'neighbor_size' \*\* 'depth': the sampled edges"),
    (lambda g: gpipe.sampling.Sampler(neighbor_size=10**9, neighbor_pool="frontier", depth=2, replace=True).run(
        g, instances=1000), "'instances' x the seeds x 'neighbor_size'"),
])
def test_a_run_larger_than_the_workers_memory_is_refused_before_it_starts(cpu, run, names):
    g = gpipe.from_edges(_ring())
    with pytest.raises(GpipeValueError, match=names + r".*would take [\d.]+ [GTPE]iB, more than the workers' "
                                                      r"[\d.]+ GiB of memory"):
        run(g)
    assert gpipe.walks.deepwalk(g, length=5, seed=1).compute().shape == (40, 6)  # the graph is still there


def test_a_large_neighbor_size_without_replacement_is_bounded_by_the_degrees_not_refused(cpu):
    g = gpipe.from_edges(_ring())  # degree 2: at most 2 picks per vertex however many are asked for
    edges = gpipe.sampling.Sampler(neighbor_size=10**9, depth=3, replace=False).run(g, seeds=np.arange(40)).compute()
    assert 0 < len(edges) <= 40 * (2 + 4 + 8)
    assert edges.groupby(["instance", "depth", "src"]).size().max() <= 2


def test_a_worker_that_runs_out_of_memory_is_said_to():
    """One walk of 600 MB fits two workers of 600 MB each, so it starts; the worker it runs on dies of it."""
    with gpipe.connect(n_workers=2, threads_per_worker=1, device="cpu", dashboard_address=":0",
                       memory_limit="600 MB"):
        g = gpipe.from_edges(_ring())
        gpipe.walks.deepwalk(g, length=5, seed=1)  # compiled before
        with pytest.raises(WorkerLostError, match=r"left the cluster \(it ran out of memory\)") as lost:
            gpipe.walks.deepwalk(g, length=150_000_000, start=[0], seed=1)
        assert lost.value.out_of_memory == lost.value.workers


def _in_loops(dask_worker=None) -> int:
    """This worker's threads inside a run's loop."""
    loops = ("run_partitions", "advance_local")
    return sum(any(frame.f_code.co_name in loops for frame, _ in traceback.walk_stack(top))
               for top in sys._current_frames().values())


def test_interrupting_the_client_stops_the_workers_loops(one_worker_cluster, eventually):
    """An interrupt (KeyboardInterrupt) drops the run; on one worker holding every partition of an out-of-memory
    graph (one on the device at a time, so walkers crossing between them wait for the next superstep), its loop
    would go on for minutes of supersteps, with no peer's barrier to stop it."""
    with one_worker_cluster.as_current():
        with dask.config.set({"gpipe.memory.device-partitions": 1}):
            g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=1, partitions=4)
        gpipe.walks.deepwalk(g, length=5, seed=1)  # compiled before
        # a real SIGINT to the main thread, as ^C sends (interrupt_main would wait for distributed's 10 s wait)
        threading.Timer(1.0, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            gpipe.walks.deepwalk(g, length=10**6, start=np.arange(16), seed=1)
        assert eventually(lambda: sum(one_worker_cluster.run(_in_loops).values()) == 0)


@pytest.fixture(scope="module")
def cliques() -> pd.DataFrame:
    """Six 5-cliques in a ring (one edge from each to the next) with a pendant vertex on each, weights in [0.5, 2].

    At most of their vertices every neighbor is the previous vertex or one of its neighbors: with p = 1e4,
    q = 1e-4 rejection accepts one proposal in 1e4 there, and one in 1e8 at a pendant vertex.
    """
    size, k = 5, 6
    src, dst = [], []
    for c in range(k):
        clique = np.arange(c * size, (c + 1) * size)
        i, j = np.triu_indices(size, 1)
        src += [*clique[i], clique[-1], clique[1]]
        dst += [*clique[j], (c + 1) % k * size, size * k + c]
    frame = pd.DataFrame({"src": src, "dst": dst})
    frame["w"] = np.random.default_rng(3).uniform(0.5, 2.0, len(frame)).round(3)
    return frame


def _pvalue(counts, exact: dict) -> tuple[float, int]:
    """Observed second-order moves against ``exact[(t, v)] = {x: probability}``, and the chi-square's degrees of
    freedom: the smaller (Bonferroni-doubled) of two p-values, a chi-square over the moves expected at least 5
    times in their context (given how many of its moves those were) and a two-sided Poisson test of how many
    of the rarer moves there were (expected 1e-4 or 1e-300 of a context's, they may not happen at all)."""
    by_context = defaultdict(dict)
    for (t, v, x), c in counts.items():
        by_context[(t, v)][x] = c
    chi2, dof, rare, rare_expected = 0.0, 0, 0, 0.0
    for context, observed in by_context.items():
        probs = exact[context]
        assert set(observed) <= set(probs), f"impossible move from {context}: {set(observed) - set(probs)}"
        total = sum(observed.values())
        common = {x: p for x, p in probs.items() if total * p >= 5}
        rare += total - sum(observed.get(x, 0) for x in common)
        rare_expected += total * sum(p for x, p in probs.items() if x not in common)
        seen = sum(observed.get(x, 0) for x in common)
        mass = sum(common.values())
        chi2 += sum((observed.get(x, 0) - seen * p / mass) ** 2 / (seen * p / mass) for x, p in common.items())
        dof += max(len(common) - 1, 0)
    poisson = 2 * min(stats.poisson.sf(rare - 1, rare_expected), stats.poisson.cdf(rare, rare_expected), 0.5)
    return min(1.0, 2 * min(stats.chi2.sf(chi2, dof), poisson)), dof


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("p, q", EXTREME)
def test_node2vec_with_extreme_p_and_q_keeps_exact_probabilities(cpu, cliques, p, q, weighted):
    g = gpipe.from_edges(cliques, weight="w", partitions=4)
    walks = gpipe.walks.node2vec(g, p=p, q=q, length=20, walks_per_vertex=300, weighted=weighted, seed=5).compute()
    triples = _transitions(walks[:, 1:], order=2)  # from the second step on: second-order moves only
    pvalue, dof = _pvalue(triples, _node2vec_exact(_adjacency(cliques), p, q, weighted))
    assert pvalue > ALPHA and dof >= 30


@pytest.mark.parametrize("p, q", EXTREME)
def test_node2vec_with_extreme_p_and_q_is_the_same_for_any_partitioning(cpu, cliques, p, q):
    """Steps drawn exactly after rejections read t's neighbors where they are, or borrowed from t's partition."""
    out = []
    for mode in ("replicated", "partitioned"):
        g = gpipe.from_edges(cliques, weight="w", partitions=None if mode == "replicated" else 4, mode=mode)
        out.append(gpipe.walks.node2vec(g, p=p, q=q, length=20, walks_per_vertex=20, weighted=True, seed=9).compute())
    np.testing.assert_array_equal(out[0], out[1])
    g = gpipe.from_edges(cliques, weight="w", partitions=4)
    owner = g.owner(np.arange(g.num_vertices))
    adj = _adjacency(cliques)
    # drawn exactly (all of v's neighbors are t or t's, so rejection would have gone on) with t on another partition
    borrowed = [(t, v) for row in out[1] for t, v in zip(row[1:-1], row[2:])
                if owner[t] != owner[v] and set(adj[v]) <= set(adj[t]) | {t}]
    assert len(borrowed) > 10


def test_node2vec_with_extreme_p_and_q_ends_in_seconds(cpu, cliques):
    """144 walks of 10 steps took 325 s before the exact draw (p = q = 1: 0.07 s), 0.1 s after; with p = 1e300,
    q = 1e-300 they never ended."""
    g = gpipe.from_edges(cliques, weight="w")
    t0 = time.perf_counter()
    for p, q in EXTREME:
        gpipe.walks.node2vec(g, p=p, q=q, length=10, walks_per_vertex=4, seed=1).compute()
    assert time.perf_counter() - t0 < 30


def test_forest_fires_bound_is_its_mean_burn_not_the_largest_degree(cpu):
    """Bounded by a hub's degree at every burning vertex, forest fire on R-MAT 22 was refused (6.5 TiB for 2,000
    instances of a few megabytes); a geometric count is bounded at its mean, as on a graph without a hub."""
    fire = gpipe.sampling.Sampler(update="unvisited", neighbor_size=("geometric", 0.7), depth=3)
    hub = gpipe.from_edges(pd.DataFrame({"src": np.zeros(5000, np.int64), "dst": np.arange(1, 5001)}))
    chords = pd.DataFrame({"src": np.arange(5001), "dst": (np.arange(5001) + 2) % 5001})
    degree_4 = gpipe.from_edges(pd.concat([_ring(5001), chords]))
    assert fire._most_edges(hub, 1) == fire._most_edges(degree_4, 1) < 5000


def test_a_deep_sample_of_a_small_dense_graph_is_bounded_by_its_edges_not_refused(cpu):
    src, dst = np.triu_indices(20, 1)  # K20: 19 ** 6 picks per instance unbounded, 6 x 380 at most
    g = gpipe.from_edges(pd.DataFrame({"src": src, "dst": dst}))
    edges = gpipe.sampling.Sampler(neighbor_size=19, depth=6).run(g, seeds=[0], instances=400).compute()
    assert 0 < edges.groupby("instance").size().max() <= 6 * 380
