"""What each writer does with what is already at its path (a real two-worker cluster).

Folder writers (``Graph.to_parquet``, ``WalkResult.to_parquet``, ``EdgeSample.to_parquet``,
``MiningResult.to_parquet``, ``PPRResult.scores_to_parquet``) write into a new or empty folder; they refuse anything
else unless ``overwrite=True``, and even then replace only a folder that holds nothing but files gpipe writes there (no
other file, link or empty folder). File writers (``to_corpus``, ``FrequentPatterns.to_parquet``, ``write_json``)
replace a regular file, as pandas does, and refuse anything else (a folder, a FIFO, a device). Both write through a
symbolic link to what it leads to.
"""

import builtins
import errno
import os

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe._files import _write_manifest
from gpipe.errors import GpipeError, GpipeValueError
from gpipe.workflow import atomic_dir, write_json
from helpers import tree


@pytest.fixture
def graph(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": [0, 1, 2, 3], "dst": [1, 2, 3, 0]}), partitions=2)
    yield g
    g.release()


def _writers(g):
    """Each folder writer, as ``write(path, **kwargs)``."""
    walks = gpipe.walks.deepwalk(g, length=3, seed=0)
    sample = gpipe.sampling.neighbor(g, seeds=[0, 2], fanouts=1, depth=2)
    paths = gpipe.mining.match(g, [(0, 1), (1, 2)], embeddings=True)
    ppr = gpipe.walks.ppr(g, start=[0, 2], walks_per_source=4, length=5, seed=0)
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
    assert sorted(p.name for p in folder.iterdir()) == [".gpipe-files.json", "_gpipe.json", "part-00000.parquet",
                                                        "part-00001.parquet"]


def test_overwrite_takes_the_part_files_of_a_graph_of_100000_partitions_or_more_for_gpipes(graph, tmp_path):
    """Part 100000 is part-100000.parquet: overwrite refused it as a file gpipe does not write, though the reader
    reads it as a part."""
    folder = tmp_path / "g"
    graph.to_parquet(folder)
    (folder / "part-100000.parquet").write_bytes(b"")  # as a graph of more partitions leaves it, listed as written
    _write_manifest(folder)
    graph.to_parquet(folder, overwrite=True)
    assert sorted(p.name for p in folder.iterdir()) == [".gpipe-files.json", "_gpipe.json", "part-00000.parquet",
                                                        "part-00001.parquet"]
    (folder / "part-012345.parquet").write_bytes(b"")  # not a name gpipe writes
    _write_manifest(folder)
    with pytest.raises(GpipeValueError, match="part-012345.parquet"):
        graph.to_parquet(folder, overwrite=True)


def test_folder_writers_write_into_an_empty_folder(graph, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    graph.to_parquet(folder)
    assert gpipe.read_edges(folder).num_edges == 4


def test_a_scores_folder_reads_back_as_the_scores(graph, tmp_path):
    ppr = gpipe.walks.ppr(graph, start=[0, 2], walks_per_source=4, length=5, seed=0)
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
    with pytest.raises(GpipeValueError, match="'path' must be a file path.*a folder of that name exists"):
        walks.to_corpus(folder)
    assert (folder / "keep.txt").read_text() == "mine\n"
    assert np.array_equal(walks.compute()[:, 0], [0, 1, 2, 3])


def _file_writers(g):
    """Each file writer, as ``write(path)``: the corpus, mined patterns, and the workflows' JSON."""
    patterns = gpipe.mining.FrequentPatterns(pd.DataFrame({"labels": [(0, 1)], "edges": [((0, 1),)], "support": [2]}),
                                             {"seconds": 0.0})
    return {"corpus": gpipe.walks.deepwalk(g, length=3, seed=0).to_corpus, "patterns": patterns.to_parquet,
            "json": lambda path: write_json(path, {"status": "ok"})}


@pytest.mark.parametrize("kind", ["corpus", "patterns", "json"])
def test_file_writers_refuse_a_fifo_or_a_link_to_a_device_and_leave_them(graph, tmp_path, kind):
    write = _file_writers(graph)[kind]
    fifo, device = tmp_path / "fifo", tmp_path / "null"
    os.mkfifo(fifo)
    device.symlink_to(os.devnull)
    with pytest.raises(GpipeValueError, match=f"'path' must be a file path.*got '{fifo}': a FIFO of that name"):
        write(fifo)
    with pytest.raises(GpipeValueError, match=f"got '{device}': it is a symbolic link to a character device"):
        write(device)
    assert fifo.is_fifo() and device.is_symlink() and device.is_char_device()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "null"]


@pytest.mark.parametrize("kind", ["corpus", "patterns", "json"])
def test_file_writers_write_through_a_link_to_a_file_and_refuse_a_link_to_nothing(graph, tmp_path, kind):
    write = _file_writers(graph)[kind]
    (tmp_path / "data").mkdir()
    target, link = tmp_path / "data" / "out", tmp_path / "out"
    target.write_text("old\n")
    link.symlink_to(target)
    assert os.fspath(write(link)) == str(link)
    assert link.is_symlink() and os.readlink(link) == str(target) and target.read_bytes() != b"old\n"
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["out"]
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(GpipeValueError, match=f"got '{loop}': a symbolic link that leads to no file"):
        write(loop)
    assert loop.is_symlink()


def test_the_corpus_under_a_file_or_in_a_read_only_folder_is_an_error_naming_the_path(graph, tmp_path, monkeypatch):
    walks = gpipe.walks.deepwalk(graph, length=3, seed=0)
    (tmp_path / "notes").write_text("mine\n")
    for path in (tmp_path / "notes" / "walks.txt", tmp_path / "notes" / "more" / "walks.txt"):
        with pytest.raises(GpipeValueError, match=f"'path' must be a file gpipe can create, got '{path}': "
                                                  f"'{tmp_path / 'notes'}' is a file, not a folder"):
            walks.to_corpus(path)
    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o555)
    real_open = builtins.open

    def refused_as_for_a_user(file, mode="r", *args, **kwargs):  # root writes anywhere: the kernel's answer to others
        if os.path.dirname(os.fspath(file)) == str(read_only) and "r" not in mode:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", refused_as_for_a_user)
    with pytest.raises(GpipeError, match=f"'path' must be a file gpipe can create, got '{read_only / 'walks.txt'}': "
                                         f"Permission denied \\(writing in '{read_only}'\\)"):
        walks.to_corpus(read_only / "walks.txt")
    assert os.listdir(read_only) == []


