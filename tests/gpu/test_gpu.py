"""CUDA kernels against their CPU twins: same bits for the same seed (run with -m gpu on a GPU host)."""

import importlib.util

import numpy as np
import pytest

import gpipe
from gpipe import _rng
from gpipe.backend import gpu_count, gpu_problem
from helpers import hub_partition, routed_first_order

pytestmark = pytest.mark.gpu

if gpu_problem() is not None:
    pytest.skip(f"no usable GPU: {gpu_problem()}", allow_module_level=True)

import cupy  # noqa: E402


def test_rng_bits_match_cpu_twin():
    """Both words of each Philox block (the second is ``below``'s retry), ids past 32 bits, steps up to 2**32 - 1."""
    ids = np.arange(0, 1 << 16, 7, dtype=np.int64) * 1_000_003 * 1_000_003
    key = _rng.key(42)
    for step, draw in [(0, 0), (5, 1), (79, np.arange(ids.size) % 5), (2**32 - 1, 2**32 - 1)]:
        gpu_draw = draw if np.isscalar(draw) else cupy.asarray(draw)
        np.testing.assert_array_equal(_rng.draws(cupy, key, cupy.asarray(ids), step, gpu_draw).get(),
                                      _rng.draws(np, key, ids, step, draw))


def _on(client, func):
    with client.as_current():
        return func()


@pytest.mark.parametrize("weighted", [False, True])
def test_rmat_graph_matches_cpu(gpu_cluster, cpu_cluster, weighted, tmp_path):
    def build():
        g = gpipe.generators.rmat(scale=12, edge_factor=8, seed=3, weighted=weighted, partitions=3)
        return g.device, g.num_edges, g.degrees().to_numpy(), g.to_parquet(tmp_path / g.device)

    gdev, gm, gdeg, gpath = _on(gpu_cluster, build)
    cdev, cm, cdeg, cpath = _on(cpu_cluster, build)
    assert (gdev, cdev) == ("gpu", "cpu")
    assert gm == cm
    np.testing.assert_array_equal(gdeg, cdeg)
    import pandas as pd

    for part in range(3):
        name = f"part-{part:05d}.parquet"
        pd.testing.assert_frame_equal(pd.read_parquet(f"{gpath}/{name}"), pd.read_parquet(f"{cpath}/{name}"))


def test_map_blocks_hands_each_block_over_as_a_device_array(gpu_cluster):
    def kind(block):
        has_torch = importlib.util.find_spec("torch") is not None
        if has_torch:  # zero-copy into torch, on the block's own GPU
            import torch

            tensor = torch.from_dlpack(block)
            assert tensor.is_cuda and tensor.data_ptr() == block.data.ptr
        return type(block).__module__.split(".")[0], has_torch, cupy.asnumpy(block)

    with gpu_cluster.as_current():
        g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=2)
        w = gpipe.walks.deepwalk(g, length=8, seed=4)
        blocks = gpu_cluster.gather(w.map_blocks(kind))
        walks = w.compute()
    assert {(module, torch) for module, torch, _ in blocks} <= {("cupy", True), ("cupy", False)}
    np.testing.assert_array_equal(np.concatenate([b for _, _, b in blocks]), walks)


def test_a_samples_map_blocks_hands_its_columns_over_on_the_device(gpu_cluster):
    import pandas as pd

    with gpu_cluster.as_current():
        g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=2)
        s = gpipe.sampling.neighbor(g, seeds=np.arange(0, 1000, 3), fanouts=4, depth=2, seed=1)
        blocks = gpu_cluster.gather(s.map_blocks(lambda c: ({type(v).__module__.split(".")[0] for v in c.values()},
                                                            {k: cupy.asnumpy(v) for k, v in c.items()})))
        edges = s.compute()
    assert set().union(*(kinds for kinds, _ in blocks)) == {"cupy"}
    frame = pd.concat([pd.DataFrame(columns) for _, columns in blocks], ignore_index=True)
    pd.testing.assert_frame_equal(frame, edges, check_dtype=False)


@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_deepwalk_cuda_equals_cpu_twin(gpu_cluster, cpu_cluster, partitions):
    def walk():
        g = gpipe.generators.rmat(scale=11, edge_factor=4, seed=9, partitions=partitions)
        w = gpipe.walks.deepwalk(g, length=40, walks_per_vertex=2, seed=11)
        return w.stats["device"], w.compute()

    gdev, gwalks = _on(gpu_cluster, walk)
    cdev, cwalks = _on(cpu_cluster, walk)
    assert (gdev, cdev) == ("gpu", "cpu")
    assert gwalks.shape == (2 * 2048, 41)
    np.testing.assert_array_equal(gwalks, cwalks)


