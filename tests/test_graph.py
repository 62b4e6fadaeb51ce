"""Graph construction on a real two-worker cluster: partitioning, cleaning, renumbering, I/O."""

import json

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.runtime._session import workers_info
from gpipe.errors import GpipeError, GpipeFileError, GpipeValueError
from helpers import hub_partition


def _stored_edges(g, tmp_path) -> pd.DataFrame:
    folder = g.to_parquet(tmp_path / "g")
    return pd.read_parquet(folder).sort_values(["src", "dst"]).reset_index(drop=True)


def _expected_undirected(edges: pd.DataFrame) -> pd.DataFrame:
    e = edges[edges.src != edges.dst]
    both = pd.concat([e, e.rename(columns={"src": "dst", "dst": "src"})])
    return both.drop_duplicates().sort_values(["src", "dst"]).reset_index(drop=True)


def test_undirected_graph_stores_both_directions_without_loops_or_duplicates(cpu, small_edges, tmp_path):
    edges = pd.concat([small_edges, pd.DataFrame({"src": [3, 3, 7], "dst": [3, 9, 9]})], ignore_index=True)
    g = gpipe.from_edges(edges, partitions=3)
    expected = _expected_undirected(edges)
    stored = _stored_edges(g, tmp_path)
    pd.testing.assert_frame_equal(stored[["src", "dst"]], expected[["src", "dst"]], check_dtype=False)
    assert g.num_edges == len(expected) // 2
    assert g.num_partitions == 3
    deg = g.degrees()
    np.testing.assert_array_equal(deg.to_numpy(), np.bincount(expected.src, minlength=g.num_vertices))


def test_keep_self_loops_and_duplicates(cpu, tmp_path):
    edges = pd.DataFrame({"src": [0, 0, 1, 2], "dst": [1, 1, 1, 0]})
    g = gpipe.from_edges(edges, directed=True, keep_self_loops=True, keep_duplicates=True, partitions=2)
    assert g.num_edges == 4
    g2 = gpipe.from_edges(edges, directed=True, partitions=2)
    assert g2.num_edges == 2
    assert g2.degrees().tolist() == [1, 0, 1]


def test_duplicate_weights_merge_to_the_largest(cpu, tmp_path):
    edges = pd.DataFrame({"src": [0, 1, 0, 1], "dst": [1, 0, 2, 2], "w": [0.5, 2.0, 1.0, 3.0]})
    g = gpipe.from_edges(edges, weight="w", partitions=2)
    stored = _stored_edges(g, tmp_path)
    got = {(s, d): w for s, d, w in stored.itertuples(index=False)}
    assert got == {(0, 1): 2.0, (1, 0): 2.0, (0, 2): 1.0, (2, 0): 1.0, (1, 2): 3.0, (2, 1): 3.0}
    assert g.weighted


def test_partitions_are_contiguous_and_edge_balanced(cpu):
    g = gpipe.generators.rmat(scale=12, edge_factor=8, seed=2, partitions=4)
    assert g.bounds[0] == 0 and g.bounds[-1] == 4096 and np.all(np.diff(g.bounds) > 0)
    edges = np.array([info["edges"] for info in g.partition_info])
    assert edges.max() / edges.mean() < 1.1
    assert set(g.placement) == set(workers_info(cpu))
    vertices = np.array([0, int(g.bounds[1]) - 1, int(g.bounds[1]), 4095])
    np.testing.assert_array_equal(g.owner(vertices), [0, 0, 1, 3])
    assert g.owner(0) == 0


def test_rmat_is_independent_of_partitions_and_symmetric(cpu, tmp_path):
    a = gpipe.generators.rmat(scale=10, edge_factor=8, seed=4, partitions=1)
    b = gpipe.generators.rmat(scale=10, edge_factor=8, seed=4, partitions=5)
    assert a.num_vertices == 1024 and a.num_edges == b.num_edges > 0
    np.testing.assert_array_equal(a.degrees(), b.degrees())
    stored = _stored_edges(b, tmp_path)
    assert not (stored.src == stored.dst).any()
    flipped = stored.rename(columns={"src": "dst", "dst": "src"})[["src", "dst"]]
    pd.testing.assert_frame_equal(flipped.sort_values(["src", "dst"]).reset_index(drop=True), stored[["src", "dst"]])
    c = gpipe.generators.rmat(scale=10, edge_factor=8, seed=5, partitions=1)
    assert not np.array_equal(a.degrees(), c.degrees())


