"""The walk family against exact probabilities (fixed seeds, chi-square at a 1e-3 false-alarm rate),
and the same walks for any partitioning."""

import inspect
from collections import Counter, defaultdict

import dask
import networkx as nx
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import gpipe
from gpipe.errors import GpipeValueError

ALPHA = 1e-3


@pytest.fixture(scope="module")
def weighted_edges() -> pd.DataFrame:
    """A connected undirected graph of 40 vertices with weights in [0.5, 2]: a ring plus random chords."""
    rng = np.random.default_rng(7)
    n = 40
    ring = np.arange(n)
    src = np.concatenate([ring, rng.integers(0, n, 120)])
    dst = np.concatenate([(ring + 1) % n, rng.integers(0, n, 120)])
    frame = pd.DataFrame({"src": src, "dst": dst})
    frame = frame[frame.src != frame.dst]
    key = np.minimum(frame.src, frame.dst) * n + np.maximum(frame.src, frame.dst)
    frame = frame.loc[~key.duplicated()].reset_index(drop=True)
    frame["w"] = rng.uniform(0.5, 2.0, len(frame)).round(3)
    return frame


@pytest.fixture(scope="module")
def dead_end_edges(weighted_edges) -> pd.DataFrame:
    """``weighted_edges`` as directed edges and three more, into vertices 40 and 41, which have no out-edge."""
    return pd.concat([weighted_edges, pd.DataFrame({"src": [5, 12, 30], "dst": [40, 41, 41], "w": [1.0, 2.0, 0.5]})])


def _adjacency(edges: pd.DataFrame) -> dict:
    adj = defaultdict(dict)
    for s, d, w in edges[["src", "dst", "w"]].itertuples(index=False):
        adj[s][d] = w
        adj[d][s] = w
    return adj


def _transitions(walks: np.ndarray, order: int = 1) -> Counter:
    """Counts of (u, v) (order 1) or (t, u, v) (order 2) over all walks."""
    counts = Counter()
    for row in walks:
        row = row[row >= 0].tolist()
        counts.update(zip(*(row[i:] for i in range(order + 1))))
    return counts


def _chi2_pvalue(counts: Counter, exact: dict) -> float:
    """Aggregate chi-square of observed next-vertex counts vs ``exact[context] = {next: probability}``."""
    by_context = defaultdict(dict)
    for key, c in counts.items():
        by_context[key[:-1]][key[-1]] = c
    chi2, dof = 0.0, 0
    for context, observed in by_context.items():
        probs = exact[context]
        assert set(observed) <= set(probs), f"impossible move from {context}: {set(observed) - set(probs)}"
        total = sum(observed.values())
        expected = {x: total * p for x, p in probs.items()}
        if total < 30 or min(expected.values()) < 5:
            continue
        chi2 += sum((observed.get(x, 0) - e) ** 2 / e for x, e in expected.items())
        dof += len(probs) - 1
    assert dof >= 50, "too few contexts tested"
    return stats.chi2.sf(chi2, dof)


def test_biased_deepwalk_moves_in_proportion_to_weight(cpu, weighted_edges):
    g = gpipe.from_edges(weighted_edges, weight="w", partitions=3)
    walks = gpipe.walks.deepwalk(g, length=20, walks_per_vertex=60, weighted=True, seed=1).compute()
    adj = _adjacency(weighted_edges)
    exact = {(u,): {x: w / sum(nb.values()) for x, w in nb.items()} for u, nb in adj.items()}
    assert _chi2_pvalue(_transitions(walks), exact) > ALPHA


@pytest.mark.parametrize("partitions", [1, 2])
def test_a_weighted_walk_never_takes_a_zero_weight_and_ends_where_every_weight_is_zero(cpu, partitions):
    """Vertex 0's edge of weight 0 is never taken; vertex 1's edges all weigh 0, so a walk reaching it ends there
    (an alias table of no positive weight draws no edge, as the inverse transform did)."""
    edges = pd.DataFrame({"src": [0, 0, 1, 1, 2, 3], "dst": [1, 2, 2, 3, 0, 0], "w": [1.0, 0.0, 0.0, 0.0, 1.0, 2.0]})
    g = gpipe.from_edges(edges, weight="w", directed=True, partitions=partitions)
    walks = gpipe.walks.deepwalk(g, length=4, walks_per_vertex=50, weighted=True, seed=3).compute()
    expected = {0: [0, 1, -1, -1, -1], 1: [1, -1, -1, -1, -1], 2: [2, 0, 1, -1, -1], 3: [3, 0, 1, -1, -1]}
    assert {tuple(row) for row in walks.tolist()} == {tuple(row) for row in expected.values()}