@pytest.mark.parametrize("threads", [256, 100])  # 100: a block's last warp is not whole
@pytest.mark.parametrize("teleport, alpha, weighted", [(0, 0.0, False), (0, 0.0, True), (2, 0.3, False)])
@pytest.mark.parametrize("ranks", [0, 3])  # every walker writes pieces; those of 4 blocks in 10 write to rows
@pytest.mark.parametrize("local", [(1, 1, 1), (0, 1, 0), (0, 0, 0)])  # all here; its own; none (no carrying)
def test_the_routed_first_order_advance_cuda_equals_cpu_twin(teleport, alpha, weighted, threads, ranks, local):
    """Each walker's vertices (from its row or its pieces, then the cells it carries on), movers (in the order of
    walk ids: the kernel writes them where its reservations land) and counts; on a partition most walkers stay in,
    so some stop at STAGE."""
    import dask

    with dask.config.set({"gpipe.kernels.threads-per-block": threads}):
        gpu = routed_first_order(cupy, teleport, alpha, 5, 300, weighted, ranks, local)
    cpu = routed_first_order(np, teleport, alpha, 5, 300, weighted, ranks, local)
    np.testing.assert_array_equal(gpu["counts"], cpu["counts"])
    for g, c in zip(gpu["vertices"], cpu["vertices"], strict=True):
        np.testing.assert_array_equal(g, c)
    for name in cpu["movers"]:
        np.testing.assert_array_equal(gpu["movers"][name], cpu["movers"][name], err_msg=name)
    for g, c in zip(gpu["carries"], cpu["carries"], strict=True):
        np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("walk, kwargs", [
    (gpipe.walks.deepwalk, {"weighted": True}),
    (gpipe.walks.node2vec, {"p": 0.5, "q": 2.0}),
    (gpipe.walks.node2vec, {"p": 2.0, "q": 0.25, "weighted": True}),
    (gpipe.walks.node2vec, {"p": 1e4, "q": 1e-4, "weighted": True}),  # many steps drawn exactly, t borrowed
    (gpipe.walks.node2vec, {"p": 1e300, "q": 1e-300}),
    (gpipe.walks.metropolis_hastings, {}),
    (gpipe.walks.with_jump, {"jump": 0.2}),
    (gpipe.walks.ppr, {"start": list(range(0, 2048, 7)), "restart": 0.2, "walks_per_source": 3}),
])
@pytest.mark.parametrize("partitions", [1, 4])
def test_walk_family_cuda_equals_cpu_twin(gpu_cluster, cpu_cluster, walk, kwargs, partitions):
    def run():
        g = gpipe.generators.rmat(scale=11, edge_factor=4, seed=5, weighted=True, partitions=partitions)
        return walk(g, length=30, seed=13, **kwargs).compute()

    gpu, cpu = _on(gpu_cluster, run), _on(cpu_cluster, run)
    assert (gpu[:, 1:] >= 0).any()
    np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.parametrize("partitions", [1, 4])
def test_frontier_sampling_cuda_equals_cpu_twin(gpu_cluster, cpu_cluster, partitions):
    import pandas as pd

    def run():
        g = gpipe.generators.rmat(scale=11, edge_factor=4, seed=5, partitions=partitions)
        return gpipe.walks.multidimensional(g, frontier_size=64, budget=500, instances=8, seed=3).compute()

    gpu, cpu = _on(gpu_cluster, run), _on(cpu_cluster, run)
    pd.testing.assert_frame_equal(gpu.drop(columns="time"), cpu.drop(columns="time"))
    np.testing.assert_allclose(gpu.time, cpu.time, rtol=1e-12)


def test_deepwalk_gpu_string_ids_and_starts(gpu_cluster, cpu_cluster):
    import pandas as pd

    edges = pd.DataFrame({"src": ["a", "b", "c", "c", "e"], "dst": ["b", "c", "a", "d", "a"]})

    def walk():
        g = gpipe.from_edges(edges, partitions=2)
        return gpipe.walks.deepwalk(g, length=12, start=["a", "d", "a"], walks_per_vertex=3, seed=4).compute()

    np.testing.assert_array_equal(_on(gpu_cluster, walk), _on(cpu_cluster, walk))


@pytest.mark.parametrize("method", ["bipartite", "updated", "repeated", "alias", "replace", "alias+replace"])
@pytest.mark.parametrize("bitmap", [True, False])
@pytest.mark.parametrize("largest,segments", [(60, 5000), (3000, 400)])  # one round of the warp's search, or several
def test_select_cuda_equals_cpu_twin(method, bitmap, largest, segments):
    from gpipe._select import select

    rng = np.random.default_rng(3)
    sizes = rng.integers(0, largest, segments)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bias = rng.exponential(1.0, offsets[-1]) ** 2 * (rng.random(offsets[-1]) < 0.85)
    want = rng.integers(0, 16, sizes.size)
    streams = np.arange(sizes.size, dtype=np.int64) * 7
    replace = method.endswith("replace")
    method = {"replace": "bipartite", "alias+replace": "alias"}.get(method, method)
    cpu = select(bias, offsets, want, streams, _rng.key(5), 2, method=method, bitmap=bitmap, replace=replace)
    gpu = select(cupy.asarray(bias), cupy.asarray(offsets), cupy.asarray(want), cupy.asarray(streams), _rng.key(5), 2,
                 method=method, bitmap=bitmap, replace=replace)
    for c, g in zip(cpu, gpu):
        np.testing.assert_array_equal(g.get(), c)


