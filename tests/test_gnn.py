"""GNN mini-batch sampling (gpipe.gnn): the blocks' structure, the pick distributions, and that the blocks depend on
the seed only — not on fused or per-hop runs, nor on the partitioning. CPU; the CUDA twin is in tests/gpu."""

import importlib.util
import subprocess
import sys
import time

import numba
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import gpipe
from gpipe.errors import GpipeError, GpipeValueError

ALPHA = 1e-3  # the false-alarm rate of each chi-square test (its seed is fixed: it fails or passes every time)


def _edges(seed: int = 2, n: int = 300, m: int = 2400) -> pd.DataFrame:
    """A skewed undirected graph (preferential ends) with a weight per edge."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = np.minimum(rng.zipf(1.6, m) - 1, n - 1)
    return pd.DataFrame({"src": src, "dst": dst, "w": rng.uniform(0.1, 4.0, m).astype(np.float32)})


def _star(weights) -> pd.DataFrame:
    """Vertex 0 joined to 1..d with the given weights (both directions stored)."""
    d = len(weights)
    return pd.DataFrame({"src": np.zeros(d, np.int64), "dst": np.arange(1, d + 1),
                         "w": np.asarray(weights, np.float32)})


@pytest.fixture(scope="module")
def graphs(cpu_cluster):
    with cpu_cluster.as_current():
        frame = _edges()
        yield {"one": gpipe.from_edges(frame, weight="w", partitions=1, num_vertices=300),
               "four": gpipe.from_edges(frame, weight="w", partitions=4, num_vertices=300),
               "star": gpipe.from_edges(_star(np.arange(1, 13)), weight="w", partitions=2)}


def _stored(frame: pd.DataFrame) -> pd.DataFrame:
    """The edges a graph stores for an undirected edge frame, in its CSR's order: both directions, no self-loops,
    no duplicates, sorted by (src, dst)."""
    both = pd.concat([frame, frame.rename(columns={"src": "dst", "dst": "src"})])
    return both[both.src != both.dst].drop_duplicates(["src", "dst"]).sort_values(["src", "dst"])


def _neighbors(frame: pd.DataFrame) -> dict:
    return _stored(frame).groupby("src")["dst"].apply(set).to_dict()


def _layers(blocks):
    """Each hop's (src, dst) as vertex ids, from the seeds outwards."""
    nodes = blocks.input_nodes
    return [(nodes[b.src], nodes[b.dst]) for b in blocks.blocks[::-1]]


SEEDS = np.array([5, 0, 17, 3, 200, 42, 1, 99])


@pytest.mark.parametrize("fanouts", [[4, 3], [2, -1, 2], [30]])
@pytest.mark.parametrize("replace", [False, True])
def test_each_vertex_picks_its_hops_fanout_or_all_its_neighbors(graphs, fanouts, replace):
    truth = _neighbors(_edges())
    blocks = gpipe.gnn.sample_blocks(graphs["four"], SEEDS, fanouts, replace=replace, seed=3)
    for fanout, block, (src, dst) in zip(fanouts, blocks.blocks[::-1], _layers(blocks)):
        for v in blocks.input_nodes[:block.num_dst_nodes]:
            degree = len(truth.get(v, ()))
            picked = src[dst == v]
            want = degree if fanout == -1 else min(fanout, degree) if not replace else fanout if degree else 0
            assert picked.size == want, (v, degree, fanout)
            if not replace:
                assert np.unique(picked).size == picked.size, "a neighbor picked twice without replacement"


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("fanouts, replace", [([-1, -1, -1], False), ([7, 9, 7], False), ([7, 7, 7], True)])
def test_a_complete_graph_fills_every_hop_to_its_bound(cpu, fanouts, replace, fused):
    """K8 from one seed: every vertex of a hop picks 7 edges — without replacement all of its own, so hop 0 takes
    vertex 3's and every later hop all 56: the most a hop can hold, which the kernel's buffers are sized for."""
    src, dst = np.triu_indices(8, 1)
    g = gpipe.from_edges(pd.DataFrame({"src": src, "dst": dst}), partitions=2)
    blocks = gpipe.gnn.sample_blocks(g, [3], fanouts, replace=replace, fused=fused, seed=1)
    assert [b.src.size for b in blocks.blocks] == [7 * b.num_dst_nodes for b in blocks.blocks]
    if not replace:  # vertex 3's edges, then every edge at each later hop
        assert blocks.num_sampled_edges == (7, 56, 56) and blocks.num_sampled_nodes == (1, 7, 0, 0)
        hops = [np.sort(b.edge_ids) for b in blocks.blocks[::-1]]
        np.testing.assert_array_equal(hops[0], np.arange(21, 28))
        for edge_ids in hops[1:]:
            np.testing.assert_array_equal(edge_ids, np.arange(56))


