"""The inputs users have in hand: a networkx graph, a SciPy sparse matrix, PyG's edge_index, a MatrixMarket file;
each gives the graph gpipe.from_edges builds from the same edges, on a real two-worker cluster."""

import concurrent.futures
import gzip
import tempfile
import threading
from pathlib import Path

import dask
import fsspec
import networkx as nx
import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp

import gpipe
from gpipe.errors import GpipeFileError, GpipeValueError
from gpipe.graph._remote import _copy


def _held(g, folder) -> tuple:
    """What a graph is: its shape, flags, ids and stored edges (as ``Graph.to_parquet`` writes them)."""
    parts = sorted(Path(g.to_parquet(folder)).glob("part-*.parquet"))
    edges = pd.concat(map(pd.read_parquet, parts)).sort_values(["src", "dst"]).reset_index(drop=True)
    ids = None if g.id_map is None else list(g.id_map)
    return g.num_vertices, g.num_edges, g.directed, g.weighted, ids, edges.to_dict("list")


@pytest.mark.parametrize("directed", [False, True])
def test_a_networkx_graph_is_the_graph_of_its_edges(cpu, tmp_path, directed):
    G = (nx.DiGraph if directed else nx.Graph)()
    G.add_weighted_edges_from([("a", "b", 0.5), ("b", "c", 2.0), ("c", "a", 1.0), ("c", "d", 3.0)])
    g = gpipe.from_networkx(G, weight="weight", partitions=2)
    frame = pd.DataFrame(list(G.edges(data="weight")), columns=["src", "dst", "w"])
    ref = gpipe.from_edges(frame, weight="w", directed=directed, partitions=2)
    assert _held(g, tmp_path / "g") == _held(ref, tmp_path / "ref")
    assert g.directed is directed and g.degrees().to_dict()["c"] == (2 if directed else 3)
    np.testing.assert_array_equal(gpipe.walks.deepwalk(g, length=5, seed=3).compute(),
                                  gpipe.walks.deepwalk(ref, length=5, seed=3).compute())


def test_a_networkx_graph_numbered_0_to_n_minus_1_keeps_its_nodes_without_edges(cpu):
    G = nx.path_graph(3)
    G.add_node(3)
    g = gpipe.from_networkx(G)
    assert (g.num_vertices, g.id_map) == (4, None) and g.degrees().tolist() == [1, 2, 1, 0]
    sparse = nx.Graph([(10, 20)])
    sparse.add_node(30)  # not numbered 0..n-1: the vertices are the nodes with edges, as from_edges has them
    assert gpipe.from_networkx(sparse).degrees().to_dict() == {10: 1, 20: 1}


def test_from_networkx_takes_directedness_from_the_graph_unless_told(cpu):
    G = nx.DiGraph([(0, 1), (1, 2)])
    assert gpipe.from_networkx(G).degrees().tolist() == [1, 1, 0]
    assert gpipe.from_networkx(G, directed=False).degrees().tolist() == [1, 2, 1]


def test_networkx_edges_without_the_weight_attribute_weigh_one_and_parallel_edges_merge(cpu, tmp_path):
    G = nx.MultiDiGraph()
    G.add_edge(0, 1, w=4.0)
    G.add_edge(0, 1, w=2.0)
    G.add_edge(1, 2)
    g = gpipe.from_networkx(G, weight="w")
    assert _held(g, tmp_path / "g")[-1] == {"src": [0, 1], "dst": [1, 2], "weight": [4.0, 1.0]}


