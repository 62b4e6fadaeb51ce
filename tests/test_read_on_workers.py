"""read_edges parses text files in byte ranges and parquet in row groups on the workers: the same graphs as one
whole-file read in the client, the same errors, and the edges never in the client."""

import concurrent.futures
import glob
import gzip
import os
import tracemalloc

import dask
import distributed
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpipe
from gpipe.errors import GpipeFileError, GpipeValueError
from gpipe.graph._io import _read_bytes
from gpipe.graph._readers import plan_npz, plan_table, read_table
from gpipe.runtime.calls import gather_in_background, submit


@pytest.fixture(params=["cpu_cluster", "one_worker_cluster"], ids=["2 workers", "1 worker"])
def cluster(request):
    client = request.getfixturevalue(request.param)
    with client.as_current():
        yield client


@pytest.fixture
def small_pieces():
    """Pieces of 300 bytes (and parquet files of row groups of 50 rows, written by the tests)."""
    with dask.config.set({"gpipe.graph.read-bytes": 300}):
        yield


def _edges(g, folder) -> pd.DataFrame:
    g.to_parquet(folder, overwrite=True)
    parts = [pd.read_parquet(name) for name in sorted(glob.glob(os.path.join(folder, "part-*.parquet")))]
    return pd.concat(parts, ignore_index=True)


def _same_graph(g, ref, tmp_path) -> None:
    assert (g.num_vertices, g.num_edges, g.weighted) == (ref.num_vertices, ref.num_edges, ref.weighted)
    if ref.id_map is None:
        assert g.id_map is None
    else:
        np.testing.assert_array_equal(g.id_map, ref.id_map)
    pd.testing.assert_series_equal(g.degrees(), ref.degrees())
    pd.testing.assert_frame_equal(_edges(g, tmp_path / "g"), _edges(ref, tmp_path / "ref"))


def _random_edges(n_edges=600, ids=None, weighted=False, seed=3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, 80, n_edges), rng.integers(0, 80, n_edges)
    frame = pd.DataFrame({"src": src, "dst": dst} if ids is None else {"src": ids[src], "dst": ids[dst]})
    if weighted:
        frame["w"] = rng.random(n_edges).round(3) + 0.5
    return frame