@pytest.mark.parametrize("fused", [True, False])
def test_destinations_are_a_prefix_of_sources_and_every_vertex_is_listed_once(graphs, fused):
    blocks = gpipe.gnn.sample_blocks(graphs["one"], SEEDS, [5, 4, 3], fused=fused, seed=1)
    nodes = blocks.input_nodes
    assert np.unique(nodes).size == nodes.size
    np.testing.assert_array_equal(blocks.output_nodes, SEEDS)
    np.testing.assert_array_equal(nodes[:SEEDS.size], SEEDS)
    assert blocks.blocks[0].num_src_nodes == nodes.size and blocks.blocks[-1].num_dst_nodes == SEEDS.size
    counts = np.cumsum(blocks.num_sampled_nodes)
    for hop, block in enumerate(blocks.blocks[::-1]):
        assert (block.num_dst_nodes, block.num_src_nodes) == (counts[hop], counts[hop + 1])
        assert block.src.size == blocks.num_sampled_edges[hop]
        assert block.src.max() < block.num_src_nodes and block.dst.max() < block.num_dst_nodes
        # a layer's sources are its destinations and the neighbors it picked, nothing else
        sources = np.union1d(np.arange(block.num_dst_nodes), block.src)
        np.testing.assert_array_equal(sources, np.arange(block.num_src_nodes))


@pytest.mark.parametrize("weighted, replace", [(False, False), (True, False), (True, True)])
def test_every_sampled_edge_is_an_edge_of_the_graph_and_its_edge_id(graphs, weighted, replace):
    truth = _neighbors(_edges())
    blocks = gpipe.gnn.sample_blocks(graphs["one"], SEEDS, [6, 6], weighted=weighted, replace=replace, seed=4)
    stored = _stored(_edges())
    csr_src, csr_dst = stored.src.to_numpy(), stored.dst.to_numpy()
    for block, (src, dst) in zip(blocks.blocks[::-1], _layers(blocks)):
        assert all(s in truth[d] for s, d in zip(src, dst))
        np.testing.assert_array_equal(csr_src[block.edge_ids], dst)
        np.testing.assert_array_equal(csr_dst[block.edge_ids], src)


def test_a_renumbered_graph_reports_its_own_ids(cpu):
    frame = _edges()
    frame[["src", "dst"]] = frame[["src", "dst"]] * 10 + 7
    g = gpipe.from_edges(frame, partitions=3)
    assert g.id_map is not None
    truth = _neighbors(frame)
    blocks = gpipe.gnn.sample_blocks(g, SEEDS * 10 + 7, [4, 4], seed=2)
    np.testing.assert_array_equal(blocks.output_nodes, SEEDS * 10 + 7)
    for src, dst in _layers(blocks):
        assert src.size and all(s in truth[d] for s, d in zip(src, dst))


def test_a_graph_with_other_than_integer_ids_is_refused(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": ["a", "b"], "dst": ["b", "c"]}), partitions=1)
    with pytest.raises(GpipeValueError, match="gpipe.gnn needs a graph with integer vertex ids; this one's are object"):
        gpipe.gnn.sample_blocks(g, ["a"], [2])


def _chi2_bound(df: int) -> float:
    return stats.chi2.ppf(1 - ALPHA, df)


def test_each_neighbor_is_included_with_probability_fanout_over_degree(graphs):
    """Vertex 0 of the star has 12 neighbors; fanout 4 includes each with p = 1/3. Over T seeds, the inclusion
    counts of a uniform 4-subset have covariance T p (1 - p) d / (d - 1) (I - 11'/d): the scaled statistic is
    chi-square with d - 1 degrees of freedom."""
    d, k, trials = 12, 4, 1500
    counts = np.zeros(d + 1)
    for seed in range(trials):
        blocks = gpipe.gnn.sample_blocks(graphs["star"], [0], [k], seed=seed)
        counts[blocks.input_nodes[blocks.blocks[0].src]] += 1
    p = k / d
    statistic = ((counts[1:] - trials * p) ** 2).sum() * (d - 1) / (trials * p * (1 - p) * d)
    assert counts.sum() == trials * k
    assert statistic < _chi2_bound(d - 1)


@pytest.mark.parametrize("replace, fanout", [(True, 5), (False, 1)])
def test_weighted_picks_are_in_proportion_to_the_edge_weights(graphs, replace, fanout):
    """With replacement every pick, without it the first pick, goes to neighbor j with probability w_j / sum w."""
    d, trials = 12, 1500
    counts = np.zeros(d + 1)
    for seed in range(trials):
        blocks = gpipe.gnn.sample_blocks(graphs["star"], [0], [fanout], weighted=True, replace=replace, seed=seed)
        np.add.at(counts, blocks.input_nodes[blocks.blocks[0].src], 1)
    weights = np.arange(1, d + 1, dtype=float)
    expected = trials * fanout * weights / weights.sum()
    assert stats.chisquare(counts[1:], expected).statistic < _chi2_bound(d - 1)


def _assert_same(a, b):
    np.testing.assert_array_equal(a.input_nodes, b.input_nodes)
    assert (a.num_sampled_nodes, a.num_sampled_edges) == (b.num_sampled_nodes, b.num_sampled_edges)
    for x, y in zip(a.blocks, b.blocks):
        assert (x.num_src_nodes, x.num_dst_nodes) == (y.num_src_nodes, y.num_dst_nodes)
        for name in ("src", "dst", "edge_ids"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name))