def test_rmat_degrees_are_skewed(cpu):
    deg = gpipe.generators.rmat(scale=12, edge_factor=16, seed=0).degrees().to_numpy()
    assert deg.max() > 20 * deg.mean()


def test_string_ids_are_renumbered_and_translated_back(cpu):
    edges = pd.DataFrame({"src": ["x", "y", "z", "z"], "dst": ["y", "z", "x", "w"]})
    g = gpipe.from_edges(edges, partitions=2)
    assert g.num_vertices == 4 and g.num_edges == 4
    assert g.degrees().to_dict() == {"w": 1, "x": 2, "y": 2, "z": 3}
    assert g.owner("w") == 0
    with pytest.raises(GpipeValueError, match="'v' must hold vertices of the graph"):
        g.owner("nope")


@pytest.mark.parametrize("largest", [10**12, 2**20])
def test_sparse_integer_ids_are_renumbered(cpu, largest):
    edges = pd.DataFrame({"src": [largest, 5], "dst": [5, 7]})
    g = gpipe.from_edges(edges, partitions=1)
    assert g.num_vertices == 3
    assert g.degrees().to_dict() == {5: 2, 7: 1, largest: 1}
    # renumbered integer ids are found in a table over their range where it is small, else by a binary search of
    # the sorted id map; other types by its hash table
    assert (g._id_table is None) == (largest == 10**12)
    for ids in ([largest, 5, 7], np.array([7, 5], np.int32), np.array([5, 7], np.uint64), [7.0]):
        assert g.to_internal(ids).tolist() == pd.Index(g.id_map).get_indexer(ids).tolist()
        assert g.to_internal(ids).dtype == np.int64
    for absent in ([6], [largest + 1], [largest - 1], [4], [-1], [-(2**62)], ["5"]):
        with pytest.raises(GpipeValueError, match=r"'vertices' must hold vertices of the graph; 1 do not"):
            g.to_internal(absent)


@pytest.mark.parametrize("frame", [pd.DataFrame, dd.from_pandas], ids=["pandas", "dask"])
def test_uint64_ids_past_int64_are_refused_naming_the_column_never_wrapped(cpu, frame):
    edges = pd.DataFrame({"src": np.array([2**64 - 1, 1], np.uint64), "dst": np.array([1, 2], np.uint64)})
    edges = edges if frame is pd.DataFrame else frame(edges, npartitions=1)
    for renumber in (None, True, False):  # int64 wrapped 2**64 - 1 to the vertex -1
        with pytest.raises(GpipeValueError, match=r"'src' column 'src' must hold integer ids below 2\*\*63, got "
                                                  r"18446744073709551615"):
            gpipe.from_edges(edges, renumber=renumber)
    edges = pd.DataFrame({"src": np.array([2**63 - 1, 1], np.uint64), "dst": np.array([1, 2], np.uint64)})
    assert gpipe.from_edges(edges).degrees().to_dict() == {1: 2, 2: 1, 2**63 - 1: 1}


def test_a_one_vertex_graph_takes_one_partition_on_two_workers_unless_more_are_asked_for(cpu):
    edges = pd.DataFrame({"src": ["a"], "dst": ["a"]})
    assert gpipe.from_edges(edges, keep_self_loops=True, mode="partitioned").num_partitions == 1
    with pytest.raises(GpipeValueError, match=r"'partitions' must be at most the number of vertices \(1\), got 2"):
        gpipe.from_edges(edges, keep_self_loops=True, partitions=2)


