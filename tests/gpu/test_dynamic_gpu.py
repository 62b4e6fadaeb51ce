"""The sampling space of dynamic graphs and the walks on them: CUDA against the CPU twins (run with -m gpu on a GPU
host)."""

import re

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.backend import gpu_problem
from gpipe.dynamic import DynamicGraph, SamplingSpace
from gpipe.dynamic._kernels import KINDS
from test_dynamic import as_it_is, assert_as_it_was, batch_across, fail_here, heal_here, rmat_dynamic

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)


@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_dynamic_sample_cuda_equals_cpu_twin(scale):
    rng = np.random.default_rng(5)
    n, m = 50, 4000
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    weight = rng.integers(1, 2**30, m) if scale == 1.0 else np.round(rng.uniform(0.01, 50, m), 4)
    spaces = [SamplingSpace(n, device=device, scale=scale) for device in ("gpu", "cpu")]
    for space in spaces:
        space.apply(["insert"] * m, src, dst, weight)
        space.apply(["delete"] * 500 + ["update"] * 500, src[:1000], dst[:1000], [None] * 500 + [7.5] * 500)
    vertices = rng.integers(0, n + 5, 100_000) % n
    gpu, cpu = (space.sample(vertices, seed=9, streams=np.arange(100_000) * 3) for space in spaces)
    assert (cpu >= 0).any()
    np.testing.assert_array_equal(gpu.get(), cpu)


@pytest.mark.parametrize("dense_fraction", [0.4, 1e-4])
def test_dynamic_sample_cuda_equals_cpu_twin_where_tries_are_rejected_and_biases_extreme(dense_fraction):
    """Spaces built on the device and on the host (the power of two scaling each vertex's biases) and sampled: groups
    whose tries keep an edge 1 time in 1000 (drawn exactly after 256 tries, a dense decimal group and, from a dense
    fraction of 1e-4, a dense group of bit 0; a listed decimal group now and then), and biases from 5e-324 to
    1.8e308."""
    rng = np.random.default_rng(12)
    rows = []
    for v in range(5):  # 2 edges of bias 1, 2000 of decimal parts around 0.001
        rows += [(v, u, 1.0) for u in (1, 2)] + [(v, 3 + j % 7, 0.0005 * (1 + j % 3)) for j in range(2000)]
    for v in range(5, 8):  # 3000 of bias 2, 1900 of 0.001: a listed decimal group
        rows += [(v, j % 11, 2.0) for j in range(3000)] + [(v, 20 + j % 5, 0.001) for j in range(1900)]
    for v in range(8, 40):  # 50 biases log-uniform over float64's whole range
        rows += [(v, int(u), 2.0 ** e) for u, e in zip(rng.integers(0, 40, 50), rng.uniform(-1074, 1023.99, 50))]
    src, dst, weight = (np.array(column) for column in zip(*rows))
    spaces = [SamplingSpace(40, device=device, dense_fraction=dense_fraction) for device in ("gpu", "cpu")]
    for space in spaces:
        space.apply(["insert"] * len(src), src, dst, weight)
    gpu, cpu = spaces
    for v in range(40):
        for name, column in cpu.groups(v).items():
            np.testing.assert_array_equal(gpu.groups(v)[name], column)
        np.testing.assert_array_equal(gpu.probabilities(v), cpu.probabilities(v))
    vertices = rng.integers(0, 40, 200_000)
    drawn = [space.sample(vertices, seed=4, streams=np.arange(200_000)) for space in spaces]
    np.testing.assert_array_equal(drawn[0].get(), drawn[1])