@pytest.mark.parametrize("kind", ["graph", "walks", "sample", "embeddings", "scores"])
def test_folder_writers_write_through_a_link_to_a_folder(graph, tmp_path, kind):
    (tmp_path / "scratch").mkdir()
    link = tmp_path / "results"
    link.symlink_to(tmp_path / "scratch")
    write = _writers(graph)[kind]
    assert write(link) == str(link)
    written = tree(tmp_path / "scratch")
    assert written and link.is_symlink()
    assert write(link, overwrite=True) == str(link)
    assert set(tree(tmp_path / "scratch")) == set(written) and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "scratch"]
    nowhere = tmp_path / "nowhere"
    nowhere.symlink_to(tmp_path / "gone")
    with pytest.raises(GpipeValueError, match=f"'path' must be a folder to write into, got '{nowhere}': a symbolic "
                                              "link that leads to no folder"):
        write(nowhere)


@pytest.mark.parametrize("kind", ["graph", "walks", "sample", "embeddings", "scores"])
def test_overwrite_keeps_a_folder_holding_a_link_an_empty_folder_or_a_fifo_and_names_it(graph, tmp_path, kind):
    folder, write = tmp_path / "out", _writers(graph)[kind]
    write(folder)
    mine = tmp_path / "mine.txt"
    mine.write_text("mine\n")
    own = sorted(folder.iterdir())[-1]  # a name gpipe writes there, now a link to the user's file
    own.unlink()
    own.symlink_to(mine)
    (folder / "empty").mkdir()
    (folder / "linked").symlink_to(tmp_path)
    os.mkfifo(folder / "pipe")
    foreign = sorted([(own.name, "a symbolic link"), ("empty", "an empty folder"), ("linked", "a symbolic link"),
                      ("pipe", "a FIFO")])
    for name, what in foreign:  # each refused in turn, naming it, and kept
        before = sorted(p.name for p in folder.iterdir())
        with pytest.raises(GpipeValueError, match=f"got '{folder}': '{name}' is {what}, not a file gpipe writes there"):
            write(folder, overwrite=True)
        assert sorted(p.name for p in folder.iterdir()) == before
        (os.rmdir if name == "empty" else os.unlink)(folder / name)
    assert mine.read_text() == "mine\n"
    assert write(folder, overwrite=True) == str(folder)
    assert own.is_file() and not own.is_symlink()