@pytest.mark.parametrize("build", [sp.csr_array, sp.csc_array, sp.coo_array, sp.csr_matrix])
def test_a_sparse_matrix_is_the_graph_of_its_entries_with_its_rows_as_vertices(cpu, tmp_path, build):
    rows, cols, values = [0, 1, 2, 2, 4], [1, 2, 0, 4, 0], [0.5, 1.0, 2.0, 3.0, 0.25]
    matrix = build((values, (rows, cols)), shape=(6, 6))
    g = gpipe.from_scipy(matrix, weighted=True, directed=True, partitions=2)
    ref = gpipe.from_edges(pd.DataFrame({"src": rows, "dst": cols, "w": values}), weight="w", directed=True,
                           partitions=2, num_vertices=6)
    assert _held(g, tmp_path / "g") == _held(ref, tmp_path / "ref")
    assert g.degrees().tolist() == [1, 1, 2, 0, 1, 0]  # vertex 5, with no entry, is a vertex
    unweighted = gpipe.from_scipy(matrix)
    assert (unweighted.weighted, unweighted.directed, unweighted.degrees().tolist()) == (
        False, False, [3, 2, 3, 0, 2, 0])


def test_an_edge_index_is_the_graph_of_its_columns_with_its_ids_as_vertices(cpu, tmp_path):
    edge_index = np.array([[0, 2, 2, 5], [2, 0, 5, 0]], dtype=np.int32)
    weight = np.array([1.0, 2.0, 0.5, 4.0], dtype=np.float32)
    g = gpipe.from_edge_index(edge_index, weight=weight, directed=True, partitions=2)
    ref = gpipe.from_edges(pd.DataFrame({"src": edge_index[0], "dst": edge_index[1], "w": weight}), weight="w",
                           directed=True, partitions=2, renumber=False)
    assert _held(g, tmp_path / "g") == _held(ref, tmp_path / "ref")
    assert g.degrees().tolist() == [1, 0, 2, 0, 0, 1]  # ids 1, 3 and 4: isolated vertices, never renumbered away
    assert gpipe.from_edge_index(edge_index.tolist(), num_vertices=8).num_vertices == 8


class _DLPackProducer:
    """An array that numpy reads only through DLPack, as it reads a CPU torch tensor (torch is not installed here:
    the protocol is what gpipe relies on, not torch)."""

    def __init__(self, array: np.ndarray):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_an_edge_index_read_through_dlpack_is_the_array_it_holds(cpu):
    edge_index = np.array([[0, 1, 3], [1, 2, 0]])
    g = gpipe.from_edge_index(_DLPackProducer(edge_index), weight=_DLPackProducer(np.array([1.0, 2.0, 3.0])))
    ref = gpipe.from_edge_index(edge_index, weight=np.array([1.0, 2.0, 3.0]))
    assert g.weighted and g.degrees().tolist() == ref.degrees().tolist() == [2, 2, 1, 1]