CONFIGS = [dict(fanouts=[5, 3]), dict(fanouts=[3, -1, 2]), dict(fanouts=[4, 4], replace=True),
           dict(fanouts=[4, 4], weighted=True), dict(fanouts=[2, 3, 2], weighted=True, replace=True)]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_fused_and_per_hop_runs_give_the_same_blocks(graphs, config):
    fused = gpipe.gnn.sample_blocks(graphs["one"], SEEDS, seed=8, **config)
    _assert_same(fused, gpipe.gnn.sample_blocks(graphs["one"], SEEDS, seed=8, fused=False, **config))
    assert sum(fused.num_sampled_edges) > 0


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_one_and_four_partitions_give_the_same_blocks(graphs, config):
    _assert_same(gpipe.gnn.sample_blocks(graphs["one"], SEEDS, seed=5, **config),
                 gpipe.gnn.sample_blocks(graphs["four"], SEEDS, seed=5, **config))


@pytest.mark.parametrize("weighted", [False, True])
def test_a_hops_picks_are_selects_the_samplings_one_rule(graphs, weighted):
    """Hop 0 of a batch (batch 0) picks each seed's edges as SELECT does its row: stream ``batch * n + vertex`` at
    step 0, the bipartite method; the same picks, in the same order, as SELECT (``gpipe._select.select``) gives."""
    from gpipe import _rng
    from gpipe.gnn._local import local_graph
    from gpipe._select import select

    g = graphs["one"]
    blocks = gpipe.gnn.sample_blocks(g, SEEDS, [6], seed=4, weighted=weighted)
    part = local_graph(g).part
    first, last = part.indptr[SEEDS], part.indptr[SEEDS + 1]
    rows = np.concatenate([np.arange(a, b) for a, b in zip(first, last)])
    bias = part.weights[rows].astype(np.float64) if weighted else np.ones(rows.size)
    offsets = np.concatenate([[0], np.cumsum(last - first)])
    taken, picks, _ = select(bias, offsets, np.full(SEEDS.size, 6), SEEDS.astype(np.int64),
                                            _rng.key(4), 0)
    edges = blocks.blocks[-1]
    np.testing.assert_array_equal(edges.edge_ids, rows[picks])
    np.testing.assert_array_equal(edges.dst, np.repeat(np.arange(SEEDS.size), np.diff(taken)))


def test_another_seed_gives_other_blocks(graphs):
    a, b = (gpipe.gnn.sample_blocks(graphs["one"], SEEDS, [5, 5], seed=s) for s in (1, 2))
    assert not np.array_equal(a.blocks[-1].edge_ids, b.blocks[-1].edge_ids)


@pytest.mark.parametrize("kwargs, message", [
    (dict(fanouts=[]), r"'fanouts' must be a non-empty list of positive ints or -1 \(every neighbor\), got \[\]"),
    (dict(fanouts=[10, 0]), r"'fanouts' must be .*, got \[10, 0\]"),
    (dict(fanouts=[-2]), r"'fanouts' must be .*, got \[-2\]"),
    (dict(fanouts=5), r"'fanouts' must be .*, got 5"),
    (dict(seeds=[1, 300]), r"'seeds' must hold vertices of the graph; 1 do not, e.g. \[300\]"),
    (dict(seeds=[-1]), r"'seeds' must hold vertices of the graph; 1 do not, e.g. \[-1\]"),
    (dict(seeds=[4, 2, 4]), r"'seeds' must be distinct vertices; 1 repeat, e.g. \[4\]"),
    (dict(seeds=[]), r"'seeds' must be a non-empty 1-D array of vertices, got shape \(0,\)"),
    (dict(seed=-1), r"'seed' must be an integer >= 0, got -1"),
    (dict(fused="yes"), r"'fused' must be true or false, got 'yes'"),
])
def test_bad_input_is_refused_naming_the_parameter_and_value(graphs, kwargs, message):
    args = dict(g=graphs["one"], seeds=[1, 2], fanouts=[3, 2]) | kwargs
    with pytest.raises(GpipeValueError, match=message):
        gpipe.gnn.sample_blocks(**args)


def test_weighted_sampling_needs_weights(cpu):
    g = gpipe.from_edges(_edges()[["src", "dst"]], partitions=1, num_vertices=300)
    with pytest.raises(GpipeValueError, match="'weighted' = True needs a graph with edge weights"):
        gpipe.gnn.sample_blocks(g, [1], [2], weighted=True)