def _edge_text(m: int, seed: int, delimiter: str = " ") -> bytes:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    table = pa.table({"s": rng.integers(0, 5000, m), "d": rng.integers(0, 5000, m),
                      "w": (rng.pareto(1.0, m) + 0.01).astype(np.float32)})
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=False, delimiter=delimiter, quoting_style="none"))
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("delimiter", [" ", "\t"])
def test_edge_lines_parsed_by_cuda_equal_the_cpu_twin(delimiter):
    from gpipe.graph._parse import parse_edges

    text = _edge_text(50_000, 3, delimiter) + b"\n\n1 2 3\r\n".replace(b" ", delimiter.encode())
    for width, keep in ((3, True), (3, False)):
        cpu = parse_edges(np, np.frombuffer(text, np.uint8), width, keep, ord(delimiter))
        gpu = parse_edges(cupy, cupy.asarray(np.frombuffer(text, np.uint8)), width, keep, ord(delimiter))
        assert cpu is not None and gpu is not None  # clean lines: parsed on the device
        assert (cpu[2] is None) == (gpu[2] is None) == (not keep)
        for c, g in zip(cpu[:2 + keep], gpu[:2 + keep]):
            np.testing.assert_array_equal(g.get(), c)
    bad = text + b"1 2 0.12345678901234567890\n"  # outside the rule: the host's readers take it
    assert parse_edges(cupy, cupy.asarray(np.frombuffer(bad, np.uint8)), 3, True, ord(" ")) is None