def test_integer_ids_with_gaps_give_no_vertex_that_is_not_in_the_input(cpu):
    edges = pd.DataFrame({"src": [0, 1, 2, 4, 4], "dst": [1, 2, 4, 0, 2]})  # no 3: dense enough to be kept before
    g = gpipe.from_edges(edges, partitions=2)
    assert g.num_vertices == 4 and g.degrees().index.tolist() == [0, 1, 2, 4]
    assert gpipe.walks.deepwalk(g, length=3, seed=0).compute()[:, 0].tolist() == [0, 1, 2, 4]


def test_isolated_vertices_are_kept_when_the_input_says_so(cpu, tmp_path):
    edges = pd.DataFrame({"src": [1, 2], "dst": [2, 4]})
    g = gpipe.from_edges(edges, num_vertices=6, partitions=2)
    assert g.id_map is None and g.degrees().tolist() == [0, 1, 2, 0, 1, 0]
    path = tmp_path / "g.npz"
    np.savez(path, indptr=np.array([0, 0, 1, 1, 1, 1]), indices=np.array([3]))  # 5 rows, one edge
    g = gpipe.read_edges(path, directed=True, partitions=1)
    assert g.id_map is None and g.num_vertices == 5 and g.degrees().tolist() == [0, 1, 0, 0, 0]


def test_dask_frame_input(cpu, small_edges):
    g = gpipe.from_edges(dd.from_pandas(small_edges, npartitions=3), partitions=2)
    ref = gpipe.from_edges(small_edges, partitions=1)
    assert g.num_edges == ref.num_edges
    np.testing.assert_array_equal(g.degrees(), ref.degrees())


def test_graph_folder_round_trip(cpu, tmp_path):
    edges = pd.DataFrame({"src": ["a", "b", "c"], "dst": ["b", "c", "a"], "w": [1.0, 2.0, 3.0]})
    g = gpipe.from_edges(edges, weight="w", partitions=2)
    folder = g.to_parquet(tmp_path / "graph")
    back = gpipe.read_edges(folder, partitions=3)
    assert (back.num_vertices, back.num_edges, back.weighted, back.directed) == (3, 3, True, False)
    pd.testing.assert_series_equal(back.degrees(), g.degrees())
    a = gpipe.walks.deepwalk(g, length=6, seed=1).compute()
    b = gpipe.walks.deepwalk(back, length=6, seed=1).compute()
    np.testing.assert_array_equal(a, b)