@pytest.mark.parametrize("batch_size", [0, -4])
def test_loader_refuses_a_batch_size_below_one(graphs, batch_size):
    with pytest.raises(GpipeValueError, match=f"'batch_size' must be a positive integer, got {batch_size}"):
        gpipe.gnn.NeighborLoader(graphs["one"], SEEDS, [2], batch_size=batch_size)


def test_loader_refuses_features_without_a_row_per_vertex(graphs):
    with pytest.raises(GpipeValueError, match=r"'features' must have a row per vertex \(300\), got \(299, 4\)"):
        gpipe.gnn.NeighborLoader(graphs["one"], SEEDS, [2], batch_size=2, features=np.zeros((299, 4)))


@pytest.mark.parametrize("drop_last, sizes", [(False, [32] * 9 + [12]), (True, [32] * 9)])
def test_loader_covers_the_seeds_once_per_epoch_in_a_new_order(graphs, drop_last, sizes):
    seeds = np.arange(0, 300, 1)
    loader = gpipe.gnn.NeighborLoader(graphs["one"], seeds, [3, 2], batch_size=32, drop_last=drop_last, seed=2)
    epochs = [[b.output_nodes for b in loader] for _ in range(2)]
    assert len(loader) == len(sizes)
    for batches in epochs:
        assert [b.size for b in batches] == sizes
        seen = np.concatenate(batches)
        assert np.unique(seen).size == seen.size and (drop_last or np.array_equal(np.sort(seen), seeds))
    assert not np.array_equal(epochs[0][0], epochs[1][0])
    unshuffled = gpipe.gnn.NeighborLoader(graphs["one"], seeds, [3, 2], batch_size=32, shuffle=False)
    np.testing.assert_array_equal(next(iter(unshuffled)).output_nodes, seeds[:32])


def test_loader_batches_depend_on_the_seed_and_epoch_only(graphs):
    def epoch(loader, number):
        loader.set_epoch(number)
        return list(loader)

    a = gpipe.gnn.NeighborLoader(graphs["one"], SEEDS, [3, 2], batch_size=3, seed=6)
    b = gpipe.gnn.NeighborLoader(graphs["four"], SEEDS, [3, 2], batch_size=3, seed=6, fused=False)
    list(a)  # epoch 0 first: a's epoch 1 is then its next iteration
    for x, y in zip(list(a), epoch(b, 1)):
        _assert_same(x, y)
    first, second = epoch(a, 1), epoch(a, 1)
    for x, y in zip(first, second):
        _assert_same(x, y)
    assert not all(np.array_equal(x.output_nodes, y.output_nodes) for x, y in zip(epoch(a, 0), first))


def _not_installed(monkeypatch, *packages):
    """Make importing each package (and its modules already imported) fail, as where it is not installed."""
    for name in [m for m in list(sys.modules) if m.split(".")[0] in packages] + list(packages):
        monkeypatch.setitem(sys.modules, name, None)


def test_where_torch_cannot_be_imported_the_loader_is_a_plain_iterable_of_len_batches(graphs, monkeypatch):
    _not_installed(monkeypatch, "torch")
    spec = importlib.util.find_spec("gpipe.gnn._loader")
    plain = importlib.util.module_from_spec(spec)  # the loader's module as its first import makes it without torch
    monkeypatch.setitem(sys.modules, spec.name, plain)
    spec.loader.exec_module(plain)
    loader = plain.NeighborLoader(graphs["one"], np.arange(100), [3, 2], batch_size=32, seed=1)
    assert type(loader).__mro__[1:] == (object,) and len(loader) == 4
    batches = iter(loader)
    assert next(batches).output_nodes.size == 32 and [b.output_nodes.size for b in batches] == [32, 32, 4]


def test_importing_gpipe_imports_no_torch():
    """Every Dask worker imports gpipe: torch (2 s and 180 MB) comes only with the loader's first use."""
    code = "import sys, gpipe; gpipe.gnn.sample_blocks; print(sorted({m.split('.')[0] for m in sys.modules} & " \
           "{'torch', 'torch_geometric', 'dgl'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_torch_dataloader_yields_the_loaders_batches_from_this_process_and_from_spawned_workers(graphs):
    data = pytest.importorskip("torch.utils.data")
    loader = gpipe.gnn.NeighborLoader(graphs["one"], np.arange(100), [3, 2], batch_size=16, seed=1)
    assert isinstance(loader, data.IterableDataset)
    loader.set_epoch(2)
    expected = list(loader)
    for workers, context in ((0, None), (2, "spawn")):
        loader.set_epoch(2)
        batches = list(data.DataLoader(loader, batch_size=None, num_workers=workers, multiprocessing_context=context))
        assert len(batches) == len(expected) == len(data.DataLoader(loader, batch_size=None)) == 7, workers
        for got, want in zip(batches, expected):  # the workers' shares, interleaved back in order
            _assert_same(got, want)