@pytest.mark.parametrize("text", ["clean", "a byte-order mark", "a comment", "ids spread"])
def test_an_edge_list_read_by_a_gpu_worker_is_the_cpu_workers_graph(gpu_cluster, cpu_cluster, tmp_path, text):
    """A GPU worker parses the file's pieces on its GPU and maps their ids through a table on it: the same graph,
    walks and weighted samples. A piece is read into pinned memory by several threads (the clean file is one piece,
    the others 1 MB pieces). A piece with a comment line is parsed on the host and mapped on the device; ids
    spread over a wide range are mapped through the sorted id map."""
    import codecs

    import dask

    path = tmp_path / "edges.el"
    lines = _edge_text(200_000, 5).splitlines(keepends=True)
    if text == "a byte-order mark":
        lines[0] = codecs.BOM_UTF8 + lines[0]
    elif text == "a comment":
        lines.insert(len(lines) // 2, b"# a comment line in one piece\n")
    elif text == "ids spread":
        lines = [b" ".join([str(int(f) << 40).encode() for f in line.split()[:2]] + line.split()[2:]) + b"\n"
                 for line in lines]
    path.write_bytes(b"".join(lines))

    def read():
        with dask.config.set({"gpipe.graph.read-bytes": 64 << 20 if text == "clean" else 1 << 20}):
            g = gpipe.read_edges(str(path))
        seeds = g.degrees().index.to_numpy()[::7]
        sample = gpipe.sampling.neighbor(g, seeds, fanouts=4, depth=2, weighted=True, seed=2)
        return (g.num_vertices, g.num_edges, g.degrees().to_numpy(), gpipe.walks.deepwalk(
            g, length=12, weighted=True, seed=4).compute(), sample.compute())

    gpu, cpu = _on(gpu_cluster, read), _on(cpu_cluster, read)
    assert gpu[:2] == cpu[:2]
    np.testing.assert_array_equal(gpu[2], cpu[2])
    np.testing.assert_array_equal(gpu[3], cpu[3])
    import pandas as pd

    pd.testing.assert_frame_equal(gpu[4], cpu[4])


@pytest.mark.parametrize("start, end", [(0, 9 << 20), (5, (9 << 20) - 3), (100, 4_196), (7, 8)])
def test_a_piece_reaches_the_device_as_it_is_in_the_file(tmp_path, monkeypatch, start, end):
    """Each thread reads its range (1 MB or more, the last one short) in stages, each copied to the device while
    the next is read into the thread's other buffer."""
    from gpipe.graph._readers import _bytes

    monkeypatch.setattr(_bytes, "_STAGE_BYTES", 100_000)  # several stages a range, its last one short
    data = np.random.default_rng(0).integers(0, 256, 9 << 20, dtype=np.uint8)
    path = tmp_path / "bytes"
    path.write_bytes(data.tobytes())
    np.testing.assert_array_equal(_bytes.read_to_device(cupy, str(path), start, end).get(), data[start:end])


@pytest.mark.parametrize("problem", [None, "index", "weight"])
def test_a_csr_npz_read_by_a_gpu_worker_is_the_cpu_workers_graph(gpu_cluster, cpu_cluster, tmp_path, problem):
    """A GPU worker takes each piece's stored arrays (int32 indices) to its GPU and lays out, checks and widens
    them there: the same graph and walks as CPU workers, and the same error for a bad index or weight found in a
    later piece."""
    import dask

    from gpipe.errors import GpipeFileError

    rng = np.random.default_rng(3)
    n = 3_000
    degrees = rng.integers(0, 40, n)
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    indices = rng.integers(0, n, int(indptr[-1])).astype(np.int32)
    weights = rng.uniform(0.5, 3.0, len(indices)).astype(np.float32)
    if problem == "index":
        indices[-100] = n + 7
    elif problem == "weight":
        weights[-50] = -2.5
    path = tmp_path / "graph.npz"
    np.savez(path, indptr=indptr, indices=indices, weights=weights)

    def read():
        with dask.config.set({"gpipe.graph.read-bytes": 4096 * 8}):  # many pieces
            try:
                g = gpipe.read_edges(str(path), weight=True, directed=True)
            except GpipeFileError as exc:
                return str(exc)
        return (g.num_vertices, g.num_edges, g.degrees().to_numpy(),
                gpipe.walks.deepwalk(g, length=12, weighted=True, seed=4).compute())

    gpu, cpu = _on(gpu_cluster, read), _on(cpu_cluster, read)
    if problem is not None:
        assert gpu == cpu and ("-2.5" in gpu if problem == "weight" else str(n + 7) in gpu)
        return
    assert gpu[:2] == cpu[:2] and gpu[0] == n
    np.testing.assert_array_equal(gpu[2], cpu[2])
    np.testing.assert_array_equal(gpu[3], cpu[3])


def test_alias_tables_cuda_equal_the_cpu_twin():
    from gpipe._alias import tables

    rng = np.random.default_rng(8)
    sizes = np.concatenate([rng.integers(0, 80, 4000), [30_000, 0, 1]])  # a hub, an empty and a one-edge segment
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bias = rng.pareto(1.1, offsets[-1]) * (rng.random(offsets[-1]) < 0.8)
    cpu = tables(offsets, bias)
    for chunk in (1 << 26, 5000):  # all at once, and a run of segments at a time
        np.testing.assert_array_equal(tables(cupy.asarray(offsets), cupy.asarray(bias), chunk).get(), cpu)


@pytest.mark.parametrize("ids, lo", [(np.int32, 0), (np.int64, 5000)])
def test_an_arc_filter_built_by_cuda_equals_the_cpu_twins(ids, lo):
    cpu = hub_partition(ids, lo, seed=4).arc_filter()
    gpu = hub_partition(ids, lo, seed=4, to=cupy.asarray).arc_filter()
    assert cpu.any()
    np.testing.assert_array_equal(gpu.get(), cpu)


def _prefer_heavy(table):
    return table["weight"] ** 2 + (table["candidate"] % 3 == 0)


def _prefer_high_degree(table):
    return table["degree"].astype(float) ** 1.5


@pytest.mark.parametrize("kwargs", [
    {"neighbor_size": 3, "depth": 3},
    {"edge_bias": "weight", "update": "unvisited", "neighbor_size": 2, "depth": 3},
    {"edge_bias": _prefer_heavy, "neighbor_size": 2, "depth": 2},
    {"edge_bias": _prefer_heavy, "neighbor_size": 3, "depth": 2, "select": "alias"},  # a table per candidate segment
    {"update": "unvisited", "neighbor_size": ("geometric", 0.7), "depth": 3},
    {"edge_bias": _prefer_high_degree, "neighbor_size": 3, "depth": 2},
    {"edge_bias": "weight", "neighbor_size": 4, "replace": True, "depth": 2},
    {"neighbor_size": 6, "neighbor_pool": "frontier", "depth": 3},  # layer
    {"vertex_bias": "degree", "frontier_size": 2, "neighbor_size": 3, "update": "unvisited", "depth": 3},
])
def test_sampler_gpu_equals_cpu(gpu_cluster, cpu_cluster, kwargs):
    def run():
        g = gpipe.generators.rmat(scale=11, edge_factor=4, seed=5, weighted=True, partitions=3)
        return gpipe.sampling.Sampler(**kwargs).run(g, seeds=np.arange(0, 2048, 5), seed=2).compute()

    import pandas as pd

    pd.testing.assert_frame_equal(_on(gpu_cluster, run), _on(cpu_cluster, run))


@pytest.mark.parametrize("fanout,depth", [(3, 3), (40, 2)])  # picks checked against each other, by a bitmap
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("replace", [False, True])
def test_neighbor_sampling_in_one_launch_on_the_gpu_is_the_cpu_superstep_sample(gpu_cluster, cpu_cluster, weighted,
                                                                               replace, fanout, depth):
    import dask
    import pandas as pd

    def run(fused: bool):
        def sample():
            # blocks of ~2,000 edges: the GPU splits and sorts them on the device, the CPU on the host
            with dask.config.set({"gpipe.sampling.fused": fused, "gpipe.sampling.block-size": 2000}):
                g = gpipe.generators.rmat(scale=11, edge_factor=4, seed=5, weighted=True, mode="replicated")
                result = gpipe.sampling.neighbor(g, np.arange(0, 2048, 5), fanouts=fanout, depth=depth,
                                                 weighted=weighted, replace=replace, seed=2)
                stats = result.stats
                assert (stats["supersteps"] == 1) == fused
                return result.compute(), result.nodes(), stats["select_picks"], stats["iterations_per_pick"]
        return sample

    gpu, cpu = _on(gpu_cluster, run(True)), _on(cpu_cluster, run(False))
    pd.testing.assert_frame_equal(gpu[0], cpu[0])
    pd.testing.assert_frame_equal(gpu[1], cpu[1])
    assert gpu[2:] == cpu[2:]  # every pick kept, every draw counted


@pytest.mark.parametrize("limit,where", [("auto", "cupy"), (1, "numpy")])
def test_a_samples_blocks_stay_on_the_gpu_within_the_output_limit(gpu_cluster, cpu_cluster, limit, where):
    import dask
    import pandas as pd

    def run():
        with dask.config.set({"gpipe.memory.output-limit": limit, "gpipe.sampling.block-size": 500}):
            g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=5, partitions=2)
            s = gpipe.sampling.neighbor(g, np.arange(0, 1024, 7), fanouts=3, depth=2, seed=2)
            kept = None
            if g.device == "gpu":  # each block's type where it is kept
                client = s._client
                kept = set(client.gather([client.submit(lambda b: type(b["edges"]["src"]).__module__.split(".")[0],
                                                        block, pure=False) for block in s._blocks()]))
            return s.compute(), s.nodes(), s.to_dask().compute(), kept

    gpu, cpu = _on(gpu_cluster, run), _on(cpu_cluster, run)
    assert gpu[3] == {where}
    for a, b in zip(gpu[:3], cpu[:3]):
        pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("sample", [
    lambda g: gpipe.sampling.random_node(g, 300, instances=20, seed=3),
    lambda g: gpipe.sampling.random_node(g, 100, instances=20, by_degree=True, seed=3),
    lambda g: gpipe.sampling.random_edge(g, 50, instances=20, seed=3),
    lambda g: gpipe.sampling.Sampler(frontier_size=30, neighbor_size=2, depth=2).run(g, instances=10, seed=3),
])
def test_samplers_without_seeds_gpu_equals_cpu(gpu_cluster, cpu_cluster, sample):
    def run():
        return sample(gpipe.generators.rmat(scale=11, edge_factor=4, seed=5, weighted=True, partitions=3)).compute()

    import pandas as pd

    pd.testing.assert_frame_equal(_on(gpu_cluster, run), _on(cpu_cluster, run))