def _node2vec_exact(adj: dict, p: float, q: float, weighted: bool) -> dict:
    exact = {}
    for v, nb in adj.items():
        for t in nb:
            bias = {x: (w if weighted else 1.0) * (1 / p if x == t else 1.0 if x in adj[t] else 1 / q)
                    for x, w in nb.items()}
            total = sum(bias.values())
            exact[(t, v)] = {x: b / total for x, b in bias.items()}
    return exact


@pytest.mark.parametrize("p, q, weighted", [(0.5, 2.0, False), (2.0, 0.25, True)])
def test_node2vec_matches_exact_second_order_probabilities_across_partitions(cpu, weighted_edges, p, q, weighted):
    g = gpipe.from_edges(weighted_edges, weight="w", partitions=4)
    walks = gpipe.walks.node2vec(g, p=p, q=q, length=12, walks_per_vertex=150, weighted=weighted, seed=2).compute()
    triples = _transitions(walks[:, 1:], order=2)  # from the second step on: second-order moves only
    owner = g.owner(np.arange(40))
    remote = Counter({k: c for k, c in triples.items() if owner[k[0]] != owner[k[1]]})
    assert sum(remote.values()) > 0.3 * sum(triples.values())  # t's neighbors mostly live elsewhere
    exact = _node2vec_exact(_adjacency(weighted_edges), p, q, weighted)
    assert _chi2_pvalue(remote, exact) > ALPHA
    assert _chi2_pvalue(triples, exact) > ALPHA


def test_metropolis_hastings_acceptance(cpu, weighted_edges):
    g = gpipe.from_edges(weighted_edges, partitions=3)
    walks = gpipe.walks.metropolis_hastings(g, length=20, walks_per_vertex=80, seed=3).compute()
    adj = _adjacency(weighted_edges)
    exact = {}
    for v, nb in adj.items():
        moves = {u: min(1.0, len(nb) / len(adj[u])) / len(nb) for u in nb}
        exact[(v,)] = {**moves, v: 1.0 - sum(moves.values())}
    assert _chi2_pvalue(_transitions(walks), exact) > ALPHA


def test_jump_rate(cpu, weighted_edges):
    g = gpipe.from_edges(weighted_edges, partitions=3)
    jump, n = 0.3, 40
    walks = gpipe.walks.with_jump(g, jump=jump, length=10, walks_per_vertex=300, seed=4).compute()
    adj = _adjacency(weighted_edges)
    exact = {(v,): {u: jump / n + (1 - jump) * (u in nb) / len(nb) for u in range(n)} for v, nb in adj.items()}
    assert _chi2_pvalue(_transitions(walks), exact) > ALPHA


def test_restart_rate(cpu, weighted_edges):
    g = gpipe.from_edges(weighted_edges, partitions=3)
    restart, sources = 0.2, [3, 17]
    walks = gpipe.walks.ppr(g, sources, restart=restart, walks_per_source=3000, length=20, seed=5).compute()
    adj = _adjacency(weighted_edges)
    n_src = len(sources)
    for i, s in enumerate(sources):
        mine = walks[np.arange(len(walks)) % n_src == i]
        assert (mine[:, 0] == s).all()
        exact = {(v,): {u: restart * (u == s) + (1 - restart) * (u in nb) / len(nb) for u in set(nb) | {s}}
                 for v, nb in adj.items()}
        assert _chi2_pvalue(_transitions(mine), exact) > ALPHA


def _exact_ppr(edges: pd.DataFrame, n: int, source: int, restart: float) -> np.ndarray:
    """Personalized PageRank by power iteration: steps by weight, dead ends send their mass back to the source."""
    P = np.zeros((n, n))
    np.add.at(P, (edges.src, edges.dst), edges.w)
    out = P.sum(axis=1)
    P[out > 0] /= out[out > 0, None]
    home = np.eye(n)[source]
    x = home
    for _ in range(500):
        x = restart * home + (1 - restart) * (x @ P + x[out == 0].sum() * home)
    return x