@pytest.mark.parametrize("call, message", [
    (lambda: gpipe.from_networkx([(0, 1)]), "'G' must be a networkx graph, got list"),
    (lambda: gpipe.from_networkx(nx.empty_graph(3)), "'G' must have at least one edge, got a Graph of 3 nodes"),
    (lambda: gpipe.from_networkx(nx.Graph([(0, "a")])), "'G' nodes must be all integers or all strings, got "
     "mixed-integer nodes such as 0: relabel them with networkx.convert_node_labels_to_integers"),
    (lambda: gpipe.from_networkx(nx.Graph([((0, 0), (0, 1))])), "'G' nodes must be all integers or all strings, got "
     r"mixed nodes such as \(0, 0\)"),
    (lambda: gpipe.from_networkx(nx.Graph([(0, 1)]), weight="w"),
     "'weight' must name an edge attribute of 'G', got 'w', which no edge has"),
    (lambda: gpipe.from_networkx(nx.Graph([(0, 1, {"w": 1.0}), (1, 2, {"w": -2.0})]), weight="w"),
     r"'G' edge attribute 'w' must hold finite, non-negative numbers that fit float32 .*; edge 1 is -2.0"),
    (lambda: gpipe.from_networkx(nx.Graph([(0, 1, {"w": "heavy"})]), weight="w"),
     "'G' edge attribute 'w' must be numeric, got dtype"),
    (lambda: gpipe.from_networkx(nx.Graph([(0, 1)]), directed="yes"), "'directed' must be true or false, got 'yes'"),
    (lambda: gpipe.from_scipy(np.eye(3)), "'matrix' must be a SciPy sparse matrix or array .*, got ndarray: a dense "
     r"array a converts with scipy.sparse.csr_array\(a\)"),
    (lambda: gpipe.from_scipy(sp.csr_array(np.ones((2, 3)))),
     r"'matrix' must be square \(row i and column i are vertex i\), got shape \(2, 3\)"),
    (lambda: gpipe.from_scipy(sp.csr_array((3, 3))), r"'matrix' must hold at least one stored entry .*shape \(3, 3\)"),
    (lambda: gpipe.from_scipy(sp.coo_array(([1.0, -1.0], ([0, 1], [1, 0])), shape=(2, 2)), weighted=True),
     "'matrix' values must hold finite, non-negative numbers that fit float32 .*; stored entry 1 is -1.0"),
    (lambda: gpipe.from_scipy(sp.eye(2), weighted=1), "'weighted' must be true or false, got 1"),
    (lambda: gpipe.from_edge_index(np.array([[0, 1], [1, 2], [2, 0]])),
     r"'edge_index' must be a 2 x E array \(sources in row 0, targets in row 1\), got shape \(3, 2\): pass "
     r"edge_index.T for an E x 2 array"),
    (lambda: gpipe.from_edge_index(np.zeros((2, 0), int)), r"'edge_index' must hold at least one edge, got shape"),
    (lambda: gpipe.from_edge_index([[0, -1], [1, 0]]), "'edge_index' must hold integers >= 0, got -1"),
    (lambda: gpipe.from_edge_index([[0.5, 1], [1, 0]]), "'edge_index' must hold integers, got dtype float64"),
    (lambda: gpipe.from_edge_index([[0, 5], [1, 0]], num_vertices=5),
     r"'num_vertices' must exceed the largest id \(5\), got 5"),
    (lambda: gpipe.from_edge_index([[0, 1], [1, 0]], num_vertices=0), "'num_vertices' must be a positive integer"),
    (lambda: gpipe.from_edge_index([[0, 1], [1, 0]], weight=[[1.0], [2.0]]),
     r"'weight' must be a 1-D array of one value per edge \(2\), got shape \(2, 1\)"),
    (lambda: gpipe.from_edge_index([[0, 1], [1, 0]], weight=[1.0, np.inf]),
     "'weight' must hold finite, non-negative numbers that fit float32 .*; edge 1 is inf"),
])
def test_bad_inputs_are_rejected_by_name(cpu, call, message):
    with pytest.raises(GpipeValueError, match=message):
        call()


def _mtx(path, matrix, symmetry="general"):
    scipy.io.mmwrite(path, matrix, symmetry=symmetry)
    return path


@pytest.mark.parametrize("directed", [False, True])
def test_a_matrixmarket_file_is_the_graph_of_its_matrix(cpu, tmp_path, directed):
    rng = np.random.default_rng(7)
    lower = sp.tril(sp.random_array((60, 60), density=0.08, format="coo", rng=rng)).tocoo()
    full = (lower + sp.triu(lower.T, k=1)).tocoo()  # the symmetric matrix whose lower triangle a symmetric file holds
    general = _mtx(tmp_path / "general.mtx", full)
    symmetric = _mtx(tmp_path / "symmetric.mtx", full, symmetry="symmetric")
    ref = _held(gpipe.from_scipy(full, weighted=True, directed=directed, partitions=2), tmp_path / "ref")
    with dask.config.set({"gpipe.graph.read-bytes": 300}):  # pieces from the byte after the header, read apart
        for i, path in enumerate([general, symmetric]):
            assert _held(gpipe.read_edges(path, directed=directed, partitions=2), tmp_path / f"g{i}") == ref


