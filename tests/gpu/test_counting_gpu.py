"""The counting estimator's CUDA kernel against its CPU twin: the same sums for the same seed (-m gpu on a GPU host)."""

from pathlib import Path

import numpy as np
import pytest

import gpipe
from gpipe import _rng
from gpipe.backend import gpu_problem
from gpipe.counting import Query

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)

import cupy  # noqa: E402
from gpipe.counting._candidates import build  # noqa: E402
from gpipe.counting._estimate import ESTIMATE  # noqa: E402

HPRD = Path(__file__).resolve().parents[3] / "shared" / "data" / "hprd"
QUERIES = ["query_dense_16_1", "query_dense_16_2", "query_dense_16_104"]


@pytest.fixture(scope="module")
def gpu_cluster():
    with gpipe.connect(n_workers=1, device="gpu", dashboard_address=":0") as client:
        yield client


def csr(labels, pairs):
    src, dst = np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]])
    order = np.lexsort((dst, src))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=len(labels)))]).astype(np.int64)
    return indptr, dst[order].astype(np.int64), labels


def hprd_inputs(name):
    from gpipe.counting._inputs import _parse

    return (*csr(*_parse(HPRD / "HPRD.graph")), Query.from_file(HPRD / "queries" / f"{name}.graph"))


def dense_inputs():
    """Local candidate lists of about 100: streamed over the warp, unlike HPRD's short ones."""
    rng = np.random.default_rng(4)
    pairs = np.array([(u, v) for u in range(400) for v in range(u + 1, 400) if rng.random() < 0.25], np.int64)
    return (*csr(rng.integers(2, size=400), pairs), Query.from_edges([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)],
                                                                     [0, 0, 1, 1]))


def hub_inputs():
    """Hubs adjacent to every vertex: local candidate lists of about 1,270, streamed over the warp (40 a lane)."""
    rng = np.random.default_rng(6)
    n, hubs = 3000, 8
    pairs = {(u, v) for u in range(hubs) for v in range(u + 1, n)}
    pairs |= {(min(u, v), max(u, v)) for u, v in rng.integers(hubs, n, size=(6000, 2)) if u != v}
    labels = rng.integers(2, size=n)
    labels[:hubs] = 0
    return (*csr(labels, np.array(sorted(pairs), np.int64)), Query.from_edges([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)],
                                                                              [0, 0, 1, 1]))


INPUTS = {**{name: lambda name=name: hprd_inputs(name) for name in QUERIES}, "dense": dense_inputs,
          "hubs": hub_inputs}
CASES = {name: lambda inputs=inputs: build(*inputs()) for name, inputs in INPUTS.items()}


@pytest.mark.parametrize("case", sorted(INPUTS))
@pytest.mark.parametrize("ids", [np.int32, np.int64])
def test_a_candidate_graph_built_on_the_gpu_is_the_cpu_twins(case, ids):
    """The filters, the refinement's passes (in place, threads reading each other's drops) and the candidate edges
    on the device give the CPU twins' candidate graph, array for array, left on the device."""
    indptr, indices, labels, query = INPUTS[case]()
    want = build(indptr, indices.astype(ids), labels, query)
    got = build(cupy.asarray(indptr), cupy.asarray(indices, ids), cupy.asarray(labels), query)
    assert not want.empty and want.num_edges > 0
    assert np.array_equal(got.order, want.order)
    for name, a in want.arrays().items():
        b = getattr(got, name)
        assert isinstance(b, cupy.ndarray) and b.dtype == a.dtype and np.array_equal(b.get(), a), name


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("inherit", [0, 1])
def test_count_estimate_cuda_equals_cpu_twin(case, alpha, inherit):
    """Each group's sum (lanes added in order) and valid count, bit for bit, groups starting past 0."""
    cg = CASES[case]()
    out = {}
    for x in (np, cupy):
        sums, valid = x.zeros(4096, x.float64), x.zeros(4096, x.int32)
        ESTIMATE.launch(**{k: x.asarray(a) for k, a in cg.arrays().items()}, k=cg.num_positions,
                        key=_rng.key(5), alpha=alpha, inherit=inherit, first_group=1000, groups=4096,
                        group_sum=sums, group_valid=valid)
        out[x.__name__] = (cupy.asnumpy(sums), cupy.asnumpy(valid))
    np.testing.assert_array_equal(out["cupy"][0], out["numpy"][0])
    np.testing.assert_array_equal(out["cupy"][1], out["numpy"][1])
    assert out["numpy"][1].sum() > 0


