"""What each writer does with what is already at its path (a real two-worker cluster).

Folder writers (``Graph.to_parquet``, ``WalkResult.to_parquet``, ``EdgeSample.to_parquet``,
``MiningResult.to_parquet``, ``PPRResult.scores_to_parquet``) write into a new or empty folder; they refuse anything else unless
``overwrite=True``, and even then replace only a folder that holds nothing but what gpipe writes there. The file writer
(``to_corpus``) replaces a file, as pandas does, and refuses a folder.
"""

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.errors import GpipeValueError
from helpers import tree


@pytest.fixture
def graph(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2, 3], "dst": [1, 2, 3, 0]}), partitions=2)
    yield g
    g.release()


def _writers(g):
    """Each folder writer, as ``write(path, **kwargs)``."""
    walks = gpipe.walks.deepwalk(g, length=3, seed=0)
    sample = gpipe.sampling.neighbor(g, seeds=[0, 2], fanout=1, depth=2)
    paths = gpipe.mining.match(g, [(0, 1), (1, 2)], embeddings=True)
    ppr = gpipe.walks.ppr(g, sources=[0, 2], walks_per_source=4, length=5, seed=0)
    return {"graph": g.to_parquet, "walks": walks.to_parquet, "sample": sample.to_parquet,
            "embeddings": paths.to_parquet, "scores": ppr.scores_to_parquet}


def _asked(overwrite: bool) -> dict:
    """The keywords of a call that asks to overwrite, or of a plain call."""
    return {"overwrite": True} if overwrite else {}


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("kind", ["graph", "walks", "sample", "embeddings", "scores"])
def test_folder_writers_keep_a_folder_they_did_not_write(graph, tmp_path, kind, overwrite):
    folder = tmp_path / "results"
    (folder / "figures").mkdir(parents=True)
    (folder / "thesis.tex").write_text("\\chapter{Results}\n")
    (folder / "figures" / "walks.pdf").write_bytes(b"%PDF")
    before = tree(folder)
    with pytest.raises(GpipeValueError, match=r"'path' .*thesis\.tex|'path' .*figures"):
        _writers(graph)[kind](folder, **_asked(overwrite))
    assert tree(folder) == before
    assert not list(tmp_path.glob(".*tmp*"))


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("kind", ["graph", "walks", "sample", "embeddings", "scores"])
def test_folder_writers_keep_a_file_of_that_name(graph, tmp_path, kind, overwrite):
    path = tmp_path / "results"
    path.write_text("not a folder\n")
    with pytest.raises(GpipeValueError, match="'path' must be a folder.*a file of that name exists"):
        _writers(graph)[kind](path, **_asked(overwrite))
    assert path.read_text() == "not a folder\n"


@pytest.mark.parametrize("kind", ["graph", "walks", "sample", "embeddings", "scores"])
def test_folder_writers_replace_their_own_output_only_when_asked(graph, tmp_path, kind):
    folder = tmp_path / "out"
    write = _writers(graph)[kind]
    write(folder)
    before = tree(folder)
    with pytest.raises(GpipeValueError, match="'path' must be a new or empty folder unless overwrite"):
        write(folder)
    assert tree(folder) == before
    (folder / "stale-extra.parquet").write_bytes(b"")  # not a name gpipe writes: no longer its output alone
    with pytest.raises(GpipeValueError, match="stale-extra.parquet"):
        write(folder, overwrite=True)
    (folder / "stale-extra.parquet").unlink()
    assert write(folder, overwrite=True) == str(folder)
    assert set(tree(folder)) == set(before)
    assert not list(tmp_path.glob(".*tmp*"))


def test_an_overwritten_graph_folder_holds_the_new_graph_only(graph, cpu, tmp_path):
    folder = tmp_path / "g"
    gpipe.generators.rmat(scale=5, edge_factor=2, partitions=3).to_parquet(folder)
    graph.to_parquet(folder, overwrite=True)
    back = gpipe.read_edges(folder)
    assert (back.num_vertices, back.num_edges) == (4, 4)
    assert sorted(p.name for p in folder.iterdir()) == ["_gpipe.json", "part-00000.parquet", "part-00001.parquet"]


