"""A locality-aware vertex order (the builders' ``vertex_order``): a permutation of the dense ids that keeps the
user's ids, the walk's law and results independent of partitions and workers, and cuts fewer crossings where the
graph has locality."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats

import gpipe
from gpipe.errors import GpipeValueError
from gpipe.graph._build import csr
from gpipe.graph._order import crossing_fractions, cuthill_mckee_levels, reverse_cuthill_mckee
from helpers import transition_chi2

try:
    import pymetis  # noqa: F401
    ORDERS = ["rcmk", "metis"]
except ImportError:
    ORDERS = ["rcmk", pytest.param("metis", marks=pytest.mark.skip(reason="pymetis is not installed"))]


def _edges(g, tmp_path) -> set:
    """The graph's stored arcs in the user's ids."""
    folder = Path(g.to_parquet(tmp_path / "graph"))
    stored = pd.concat([pd.read_parquet(part) for part in sorted(folder.glob("part-*.parquet"))])
    ids = np.arange(g.num_vertices) if g.id_map is None else g.id_map
    return set(zip(ids[stored.src].tolist(), ids[stored.dst].tolist()))


def _ring_of_cliques(cliques: int, size: int, seed: int) -> pd.DataFrame:
    """Cliques joined in a ring by one edge each, the vertex ids shuffled: locality the input's order hides."""
    members = np.arange(cliques * size).reshape(cliques, size)
    src, dst = np.triu_indices(size, 1)
    inside = [(m[src], m[dst]) for m in members]
    ring = (members[:, 0], np.roll(members[:, 1], 1))
    ids = np.random.default_rng(seed).permutation(cliques * size)
    return pd.DataFrame({"src": ids[np.concatenate([a for a, _ in inside] + [ring[0]])],
                         "dst": ids[np.concatenate([b for _, b in inside] + [ring[1]])]})


def test_the_gpu_level_at_a_time_order_is_the_numba_twins():
    rng = np.random.default_rng(3)
    for _ in range(30):
        n, m = int(rng.integers(1, 300)), int(rng.integers(0, 600))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        keep = src != dst
        pieces = [{"src": np.concatenate([src[keep], dst[keep]]), "dst": np.concatenate([dst[keep], src[keep]])}]
        indptr, indices, _, _ = csr(np, pieces, lo=0, hi=n, n=n, keep_duplicates=False, index_dtype=np.int64)
        twin = reverse_cuthill_mckee(np, indptr, indices)
        by_key = np.argsort(np.diff(indptr) * n + np.arange(n))
        key = np.empty(n, np.int64)
        key[by_key] = np.arange(n)
        np.testing.assert_array_equal(cuthill_mckee_levels(np, indptr, indices, by_key, key)[::-1], twin)
        np.testing.assert_array_equal(np.sort(twin), np.arange(n))


def test_reverse_cuthill_mckee_narrows_the_band_as_scipys_does():
    """Its bandwidth on a shuffled grid is the grid's (scipy's RCM gives the same), against hundreds shuffled."""
    grid = sp.csr_matrix(sp.kron(sp.eye(30), sp.diags([1, 1], [-1, 1], (30, 30), dtype=np.int8)) +
                         sp.diags([1, 1], [-30, 30], (900, 900), dtype=np.int8))
    shuffle = np.random.default_rng(1).permutation(900)
    grid = grid[shuffle][:, shuffle].tocsr()
    order = reverse_cuthill_mckee(np, grid.indptr.astype(np.int64), grid.indices.astype(np.int64))
    rank = np.empty(900, np.int64)
    rank[order] = np.arange(900)
    coo = grid.tocoo()
    assert np.abs(rank[coo.row] - rank[coo.col]).max() <= 31 < np.abs(coo.row - coo.col).max()


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("order", ORDERS)
def test_the_order_is_a_permutation_that_keeps_the_users_ids_and_edges(cpu, order, directed, tmp_path):
    plain = gpipe.generators.rmat(scale=9, edge_factor=4, seed=1, partitions=2, directed=directed)
    g = gpipe.generators.rmat(scale=9, edge_factor=4, seed=1, partitions=2, directed=directed, vertex_order=order)
    assert plain.id_map is None and g.num_edges == plain.num_edges
    np.testing.assert_array_equal(np.sort(g.id_map), np.arange(512))
    assert not np.array_equal(g.id_map, np.arange(512))
    np.testing.assert_array_equal(g.to_internal(g.id_map), np.arange(512))
    assert g.degrees().sort_index().equals(plain.degrees().rename_axis("vertex"))
    assert _edges(g, tmp_path / "ordered") == _edges(plain, tmp_path / "plain")


