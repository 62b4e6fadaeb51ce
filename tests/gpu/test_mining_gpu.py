"""gpipe.mining on the GPU against the CPU twin: the same counts and the same cliques (run with -m gpu)."""

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.backend import gpu_problem

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)


def _cliques(client, k, **budgets):
    with client.as_current():
        g = gpipe.generators.rmat(scale=12, edge_factor=8, seed=6, mode="replicated")
        return gpipe.mining.list_cliques(g, k, **budgets)


@pytest.mark.parametrize("k", [3, 4, 5])
def test_cliques_on_gpu_equal_cpu(gpu_cluster, cpu_cluster, k):
    gpu, cpu = _cliques(gpu_cluster, k), _cliques(cpu_cluster, k)
    assert (gpu.stats["device"], cpu.stats["device"]) == ("gpu", "cpu")
    np.testing.assert_array_equal(gpu.embeddings, cpu.embeddings)
    assert gpu.count == cpu.count > 0


def test_gpu_table_beyond_its_budgets_spills_and_finds_the_same_cliques(gpu_cluster):
    in_memory, spilled = _cliques(gpu_cluster, 4), _cliques(gpu_cluster, 4, device_budget="64 kB",
                                                            host_budget="256 kB")
    np.testing.assert_array_equal(spilled.embeddings, in_memory.embeddings)
    assert spilled.stats["bytes"]["disk"] > 0 and spilled.stats["spilled_bytes"] > 0


@pytest.mark.parametrize("induced", [False, True])
def test_matches_on_gpu_equal_cpu(gpu_cluster, cpu_cluster, induced):
    diamond = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]

    def matches(client):
        with client.as_current():
            g = gpipe.generators.rmat(scale=10, edge_factor=8, seed=6, mode="replicated")
            return gpipe.mining.match(g, diamond, induced=induced, embeddings=True)

    gpu, cpu = matches(gpu_cluster), matches(cpu_cluster)
    np.testing.assert_array_equal(gpu.embeddings, cpu.embeddings)
    assert gpu.count == cpu.count > 0


@pytest.mark.parametrize("max_edges, support", [(3, 20), (4, 40)])
def test_frequent_patterns_on_gpu_equal_cpu(gpu_cluster, cpu_cluster, max_edges, support):
    """The existence-check kernel against its CPU twin, through the whole FPM run."""

    def patterns(client):
        with client.as_current():
            g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=6, mode="replicated")
            labels = np.random.default_rng(6).integers(0, 4, g.num_vertices)
            return gpipe.mining.frequent_patterns(g, max_edges, support, labels=labels)

    gpu, cpu = patterns(gpu_cluster), patterns(cpu_cluster)
    assert (gpu.stats["device"], cpu.stats["device"]) == ("gpu", "cpu")
    pd.testing.assert_frame_equal(gpu.patterns, cpu.patterns)
    assert gpu.stats["checks"] == cpu.stats["checks"] and (gpu.patterns["size"] == max_edges).any()


@pytest.mark.parametrize("partitions", [None, 3])
def test_a_multigraph_on_gpu_is_mined_as_the_simple_graph_on_cpu(gpu_cluster, cpu_cluster, partitions):
    """Repeated edges, dropped where the GPU worker reads the rows (cupy), count once, as on the simple graph."""
    rng = np.random.default_rng(7)
    src, dst = rng.integers(0, 150, (2, 2500))
    edges = pd.DataFrame({"src": src, "dst": dst})
    repeated = pd.concat([edges, edges.rename(columns={"src": "dst", "dst": "src"}), edges[::3]])
    layout = {"mode": "replicated"} if partitions is None else {"mode": "partitioned", "partitions": partitions}
    diamond = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]

    def mined(client, frame, keep_duplicates):
        with client.as_current():
            g = gpipe.from_edges(frame, keep_duplicates=keep_duplicates, num_vertices=150, **layout)
            found = [gpipe.mining.list_cliques(g, k) for k in (3, 4)]
            found.append(gpipe.mining.match(g, diamond, induced=True, embeddings=True))
            labels = np.arange(150) % 3
            fpm = gpipe.mining.frequent_patterns(g, 3, 5, labels=labels) if partitions is None else None
            return found, fpm

    (gpu, gpu_fpm), (cpu, cpu_fpm) = mined(gpu_cluster, repeated, True), mined(cpu_cluster, edges, False)
    for on_gpu, on_cpu in zip(gpu, cpu):
        assert on_gpu.stats["device"] == "gpu" and on_gpu.count == on_cpu.count > 0
        assert sorted(map(tuple, on_gpu.embeddings.tolist())) == sorted(map(tuple, on_cpu.embeddings.tolist()))
        assert on_gpu.stats["embeddings"] == on_cpu.stats["embeddings"]
    if partitions is None:
        pd.testing.assert_frame_equal(gpu_fpm.patterns, cpu_fpm.patterns)


def test_canonical_forms_on_the_gpu_are_the_cpu_twins():
    import itertools

    import cupy as cp

    from gpipe.mining._patterns import MAX_VERTICES, canonical_forms, pack

    rng = np.random.default_rng(3)
    pairs = list(itertools.combinations(range(MAX_VERTICES), 2))
    raw = []
    for _ in range(20_000):
        n = int(rng.integers(2, MAX_VERTICES + 1))
        edges = frozenset(p for p in pairs if max(p) < n and rng.random() < 0.5) or frozenset({(0, 1)})
        raw.append(pack(tuple(int(v) for v in rng.integers(0, 1024, n) % int(rng.choice([2, 1024]))), edges))
    raw = np.array(raw, np.int64)
    on_cpu, on_gpu = canonical_forms(np, raw), canonical_forms(cp, cp.asarray(raw))
    for cpu, gpu in zip(on_cpu, on_gpu):
        assert isinstance(gpu, cp.ndarray)
        np.testing.assert_array_equal(cp.asnumpy(gpu), cpu)


@pytest.mark.parametrize("pattern", [[(0, 1), (1, 2), (2, 0), (2, 3), (3, 4)], [(0, 1), (0, 2), (0, 3), (0, 4)],
                                     [(0, 1), (1, 2), (2, 3), (3, 0)], [(0, 1), (1, 2), (2, 3)]])
def test_match_counts_on_gpu_equal_cpu_with_and_without_a_leaf_counted(gpu_cluster, cpu_cluster, pattern):
    def count(client):
        with client.as_current():
            g = gpipe.generators.rmat(scale=10, edge_factor=8, seed=6, mode="replicated")
            return gpipe.mining.match(g, pattern)

    gpu, cpu = count(gpu_cluster), count(cpu_cluster)
    assert (gpu.stats["device"], cpu.stats["device"]) == ("gpu", "cpu")
    assert gpu.count == cpu.count > 0 and gpu.stats["embeddings"] == cpu.stats["embeddings"]