def _node2vec(g):
    return gpipe.walks.node2vec(g, p=0.5, q=2.0, length=12, weighted=True, seed=1)


def _walk_and_sample_equal_cpu(gpu_client, cpu_client, build: dict, run: dict, walk=_node2vec, check=None) -> dict:
    """A walk and a neighbor sample on an R-MAT graph built (``build``) and run (``run``: config; a
    ``gpipe.exchange`` only on the GPUs) on the GPU cluster and on the CPU one: the same results;
    ``check(g, walks, sample)`` holds on each. The GPU walk's stats.
    """
    import dask
    import pandas as pd

    def on_this_client():
        build_options = dict(build)
        with dask.config.set({"gpipe.memory.device-partitions": build_options.pop("budget", None)}):
            g = gpipe.generators.rmat(scale=11, edge_factor=4, seed=5, weighted=True, **build_options)
        here = run if g.device == "gpu" else {k: v for k, v in run.items() if k != "gpipe.exchange"}
        with dask.config.set(here):
            walks = walk(g)
            sample = gpipe.sampling.neighbor(g, np.arange(0, 2048, 7), fanouts=2, depth=3, weighted=True, seed=1)
        if check is not None:
            check(g, walks, sample)
        return walks.stats, walks.compute(), sample.compute()

    (stats, gw, gs), (_, cw, cs) = _on(gpu_client, on_this_client), _on(cpu_client, on_this_client)
    np.testing.assert_array_equal(gw, cw)
    pd.testing.assert_frame_equal(gs, cs)
    return stats


@pytest.mark.parametrize("settings", [
    {"mode": "replicated"},
    {"partitions": 4, "budget": 1},  # out of memory: one partition on the GPU at a time
    {"partitions": 4, "budget": 2},  # ... with the next one prefetched on a side stream
    {"partitions": 4, "budget": 1, "in_place": 1.0},  # ... or read where it is, in pinned host memory (zero-copy)
    {"partitions": 4, "output_limit": "64 kB"},  # older outputs spill from the GPU to host memory
    {"mode": "replicated", "output_limit": "64 kB"},
])
def test_replicated_and_out_of_memory_gpu_runs_equal_cpu(gpu_cluster, cpu_cluster, settings):
    def check(g, walks, sample):
        assert (walks.stats["spilled_bytes"] > 0) == ("output_limit" in settings)
        budget = settings.get("budget")
        if budget is not None and budget * len(set(g.placement)) < g.num_partitions:  # not all fit at once
            assert walks.stats["partition_transfers"] > 0
            assert (sample.stats["partition_reads_in_place"] > 0) == ("in_place" in settings)

    build = {k: settings.get(k) for k in ("partitions", "mode", "budget")}
    run = {"gpipe.memory.output-limit": settings.get("output_limit"),
           "gpipe.memory.read-in-place-below": settings.get("in_place", 0.0)}
    _walk_and_sample_equal_cpu(gpu_cluster, cpu_cluster, build, run, check=check)