def test_ppr_restart_is_one_minus_the_alpha_of_networkx_pagerank(dead_end_edges):
    """What ppr's docstring says: the personalized PageRank its walks estimate (the power iteration the test below
    holds them to) is networkx's with alpha = 1 - restart and the source as personalization, dead ends included."""
    graph = nx.from_pandas_edgelist(dead_end_edges, "src", "dst", edge_attr="w", create_using=nx.DiGraph)
    restart = 0.2
    for source in (3, 40):  # 40: a dead end
        theirs = nx.pagerank(graph, alpha=1 - restart, personalization={source: 1}, weight="w", tol=1e-13,
                             max_iter=1000)
        np.testing.assert_allclose(_exact_ppr(dead_end_edges, 42, source, restart),
                                   [theirs[v] for v in range(42)], atol=1e-10)


def test_ppr_scores_are_personalized_pagerank_within_monte_carlo_error(cpu, dead_end_edges):
    """1e5 walks per source (10 seeds of 1e4) on a weighted directed graph with dead ends, against power iteration:
    every score within the Monte Carlo error the seeds' spread shows (t-test per vertex, Bonferroni over all,
    false-alarm rate 1e-3): L1 0.002, at most 4.3 standard errors here, where the share of visits of
    fixed-length walks missed by 0.02 to 0.03, up to 59 standard errors (the source +4 %)."""
    n, restart, sources, seeds = 42, 0.2, [3, 12, 40], range(10)  # 40: a dead end
    g = gpipe.from_edges(dead_end_edges, weight="w", directed=True, partitions=3)
    runs = []
    for seed in seeds:
        scores = gpipe.walks.ppr(g, sources, restart=restart, walks_per_source=10_000, length=40, weighted=True,
                                 seed=seed).scores()
        runs.append([scores[scores.source == s].set_index("vertex").score.reindex(range(n), fill_value=0.0)
                     for s in sources])
    runs = np.array(runs)  # seed, source, vertex
    exact = np.array([_exact_ppr(dead_end_edges, n, s, restart) for s in sources])
    mean = runs.mean(axis=0)
    error = runs.std(axis=0, ddof=1) / np.sqrt(len(seeds))
    np.testing.assert_allclose(runs.sum(axis=2), 1.0)
    np.testing.assert_allclose(mean[error == 0], exact[error == 0], atol=1e-4)  # never reached, or certain
    z = np.abs(mean - exact)[error > 0] / error[error > 0]
    assert z.max() < stats.t.ppf(1 - ALPHA / (2 * z.size), len(seeds) - 1), np.abs(mean - exact).sum(axis=1)


@pytest.mark.parametrize("walk, kwargs", [
    (gpipe.walks.deepwalk, {"weighted": True}),
    (gpipe.walks.node2vec, {"p": 0.25, "q": 4.0}),
    (gpipe.walks.node2vec, {"p": 4.0, "q": 0.5, "weighted": True}),
    (gpipe.walks.metropolis_hastings, {}),
    (gpipe.walks.with_jump, {"jump": 0.2}),
])
def test_walks_are_the_same_for_any_partitioning(cpu, walk, kwargs):
    out = []
    for parts in (1, 4):
        g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=8, weighted=True, partitions=parts)
        out.append(walk(g, length=15, walks_per_vertex=2, seed=6, **kwargs).compute())
    np.testing.assert_array_equal(out[0], out[1])
    assert (out[0][:, 1:] >= 0).any()