def test_read_edges_snap_file(cpu, tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("# a SNAP file\n% another comment\n1\t2\n2 3\n\n3   1\n4 1\n")
    g = gpipe.read_edges(path, partitions=2)
    assert (g.num_vertices, g.num_edges) == (4, 4)
    assert g.degrees().to_dict() == {1: 3, 2: 2, 3: 2, 4: 1}  # 1-based ids: no vertex 0
    walks = gpipe.walks.deepwalk(g, length=4, seed=0)
    assert walks.compute()[:, 0].tolist() == [1, 2, 3, 4]
    lines = open(walks.to_corpus(tmp_path / "walks.txt")).read().split()
    assert "0" not in lines


def test_read_edges_malformed_file_names_file_and_line(cpu, tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("# header\n1 2\n2 3\n3 4 5 6\n")
    with pytest.raises(GpipeFileError, match=rf"{path}:4"):
        gpipe.read_edges(path)


def test_read_edges_formats_agree(cpu, small_edges, tmp_path):
    small_edges.to_csv(tmp_path / "e.csv", index=False)
    small_edges.to_parquet(tmp_path / "e.parquet")
    (tmp_path / "e.el").write_text("".join(f"{s} {d}\n" for s, d in small_edges.itertuples(index=False)))
    ref = gpipe.from_edges(small_edges).degrees()
    for name in ("e.csv", "e.parquet", "e.el"):
        pd.testing.assert_series_equal(gpipe.read_edges(tmp_path / name).degrees(), ref)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: gpipe.generators.rmat(scale=0), "'scale' must be a positive integer, got 0"),
        (lambda: gpipe.generators.rmat(scale=4, edge_factor=-1), "'edge_factor' must be a positive integer, got -1"),
        (lambda: gpipe.generators.rmat(scale=4, a=0.6, b=0.3, c=0.3), "'a \\+ b \\+ c' must be at most 1"),
        (lambda: gpipe.generators.rmat(scale=4, partitions=0), "'partitions' must be a positive integer, got 0"),
        (lambda: gpipe.generators.rmat(scale=2, partitions=9), "'partitions' must be at most the number of vertices"),
        (lambda: gpipe.generators.rmat(scale=40), r"'scale' and 'edge_factor' \(1099511627776 vertices, "
         r"17592186044416 edges\): the graph would take at least 264\.00 TiB, more than the workers' .* of memory"),
        (lambda: gpipe.generators.rmat(scale=4, edge_factor=2**50, weighted=True),
         r"'scale' and 'edge_factor' .*: the graph would take at least 320\.00 PiB"),
        (lambda: gpipe.from_edges(pd.DataFrame({"a": [1], "dst": [2]})), "'src' must name a column of the frame, got 'src'"),
        (lambda: gpipe.from_edges(pd.DataFrame({"src": [1], "dst": [2], "w": [-1.0]}), weight="w"),
         "'weight' column 'w' must hold finite, non-negative numbers"),
        (lambda: gpipe.from_edges(pd.DataFrame({"src": [1, 2], "dst": [2, 3], "w": [1.0, 1e300]}), weight="w"),
         r"'weight' column 'w' must hold .* that fit float32 .*; row 1 is 1e\+300"),
        (lambda: gpipe.from_edges(pd.DataFrame({"src": [1, 2], "dst": [2, 3], "w": [1e-60, 1.0]}), weight="w"),
         r"'weight' column 'w' must hold .* that fit float32 .*; row 0 is 1e-60"),
        (lambda: gpipe.from_edges([(1, 2)]), "'frame' must be a pandas, cudf or dask DataFrame, got list"),
        (lambda: gpipe.from_edges(pd.DataFrame({"src": ["a"], "dst": [2]})), "all integers or all strings"),
        (lambda: gpipe.from_edges(pd.DataFrame({"src": [0], "dst": [2**63 - 1]}), renumber=False),
         "'renumber' must be True .* when the largest id is 9223372036854775807"),
        (lambda: gpipe.generators.rmat(scale=4, weighted="yes"), "'weighted' must be true or false, got 'yes'"),
        (lambda: gpipe.generators.rmat(scale=4, directed="no"), "'directed' must be true or false, got 'no'"),
        (lambda: gpipe.generators.rmat(scale=4, scramble=0), "'scramble' must be true or false, got 0"),
        (lambda: gpipe.from_edges(pd.DataFrame({"src": [0], "dst": [1]}), directed="yes"),
         "'directed' must be true or false, got 'yes'"),
        (lambda: gpipe.from_edges(pd.DataFrame({"src": [0], "dst": [1]}), keep_self_loops=1),
         "'keep_self_loops' must be true or false, got 1"),
        (lambda: gpipe.from_edges(pd.DataFrame({"src": [0], "dst": [1]}), keep_duplicates="no"),
         "'keep_duplicates' must be true or false, got 'no'"),
        (lambda: gpipe.walks.deepwalk(gpipe.generators.rmat(scale=4, weighted=True), weighted="yes"),
         "'weighted' must be true or false, got 'yes'"),
        (lambda: gpipe.walks.node2vec(gpipe.generators.rmat(scale=4, weighted=True), weighted=1),
         "'weighted' must be true or false, got 1"),
        (lambda: gpipe.walks.deepwalk(None), "'g' must be a gpipe.Graph .*, got NoneType"),
        (lambda: gpipe.walks.metropolis_hastings(pd.DataFrame({"src": [0], "dst": [1]})),
         "'g' must be a gpipe.Graph .*, got DataFrame"),
        (lambda: gpipe.walks.ppr(None, start=[0]), "'g' must be a gpipe.Graph .*, got NoneType"),
        (lambda: gpipe.walks.multidimensional("graph.txt"), "'g' must be a gpipe.Graph .*, got str"),
    ],
)
def test_bad_parameters_are_rejected_by_name(cpu, call, message):
    with pytest.raises(GpipeValueError, match=message):
        call()