@pytest.fixture(scope="module")
def two_gpu_cluster():
    """Two GPU workers, each on a GPU of its own (a host with two GPUs or more): the exchange goes through NCCL."""
    if gpu_count() < 2:
        pytest.skip("one GPU: NCCL between GPU workers needs two (run on nvidia-h200-x2)")
    with gpipe.connect(n_workers=2, device="gpu", dashboard_address=":0") as client:
        yield client


@pytest.mark.parametrize("exchange", ["auto", "comms"])
def test_walkers_between_gpu_workers_sharing_a_gpu_equal_cpu(shared_gpu_cluster, cpu_cluster, exchange):
    stats = _walk_and_sample_equal_cpu(shared_gpu_cluster, cpu_cluster, {"partitions": 4},
                                       {"gpipe.exchange": exchange})
    assert stats["device"] == "gpu" and stats["workers"] == 2
    assert stats["exchange"] == "comms" and stats["walker_bytes"] > 0  # auto: NCCL cannot join two ranks on one GPU


def _deepwalk(g):
    return gpipe.walks.deepwalk(g, length=20, walks_per_vertex=2, seed=1)


def test_supersteps_in_chunks_on_gpu_workers_sharing_a_gpu_equal_cpu(shared_gpu_cluster, cpu_cluster):
    """A partition a worker, each superstep in 3 chunks: a chunk's leavers go while the next chunk's kernel runs
    (through the comms here: the GPU path of the rounds, the routed kernel's wait in between)."""
    stats = _walk_and_sample_equal_cpu(shared_gpu_cluster, cpu_cluster, {"partitions": 2},
                                       {"gpipe.exchange-chunks": 3}, walk=_deepwalk)
    assert stats["workers"] == 2 and stats["exchange"] == "comms" and stats["walker_bytes"] > 0


def test_deepwalk_on_gpu_workers_carries_row_sectors_between_their_partitions_equal_cpu(shared_gpu_cluster,
                                                                                         cpu_cluster):
    """Two partitions a GPU worker: a walker crossing to its worker's other partition carries the cells of its row's
    sector not yet full (fields of no bits on the wire to a peer); CPU workers carry none. The same walks."""
    sector = importlib.import_module("gpipe.walks._first_order").SECTOR
    stats = _walk_and_sample_equal_cpu(shared_gpu_cluster, cpu_cluster, {"partitions": 4}, {}, walk=_deepwalk)
    assert stats["workers"] == 2 and stats["walker_bytes"] > 0
    assert {k: b for k, b in stats["wire"]["bits"].items() if k in sector} == dict.fromkeys(sector, 0)


def test_nccl_asked_for_workers_sharing_a_gpu_is_refused_naming_them(shared_gpu_cluster):
    import dask

    with shared_gpu_cluster.as_current():
        g = gpipe.generators.rmat(scale=8, edge_factor=4, seed=5, partitions=2)
        with dask.config.set({"gpipe.exchange": "nccl"}), pytest.raises(
                gpipe.GpipeValueError, match="'nccl' needs NCCL on every GPU worker; worker .*: it shares GPU"):
            gpipe.walks.deepwalk(g, length=5)


@pytest.mark.parametrize("exchange", ["auto", "nccl", "comms"])
def test_walkers_between_gpus_equal_cpu_through_every_exchange(two_gpu_cluster, cpu_cluster, exchange):
    stats = _walk_and_sample_equal_cpu(two_gpu_cluster, cpu_cluster, {"partitions": 4},
                                       {"gpipe.exchange": exchange})
    assert stats["workers"] == 2 and stats["walker_bytes"] > 0
    assert stats["exchange"] == ("comms" if exchange == "comms" else "nccl")
    assert stats["host_memory_peak"] > 0 and stats["device_memory_peak"] > 0


@pytest.mark.parametrize("chunks", [3, 40])  # 40: most of the last supersteps' rounds empty
def test_supersteps_in_chunks_between_gpus_through_nccl_equal_cpu(two_gpu_cluster, cpu_cluster, chunks):
    stats = _walk_and_sample_equal_cpu(two_gpu_cluster, cpu_cluster, {"partitions": 2},
                                       {"gpipe.exchange-chunks": chunks}, walk=_deepwalk)
    assert stats["workers"] == 2 and stats["exchange"] == "nccl" and stats["walker_bytes"] > 0
    assert stats["exchange_hidden_seconds"] >= 0


def test_out_of_memory_on_two_gpus_equals_cpu(two_gpu_cluster, cpu_cluster):
    stats = _walk_and_sample_equal_cpu(two_gpu_cluster, cpu_cluster, {"partitions": 6, "budget": 1}, {},
                                       walk=lambda g: gpipe.walks.deepwalk(g, length=12, weighted=True, seed=1))
    assert stats["workers"] == 2 and stats["partition_transfers"] > 0 and stats["exchange"] == "nccl"