def test_ppr_walks_and_scores_are_the_same_for_any_workers_and_partitions(cpu_cluster, one_worker_cluster):
    out = []
    for client, parts in [(one_worker_cluster, 1), (one_worker_cluster, 3), (cpu_cluster, 1), (cpu_cluster, 3)]:
        with client.as_current(), dask.config.set({"gpipe.walks.block-size": 7}):  # 12 blocks, 4 source ranges
            g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=8, weighted=True, partitions=parts)
            r = gpipe.walks.ppr(g, [9, 1, 200, 3], restart=0.3, walks_per_source=20, length=10, weighted=True, seed=2)
            out.append((r.compute(), r.scores(), r.scores_to_dask()))
            pd.testing.assert_frame_equal(out[-1][2].compute(), out[-1][1], check_exact=True)
    assert [d.npartitions for _, _, d in out] == [4] * 4
    for walks, scores, _ in out[1:]:
        np.testing.assert_array_equal(out[0][0], walks)
        pd.testing.assert_frame_equal(out[0][1], scores, check_exact=True)  # bit for bit


def test_ppr_scores_are_reduced_on_both_workers_and_keep_their_string_ids(cpu, monkeypatch):
    g = gpipe.from_edges(pd.DataFrame({"src": list("zbcca"), "dst": list("bcazc")}), partitions=2)
    with dask.config.set({"gpipe.walks.block-size": 3}):
        r = gpipe.walks.ppr(g, ["z", "a", "c"], restart=0.2, walks_per_source=5, length=6, seed=1)
        gathered, gather = [], type(cpu).gather
        monkeypatch.setattr(type(cpu), "gather", lambda self, *a, **k: gathered.append(gather(self, *a, **k))
                            or gathered[-1])
        lazy = r.scores_to_dask()
        monkeypatch.undo()
    ranges = r._score_ranges()
    assert len(ranges) == 3 and len(set().union(*cpu.who_has(ranges).values())) == 2  # the ranges on both workers
    assert gathered and all(isinstance(x, int) for got in gathered for x in got)  # only the ranges' sizes
    scores = r.scores()
    assert list(scores.source.drop_duplicates()) == ["a", "c", "z"] and set(scores.vertex) <= set("abcz")
    pd.testing.assert_frame_equal(lazy.compute(), scores, check_exact=True)
    assert scores.groupby("source").score.sum().to_numpy() == pytest.approx([1.0, 1.0, 1.0])


@pytest.mark.parametrize("walk", [gpipe.walks.node2vec, gpipe.walks.metropolis_hastings, gpipe.walks.with_jump])
def test_directed_graphs_end_at_dead_ends(cpu, walk):
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 3]}), directed=True, partitions=2)
    kwargs = {"jump": 0.0} if walk is gpipe.walks.with_jump else {}
    walks = walk(g, length=5, start=[0], seed=0, **kwargs).compute()
    np.testing.assert_array_equal(walks, [[0, 1, 2, 3, -1, -1]])


@pytest.mark.parametrize("call, message", [
    (lambda g: gpipe.walks.node2vec(g, p=0), "'p' must be a positive finite number, got 0"),
    (lambda g: gpipe.walks.node2vec(g, q=-1.0), "'q' must be a positive finite number, got -1.0"),
    (lambda g: gpipe.walks.node2vec(g, length=0), "'length' must be a positive integer, got 0"),
    (lambda g: gpipe.walks.node2vec(g, start=[10**6]), "'start' must hold vertices of the graph"),
    (lambda g: gpipe.walks.ppr(g, [0], restart=1.0), r"'restart' must be in \[0, 1\), got 1.0"),
    (lambda g: gpipe.walks.ppr(g, [0], restart=-0.1), r"'restart' must be in \[0, 1\), got -0.1"),
    (lambda g: gpipe.walks.ppr(g, [10**6]), "'start' must hold vertices of the graph"),
    (lambda g: gpipe.walks.ppr(g, [5, 0, 5, 5]), r"'start' must hold each vertex once .*; 5 is there 3 times"),
    (lambda g: gpipe.walks.ppr(g, [0], walks_per_source=0), "'walks_per_source' must be a positive integer"),
    (lambda g: gpipe.walks.ppr(g, []), "'start' must hold at least one vertex, got an empty array"),
    (lambda g: gpipe.walks.ppr(g, [0], sources=[1]),
     r"ppr\(\): 'start' and 'sources' \(its old name\) must not both be given, got both: pass start only"),
    (lambda g: gpipe.walks.ppr(g, start=[0], sources=[1]), r"'start' and 'sources' \(its old name\) must not both"),
    (lambda g: gpipe.walks.deepwalk(g, 80), r"'start' must be a list or array of vertex ids \(the second parameter "
                                            r"of every walk; pass length and the others by name\), got the single "
                                            r"value 80"),
    (lambda g: gpipe.walks.node2vec(g, 0.5, 2.0), "'start' must be a list or array .*, got the single value 0.5"),
    (lambda g: gpipe.walks.ppr(g, 0), "'start' must be a list or array .*, got the single value 0"),
    (lambda g: gpipe.walks.multidimensional(g, 50), "'start' must be a list or array .*, got the single value 50"),
    (lambda g: gpipe.walks.with_jump(g, jump=1.5), r"'jump' must be in \[0, 1\], got 1.5"),
    (lambda g: gpipe.walks.metropolis_hastings(g, length=-2), "'length' must be a positive integer, got -2"),
    (lambda g: gpipe.walks.node2vec(g, weighted=True), "'weighted' needs a graph with edge weights"),
])
def test_bad_parameters_are_rejected_by_name(cpu, call, message):
    g = gpipe.generators.rmat(scale=6, edge_factor=2, seed=0, partitions=1)
    with pytest.raises(GpipeValueError, match=message):
        call(g)