def test_a_graph_of_a_closed_client_says_its_cluster_is_closed(cpu_cluster):
    with gpipe.connect(address=cpu_cluster.scheduler.address):
        g = gpipe.generators.rmat(scale=5, edge_factor=2, seed=0)
    for call in (lambda: gpipe.walks.deepwalk(g, length=2), lambda: gpipe.sampling.neighbor(g, seeds=[0]),
                 lambda: g.degrees()):
        with pytest.raises(GpipeError, match="this graph's cluster is closed"):
            call()
    g.release()  # nothing left to free: no error


def _partitions_of(graph_id, dask_worker=None):
    return sum(k[0] == graph_id for k in dask_worker.plugins["gpipe"].partitions._held)


def test_partitions_are_released_with_the_graph(cpu, eventually):
    import gc

    def held(graph_id):
        return sum(cpu.run(_partitions_of, graph_id).values())

    g = gpipe.generators.rmat(scale=6, edge_factor=2, seed=0, partitions=3)
    graph_id = g.graph_id
    assert held(graph_id) == 3
    del g
    gc.collect()
    assert eventually(lambda: held(graph_id) == 0)
    g = gpipe.generators.rmat(scale=6, edge_factor=2, seed=0, partitions=2)
    g.release()
    assert held(g.graph_id) == 0


def _drop(folder, name):
    (folder / name).unlink()