def test_an_order_composes_with_renumbered_ids_and_reads_back_from_a_graph_folder(cpu, tmp_path):
    edges = pd.DataFrame({"src": ["a", "b", "c", "c", "e"], "dst": ["b", "c", "a", "d", "f"]})
    g = gpipe.from_edges(edges, partitions=2, vertex_order="rcmk")
    assert sorted(g.id_map.tolist()) == ["a", "b", "c", "d", "e", "f"]
    assert g.degrees().to_dict() == {"a": 2, "b": 2, "c": 3, "d": 1, "e": 1, "f": 1}
    again = gpipe.read_edges(g.to_parquet(tmp_path / "graph"))
    assert again.degrees().equals(g.degrees())


def test_self_loops_kept_do_not_change_the_order(cpu, small_edges):
    loops = pd.DataFrame({"src": [3, 7], "dst": [3, 7]})
    with_loops = gpipe.from_edges(pd.concat([small_edges, loops]), keep_self_loops=True, vertex_order="rcmk")
    np.testing.assert_array_equal(with_loops.id_map, gpipe.from_edges(small_edges, vertex_order="rcmk").id_map)


def test_a_walk_keeps_its_law_with_the_order_on(cpu, small_edges):
    """Chi-square of every vertex's transition counts vs 1/deg (false-alarm rate 1e-3, fixed seed)."""
    g = gpipe.from_edges(small_edges, partitions=3, vertex_order="rcmk")
    walks = gpipe.walks.deepwalk(g, length=30, walks_per_vertex=60, seed=11).compute()
    chi2, dof = transition_chi2(walks, g.degrees())
    assert dof > 50
    assert stats.chi2.sf(chi2, dof) > 1e-3


@pytest.mark.parametrize("order", ORDERS)
def test_walks_with_the_order_on_do_not_depend_on_partitions(cpu, order):
    results = []
    for parts in (1, 2, 4):
        g = gpipe.generators.rmat(scale=10, edge_factor=4, seed=2, partitions=parts, vertex_order=order)
        results.append(gpipe.walks.deepwalk(g, length=25, walks_per_vertex=2, seed=9).compute())
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


def test_walks_with_the_order_on_do_not_depend_on_worker_count(cpu_cluster, one_worker_cluster, small_edges):
    out = []
    for client in (cpu_cluster, one_worker_cluster):
        with client.as_current():
            g = gpipe.from_edges(small_edges, partitions=2, vertex_order="rcmk")
            out.append(gpipe.walks.deepwalk(g, length=20, walks_per_vertex=3, seed=4).compute())
    np.testing.assert_array_equal(out[0], out[1])


@pytest.mark.parametrize("order", ORDERS)
def test_an_order_cuts_fewer_crossings_where_the_graph_has_locality(cpu, order):
    edges = _ring_of_cliques(cliques=40, size=8, seed=2)
    plain, ordered = (gpipe.from_edges(edges, vertex_order=o) for o in (None, order))
    assert crossing_fractions(plain, 1) == (0.0, 0.0)
    for parts in (2, 4):
        before, after = crossing_fractions(plain, parts)[0], crossing_fractions(ordered, parts)[0]
        assert before > 0.4 and after < 0.05, (parts, before, after)


def test_crossing_fractions_count_arcs_and_vertices(cpu):
    """A path 0-1-2-3 in two ranges of equal arcs cuts arc 1-2 both ways: 2 of 6 arcs; vertices 1 and 2 each
    cross with one of two arcs."""
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 3]}))
    arcs, vertices = crossing_fractions(g, 2)
    assert arcs == pytest.approx(2 / 6) and vertices == pytest.approx((0.5 + 0.5) / 4)


@pytest.mark.parametrize("value", ["rcm", "METIS", 1, ["rcmk"]])
def test_an_unknown_order_is_refused_by_every_builder(cpu, value, tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("0 1\n1 2\n")
    message = r"^'vertex_order' must be None or one of 'rcmk', 'metis'; got "
    with pytest.raises(GpipeValueError, match=message):
        gpipe.from_edges(pd.DataFrame({"src": [0], "dst": [1]}), vertex_order=value)
    with pytest.raises(GpipeValueError, match=message):
        gpipe.read_edges(path, vertex_order=value)
    with pytest.raises(GpipeValueError, match=message):
        gpipe.generators.rmat(scale=4, vertex_order=value)


def test_metis_without_pymetis_is_refused_saying_what_to_install(cpu, monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)
    with pytest.raises(GpipeValueError, match=r"^'vertex_order' 'metis' needs pymetis.*`pip install pymetis`"):
        gpipe.generators.rmat(scale=4, vertex_order="metis")