def test_a_sample_folder_reads_back_as_the_sample(graph, tmp_path):
    sample = gpipe.sampling.neighbor(graph, seeds=[0, 1, 3], fanouts=1, depth=2)
    pd.testing.assert_frame_equal(pd.read_parquet(sample.to_parquet(tmp_path / "edges")), sample.compute())
    pd.testing.assert_frame_equal(pd.read_parquet(sample.to_parquet(tmp_path / "nodes", nodes=True)), sample.nodes())


@pytest.mark.parametrize("names", ["strings", "wide ints"])
def test_a_samples_blocks_come_narrow_and_are_the_frames_the_workers_make(cpu, names):
    import dask

    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 300, 2000), rng.integers(0, 300, 2000)
    name = (lambda v: np.char.add("v", v.astype(str))) if names == "strings" else (lambda v: v * (1 << 40) - 7)
    g = gpipe.from_edges(pd.DataFrame({"src": name(src), "dst": name(dst)}), partitions=2)
    with dask.config.set({"gpipe.sampling.block-size": 300}):
        s = gpipe.sampling.neighbor(g, seeds=name(np.arange(0, 300, 3)), fanouts=3, depth=2, seed=1)
    edges, nodes = s.compute(), s.nodes()
    assert s.to_dask().npartitions > 3 and set(edges.src) <= set(name(src))
    pd.testing.assert_frame_equal(edges, s.to_dask().compute())  # widened on the client as the workers make them
    pd.testing.assert_frame_equal(nodes, s.to_dask(nodes=True).compute())
    assert [str(t) for t in edges.dtypes] == ["int64", "int32", str(edges.src.dtype), str(edges.src.dtype)]
    g.release()


@pytest.mark.parametrize("seed", range(5))
def test_the_packed_stable_order_is_lexsorts(seed):
    from gpipe.sampling._result import _stable_order

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
    from gpipe.sampling._result import _in_order, _node_rows
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


def test_one_large_allocation_is_counted_in_the_drivers_free_memory_after_the_pool_gives_back_what_it_can():
    """A GPU's free memory for one block: the pool's unused bytes are pieces of its allocations, of which only
    the wholly unused go back to the driver; a block is placed on the device only if the driver then has room
    (free_memory's count, driver + pool, refused a 27 GB block on an H200 with 14 GB 'free')."""
    from types import SimpleNamespace

    from gpipe.backend import can_allocate, free_memory

    state = {"driver": 10, "pooled": 20, "whole": 5, "released": 0}

    def release():
        state["released"] += 1
        state["driver"] += state["whole"]
        state["pooled"] -= state["whole"]
        state["whole"] = 0

    pool = SimpleNamespace(free_all_blocks=release, free_bytes=lambda: state["pooled"])
    gpu = SimpleNamespace(cuda=SimpleNamespace(Device=lambda: SimpleNamespace(mem_info=(state["driver"], 100))),
                          get_default_memory_pool=lambda: pool)
    assert free_memory(gpu) == 30
    assert can_allocate(gpu, 8) and state["released"] == 0  # within the driver's count: the pool keeps its blocks
    assert not can_allocate(gpu, 20)  # 30 'free', but one block of 20 has 15 at most
    assert state["released"] == 1 and state["driver"] == 15
    assert can_allocate(gpu, 15)
    assert can_allocate(np, 1) and not can_allocate(np, 1 << 62)