def _fewer_rows(folder, name):
    part = pd.read_parquet(folder / name)
    part.iloc[: len(part) // 2].to_parquet(folder / name, index=False)


def _cut(folder, name):
    data = (folder / name).read_bytes()
    (folder / name).write_bytes(data[: len(data) // 2])


def _edit_meta(change):
    def damage(folder, name):
        meta = json.loads((folder / name).read_text())
        change(meta)
        (folder / name).write_text(json.dumps(meta))
    return damage


@pytest.mark.parametrize("damage, name, message", [
    (_drop, "part-00001.parquet", "missing: _gpipe.json lists 3 partitions"),
    (_fewer_rows, "part-00001.parquet", r"holds \d+ edges; _gpipe.json says \d+"),
    (_cut, "part-00001.parquet", "not readable as parquet"),
    (lambda folder, name: (folder / name).write_bytes((folder / "part-00000.parquet").read_bytes()),
     "part-00003.parquet",
     "not one of the 3 partitions _gpipe.json lists"),
    (lambda folder, name: (folder / name).write_text('{"format": "gpipe-graph",\n'), "_gpipe.json", "not valid JSON"),
    (_edit_meta(lambda m: m.pop("num_edges")), "_gpipe.json", "no key 'num_edges'"),
    (_edit_meta(lambda m: m.update(partitions="3")), "_gpipe.json", "'partitions' must be an integer"),
    (_edit_meta(lambda m: m.update(version=True)), "_gpipe.json", "format version True is not 1 or 2"),
    (_edit_meta(lambda m: m.update(num_edges=m["num_edges"] + 1)), "_gpipe.json",
     r"'num_edges' is \d+ but the part files hold \d+ edges"),
])
def test_a_damaged_graph_folder_is_an_error_naming_the_file(cpu, tmp_path, damage, name, message):
    folder = tmp_path / "graph"
    gpipe.generators.rmat(scale=6, edge_factor=4, seed=1, partitions=3).to_parquet(folder)
    damage(folder, name)
    with pytest.raises(GpipeFileError, match=message) as info:
        gpipe.read_edges(folder)
    assert info.value.path == str(folder / name)



@pytest.mark.parametrize("keep_duplicates", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("rows", [40, 400])  # rows of ~75 edges (a merge sort each), or of ~7 (an insertion sort)
def test_cpu_partition_rows_are_the_edges_sorted_with_duplicates_merged_to_their_largest_weight(keep_duplicates,
                                                                                               weighted, rows):
    from gpipe.graph._build import _csr_cpu, _csr_device

    rng = np.random.default_rng(7)
    lo, m = 5, 3000
    src, dst = rng.integers(lo, lo + rows, m), rng.integers(0, 60, m)
    src[:50] = dst[:50] = lo + 3  # self-loops, duplicated
    weight = rng.random(m).astype(np.float32) if weighted else None
    indptr, indices, weights, loops = _csr_cpu(src - lo, dst, weight, rows, lo, keep_duplicates)
    frame = pd.DataFrame({"src": src, "dst": dst, "w": weight if weighted else 0.0})
    if not keep_duplicates:
        frame = frame.groupby(["src", "dst"], as_index=False)["w"].max()
    frame = frame.sort_values(["src", "dst"], kind="stable", ignore_index=True)
    np.testing.assert_array_equal(np.diff(indptr), np.bincount(frame["src"] - lo, minlength=rows))
    np.testing.assert_array_equal(indices, frame["dst"])
    if weighted:
        np.testing.assert_array_equal(weights, frame["w"].to_numpy(np.float32))
    else:
        assert weights is None
    assert loops == int((frame["src"] == frame["dst"]).sum())
    # the device path, sorting ranges of rows of at most 700 edges from pieces it never concatenates whole
    cuts = [0, 1000, 1001, 2200, m]
    pieces = [{"src": src[a:b], "dst": dst[a:b], **({"weight": weight[a:b]} if weighted else {})}
              for a, b in zip(cuts, cuts[1:])]
    for most in (700, m):
        got = _csr_device(np, pieces, weighted, lo=lo, hi=lo + rows, n=60, keep_duplicates=keep_duplicates,
                          index_dtype=np.int32, most=most)
        np.testing.assert_array_equal(got[0], indptr)
        np.testing.assert_array_equal(got[1], indices)
        assert got[1].dtype == np.int32 and got[3] == loops
        if weighted:
            np.testing.assert_array_equal(got[2], weights)


@pytest.mark.parametrize("spread", [3, 10**12])  # ids a bitmap of their range numbers, and ids too far apart
def test_integer_ids_are_numbered_by_their_sorted_distinct_values(spread):
    from gpipe.graph._io import _lookup, _merge_ids, _to_dense, _unique_ids

    rng = np.random.default_rng(3)
    chunks = [pd.DataFrame({"s": rng.integers(0, 1000, 500) * spread + 7, "d": rng.integers(0, 1000, 500) * spread})
              for _ in range(3)]
    ids = _merge_ids(*[_unique_ids(c, "s", "d") for c in chunks])
    everything = np.concatenate([np.concatenate([c["s"], c["d"]]) for c in chunks])
    np.testing.assert_array_equal(ids, np.unique(everything))
    for c in chunks:
        dense = _to_dense(c, "s", "d", None, _lookup(ids))
        np.testing.assert_array_equal(ids[dense["src"]], c["s"])
        np.testing.assert_array_equal(ids[dense["dst"]], c["d"])


@pytest.mark.parametrize("ids, lo", [(np.int32, 0), (np.int64, 5000)])
def test_a_partitions_arc_filter_clears_no_bit_of_an_arc_and_few_others(ids, lo):
    from gpipe._search import arc_bit
    from gpipe.graph._partition import ARC_FILTER_BITS

    part = hub_partition(ids, lo, seed=3)
    bits = part.arc_filter()
    size = bits.shape[0] * 32
    assert bits.dtype == np.uint32 and size - 32 < ARC_FILTER_BITS * part.num_edges <= size
    v = np.repeat(np.arange(part.lo, part.hi), np.diff(part.indptr))
    b = np.array([arc_bit(t, x, size) for t, x in zip(v, part.indices)])
    assert ((bits[b >> 5] >> (b & 31)) & 1).all()  # no arc is ever said absent
    others = np.array([arc_bit(t, x, size) for t, x in zip(v[:5000], np.arange(1 << 20, (1 << 20) + 5000))])
    assert ((bits[others >> 5] >> (others & 31)) & 1).mean() < 0.1  # no arcs: 1 - exp(-1/16) of the bits are set
    assert part.arc_filter() is bits and part.nbytes == part.indptr.nbytes + part.indices.nbytes + bits.nbytes