def test_every_walk_takes_the_graph_first_and_its_start_vertices_second_by_position_or_name():
    walks = [getattr(gpipe.walks, name) for name in gpipe.walks.__all__ if inspect.isfunction(getattr(gpipe.walks, name))]
    assert len(walks) == 6
    for walk in walks:
        g, start = list(inspect.signature(walk).parameters.values())[:2]
        assert (g.name, start.name, start.kind) == ("g", "start", inspect.Parameter.POSITIONAL_OR_KEYWORD), walk


def test_frontier_sampling_selects_pool_members_in_proportion_to_degree(cpu):
    """Star-like graph: pool {0, 1, 2} with degrees 1, 2, 4; the first pick is v with probability deg(v) / 7,
    and the second is proportional to the degrees of the pool after the first replacement."""
    edges = pd.DataFrame({"src": [0, 1, 1, 2, 2, 2, 2], "dst": [10, 11, 12, 13, 14, 15, 16]})
    g = gpipe.from_edges(edges, partitions=3)
    deg = g.degrees()
    sample = gpipe.walks.multidimensional(g, frontier_size=3, budget=2, instances=6000, start=[0, 1, 2], seed=4)
    frame = sample.compute()
    assert frame.groupby("instance").size().eq(2).all()
    first = frame[frame.step == 0]
    counts = first.src.value_counts().reindex([0, 1, 2], fill_value=0).to_numpy()
    assert stats.chisquare(counts, 6000 * np.array([1, 2, 4]) / 7).pvalue > ALPHA
    second = frame[frame.step == 1].set_index("instance")
    chi2, dof = 0.0, 0
    for moved, group in first.groupby("src"):
        for dst, sub in group.groupby("dst"):
            pool = [v for v in (0, 1, 2) if v != moved] + [dst]
            weights = np.array([deg[v] for v in pool], float)
            observed = second.loc[sub.instance].src.value_counts().reindex(pool, fill_value=0).to_numpy()
            expected = observed.sum() * weights / weights.sum()
            keep = expected > 0
            if observed.sum() >= 50:
                chi2 += ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
                dof += keep.sum() - 1
    assert dof >= 10 and stats.chi2.sf(chi2, dof) > ALPHA


def test_frontier_sampling_structure_and_partitioning(cpu, tmp_path):
    out = []
    for parts in (1, 4):
        g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=3, partitions=parts)
        s = gpipe.walks.multidimensional(g, frontier_size=40, budget=250, instances=6, seed=9)
        out.append(s.compute())
        assert s.stats["edges"] == 6 * 250 and s.stats["edges_per_second"] > 0
    pd.testing.assert_frame_equal(out[0], out[1])
    frame = out[0]
    assert frame.groupby("instance").step.apply(list).apply(lambda x: x == list(range(250))).all()
    assert frame.groupby("instance").time.is_monotonic_increasing.all()
    stored = pd.read_parquet(g.to_parquet(tmp_path / "g"))
    edges = set(zip(stored.src, stored.dst))
    assert all(e in edges for e in zip(frame.src, frame.dst))