def _mixed_batch(rng, src, dst, count):
    """``count`` valid deletes, updates and inserts in random order, after the edges ``src -> dst``: each delete
    names a distinct copy, each update an edge no delete names."""
    copies = rng.permutation(len(src))
    deleted = copies[:count]
    gone = set(zip(src[deleted].tolist(), dst[deleted].tolist()))
    updated = np.array([i for i in copies[count:] if (src[i], dst[i]) not in gone][:count])
    new_src, new_dst = rng.integers(0, len(src) // 10, count), rng.integers(0, 60, count)
    op = np.array(["delete"] * count + ["update"] * len(updated) + ["insert"] * count)
    s = np.concatenate([src[deleted], src[updated], new_src])
    d = np.concatenate([dst[deleted], dst[updated], new_dst])
    w = np.concatenate([np.ones(count), 2 ** rng.uniform(0, 40, len(updated)), rng.uniform(0.01, 9, count)])
    order = rng.permutation(len(op))
    return op[order], s[order], d[order], w[order]


@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_a_batch_applied_on_the_gpu_builds_the_cpu_twins_space_to_the_bit(scale):
    rng = np.random.default_rng(8)
    n, m = 400, 60_000
    hub = rng.random(m) < 0.5  # three vertices with ~10,000 edges each: many rounds of a warp
    src = np.where(hub, rng.integers(0, 3, m), rng.integers(0, n, m))
    dst = rng.integers(0, 60, m)  # duplicated edges
    weight = np.floor(2 ** rng.uniform(0, 40, m)) if scale == 1.0 else np.round(rng.uniform(0.01, 50, m), 4)
    spaces = [SamplingSpace(n, device=device, scale=scale) for device in ("gpu", "cpu")]
    batch = _mixed_batch(rng, src, dst, 5000)
    for space in spaces:
        space.apply(["insert"] * m, src, dst, weight)
        space.apply(*batch)
    views = []
    for size in (1, 2, 7, 40, 1, 120, 3, 85):  # streaming-sized batches: staged and built on the host, then copied
        now_src, now_dst, _ = spaces[1].all_edges()
        small = _mixed_batch(rng, now_src, now_dst, size)
        for space in spaces:
            space.apply(*small)
        if size == 40:  # a version pinned between them, then released: its blocks kept, then reused
            views.append(spaces[0].view(0, 0, n, np.array([0, n])))
        elif views and size == 3:
            views.clear()
    for space in spaces:
        with pytest.raises(gpipe.GpipeValueError, match=re.escape("update 2: cannot delete edge (5, 999)")):
            space.apply(["insert", "update", "delete", "delete"], [9, 1, 5, 0], [2, int(dst[src == 1][0]), 999, 998],
                        [1, 2, None, None])
    gpu, cpu = spaces
    assert gpu.num_edges == cpu.num_edges == m and gpu.version == cpu.version == 10
    kinds = set()
    for v in range(n + 5):
        for a, b in zip(gpu.edges(v) + (gpu.neighbors(v),), cpu.edges(v) + (cpu.neighbors(v),)):
            np.testing.assert_array_equal(a, b)
        groups = gpu.groups(v)
        for name, column in cpu.groups(v).items():
            np.testing.assert_array_equal(groups[name], column)
        np.testing.assert_array_equal(gpu.probabilities(v), cpu.probabilities(v))  # listed members too
        kinds |= set(groups["group_kind"].tolist())
    assert kinds == set(KINDS.values())


@pytest.mark.parametrize("walk, kwargs", [
    (gpipe.walks.deepwalk, {}),
    (gpipe.walks.deepwalk, {"weighted": True}),
    (gpipe.walks.with_jump, {"jump": 0.2, "weighted": True}),
    (gpipe.walks.ppr, {"start": list(range(0, 200, 3)), "restart": 0.2, "walks_per_source": 3, "weighted": True}),
    (gpipe.walks.node2vec, {"p": 0.5, "q": 2.0}),
    (gpipe.walks.node2vec, {"p": 2.0, "q": 0.5, "weighted": True}),
    (gpipe.walks.node2vec, {"p": 0.01, "q": 50.0, "weighted": True}),  # the exact draw after 256 rejections
])
@pytest.mark.parametrize("partitions, scale", [(1, 1.0), (4, 10.0)])
def test_dynamic_walks_cuda_equal_cpu_twin(gpu_cluster, cpu_cluster, walk, kwargs, partitions, scale):
    rng = np.random.default_rng(partitions)
    n, m = 200, 3000
    weight = rng.integers(1, 2**20, m) if scale == 1.0 else np.round(rng.uniform(0.01, 50, m), 4)
    frame = pd.DataFrame({"src": rng.integers(0, n, m), "dst": rng.integers(0, n, m), "weight": weight})
    src, dst = rng.integers(0, n + 10, 2000), rng.integers(0, n + 10, 2000)  # new vertices too
    inserted = np.round(rng.uniform(0.5, 2**12, 2000), 3)

    def run():
        g = gpipe.from_edges(frame, weight="weight", directed=True, partitions=partitions, mode="partitioned")
        dg = DynamicGraph.from_graph(g, scale=scale)
        dg.insert_edges(src, dst, inserted)
        gone = dg.edges().iloc[::7]
        dg.delete_edges(gone.src, gone.dst)
        changed = dg.edges().iloc[3::11]
        dg.update_weights(changed.src, changed.dst, np.full(len(changed), 7.25))
        return walk(dg, length=30, seed=13, **kwargs).compute()

    with gpu_cluster.as_current():
        gpu = run()
    with cpu_cluster.as_current():
        cpu = run()
    assert (cpu[:, 1:] >= 0).any()
    np.testing.assert_array_equal(gpu, cpu)


def test_an_id_past_what_the_gpu_workers_can_hold_is_refused_naming_it_and_changes_nothing(gpu_cluster):
    with gpu_cluster.as_current():
        dg = rmat_dynamic()
        before = as_it_is(dg)
        with pytest.raises(gpipe.GpipeValueError, match=re.escape("update 0: vertex id 1000000000000") +
                           ".* more than the .* of device memory of worker "):
            dg.insert_edges([2], [10**12])
        assert_as_it_was(dg, before)


@pytest.mark.parametrize("one_partition", [False, True], ids=["across partitions", "one partition"])
@pytest.mark.parametrize("inserts", [2, 300])  # staged on the host and copied, or played on the device
@pytest.mark.parametrize("phase", ["stage", "commit"])
def test_a_batch_that_fails_on_a_gpu_worker_half_way_leaves_the_graph_as_it_was(gpu_cluster, phase, inserts,
                                                                                 one_partition):
    with gpu_cluster.as_current():
        dg = rmat_dynamic()
        last = dg._graph.num_partitions - 1
        ops, src, dst, weight, added = batch_across(dg, inserts, one_partition)
        before = as_it_is(dg)
        gpu_cluster.run(fail_here, dg.graph_id, last, phase)
        named = "apply" if one_partition else phase  # one partition's batch is staged and committed in one call
        try:
            with pytest.raises(gpipe.TaskError, match=f"dynamic {named} failed in partition {last}: MemoryError"):
                dg.apply(ops, src, dst, weight)
            assert_as_it_was(dg, before)
        finally:
            gpu_cluster.run(heal_here, dg.graph_id, last)
        dg.apply(ops, src, dst, weight)
        assert dg.version == before[2] + 1 and dg.num_edges == before[1] + added