def _snap(path, frame, comments=True, comment_lines=1) -> str:
    lines = ["# a SNAP edge list\n"] + [" ".join(map(str, row)) + "\n" for row in frame.itertuples(index=False)]
    if comments:
        lines[len(lines) // 3:len(lines) // 3] = ["% a comment among the data\n"] * comment_lines + ["\n"]
    path.write_text("".join(lines))
    return str(path)


_INPUTS = {
    "snap, dense ids": lambda tmp: _snap(tmp / "g.el", _random_edges()),
    "snap, ids with gaps, weighted": lambda tmp: _snap(tmp / "g.txt", _random_edges(ids=np.arange(80) * 7 + 5,
                                                                                    weighted=True)),
    "snap, string ids": lambda tmp: _snap(tmp / "g.edges", _random_edges(ids=np.array([f"v{i}" for i in range(80)]))),
    # ranges of comments only: no edges, no ids
    "snap, comment ranges": lambda tmp: _snap(tmp / "g.el", _random_edges(), comment_lines=80),
    "snap, string ids, comment ranges": lambda tmp: _snap(
        tmp / "g.edges", _random_edges(ids=np.array([f"v{i}" for i in range(80)])), comment_lines=80),
    "snap, crlf": lambda tmp: str(tmp / "g.tsv") if (tmp / "g.tsv").write_bytes(
        _random_edges().to_csv(sep="\t", header=False, index=False, lineterminator="\r\n").encode()) else "",
    "csv, weighted": lambda tmp: _random_edges(weighted=True).to_csv(tmp / "g.csv", index=False) or str(tmp / "g.csv"),
    "csv, string ids": lambda tmp: _random_edges(ids=np.array([f"v{i}" for i in range(80)])).to_csv(
        tmp / "g.csv", index=False) or str(tmp / "g.csv"),
}


@pytest.mark.parametrize("make", _INPUTS.values(), ids=_INPUTS.keys())
def test_text_read_in_ranges_is_the_graph_of_one_whole_file_read(cluster, small_pieces, tmp_path, make):
    path = make(tmp_path)
    weight = "w" if path.endswith(".csv") and "w" in open(path).readline() else None
    assert len(plan_table(path, weight=weight, piece_bytes=300).pieces) > 5
    frame, _ = read_table(path, weight=weight)
    ref = gpipe.from_edges(frame, weight="weight" if "weight" in frame else None, partitions=2)
    g = gpipe.read_edges(path, weight=weight, partitions=2)
    _same_graph(g, ref, tmp_path)
    # and against pandas: every vertex, and its degree (undirected, self-loops dropped, duplicates merged)
    pairs = {tuple(sorted(map(str, p))) for p in frame[["src", "dst"]].itertuples(index=False) if p[0] != p[1]}
    degrees = pd.Series([v for p in pairs for v in p]).value_counts()
    assert {str(k): v for k, v in g.degrees().items() if v} == degrees.to_dict()


def test_a_pieces_ids_are_found_before_the_next_piece_is_read(one_worker_cluster, small_pieces, tmp_path):
    path = _snap(tmp_path / "g.txt", _random_edges())
    with one_worker_cluster.as_current(), distributed.get_task_stream(client=one_worker_cluster) as tasks:
        gpipe.read_edges(path)
    began = {}
    for task in tasks.data:
        start = min(s["start"] for s in task["startstops"] if s["action"] == "compute")
        began.setdefault(distributed.utils.key_split(task["key"]), []).append(start)
    assert len(began["read_piece"]) > 5
    # the worker's one thread took pieces' ids between reads (a piece behind: the next read may be on it already)
    reads, ids = sorted(began["read_piece"]), sorted(began["unique_ids"])
    assert ids[0] < reads[2] and sum(t < reads[-1] for t in ids) >= len(ids) // 2


def test_a_range_of_string_ids_makes_the_integer_ids_of_other_ranges_strings(cluster, small_pieces, tmp_path):
    frame = _random_edges().astype(object)
    frame.loc[len(frame) - 1] = ["007", "x"]  # in the last range only: "007" stays "007", not 7
    path = _snap(tmp_path / "g.txt", frame)
    g = gpipe.read_edges(path, partitions=2)
    assert g.id_map.dtype == object and "007" in g.id_map and "7" in g.id_map
    _same_graph(g, gpipe.from_edges(read_table(path)[0], partitions=2), tmp_path)


@pytest.mark.parametrize("renumber", [None, True, False])
def test_parquet_row_groups_folder_and_glob(cluster, small_pieces, tmp_path, renumber):
    folder = tmp_path / "edges"
    folder.mkdir()
    frame = _random_edges(ids=np.arange(80) + 10, weighted=True)
    for i in range(3):
        pq.write_table(pa.Table.from_pandas(frame.iloc[i * 200:(i + 1) * 200]), folder / f"part-{i}.parquet",
                       row_group_size=50)
    (folder / "notes.txt").write_text("not parquet")
    pattern = str(folder / "part-*.parquet")
    assert len(plan_table(pattern, weight="w").pieces) == 3  # a file each, read in this process
    assert len(plan_table(pattern, weight="w", piece_bytes=300).pieces) == 12  # a row group (~1.2 kB) each
    groups = [(p.start, p.end) for p in plan_table(pattern, weight="w", piece_bytes=2000).pieces]
    assert groups == [(0, 2), (2, 4)] * 3  # runs of row groups holding about 2 kB
    ref = gpipe.from_edges(frame, weight="w", renumber=renumber, partitions=2)
    _same_graph(gpipe.read_edges(pattern, weight="w", renumber=renumber, partitions=2), ref, tmp_path)
    os.remove(folder / "notes.txt")
    _same_graph(gpipe.read_edges(folder, weight="w", renumber=renumber, partitions=2), ref, tmp_path)


def test_a_glob_is_for_parquet_and_a_file_named_like_one_is_that_file(tmp_path):
    (tmp_path / "g1.txt").write_text("0 1\n")
    (tmp_path / "g[1].txt").write_text("5 6\n")
    assert read_table(tmp_path / "g[1].txt")[0].to_numpy().tolist() == [[5, 6]]
    with pytest.raises(GpipeFileError, match="missing: no such file or folder"):
        read_table(tmp_path / "g*.txt")


def test_read_bytes_takes_a_byte_count_and_refuses_what_is_not_one(cpu, tmp_path):
    path = _snap(tmp_path / "g.txt", _random_edges())
    with dask.config.set({"gpipe.graph.read-bytes": "300 B"}), distributed.get_task_stream(client=cpu) as tasks:
        pieces = gpipe.read_edges(path)
    parsed = [t for t in tasks.data if distributed.utils.key_split(t["key"]) == "read_piece"]
    assert len(parsed) == len(plan_table(path, piece_bytes=300).pieces) > 5
    _same_graph(pieces, gpipe.read_edges(path), tmp_path)
    assert (_read_bytes("cpu"), _read_bytes("gpu")) == (64 << 20, 512 << 20)  # auto
    for bad in ("lots", 0):
        with dask.config.set({"gpipe.graph.read-bytes": bad}), pytest.raises(GpipeValueError,
                                                                             match="'gpipe.graph.read-bytes' must"):
            gpipe.read_edges(path)


def test_compressed_file_is_one_piece(cluster, small_pieces, tmp_path):
    text = open(_snap(tmp_path / "g.txt", _random_edges())).read()
    with gzip.open(tmp_path / "g.txt.gz", "wt") as f:
        f.write(text)
    assert len(plan_table(tmp_path / "g.txt.gz", piece_bytes=300).pieces) == 1
    _same_graph(gpipe.read_edges(tmp_path / "g.txt.gz"), gpipe.read_edges(tmp_path / "g.txt"), tmp_path)


@pytest.mark.parametrize("name, bad, message", [
    ("g.txt", "3 4 5 6", "expected 2 or 3 whitespace-separated fields, got 4"),
    ("g.txt", "3 4 2.5", r"expected 2 fields like the first data line \(line 2\), got 3"),
    ("g.csv", "3,4,5", "expected 2 fields like the header, got 3"),
])
def test_bad_line_far_into_the_file_is_named_by_the_worker_that_parsed_it(cluster, small_pieces, tmp_path, name, bad,
                                                                          message):
    lines = ["src,dst\n" if name.endswith(".csv") else "# edges\n"]
    lines += [(f"{i},{i + 1}\n" if name.endswith(".csv") else f"{i} {i + 1}\n") for i in range(2000)]
    lines[1500] = bad + "\n"  # line 1501
    lines[1800] = bad + "\n"  # a later bad line in a later range: the first is named
    path = tmp_path / name
    path.write_text("".join(lines))
    assert len(plan_table(path, piece_bytes=300).pieces) > 20
    with pytest.raises(GpipeFileError, match=message) as info:
        gpipe.read_edges(path)
    assert info.value.line == 1501 and str(info.value).startswith(f"{path}:1501: ")


def test_the_client_never_holds_the_edge_list(cpu, tmp_path):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 5000, 400_000), rng.integers(0, 5000, 400_000)
    path = tmp_path / "g.el"
    np.savetxt(path, np.stack([src, dst], axis=1), fmt="%d")
    size = os.path.getsize(path)
    assert size > 3_000_000
    # The peak counts this process's scheduler too (a LocalCluster's): its bookkeeping grows with the tasks.
    with dask.config.set({"gpipe.graph.read-bytes": 1 << 20}):
        tracemalloc.start()
        try:
            g = gpipe.read_edges(path, partitions=2)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < size / 2, f"the client's peak ({peak} bytes) is not far below the file's size ({size} bytes)"
    ref = gpipe.from_edges(pd.DataFrame({"src": src, "dst": dst}), partitions=2)
    assert g.id_map is None
    _same_graph(g, ref, tmp_path)