def test_folder_writers_write_into_an_empty_folder(graph, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    graph.to_parquet(folder)
    assert gpipe.read_edges(folder).num_edges == 4


def test_a_scores_folder_reads_back_as_the_scores(graph, tmp_path):
    ppr = gpipe.walks.ppr(graph, sources=[0, 2], walks_per_source=4, length=5, seed=0)
    pd.testing.assert_frame_equal(pd.read_parquet(ppr.scores_to_parquet(tmp_path / "scores")), ppr.scores())


def test_the_file_writer_replaces_a_file_and_refuses_a_folder(graph, tmp_path):
    walks = gpipe.walks.deepwalk(graph, length=3, seed=0)
    corpus = tmp_path / "walks.txt"
    corpus.write_text("old\n")
    walks.to_corpus(corpus)
    assert len(corpus.read_text().splitlines()) == 4
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine\n")
    with pytest.raises(GpipeValueError, match="'path' must be a file.*a folder of that name exists"):
        walks.to_corpus(folder)
    assert (folder / "keep.txt").read_text() == "mine\n"
    assert np.array_equal(walks.compute()[:, 0], [0, 1, 2, 3])


def test_a_sample_folder_reads_back_as_the_sample(graph, tmp_path):
    sample = gpipe.sampling.neighbor(graph, seeds=[0, 1, 3], fanout=1, depth=2)
    pd.testing.assert_frame_equal(pd.read_parquet(sample.to_parquet(tmp_path / "edges")), sample.compute())
    pd.testing.assert_frame_equal(pd.read_parquet(sample.to_parquet(tmp_path / "nodes", nodes=True)), sample.nodes())


@pytest.mark.parametrize("seed", range(5))
def test_the_packed_stable_order_is_lexsorts(seed):
    from gpipe.runtime._result import _stable_order

    rng = np.random.default_rng(seed)
    keys = [rng.integers(0, 4, 500), rng.integers(0, 3, 500).astype(np.int32), rng.integers(0, 1 << 20, 500),
            rng.integers(0, 5, 500)]  # ties in every key, and in all of them: the order among ties is kept
    np.testing.assert_array_equal(_stable_order(keys), np.lexsort(keys[::-1]))
    wide = [rng.integers(0, 1 << 40, 500), rng.integers(0, 1 << 40, 500)]  # 80 bits: lexsort itself
    np.testing.assert_array_equal(_stable_order(wide), np.lexsort(wide[::-1]))
    negative = [rng.integers(-3, 3, 500), rng.integers(0, 3, 500)]
    np.testing.assert_array_equal(_stable_order(negative), np.lexsort(negative[::-1]))


@pytest.mark.parametrize("seed", range(3))
def test_a_block_sorted_by_every_column_as_keys_is_its_lexsorted_rows(seed):
    from gpipe.runtime._result import _in_order, _node_rows
    from gpipe.sampling._sampler import SAMPLE_LAYOUT

    rng = np.random.default_rng(seed)
    edges = {"instance": rng.integers(0, 4, 600), "depth": np.zeros(600, np.int32),  # a key of width 0
             "src": rng.integers(0, 30, 600), "dst": rng.integers(0, 1 << 20, 600)}
    edges["dst"][:100] = edges["dst"][100:200]  # rows equal in every column
    edges["src"][:100], edges["instance"][:100] = edges["src"][100:200], edges["instance"][100:200]
    order = np.lexsort([edges[c] for c in reversed(SAMPLE_LAYOUT.order)])
    ordered = _in_order(edges, SAMPLE_LAYOUT)
    assert list(ordered) == list(edges)
    for column, values in edges.items():
        np.testing.assert_array_equal(ordered[column], values[order])
        assert ordered[column].dtype == values.dtype
    vertices = {"instance": rng.integers(0, 4, 50), "vertex": rng.integers(0, 1 << 20, 50)}
    instance, vertex = _node_rows({"edges": edges, "vertices": vertices})
    pairs = sorted({(int(i), int(v)) for i, v in zip(np.concatenate([edges["instance"], edges["instance"],
                                                                      vertices["instance"]]),
                                                       np.concatenate([edges["src"], edges["dst"],
                                                                       vertices["vertex"]]))})
    assert list(zip(instance.tolist(), vertex.tolist())) == pairs