def _busy_at(path, monkeypatch):
    """``os.rename`` fails as a mount point at ``path`` makes it fail (EBUSY), renaming to or from it."""
    rename = os.rename

    def busy(src, dst, *args, **kwargs):
        if str(path) in (os.fspath(src), os.fspath(dst)):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), os.fspath(src), None, os.fspath(dst))
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", busy)


@pytest.mark.parametrize("before", ["absent", "empty", "earlier output"])
def test_a_finished_output_that_cannot_be_renamed_into_place_is_an_error_naming_it_and_leaves_nothing(
        tmp_path, monkeypatch, before):
    out = tmp_path / "out"
    if before == "empty":
        out.mkdir()
    elif before == "earlier output":
        with atomic_dir(out, owned=r"notes\.txt") as folder:
            (tmp_path / folder / "notes.txt").write_text("run 1\n")
    kept = tree(out) if out.exists() else None
    _busy_at(out, monkeypatch)
    with pytest.raises(GpipeValueError, match=f"^'out' must be a folder gpipe can rename its finished output to, got "
                                              f"'{out}': Device or resource busy .*; the output was not written$"):
        with atomic_dir(out, owned=r"notes\.txt", overwrite=True, name="out") as folder:
            (tmp_path / folder / "notes.txt").write_text("run 2\n")
    assert (tree(out) if out.exists() else None) == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if before == "absent" else ["out"])


def _a_mount_point(tmp_path, monkeypatch):
    """An empty folder that behaves as a mount point (a container's volume): renaming it, or over it, fails."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    ismount = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: os.fspath(p) == str(mnt) or ismount(p))
    _busy_at(mnt, monkeypatch)
    return mnt


def _notes(out, text: str, overwrite: bool = False):
    before = tree(out)
    with atomic_dir(out, owned=r"notes\.txt|walks\.parquet/part-\d\.parquet", overwrite=overwrite, name="out") as folder:
        assert tree(out) == before  # nothing appears before the end
        os.mkdir(os.path.join(folder, "walks.parquet"))
        for part in range(2):
            with open(os.path.join(folder, "walks.parquet", f"part-{part}.parquet"), "w") as f:
                f.write(text)
        with open(os.path.join(folder, "notes.txt"), "w") as f:
            f.write(text)


def test_a_mount_point_is_written_in_place_and_overwritten_with_its_own_output_only(tmp_path, monkeypatch):
    """The run's work is kept: the output is made inside the mount point, then moved up, its list last."""
    mnt = _a_mount_point(tmp_path, monkeypatch)
    _notes(mnt, "run 1\n")
    assert tree(mnt).keys() == {".gpipe-files.json", "notes.txt", "walks.parquet/part-0.parquet",
                                "walks.parquet/part-1.parquet"}
    with pytest.raises(GpipeValueError, match="must be a new or empty folder unless overwrite is set"):
        _notes(mnt, "run 2\n")
    _notes(mnt, "run 2\n", overwrite=True)
    assert tree(mnt)["notes.txt"] == tree(mnt)["walks.parquet/part-1.parquet"] == b"run 2\n"
    (mnt / "notes.txt").write_text("mine now\n")
    with pytest.raises(GpipeValueError, match="'notes.txt' is not the file gpipe wrote there"):
        _notes(mnt, "run 3\n", overwrite=True)
    assert (mnt / "notes.txt").read_text() == "mine now\n" and sorted(p.name for p in tmp_path.iterdir()) == ["mnt"]
    assert sorted(p.name for p in mnt.iterdir()) == [".gpipe-files.json", "notes.txt", "walks.parquet"]