def test_a_value_is_fetched_to_the_client_as_soon_as_it_is_ready_unasked(cpu):
    """A renumbered graph's id map comes while the graph is assembled (the client waits for nothing to start it)."""
    ids = submit(cpu, np.arange, 5)
    fetched = gather_in_background(cpu, ids)
    done, _ = concurrent.futures.wait([fetched], timeout=30)
    assert done and fetched.result().tolist() == [0, 1, 2, 3, 4]
    failed = gather_in_background(cpu, submit(cpu, np.arange, "five"))
    with pytest.raises(TypeError):
        failed.result(timeout=30)


@pytest.mark.parametrize("frame, kwargs, message", [
    (pd.DataFrame({"src": ["a", "b"], "dst": ["b", "c"]}), {"renumber": False},
     r"'renumber' must be True \(or None\) when ids are not non-negative integers"),
    (pd.DataFrame({"src": [-1, 0], "dst": [0, 1]}), {"renumber": False},
     r"'renumber' must be True \(or None\) when ids are not non-negative integers"),
    (pd.DataFrame({"src": [0, 1], "dst": [1, 99]}), {"num_vertices": 50},
     r"'num_vertices' must exceed the largest id \(99\), got 50"),
    (pd.DataFrame({"src": [0, 1], "dst": [1, 2]}), {"partitions": 5},
     r"'partitions' must be at most the number of vertices \(3\), got 5"),
])
def test_what_the_ids_rule_out_is_refused_by_name_though_the_workers_find_them(cluster, tmp_path, frame, kwargs,
                                                                                message):
    """The ids are numbered where they are (the client waits for no count): what they rule out is still the
    parameter's error, and the next graph builds."""
    with pytest.raises(GpipeValueError, match=message):
        gpipe.from_edges(frame, **kwargs)
    if "num_vertices" not in kwargs:  # (read_edges takes none)
        path = tmp_path / "g.el"
        frame.to_csv(path, sep=" ", header=False, index=False)
        with pytest.raises(GpipeValueError, match=message):
            gpipe.read_edges(path, **kwargs)
    assert gpipe.from_edges(pd.DataFrame({"src": [0, 1], "dst": [1, 2]})).num_vertices == 3