def _hub(partitions: int, mode: str | None = None):
    """A hub of degree 50 on a ring of degree-2 vertices: members starting at the hub slow down once they leave
    it, so their instances need several rounds of frontier sampling."""
    src = np.r_[np.zeros(50, int), np.arange(1, 51)]
    dst = np.r_[np.arange(1, 51), np.arange(1, 51) % 50 + 1]
    return gpipe.from_edges(pd.DataFrame({"src": src, "dst": dst}), partitions=partitions, mode=mode)


def test_frontier_samples_stay_on_the_workers_and_go_with_their_result(cpu, eventually, monkeypatch):
    """The client hears each round's moves per instance and its parked members, never the moves: every round's
    moves wait in its run's stores until the blocks are made on the workers, or until the result is dropped."""
    import gc

    import distributed
    from helpers import runs_here

    from gpipe.walks import _frontier

    def held() -> set:
        return set().union(*cpu.run(runs_here).values())

    heard = []

    def run_and_hear(*args, **kwargs):
        ran = run_supersteps(*args, **kwargs)
        heard.extend(ran.stats["outputs"])  # what came back with the run: each partition's summary
        return ran

    run_supersteps = _frontier.run_supersteps
    monkeypatch.setattr(_frontier, "run_supersteps", run_and_hear)
    before = held()
    s = gpipe.walks.multidimensional(_hub(3), frontier_size=2, budget=120, instances=3, start=[0, 0], seed=7)
    assert s.stats["rounds"] > 1 and set(s._run_ids) <= held() - before
    assert heard and all(moves.shape == (3,) and set(parked) == {"walk_id", "vertex", "step", "time"}
                         for moves, parked in heard)
    blocks = s._blocks()
    distributed.wait(blocks)
    assert all(cpu.who_has(blocks)[b.key] for b in blocks)  # each block is on a worker until gathered
    assert eventually(lambda: held() <= before)  # making them took every round's moves
    edges = s.compute()
    assert len(edges) == s.stats["edges"] == 360 and edges.groupby("instance").step.max().eq(119).all()
    pd.testing.assert_frame_equal(s.to_dask().compute(), edges)
    s = gpipe.walks.multidimensional(_hub(3), frontier_size=2, budget=120, instances=3, start=[0, 0], seed=7)
    runs = set(s._run_ids)
    assert runs <= held()
    del s
    gc.collect()
    assert eventually(lambda: not runs & held())


def test_frontier_samples_do_not_depend_on_workers_partitions_or_mode(cpu_cluster, one_worker_cluster):
    out = []
    for client in (one_worker_cluster, cpu_cluster):
        with client.as_current():
            for partitions, mode in ((1, None), (3, None), (None, "replicated")):
                g = _hub(partitions, mode)
                s = gpipe.walks.multidimensional(g, frontier_size=2, budget=120, instances=3, start=[0, 0], seed=7)
                r = gpipe.generators.rmat(scale=8, edge_factor=2, seed=3, partitions=partitions, mode=mode)
                t = gpipe.walks.multidimensional(r, frontier_size=4, budget=50, instances=5, seed=1)
                assert s.stats["rounds"] > 1
                out.append((s.compute(), s.nodes(), t.compute(), t.nodes()))
                assert (len(out[-1][0]), len(out[-1][2])) == (360, 250)  # each its own, though both alive
                g.release()
                r.release()
    for other in out[1:]:
        for a, b in zip(out[0], other):
            pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("kwargs, message", [
    ({"frontier_size": 0}, "'frontier_size' must be a positive integer, got 0"),
    ({"budget": 0}, "'budget' must be a positive integer, got 0"),
    ({"instances": -1}, "'instances' must be a positive integer, got -1"),
    ({"frontier_size": 2, "start": [0, 1, 2]}, r"'start' must have shape \(2,\) or \(1, 2\)"),
])
def test_frontier_sampling_bad_parameters(cpu, kwargs, message):
    g = gpipe.generators.rmat(scale=6, edge_factor=2, seed=0, partitions=1)
    with pytest.raises(GpipeValueError, match=message):
        gpipe.walks.multidimensional(g, **kwargs)