def test_a_dataloader_worker_forked_after_numbas_openmp_threads_ran_says_to_spawn(graphs):
    data = pytest.importorskip("torch.utils.data")
    loader = gpipe.gnn.NeighborLoader(graphs["one"], np.arange(100), [3, 2], batch_size=16, seed=1)
    list(loader)  # the shuffle's and the sampler's parallel kernels run here first
    if numba.threading_layer() != "omp":
        pytest.skip(f"numba's threading layer here is {numba.threading_layer()!r}, which survives a fork")
    forked = data.DataLoader(loader, batch_size=None, num_workers=1, multiprocessing_context="fork")
    with pytest.raises(GpipeError, match=r"gpipe.gnn.NeighborLoader cannot run in this process: it was forked from "
                                         r"one whose numba CPU kernels ran on OpenMP threads.*'spawn' or 'forkserver' "
                                         r"\(DataLoader\(\.\.\., multiprocessing_context='spawn'\)\)"):
        list(forked)


@pytest.fixture(scope="module")
def directed(cpu_cluster):
    with cpu_cluster.as_current():
        g = gpipe.generators.rmat(8, seed=3, directed=True, partitions=2)
        yield g
        g.release()


def test_pygs_loader_arguments_sample_what_gpipes_loader_samples_inwards(cpu, directed):
    mask = np.zeros(directed.num_vertices, bool)
    mask[::3] = True
    ported = gpipe.gnn.pyg.NeighborLoader(directed, num_neighbors=[3, 2], input_nodes=mask, batch_size=16,
                                          shuffle=True, seed=4)
    native = gpipe.gnn.NeighborLoader(directed, np.flatnonzero(mask), [3, 2], 16, shuffle=True, seed=4,
                                      edge_dir="in")
    batches = list(gpipe.gnn.NeighborLoader.__iter__(ported))  # the Blocks it hands to_pyg()
    assert len(ported) == len(native) == len(batches) == 6
    for got, want in zip(batches, native):
        _assert_same(got, want)
    defaults = gpipe.gnn.pyg.NeighborLoader(directed, [2])  # PyG's: every vertex, one a batch, in order
    assert (len(defaults), defaults.batch_size, defaults.shuffle) == (directed.num_vertices, 1, False)


def test_dgls_sampler_and_loader_arguments_sample_what_gpipes_loader_samples_inwards(cpu, directed):
    sampler = gpipe.gnn.dgl.NeighborSampler([3, -1], replace=False)  # DGL's order: the last layer's around the seeds
    ported = gpipe.gnn.dgl.DataLoader(directed, np.arange(0, 200, 2), sampler, batch_size=32, drop_last=True, seed=5)
    native = gpipe.gnn.NeighborLoader(directed, np.arange(0, 200, 2), [-1, 3], 32, shuffle=False, drop_last=True,
                                      seed=5, edge_dir="in")
    assert sampler.edge_dir == "in" and len(ported) == len(native) == 3
    for got, want in zip(gpipe.gnn.NeighborLoader.__iter__(ported), native):
        _assert_same(got, want)


def test_the_ported_loaders_say_what_to_install_for_their_batches(cpu, directed, monkeypatch):
    _not_installed(monkeypatch, "torch")
    with pytest.raises(ImportError, match=r"Blocks.to_pyg\(\) needs torch"):
        next(iter(gpipe.gnn.pyg.NeighborLoader(directed, [2], input_nodes=[0, 1])))
    with pytest.raises(ImportError, match=r"Blocks.to_dgl\(\) needs torch"):
        next(iter(gpipe.gnn.dgl.DataLoader(directed, [0, 1], gpipe.gnn.dgl.NeighborSampler([2]))))


@pytest.mark.parametrize("call, message", [
    (lambda g: gpipe.gnn.dgl.NeighborSampler([0]), "'fanouts' must be a non-empty list of positive ints or -1"),
    (lambda g: gpipe.gnn.dgl.NeighborSampler([2], edge_dir="both"), "'edge_dir' must be one of 'out', 'in'"),
    (lambda g: gpipe.gnn.dgl.DataLoader(g, None, {"fanouts": [2]}), "'graph_sampler' must be a "
                                                                    "gpipe.gnn.dgl.NeighborSampler, got dict"),
    (lambda g: gpipe.gnn.pyg.NeighborLoader(g, [2], input_nodes=np.ones(3, bool)),
     r"'input_nodes' as a mask must have an entry per vertex \(256\), got shape \(3,\)"),
])
def test_the_ported_loaders_refuse_bad_input_naming_the_parameter(cpu, directed, call, message):
    with pytest.raises(GpipeValueError, match=message):
        call(directed)