def _csr(n=90, n_edges=700, seed=4):
    """indptr (int64), indices (int32), weights (float32) of a CSR with isolated vertices (the last ten rows and
    columns), self-loops and duplicate edges, as ../shared/gpu/gen_rmat.py writes them."""
    rng = np.random.default_rng(seed)
    src, dst = np.sort(rng.integers(0, n - 10, n_edges)), rng.integers(0, n - 10, n_edges)
    dst[:5] = src[:5]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))]).astype(np.int64)
    return indptr, dst.astype(np.int32), (rng.random(n_edges) + 0.25).astype(np.float32)


@pytest.mark.parametrize("weighted, directed, mode, compressed", [
    (False, False, "partitioned", False), (True, False, "replicated", False),
    (True, True, "partitioned", True), (False, True, "replicated", True),
])
def test_npz_read_by_row_ranges_on_the_workers_is_the_graph_of_its_edges(cluster, tmp_path, weighted, directed, mode,
                                                                         compressed):
    indptr, indices, weights = _csr()
    path = tmp_path / "g.npz"
    (np.savez_compressed if compressed else np.savez)(path, indptr=indptr, indices=indices, weights=weights)
    piece_bytes = 100 * (8 if weighted else 4)  # 100 edges of int32 indices (and float32 weights)
    plan = plan_npz(str(path), weighted, piece_bytes=piece_bytes)
    assert len(plan.pieces) == (1 if compressed else 7)
    edges = pd.DataFrame({"src": np.repeat(np.arange(90), np.diff(indptr)), "dst": indices.astype(np.int64)})
    if weighted:
        edges["weight"] = weights
    ref = gpipe.from_edges(edges, weight="weight" if weighted else None, directed=directed, partitions=2, mode=mode,
                           num_vertices=90)
    with dask.config.set({"gpipe.graph.read-bytes": piece_bytes}):
        g = gpipe.read_edges(path, weight=weighted, directed=directed, partitions=2, mode=mode)
    assert (g.mode, g.num_vertices, g.directed) == (mode, 90, directed)
    _same_graph(g, ref, tmp_path)


def test_npz_renumbered_numbers_the_ids_that_occur_and_renumber_is_checked(cluster, tmp_path):
    indptr, indices, weights = _csr()
    path = tmp_path / "g.npz"
    np.savez(path, indptr=indptr, indices=indices, weights=weights)
    edges = pd.DataFrame({"src": np.repeat(np.arange(90), np.diff(indptr)), "dst": indices.astype(np.int64),
                          "weight": weights})
    ref = gpipe.from_edges(edges, weight="weight", renumber=True, partitions=2)
    with dask.config.set({"gpipe.graph.read-bytes": 800}):
        _same_graph(gpipe.read_edges(path, weight=True, renumber=True, partitions=2), ref, tmp_path)
    with pytest.raises(GpipeValueError, match="'renumber' must be"):
        gpipe.read_edges(path, weight=True, renumber="yes")


def test_npz_error_found_by_a_later_piece_is_the_one_whole_read_gives(cluster, tmp_path):
    indptr, indices, weights = _csr()
    weights = weights.astype(np.float64)
    indices[650], indices[690] = 90, 95  # out of range, in the last pieces
    weights[[10, 600]] = [1e-60, -1.0]   # a misfit, and a negative weight that a bad index hides
    path = tmp_path / "g.npz"
    np.savez(path, indptr=indptr, indices=indices, weights=weights)
    with pytest.raises(GpipeFileError) as whole:
        read_table(path, weight=True)
    assert "found 90" in str(whole.value)
    with dask.config.set({"gpipe.graph.read-bytes": 1200}), pytest.raises(GpipeFileError) as pieces:
        gpipe.read_edges(path, weight=True)
    assert str(pieces.value) == str(whole.value)
    indices[[650, 690]] = 0
    np.savez(path, indptr=indptr, indices=indices, weights=weights)
    with dask.config.set({"gpipe.graph.read-bytes": 1200}), pytest.raises(GpipeFileError) as pieces:
        gpipe.read_edges(path, weight=True)
    assert str(pieces.value) == str(pytest.raises(GpipeFileError, read_table, path, weight=True).value)
    assert "has 1 values that do not fit float32" in str(pieces.value) and "index 10 is 1e-60" in str(pieces.value)