def test_a_bad_entry_in_a_later_piece_of_a_matrixmarket_file_names_its_line(cpu, tmp_path):
    lines = ["%%MatrixMarket matrix coordinate pattern general", "200 200 100"]
    lines += [f"{i + 1} {(i * 7) % 200 + 1}" for i in range(99)] + ["5 201"]
    path = tmp_path / "g.mtx"
    path.write_text("\n".join(lines) + "\n")
    with dask.config.set({"gpipe.graph.read-bytes": 300}), pytest.raises(
            GpipeFileError, match=rf"{path}:102: column '201' is not an integer from 1 to 200"):
        gpipe.read_edges(path)


def _in_memory(local: Path, name: str) -> str:
    """``local`` (a file or a folder) put in fsspec's in-memory filesystem of this process, at ``memory://<name>``:
    object storage that the workers do not share, so what they read is the copy read_edges gives their host."""
    fs = fsspec.filesystem("memory")
    fs.put(str(local), f"/{name}", recursive=local.is_dir())
    return f"memory://{name}"


def _written(folder: Path, edges: pd.DataFrame) -> dict:
    """The edges written in each format read_edges reads, by the name of their input."""
    edges.to_csv(folder / "e.csv", index=False)
    (folder / "e.txt").write_text("".join(f"{s} {d} {w}\n" for s, d, w in edges.itertuples(index=False)))
    (folder / "e.txt.gz").write_bytes(gzip.compress((folder / "e.txt").read_bytes()))
    (folder / "pq").mkdir()
    edges.iloc[:40].to_parquet(folder / "pq" / "a.parquet")
    edges.iloc[40:].to_parquet(folder / "pq" / "b.parquet")
    n = int(edges[["src", "dst"]].max().max()) + 1
    matrix = sp.coo_array((edges.w, (edges.src, edges.dst)), shape=(n, n))
    sp.save_npz(folder / "e.npz", matrix.tocsr())
    scipy.io.mmwrite(folder / "e.mtx", matrix)
    return {"e.csv": {"weight": "w"}, "e.txt": {}, "e.txt.gz": {}, "pq": {"weight": "w"},
            "pq/*.parquet": {"weight": "w"}, "e.npz": {"weight": True}, "e.mtx": {}}


def test_every_format_read_edges_reads_is_read_from_a_url_as_from_a_file(cpu, tmp_path):
    rng = np.random.default_rng(3)
    edges = pd.DataFrame({"src": rng.integers(0, 30, 90), "dst": rng.integers(0, 30, 90),
                          "w": rng.integers(1, 9, 90).astype(float)})
    local = tmp_path / "local"
    local.mkdir()
    inputs = _written(local, edges)
    bucket = _in_memory(local, "bucket")
    for name, options in inputs.items():
        ref = gpipe.read_edges(str(local / name), **options)
        g = gpipe.read_edges(f"{bucket}/{name}", **options)
        assert (g.num_vertices, g.num_edges, g.weighted) == (ref.num_vertices, ref.num_edges, True), name
        pd.testing.assert_series_equal(g.degrees(), ref.degrees())
    folder = gpipe.from_edges(edges, weight="w").to_parquet(tmp_path / "graph")
    g = gpipe.read_edges(_in_memory(Path(folder), "graph-folder"))
    assert (g.num_edges, g.weighted) == (gpipe.read_edges(folder).num_edges, True)
    assert not list(Path(tempfile.gettempdir()).glob("gpipe-remote-*"))  # the copies are removed


def test_a_bad_file_at_a_url_is_named_by_its_url_and_line(cpu, tmp_path):
    (tmp_path / "bad.txt").write_text("0 1\n1 2\n2 3 4 5\n")
    url = _in_memory(tmp_path / "bad.txt", "bad/bad.txt")
    with pytest.raises(GpipeFileError, match=f"^{url}:3: expected 2 or 3 whitespace-separated fields, got 4$"):
        gpipe.read_edges(url)
    with pytest.raises(GpipeFileError, match="^memory://bad/gone.txt: missing: no such file or folder$"):
        gpipe.read_edges("memory://bad/gone.txt")