def test_loader_gathers_the_feature_rows_of_the_input_nodes_and_the_labels_of_the_seeds(graphs):
    features = np.random.default_rng(1).random((300, 5)).astype(np.float32)
    labels = np.random.default_rng(2).integers(0, 7, 300)
    loader = gpipe.gnn.NeighborLoader(graphs["one"], SEEDS, [4, 4], batch_size=5, features=features, labels=labels)
    for batch in loader:
        np.testing.assert_array_equal(batch.features, features[batch.input_nodes])
        np.testing.assert_array_equal(batch.labels, labels[batch.output_nodes])
    assert next(iter(gpipe.gnn.NeighborLoader(graphs["one"], SEEDS, [4], batch_size=5))).labels is None


@pytest.mark.parametrize("method, missing", [("to_pyg", "torch"), ("to_dgl", "torch"), ("to_pyg", "torch_geometric"),
                                             ("to_dgl", "dgl")])
def test_adapters_without_their_library_say_what_to_install(graphs, monkeypatch, method, missing):
    if missing != "torch":
        pytest.importorskip("torch")  # asked for first
    _not_installed(monkeypatch, missing)
    blocks = gpipe.gnn.sample_blocks(graphs["one"], SEEDS, [2])
    with pytest.raises(ImportError, match=rf"Blocks.{method}\(\) needs {missing}, which cannot be imported .*"
                                          rf"gpipe\[gnn\]"):
        getattr(blocks, method)()


def test_to_pyg_is_shaped_as_pyg_neighbor_loader_output(graphs):
    pytest.importorskip("torch_geometric")
    blocks = gpipe.gnn.sample_blocks(graphs["one"], SEEDS, [4, 3], seed=2)
    data = blocks.to_pyg()
    assert data.batch_size == SEEDS.size and data.num_nodes == blocks.input_nodes.size
    assert data.num_sampled_nodes == list(blocks.num_sampled_nodes)
    assert data.num_sampled_edges == list(blocks.num_sampled_edges)
    np.testing.assert_array_equal(data.n_id.numpy(), blocks.input_nodes)
    hops = blocks.blocks[::-1]
    np.testing.assert_array_equal(data.edge_index.numpy(), [np.concatenate([b.src for b in hops]),
                                                            np.concatenate([b.dst for b in hops])])
    from torch_geometric.nn import SAGEConv
    import torch

    x = torch.randn(data.num_nodes, 8)
    assert SAGEConv(8, 4)(x, data.edge_index).shape == (data.num_nodes, 4)


def test_to_dgl_gives_blocks_a_sage_stack_takes(graphs):
    pytest.importorskip("dgl")
    import torch
    from dgl.nn import SAGEConv

    blocks = gpipe.gnn.sample_blocks(graphs["one"], SEEDS, [4, 3], seed=2)
    dgl_blocks = blocks.to_dgl()
    h = torch.randn(blocks.input_nodes.size, 8)
    for block in dgl_blocks:
        h = SAGEConv(8, 8, "mean")(block, h)
    assert h.shape == (SEEDS.size, 8)


# -- the acceptance of issue 68: GraphSAGE trained PyG's way over gpipe's loader, on a directed graph ---------------

PLANTED, IN_DEGREE = 600, 5