def test_two_runs_at_once_through_nccl_each_equal_alone(two_gpu_cluster):
    """Two runs at once on the same GPU workers take turns (one communicator at work on a GPU at a time: two at
    once hung at R-MAT 24), and each gives its walks alone."""
    from concurrent.futures import ThreadPoolExecutor

    with two_gpu_cluster.as_current():
        g = gpipe.generators.rmat(scale=12, edge_factor=8, seed=2, partitions=4)
        alone = [gpipe.walks.deepwalk(g, length=30, seed=s).compute() for s in (1, 2)]
        with ThreadPoolExecutor(2) as pool:
            together = list(pool.map(lambda s: gpipe.walks.deepwalk(g, length=30, seed=s).compute(), (1, 2)))
    for a, t in zip(alone, together):
        np.testing.assert_array_equal(a, t)


def _long_deepwalk(g, warm):
    return gpipe.walks.deepwalk(g, length=4 if warm else 20000, seed=1).compute()


def test_a_gpu_worker_killed_mid_run_fails_the_nccl_run_within_seconds():
    """A peer lost in the middle of a collective: the survivor's wait sees the run fail (or the peer silent) and
    aborts the communicator; the call fails naming the lost partitions instead of hanging."""
    from helpers import assert_lost, run_and_kill

    if gpu_count() < 2:
        pytest.skip("one GPU: NCCL between GPU workers needs two (run on nvidia-h200-x2)")
    with gpipe.connect(n_workers=2, device="gpu", dashboard_address=":0") as client:
        assert_lost(*run_and_kill(client, _long_deepwalk, timeout=30))


def _device_bytes_in_use() -> int:
    """On a worker: the bytes its CuPy memory pool has handed out and not had back."""
    return cupy.get_default_memory_pool().used_bytes()


def _settled(client) -> dict:
    """Each worker's :func:`_device_bytes_in_use` once two readings half a second apart agree."""
    import time

    last = client.run(_device_bytes_in_use)
    for _ in range(20):
        time.sleep(0.5)
        now = client.run(_device_bytes_in_use)
        if now == last:
            break
        last = now
    return last


_BROKEN_IN = {"_owned": "_run", "merge_rows": "_gather", "_split": "_gather", "owned_blocks": "_pieces"}  # what
# a superstep keeps of every step; the rows of every walk merged as the run ends; the pieces sent to the workers
# making their blocks then (with each worker holding its own blocks' rows alone); the assembly


def _break_pieces(name: str, broken: bool) -> None:
    """On a worker: make ``gpipe.runtime.<module>.<name>`` (:data:`_BROKEN_IN`) fail as a full device would, or
    mend it."""
    import importlib

    module = importlib.import_module(f"gpipe.runtime.{_BROKEN_IN[name]}")
    if name in ("_owned", "_split", "merge_rows"):  # pieces kept and sent (through NCCL a run writes every walk's
        # rows in place and keeps no pieces; its own blocks' rows alone); every walk's rows to merge
        from gpipe.runtime import _advance

        if broken:
            _advance._mended_every = _advance.EVERY_ROW_RANKS, _advance.EVERY_ROW_EXCHANGES
            _advance.EVERY_ROW_RANKS, _advance.EVERY_ROW_EXCHANGES = (4, ("nccl", "comms")) if name == "merge_rows" \
                else (1, ())
        elif hasattr(_advance, "_mended_every"):
            _advance.EVERY_ROW_RANKS, _advance.EVERY_ROW_EXCHANGES = _advance._mended_every
    if broken:
        setattr(module, f"_mended_{name}", getattr(module, name))

        def fail(*args, **kwargs):
            raise MemoryError(f"forced failure in {name}")

        setattr(module, name, fail)
    elif hasattr(module, f"_mended_{name}"):
        setattr(module, name, getattr(module, f"_mended_{name}"))


@pytest.mark.parametrize("where", sorted(_BROKEN_IN))
@pytest.mark.parametrize("cluster", ["shared_gpu_cluster", "two_gpu_cluster"])  # the comms; NCCL
def test_a_failed_run_gives_back_its_device_memory_and_the_next_run_works(request, cluster, eventually, where):
    """A failure costs one run, not the cluster: what the run held on each GPU worker (pieces, walkers, exchange
    buffers, blocks made) is given back, and the same walk then runs whole with the same walks."""
    import gc

    from helpers import runs_here

    client = request.getfixturevalue(cluster)
    with client.as_current():  # not the cluster another test made the default
        g = gpipe.generators.rmat(scale=14, edge_factor=8, seed=1, partitions=4)
        walk = gpipe.walks.deepwalk(g, length=20, walks_per_vertex=3, seed=5)
        assert walk.stats["exchange"] == ("nccl" if cluster == "two_gpu_cluster" else "comms")
        reference = walk.compute()
        del walk
        gc.collect()
        assert eventually(lambda: not set().union(*client.run(runs_here).values()))  # the reference run has left,
        assert eventually(lambda: not any(client.has_what().values()))  # and its blocks
        before = _settled(client)  # the reference's block goes a moment after Dask forgets its key
        client.run(_break_pieces, where, True)
        try:
            with pytest.raises(gpipe.GpipeError, match=f"forced failure in {where}"):
                gpipe.walks.deepwalk(g, length=20, walks_per_vertex=3, seed=5).compute()
        finally:
            client.run(_break_pieces, where, False)
        gc.collect()

        def given_back():  # no worker holds more than before (one may hold less: a block of earlier runs went since)
            return all(held <= before[w] for w, held in client.run(_device_bytes_in_use).items())

        assert eventually(given_back), (client.run(_device_bytes_in_use), before)
        np.testing.assert_array_equal(gpipe.walks.deepwalk(g, length=20, walks_per_vertex=3, seed=5).compute(),
                                      reference)