def test_the_client_reads_only_the_indptr_of_an_npz(cpu, tmp_path):
    rng = np.random.default_rng(0)
    n, n_edges = 5000, 1_000_000
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rng.integers(0, n, n_edges), minlength=n))]).astype(np.int64)
    indices, weights = rng.integers(0, n, n_edges).astype(np.int32), rng.random(n_edges).astype(np.float32)
    path = tmp_path / "g.npz"
    np.savez(path, indptr=indptr, indices=indices, weights=weights)
    size = os.path.getsize(path)
    with dask.config.set({"gpipe.graph.read-bytes": 1 << 20}):
        tracemalloc.start()
        try:
            g = gpipe.read_edges(path, weight=True, directed=True, partitions=2, keep_duplicates=True,
                               keep_self_loops=True)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < size / 4, f"the client's peak ({peak} bytes) is not far below the file's size ({size} bytes)"
    assert (g.num_vertices, g.num_edges) == (n, n_edges)
    np.testing.assert_array_equal(g.degrees().to_numpy(), np.diff(indptr))


@pytest.mark.parametrize("weighted, directed, mode", [(True, False, "partitioned"), (False, True, "replicated")])
def test_graph_folder_read_by_the_workers_a_part_each_is_the_graph_written(cluster, tmp_path, monkeypatch, weighted,
                                                                            directed, mode):
    frame = _random_edges(ids=np.array([f"v{i}" for i in range(80)]), weighted=weighted)
    ref = gpipe.from_edges(frame, weight="w" if weighted else None, directed=directed, partitions=3, mode=mode)
    folder = ref.to_parquet(tmp_path / "saved")
    monkeypatch.setattr(gpipe.graph._readers._folder, "_graph_part", None)  # here only: the workers read parts
    g = gpipe.read_edges(folder, partitions=3, mode=mode)
    monkeypatch.undo()
    assert (g.mode, g.directed) == (mode, directed)
    _same_graph(g, ref, tmp_path)


@pytest.mark.parametrize("ids", ["dense", "small range", "wide range"])
def test_a_piece_left_on_a_device_numbers_and_maps_as_its_frame_does(ids):
    """A GPU worker's parsed piece is a dict of its device arrays: its distinct ids and dense edges are the frame's
    (numpy arrays stand in for the device's: the same array code)."""
    from gpipe.graph._io import _lookup, _to_dense, _unique_ids

    rng = np.random.default_rng(4)
    spread = {"dense": 1, "small range": 3, "wide range": 2**40}[ids]
    src, dst = rng.integers(0, 5000, 20_000) * spread, rng.integers(0, 5000, 20_000) * spread
    weight = rng.random(20_000)
    frame = pd.DataFrame({"src": src, "dst": dst, "weight": weight})
    chunk = {"src": src, "dst": dst, "weight": weight}
    np.testing.assert_array_equal(_unique_ids(chunk, "src", "dst"), np.sort(_unique_ids(frame, "src", "dst")))
    id_map = np.unique(np.concatenate([src, dst]))
    for lookup in (None, _lookup(id_map)) if ids == "dense" else (_lookup(id_map),):
        got, expected = _to_dense(chunk, "src", "dst", "weight", lookup), _to_dense(frame, "src", "dst", "weight", lookup)
        assert set(got) == set(expected)
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name])
            assert got[name].dtype == expected[name].dtype


@pytest.mark.parametrize("name", ["g.el", "g.npz", "graph", "parts/*.parquet"])
def test_a_relative_path_is_the_clients_file_whatever_the_workers_working_directory(cpu, tmp_path, monkeypatch,
                                                                                    name):
    frame = _random_edges()
    _snap(tmp_path / "g.el", frame)
    np.savez(tmp_path / "g.npz", **dict(zip(("indptr", "indices"), _csr())))
    gpipe.from_edges(frame, partitions=2).to_parquet(tmp_path / "graph")
    os.mkdir(tmp_path / "parts")
    frame.to_parquet(tmp_path / "parts" / "0.parquet")
    monkeypatch.chdir(tmp_path)  # the client's; the workers keep the one they started in
    assert os.getcwd() not in cpu.run(os.getcwd).values()
    _same_graph(gpipe.read_edges(name, partitions=2), gpipe.read_edges(tmp_path / name, partitions=2), tmp_path)