def _planted(seed: int = 4) -> tuple:
    """A directed graph in which every vertex has 5 in-edges from distinct others; a color (0 or 1) per vertex, one-hot
    in the first 2 of its 8 noisy features; as its label the color most of its in-neighbors have, of which its own
    features and its out-neighbors' say nothing. Returns the edges, the features and the labels."""
    rng = np.random.default_rng(seed)
    src = np.concatenate([rng.choice(np.delete(np.arange(PLANTED), v), IN_DEGREE, replace=False)
                          for v in range(PLANTED)])
    color = rng.integers(0, 2, PLANTED)
    features = rng.normal(0, 0.2, (PLANTED, 8)).astype(np.float32)
    features[np.arange(PLANTED), color] += 1
    labels = (color[src].reshape(PLANTED, IN_DEGREE).sum(axis=1) > IN_DEGREE // 2).astype(np.int64)
    return pd.DataFrame({"src": src, "dst": np.repeat(np.arange(PLANTED), IN_DEGREE)}), features, labels


@pytest.fixture(scope="module")
def planted(cpu_cluster):
    frame, features, labels = _planted()
    with cpu_cluster.as_current():
        g = gpipe.from_edges(frame, directed=True, partitions=2, num_vertices=PLANTED)
        yield g, frame, features, labels
        g.release()


def test_pygs_loader_gives_each_seed_its_in_edges_pointing_from_its_in_neighbors(cpu, planted):
    pytest.importorskip("torch_geometric")
    g, frame, features, labels = planted
    edges = set(zip(frame.src.tolist(), frame.dst.tolist()))
    in_neighbors = frame.groupby("dst")["src"].apply(sorted).to_dict()
    loader = gpipe.gnn.pyg.NeighborLoader(g, num_neighbors=[IN_DEGREE, 3], input_nodes=np.arange(0, PLANTED, 7),
                                          batch_size=16, shuffle=True, edge_dir="in", features=features,
                                          labels=labels)
    for data in loader:
        n_id = data.n_id.numpy()
        src, dst = n_id[data.edge_index.numpy()]  # as the graph's ids; messages flow from row 0 to row 1
        assert set(zip(src.tolist(), dst.tolist())) <= edges, "a sampled edge that is no edge u -> v of the graph"
        first = data.num_sampled_edges[0]  # the first hop's edges: those into the seeds
        for seed in n_id[:data.batch_size]:
            assert sorted(src[:first][dst[:first] == seed].tolist()) == in_neighbors[seed]
        np.testing.assert_array_equal(data.x.numpy(), features[n_id])
        np.testing.assert_array_equal(data.y.numpy(), labels[n_id[:data.batch_size]])


def test_graphsage_trained_pygs_way_over_gpipes_loader_learns_labels_planted_in_the_in_neighbors(cpu, planted):
    pytest.importorskip("torch_geometric")
    import torch
    from torch_geometric.nn import SAGEConv

    g, _, features, labels = planted
    order = np.random.default_rng(5).permutation(PLANTED)
    train, test = order[:420], order[420:]

    def loader(seeds, shuffle):
        return gpipe.gnn.pyg.NeighborLoader(g, num_neighbors=[IN_DEGREE, IN_DEGREE], input_nodes=seeds,
                                            batch_size=64, shuffle=shuffle, edge_dir="in", features=features,
                                            labels=labels, seed=1)

    class GraphSAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = SAGEConv(8, 32), SAGEConv(32, 2)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    def accuracy(model) -> float:
        model.eval()
        with torch.no_grad():
            right = sum(int((model(data.x, data.edge_index)[:data.batch_size].argmax(1) == data.y).sum())
                        for data in loader(test, shuffle=False))
        return right / test.size

    torch.manual_seed(0)
    model = GraphSAGE()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    before, losses, batches = accuracy(model), [], loader(train, shuffle=True)
    for _ in range(8):
        model.train()
        total = 0.0
        for data in batches:  # PyG's loop, as its examples write it
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(data.x, data.edge_index)[:data.batch_size], data.y)
            loss.backward()
            optimizer.step()
            total += loss.item() * data.batch_size
        losses.append(total / train.size)
    after = accuracy(model)
    assert losses[-1] < 0.5 * losses[0], losses
    assert after > 0.85 and after > before + 0.2, (before, after)  # chance: 0.5


# -- run_on_workers: a loader on every worker, over its share of the seeds ----------------------

def _batches(loader, rank, world_size, epochs=2):
    """What a rank saw, comparable with a client loader's: per batch the seeds, the sampled nodes and edges, and
    whether the features and labels are the rows of its nodes."""
    seen = []
    for _ in range(epochs):
        for batch in loader:
            seen.append((batch.output_nodes, batch.input_nodes, batch.num_sampled_edges,
                         batch.blocks[0].edge_ids, batch.features, batch.labels))
    return seen