def test_a_mount_point_whose_output_cannot_be_moved_up_keeps_the_earlier_output(tmp_path, monkeypatch):
    mnt = _a_mount_point(tmp_path, monkeypatch)
    _notes(mnt, "run 1\n")
    before = tree(mnt)
    rename = os.rename

    def fails_on_the_notes(src, dst, *args, **kwargs):  # the new notes, after the new walks.parquet has moved up
        if os.fspath(dst) == str(mnt / "notes.txt") and ".gpipe.tmp-" in os.fspath(src):
            raise OSError(errno.EIO, os.strerror(errno.EIO), os.fspath(src), None, os.fspath(dst))
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", fails_on_the_notes)
    with pytest.raises(GpipeValueError, match=f"^'out' must be a folder gpipe can rename its finished output to, got "
                                              f"'{mnt}': Input/output error .*; the output was not written$"):
        _notes(mnt, "run 2\n", overwrite=True)
    assert tree(mnt) == before and sorted(p.name for p in tmp_path.iterdir()) == ["mnt"]
    with pytest.raises(KeyboardInterrupt):  # an interrupted run leaves the mount point as it was too
        with atomic_dir(mnt, owned=r"notes\.txt|walks\.parquet/part-\d\.parquet", overwrite=True):
            raise KeyboardInterrupt
    assert tree(mnt) == before


def test_overwrite_keeps_a_users_file_of_a_name_gpipe_writes_and_names_it(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("my own summary\n")  # a folder gpipe never wrote
    with pytest.raises(GpipeValueError, match=f"^'out' must hold only gpipe's output to be overwritten, got '{out}': "
                                              "'summary.json' is not a file gpipe wrote there"):
        with atomic_dir(out, owned=r"summary\.json|walks\.txt", overwrite=True, name="out"):
            raise AssertionError("the work began")
    (out / "summary.json").unlink()
    with atomic_dir(out, owned=r"summary\.json|walks\.txt", name="out") as folder:
        (tmp_path / folder / "summary.json").write_text("{}\n")
        (tmp_path / folder / "walks.txt").write_text("0 1\n")
    (out / "walks.txt").unlink()
    (out / "walks.txt").write_text("my own walks\n")  # in place of gpipe's, under its name
    with pytest.raises(GpipeValueError, match="'walks.txt' is not the file gpipe wrote there"):
        with atomic_dir(out, owned=r"summary\.json|walks\.txt", overwrite=True, name="out"):
            raise AssertionError("the work began")
    assert (out / "walks.txt").read_text() == "my own walks\n"
    (out / "walks.txt").unlink()
    with atomic_dir(out, owned=r"summary\.json|walks\.txt", overwrite=True, name="out") as folder:
        (tmp_path / folder / "walks.txt").write_text("1 0\n")
    assert tree(out).keys() == {".gpipe-files.json", "walks.txt"}  # gpipe's own summary.json was replaced


def test_a_finished_file_that_cannot_be_renamed_into_place_is_an_error_naming_it_and_leaves_nothing(
        tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    path.write_text("run 1\n")
    replace = os.replace

    def busy(src, dst, *args, **kwargs):  # as a file bind-mounted at path
        if os.fspath(dst) == str(path):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), os.fspath(src), None, os.fspath(dst))
        return replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", busy)
    with pytest.raises(GpipeValueError, match=f"^'path' must be a file gpipe can rename its finished output to, got "
                                              f"'{path}': Device or resource busy .*; the output was not written$"):
        write_json(path, {"run": 2})
    assert path.read_text() == "run 1\n" and sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