def test_race_cuda_equals_cpu_twin():
    from gpipe.sampling._race import race

    rng = np.random.default_rng(8)
    sizes = rng.integers(0, 3000, 2000)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bias = rng.exponential(1.0, offsets[-1]) ** 3 * (rng.random(offsets[-1]) < 0.9)
    want = rng.integers(0, 20, sizes.size)
    streams = np.arange(sizes.size, dtype=np.int64) * 11
    cpu = race(bias, offsets, want, streams, _rng.key(2), 7)
    gpu = race(cupy.asarray(bias), cupy.asarray(offsets), cupy.asarray(want), cupy.asarray(streams), _rng.key(2), 7)
    for c, g in zip(cpu[:2], gpu[:2]):
        np.testing.assert_array_equal(g.get(), c)
    np.testing.assert_allclose(gpu[2].get(), cpu[2], rtol=1e-15)


@pytest.mark.parametrize("stage", [1 << 12, None])
def test_large_copies_between_the_gpu_and_host_memory_are_exact(monkeypatch, stage):
    """Copies past ``STAGE_BYTES`` go through the pinned buffers in chunks (many small ones here, or the real size):
    both ways, with a short last chunk, from a strided device array too."""
    from gpipe import backend

    if stage is not None:
        monkeypatch.setattr(backend, "STAGE_BYTES", stage)
    rows = 3 * backend.STAGE_BYTES // (8 * 7) + 5
    host = np.random.default_rng(1).integers(-(1 << 62), 1 << 62, size=(rows, 7))
    device = backend.to_device(host, "gpu")
    assert isinstance(device, cupy.ndarray)
    np.testing.assert_array_equal(device.get(), host)
    back = backend.to_host(device)
    assert isinstance(back, np.ndarray) and back.shape == host.shape
    np.testing.assert_array_equal(back, host)
    np.testing.assert_array_equal(backend.to_host(device[:, ::2]), host[:, ::2])


def test_minus_ones_on_the_gpu_is_a_full_fill_of_minus_one():
    """A walk's rows start as -1: on the GPU one memset, of every signed integer width (no kernel to compile)."""
    from gpipe.backend import minus_ones

    for dtype in (np.int8, np.int32, np.int64):
        got = minus_ones(cupy, (1001, 7), dtype)
        assert got.dtype == dtype and got.shape == (1001, 7)
        np.testing.assert_array_equal(got.get(), np.full((1001, 7), -1, dtype))


def test_reverse_cuthill_mckee_on_the_device_is_the_cpu_twins_order():
    """A level at a time on the GPU, one vertex at a time by numba: the same order, isolated vertices and small
    components included."""
    from gpipe.graph._build import csr
    from gpipe.graph._order import reverse_cuthill_mckee

    rng = np.random.default_rng(3)
    for n, m in [(1, 0), (60, 40), (300, 600), (20_000, 100_000)]:
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        keep = src != dst
        pieces = [{"src": np.concatenate([src[keep], dst[keep]]), "dst": np.concatenate([dst[keep], src[keep]])}]
        indptr, indices, _, _ = csr(np, pieces, lo=0, hi=n, n=n, keep_duplicates=False, index_dtype=np.int64)
        on_device = reverse_cuthill_mckee(cupy, cupy.asarray(indptr), cupy.asarray(indices))
        np.testing.assert_array_equal(on_device.get(), reverse_cuthill_mckee(np, indptr, indices))


@pytest.mark.parametrize("order", ["rcmk", pytest.param("metis", marks=pytest.mark.skipif(
    importlib.util.find_spec("pymetis") is None, reason="pymetis is not installed"))])
def test_walks_with_a_vertex_order_on_a_gpu_worker_equal_the_cpu_workers(gpu_cluster, cpu_cluster, order):
    def walk():
        g = gpipe.generators.rmat(scale=11, edge_factor=4, seed=9, partitions=2, vertex_order=order)
        return g.id_map, gpipe.walks.deepwalk(g, length=20, seed=11).compute()

    gids, gwalks = _on(gpu_cluster, walk)
    cids, cwalks = _on(cpu_cluster, walk)
    np.testing.assert_array_equal(gids, cids)
    np.testing.assert_array_equal(gwalks, cwalks)