def _environment(loader, rank, world_size):
    import os

    from distributed import get_worker

    return (get_worker().address, rank, world_size,
            {name: os.environ.get(name) for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")})


def _fails_on_rank_1(loader, rank, world_size):
    if rank == 1:
        raise ArithmeticError("no gradient today")
    return rank


@pytest.mark.parametrize("mode", ["partitioned", "replicated"])
def test_each_rank_gets_the_batches_a_client_loader_gives_for_its_share(cpu, mode):
    g = gpipe.from_edges(_edges(), weight="w", partitions=4 if mode == "partitioned" else None, mode=mode,
                         num_vertices=300)
    rng = np.random.default_rng(4)
    seeds = rng.permutation(300)[:41]  # 20 each for 2 ranks; the 41st is left out
    features, labels = rng.random((300, 3)).astype(np.float32), rng.integers(0, 5, 300)
    args = dict(fanouts=[3, 2], batch_size=6, seed=9, weighted=True, features=features, labels=labels)
    ranks = gpipe.gnn.run_on_workers(_batches, g, seeds, **args)
    assert len(ranks) == 2
    for rank, seen in enumerate(ranks):
        client_loader = gpipe.gnn.NeighborLoader(g, seeds[rank:40:2], **args)
        expected = _batches(client_loader, rank, 2)
        assert len(seen) == len(expected) == 2 * 4
        for got, want in zip(seen, expected):
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(got[4], features[got[1]])
            np.testing.assert_array_equal(got[5], labels[got[0]])
    shares = [np.concatenate([batch[0] for batch in seen[:4]]) for seen in ranks]
    assert sorted(np.concatenate(shares).tolist()) == sorted(seeds[:40].tolist())


def test_ranks_follow_the_worker_addresses_and_find_the_rendezvous_in_the_environment(cpu):
    g = gpipe.from_edges(_edges(), partitions=3, num_vertices=300)
    before = cpu.run(lambda: __import__("os").environ.get("MASTER_PORT"))
    ranks = gpipe.gnn.run_on_workers(_environment, g, np.arange(10), [2], batch_size=4)
    assert [address for address, *_ in ranks] == sorted(cpu.nthreads())
    master = {(env["MASTER_ADDR"], env["MASTER_PORT"]) for *_, env in ranks}
    assert len(master) == 1 and master.pop()[1].isdigit()
    assert [(rank, world, env["RANK"], env["WORLD_SIZE"]) for _, rank, world, env in ranks] == [
        (0, 2, "0", "2"), (1, 2, "1", "2")]
    assert cpu.run(lambda: __import__("os").environ.get("MASTER_PORT")) == before  # restored after the run


def test_a_failing_train_fn_is_reported_with_its_rank(graphs):
    with pytest.raises(gpipe.errors.TaskError, match=r"gnn training failed in rank 1: ArithmeticError\('no gradient"):
        gpipe.gnn.run_on_workers(_fails_on_rank_1, graphs["one"], SEEDS, [2], batch_size=4)


def _trains_until_stopped(loader, rank, world_size, marker):
    """Rank 1 fails at once; rank 0 takes a batch every 0.1 s for 20 s, and marks ``marker`` if it is stopped."""
    import time

    if rank == 1:
        raise ArithmeticError("no gradient today")
    try:
        for _ in range(50):
            for _ in loader:
                time.sleep(0.1)
    except gpipe.GpipeError:
        open(marker, "w").close()
        raise
    return rank


def test_a_failing_rank_stops_the_others_at_their_next_batch(graphs, tmp_path):
    marker = tmp_path / "stopped"
    with pytest.raises(gpipe.errors.TaskError, match=r"gnn training failed in rank 1: ArithmeticError"):
        gpipe.gnn.run_on_workers(_trains_until_stopped, graphs["one"], SEEDS, [2], batch_size=1,
                                 kwargs={"marker": str(marker)})
    for _ in range(50):  # 5 s; left running, rank 0 would keep its worker busy for 20 s
        if marker.exists():
            break
        time.sleep(0.1)
    assert marker.exists(), "rank 0 went on training after rank 1 failed"


def _rank(loader, rank, world_size):
    return rank


def _exits_on_rank_1(loader, rank, world_size):
    if rank == 1:
        raise SystemExit(3)
    return rank


def _returns_a_lock(loader, rank, world_size):
    import threading

    return threading.Lock() if rank == 0 else rank


@pytest.mark.parametrize("train_fn, message", [
    (_exits_on_rank_1, r"gnn training failed in rank 1: SystemExit\(3\)"),
    (_returns_a_lock, r"gnn training failed in rank 0: train_fn's result cannot be pickled to reach the client: "
                      r".*lock"),
])
def test_a_train_fn_that_exits_or_returns_what_cannot_be_sent_is_a_task_error_naming_its_rank(cpu, graphs,
                                                                                                  train_fn, message):
    workers = sorted(cpu.nthreads())
    with pytest.raises(gpipe.errors.TaskError, match=message):
        gpipe.gnn.run_on_workers(train_fn, graphs["one"], SEEDS, [2], batch_size=4)
    assert sorted(cpu.nthreads()) == workers  # no worker was lost, nor the graph
    assert gpipe.gnn.run_on_workers(_rank, graphs["one"], SEEDS, [2], batch_size=4) == [0, 1]


@pytest.mark.parametrize("kwargs, message", [
    (dict(train_fn="train"), r"'train_fn' must be callable, got 'train'"),
    (dict(train_fn=lambda loader, rank, world_size, lock=__import__("threading").Lock(): 0),
     r"'train_fn' must be picklable \(by cloudpickle\) to reach the workers"),
    (dict(kwargs={"rank": 3}), r"'kwargs' must not hold loader, rank, world_size \(run_on_workers gives them\), "
                               r"got 'rank'"),
    (dict(kwargs=[("lr", 0.1)]), r"'kwargs' must be a mapping of keys to values, got \[\('lr', 0.1\)\]"),
    (dict(kwargs={1: 0.1}), r"'kwargs' must map argument names to values, got the key 1"),
    (dict(seeds=[7]), r"'seeds' must hold at least one vertex per worker \(2\), got 1"),
    (dict(batch_size=0), r"'batch_size' must be a positive integer, got 0"),
    (dict(fanouts=[0]), r"'fanouts' must be .*, got \[0\]"),
    (dict(labels=np.zeros(299)), r"'labels' must have a row per vertex \(300\), got \(299,\)"),
])
def test_run_on_workers_refuses_bad_input_naming_the_parameter(graphs, kwargs, message):
    args = dict(train_fn=_batches, g=graphs["one"], seeds=SEEDS, fanouts=[2], batch_size=4) | kwargs
    with pytest.raises(GpipeValueError, match=message):
        gpipe.gnn.run_on_workers(**args)