def test_a_host_copies_a_url_once_though_its_workers_copy_it_at_once(tmp_path):
    fs = fsspec.filesystem("memory")
    fs.pipe("/once/e.txt", b"0 1\n")
    folder = str(tmp_path / "copy")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: _copy(fs, ["/once/e.txt"], "/once", folder), range(4)))
    assert [p.name for p in tmp_path.iterdir()] == ["copy"] and (tmp_path / "copy" / "e.txt").read_text() == "0 1\n"
    fs.pipe("/once/e.txt", b"2 3\n")
    _copy(fs, ["/once/e.txt"], "/once", folder)  # the host has it: nothing is fetched again
    assert (tmp_path / "copy" / "e.txt").read_text() == "0 1\n"


class _Store:
    """Object storage whose fetches are counted, the first ``failing`` of them writing half the file and failing,
    each waiting (up to ``wait`` seconds) for ``copiers`` fetches to be under way at once: copiers that do not take
    turns are all seen fetching."""

    def __init__(self, copiers: int, failing: int = 0, wait: float = 0.2):
        self.copiers, self.failing, self.wait = copiers, failing, wait
        self.fetches, self.at_once, self.most_at_once = 0, 0, 0
        self.changed = threading.Condition()

    def get_file(self, name: str, target: str) -> None:
        with self.changed:
            self.fetches += 1
            self.at_once += 1
            self.most_at_once = max(self.most_at_once, self.at_once)
            fails = self.fetches <= self.failing
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.at_once == self.copiers, self.wait)
        try:
            Path(target).write_text("0 1\n"[:2 if fails else 4])
            if fails:
                raise OSError(f"{name}: the connection was reset")
        finally:
            with self.changed:
                self.at_once -= 1


def test_the_workers_of_a_host_fetch_a_url_once_one_at_a_time(tmp_path):
    store, folder = _Store(copiers=8), str(tmp_path / "copy")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: _copy(store, ["/once/e.txt"], "/once", folder), range(8)))
    assert (store.fetches, store.most_at_once) == (1, 1)
    assert [p.name for p in tmp_path.iterdir()] == ["copy"] and (tmp_path / "copy" / "e.txt").read_text() == "0 1\n"


def test_a_copy_that_fails_leaves_nothing_and_the_next_copier_copies(tmp_path):
    store, folder = _Store(copiers=4, failing=1, wait=0.05), str(tmp_path / "copy")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        copies = [pool.submit(_copy, store, ["/once/e.txt"], "/once", folder) for _ in range(4)]
    assert [str(c.exception()) for c in copies if c.exception()] == ["/once/e.txt: the connection was reset"]
    assert [p.name for p in tmp_path.iterdir()] == ["copy"] and (tmp_path / "copy" / "e.txt").read_text() == "0 1\n"
    store.failing = store.fetches + 1  # the next fetch fails
    with pytest.raises(OSError, match="the connection was reset"):
        _copy(store, ["/again/e.txt"], "/again", str(tmp_path / "again"))
    assert [p.name for p in tmp_path.iterdir()] == ["copy"]  # no half-made folder, no lock


def test_an_edge_index_on_a_gpu_this_process_cannot_read_says_to_pass_it_from_the_host(cpu):
    class OnGpu(_DLPackProducer):
        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

    if gpipe.backend.gpu_problem() is None:
        pytest.skip("this process has a GPU: it reads the array")
    with pytest.raises(GpipeValueError, match=r"'edge_index' must be on the host .*: pass edge_index.cpu\(\)"):
        gpipe.from_edge_index(OnGpu(np.array([[0], [1]])))