def test_a_setting_above_the_kernels_launch_bounds_launches_blocks_of_the_bound():
    """gp_count_estimate allows 256 threads a block (__launch_bounds__): a setting of 1024 must not fail its launch."""
    import dask

    cg = CASES["hubs"]()
    out = {}
    for x in (np, cupy):
        sums, valid = x.zeros(512, x.float64), x.zeros(512, x.int32)
        with dask.config.set({"gpipe.kernels.threads-per-block": 1024}):
            ESTIMATE.launch(**{k: x.asarray(a) for k, a in cg.arrays().items()}, k=cg.num_positions,
                            key=_rng.key(3), alpha=1.0, inherit=1, first_group=0, groups=512, group_sum=sums,
                            group_valid=valid)
        out[x.__name__] = (cupy.asnumpy(sums), cupy.asnumpy(valid))
    np.testing.assert_array_equal(out["cupy"][0], out["numpy"][0])
    np.testing.assert_array_equal(out["cupy"][1], out["numpy"][1])


def _estimates_on_gpu_and_cpu(gpu_cluster, cpu_cluster, methods, samples: int, seed: int) -> list[list]:
    """HPRD's dense 16-vertex query estimated by each of ``methods`` on the GPU cluster, then on the CPU one."""
    query = Query.from_file(HPRD / "queries" / "query_dense_16_1.graph")
    results = []
    for client in (gpu_cluster, cpu_cluster):
        with client.as_current():
            g = gpipe.counting.read_graph(HPRD / "HPRD.graph")
            results.append([gpipe.counting.estimate(g, query, method=m, samples=samples, seed=seed)
                            for m in methods])
    return results


LAYOUTS = [{}, {"mode": "partitioned", "partitions": 3}]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_candidate_graphs_on_gpu_workers_are_the_cpu_clusters_on_every_layout(gpu_cluster, cpu_cluster, layout):
    """HPRD's dense 16-vertex query, replicated and in partitions (rows lo.. of each, refined against the others'
    candidates in rounds): the GPU worker's candidate graph is the CPU cluster's."""
    query = Query.from_file(HPRD / "queries" / "query_dense_16_2.graph")
    got = []
    for client in (gpu_cluster, cpu_cluster):
        with client.as_current():
            g = gpipe.counting.read_graph(HPRD / "HPRD.graph", **layout)
            got.append(gpipe.counting.candidates(g, query))
    assert got[1].num_edges > 0
    for name in ["order", *got[1].arrays()]:
        a, b = getattr(got[0], name), getattr(got[1], name)
        assert isinstance(a, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b), name


def test_estimate_on_gpu_workers_equals_cpu(gpu_cluster, cpu_cluster):
    results = _estimates_on_gpu_and_cpu(gpu_cluster, cpu_cluster, ("wanderjoin", "alley", "partial_refine"),
                                        100_000, 2)
    for gpu, cpu in zip(*results):
        assert (gpu.estimate, gpu.std_error, gpu.valid_fraction) == (cpu.estimate, cpu.std_error, cpu.valid_fraction)


def _numpy_alley(table):
    """Alley's refine written in numpy, as the docstring allows: it gets cupy columns on a GPU worker."""
    extends = table["extends"]
    return np.asarray(extends.get() if hasattr(extends, "get") else extends)


def test_a_refine_in_numpy_runs_on_gpu_workers_as_on_cpu(gpu_cluster, cpu_cluster):
    [gpu], [cpu] = _estimates_on_gpu_and_cpu(gpu_cluster, cpu_cluster, (_numpy_alley,), 20_000, 3)
    assert gpu.estimate > 0 and (gpu.estimate, gpu.std_error) == (cpu.estimate, cpu.std_error)
