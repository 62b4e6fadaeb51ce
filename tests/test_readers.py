"""Tests of gpipe.graph._readers.read_table: snap, csv, parquet, npz and mtx edge tables; and of graph folders."""

import bz2
import gzip
import json
import lzma
import os
import tracemalloc
import zlib

import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.errors import GpipeFileError, GpipeValueError
from gpipe.graph._readers import read_table


def _write(path, text):
    path.write_text(text)
    return path


def _rows(frame):
    return frame.to_numpy().tolist()


def _file_error(path, lineno, match, **kwargs):
    with pytest.raises(GpipeFileError, match=match) as info:
        read_table(path, **kwargs)
    where = f"{path}:{lineno}" if lineno is not None else f"{path}: "
    assert where in str(info.value)
    assert info.value.line == lineno
    return info.value


# --- snap ---------------------------------------------------------------------------------------

def test_snap_comments_blanks_tabs_and_spaces(tmp_path):
    path = _write(tmp_path / "g.txt", "# Directed graph\n% Nodes: 4\n\n0\t1\n1    2\n   \n2 \t 3\n% late\n3 0\n")
    frame, num_vertices = read_table(path)
    assert list(frame.columns) == ["src", "dst"]
    assert frame["src"].dtype == np.int64 and frame["dst"].dtype == np.int64
    assert _rows(frame) == [[0, 1], [1, 2], [2, 3], [3, 0]]
    assert num_vertices is None


def test_snap_comment_between_data_lines(tmp_path):
    path = _write(tmp_path / "g.el", "5 6\n# note\n7 8\n% a longer note\n")
    frame, _ = read_table(path)
    assert frame["src"].tolist() == [5, 7] and frame["dst"].tolist() == [6, 8]
    assert frame["src"].dtype == np.int64


def test_snap_three_columns_weight(tmp_path):
    path = _write(tmp_path / "g.edges", "# w\n0 1 0.5\n1 2 2\n2 0 1.25e1\n")
    frame, _ = read_table(path)
    assert list(frame.columns) == ["src", "dst", "weight"]
    assert frame["weight"].dtype == np.float64
    assert _rows(frame) == [[0, 1, 0.5], [1, 2, 2.0], [2, 0, 12.5]]
    assert list(read_table(path, weight=True)[0].columns) == ["src", "dst", "weight"]


def test_snap_weight_false_drops_the_column(tmp_path):
    path = _write(tmp_path / "g.tsv", "0\t1\t0.5\n1\t2\t2\n")
    frame, _ = read_table(path, weight=False)
    assert list(frame.columns) == ["src", "dst"]
    assert _rows(frame) == [[0, 1], [1, 2]]
    signed = _write(tmp_path / "signed.txt", "# a signed network\n0 1 -1\n1 2 +1\n2 0 n/a\n")  # not weights
    assert _rows(read_table(signed, weight=False)[0]) == [[0, 1], [1, 2], [2, 0]]


def test_snap_weight_true_needs_a_third_column(tmp_path):
    path = _write(tmp_path / "g.txt", "0 1\n")
    _file_error(path, None, "third column", weight=True)


def test_snap_string_ids(tmp_path):
    path = _write(tmp_path / "g.txt", "alice bob\n# c\nbob  carol\n")
    frame, _ = read_table(path)
    assert frame["src"].tolist() == ["alice", "bob"] and frame["dst"].tolist() == ["bob", "carol"]
    assert frame["src"].dtype == frame["dst"].dtype != np.int64


def test_snap_mixed_ids_are_all_strings(tmp_path):
    path = _write(tmp_path / "g.txt", "1 2\n3 x\n007 4\n")
    frame, _ = read_table(path)
    assert frame["src"].tolist() == ["1", "3", "007"]
    assert frame["dst"].tolist() == ["2", "x", "4"]
    assert frame["src"].dtype == frame["dst"].dtype


def test_snap_mixed_ids_with_comment_and_weight(tmp_path):
    path = _write(tmp_path / "g.snap", "1 b 1.5\n% note\na 2 2.5\n")
    frame, _ = read_table(path)
    assert _rows(frame) == [["1", "b", 1.5], ["a", "2", 2.5]]


def _lines_with_comments(lines: list[str], end: str) -> str:
    """``lines`` with comment lines before, between and after them, each line ending in ``end``."""
    commented = ["# header", "% Nodes: 4"]
    for i, line in enumerate(lines):
        commented += [line] + (["#", "   % indented", "\t#1 2", "# 3 4 5 6"] if i % 3 == 1 else [])
    return "".join(line + end for line in commented + ["% the end"])


@pytest.mark.parametrize("block", [1 << 22, 5])  # 5 bytes: every line and comment crosses a block boundary
@pytest.mark.parametrize("end", ["\n", "\r\n"])
@pytest.mark.parametrize("lines", [
    ["0 1", "1 2", "2 3", "3 0", "1 3"],
    ["0 1 0.5", "1 2 2", "2 0 1e-3", "3 1 4"],
    ["alice bob", "bob c#rol", "c#rol 1", "1 alice"],
])
def test_snap_comment_lines_anywhere_read_as_without_them(tmp_path, monkeypatch, block, end, lines):
    monkeypatch.setattr("gpipe.graph._readers._common._BLOCK", block)
    plain, _ = read_table(_write(tmp_path / "plain.txt", "".join(line + end for line in lines)))
    text = _lines_with_comments(lines, end)
    for path in (_write(tmp_path / "commented.txt", text), _write(tmp_path / "bom.txt", "\ufeff" + text)):
        pd.testing.assert_frame_equal(read_table(path)[0], plain)
    with gzip.open(tmp_path / "commented.txt.gz", "wt", newline="") as f:
        f.write(text)
    pd.testing.assert_frame_equal(read_table(tmp_path / "commented.txt.gz")[0], plain)
    bad = _write(tmp_path / "bad.txt", text.replace(lines[2] + end, lines[2] + " 7 7" + end))
    _file_error(bad, text.split(end).index(lines[2]) + 1, "got [45]")


def test_snap_comment_lines_keep_the_fast_path(tmp_path, monkeypatch):
    """Comment lines are emptied on the way to a parser of the whole piece, not left to the line-by-line scan (which
    took 12x as long as the fast path; with its comment lines emptied it takes about 1.2x)."""
    from gpipe.graph._readers import _snap

    rng = np.random.default_rng(0)
    lines = [f"{s} {d}\n" for s, d in rng.integers(0, 50_000, (200_000, 2))]
    commented = _write(tmp_path / "commented.txt", "".join(
        line + ("# a comment line\n" if i % 20_000 == 10_000 else "") for i, line in enumerate(lines)))

    def scanned(*args):
        raise AssertionError("the line-by-line scan ran")

    monkeypatch.setattr(_snap, "_scan_snap", scanned)
    frame, _ = read_table(commented)
    assert len(frame) == len(lines)


def test_snap_gzip(tmp_path):
    path = tmp_path / "g.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("# c\n0 1\n1 2\n")
    frame, _ = read_table(path)
    assert _rows(frame) == [[0, 1], [1, 2]]


def test_snap_gzip_bad_line(tmp_path):
    path = tmp_path / "g.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("# c\n0 1\n1 2 3 4\n")
    _file_error(path, 3, "got 4")


def test_snap_too_many_fields_after_comments(tmp_path):
    path = _write(tmp_path / "g.txt", "# header\n% more\n0 1\n\n1 2 3 4\n2 3\n")
    err = _file_error(path, 5, "expected 2 or 3 whitespace-separated fields, got 4")
    assert err.path == str(path)


def test_snap_one_field(tmp_path):
    path = _write(tmp_path / "g.txt", "0 1\n1 2\n7\n")
    _file_error(path, 3, "got 1")


def test_snap_non_numeric_weight(tmp_path):
    path = _write(tmp_path / "g.txt", "# c\n0 1 1.0\n1 2 abc\n")
    _file_error(path, 3, "weight 'abc' is not a number")


def test_negative_weights_name_the_line_or_row(tmp_path):
    _file_error(_write(tmp_path / "g.txt", "# w\n0 1 0.5\n1 2 -0.5\n2 0 1\n"), 3,
                "weight '-0.5' is negative; weights must be >= 0")
    _file_error(_write(tmp_path / "g.csv", "src,dst,w\n0,1,0.5\n1,2,-0.5\n"), 3, "weight '-0.5' is negative",
                weight="w")
    path = tmp_path / "e.parquet"
    pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 0], "w": [1.0, 2.0, -0.5]}).to_parquet(path)
    _file_error(path, None, "column 'w' has 1 values that are negative; weights must be >= 0; row 2 is -0.5",
                weight="w")
    path = tmp_path / "g.npz"
    np.savez(path, indptr=np.array([0, 1, 2]), indices=np.array([1, 0]), weights=np.array([-2.0, 1.0]))
    _file_error(path, None, "'weights' has 1 values that are negative.*; index 0 is -2.0", weight=True)


def test_snap_non_finite_weight(tmp_path):
    path = _write(tmp_path / "g.txt", "0 1 1.0\n1 2 inf\n")
    _file_error(path, 2, "weight 'inf' is not finite")


def test_snap_inconsistent_column_count(tmp_path):
    path = _write(tmp_path / "g.txt", "# c\n\n0 1 0.5\n1 2 0.5\n2 3\n")
    _file_error(path, 5, r"expected 3 fields like the first data line \(line 3\), got 2")


def test_snap_inconsistent_column_count_two_then_three(tmp_path):
    path = _write(tmp_path / "g.txt", "0 1\n# c\n1 2 0.5\n")
    _file_error(path, 3, r"expected 2 fields like the first data line \(line 1\), got 3")


def test_snap_first_bad_line_is_reported(tmp_path):
    path = _write(tmp_path / "g.txt", "0 1 1\n1 2 x\n2 3 4 5\n")
    _file_error(path, 2, "weight 'x'")


def test_snap_empty_file(tmp_path):
    for name, text in (("empty.txt", ""), ("comments.txt", "# a\n% b\n\n")):
        _file_error(_write(tmp_path / name, text), None, "no edges")


# --- compressed text ----------------------------------------------------------------------------

_COMPRESSIONS = {".gz": (gzip.compress, lambda data: zlib.decompressobj(wbits=31).decompress(data)),
                 ".bz2": (lambda data: bz2.compress(data, 1), lambda data: bz2.BZ2Decompressor().decompress(data)),
                 ".xz": (lzma.compress, lambda data: lzma.LZMADecompressor().decompress(data))}


def _cut_short(path) -> int:
    """Write an edge list at ``path`` (snap, or csv with a header, as its name says), compressed as its suffix says
    and cut halfway; return the line its readable text ends in."""
    compress, readable = _COMPRESSIONS[path.suffix]
    csv = ".csv" in path.suffixes
    text = ("src,dst\n" if csv else "") + "".join(f"{i}{',' if csv else ' '}{i + 1}\n" for i in range(40000))
    whole = compress(text.encode())
    path.write_bytes(whole[:len(whole) // 2])
    return readable(whole[:len(whole) // 2]).count(b"\n") + 1


@pytest.mark.parametrize("suffix", list(_COMPRESSIONS))
@pytest.mark.parametrize("name", ["g.txt", "g.csv"])
def test_compressed_text_cut_short_is_an_error_naming_the_file_and_the_line_it_ends_in(tmp_path, suffix, name):
    path = tmp_path / (name + suffix)
    _file_error(path, _cut_short(path), f"not readable as {suffix} data: .*ended before the end-of-stream marker")


@pytest.mark.parametrize("suffix", list(_COMPRESSIONS))
@pytest.mark.parametrize("name", ["g.txt", "g.csv"])
def test_text_that_is_not_compressed_as_its_suffix_says_is_an_error_naming_the_file(tmp_path, suffix, name):
    path = tmp_path / (name + suffix)
    path.write_bytes(b"src,dst\n0,1\n1,2\n")
    _file_error(path, None, f"not readable as {suffix} data: ")


def test_a_compressed_edge_list_cut_short_is_named_by_the_worker_that_reads_it(cpu, tmp_path):
    path = tmp_path / "g.txt.gz"
    line = _cut_short(path)
    with pytest.raises(GpipeFileError, match="ended before the end-of-stream marker") as info:
        gpipe.read_edges(path)
    assert (info.value.path, info.value.line) == (str(path), line)


# --- csv ----------------------------------------------------------------------------------------

def test_csv_selects_and_renames_columns(tmp_path):
    path = _write(tmp_path / "e.csv", "w,from,label,to\n0.5,1,x,2\n2,3,y,1\n")
    frame, num_vertices = read_table(path, src="from", dst="to", weight="w")
    assert list(frame.columns) == ["src", "dst", "weight"]
    assert frame["src"].dtype == np.int64 and frame["weight"].dtype == np.float64
    assert _rows(frame) == [[1, 2, 0.5], [3, 1, 2.0]]
    assert num_vertices is None


def test_csv_without_weight_and_string_ids(tmp_path):
    path = _write(tmp_path / "e.csv", "src,dst,w\na,1,0.5\nb,c,1\n")
    frame, _ = read_table(path)
    assert list(frame.columns) == ["src", "dst"]
    assert frame["src"].tolist() == ["a", "b"] and frame["dst"].tolist() == ["1", "c"]


def test_csv_missing_column(tmp_path):
    path = _write(tmp_path / "e.csv", "src,dst\n0,1\n")
    err = _file_error(path, 1, "no column 'w' in the header", weight="w")
    assert "['src', 'dst']" in str(err)


def test_csv_short_row(tmp_path):
    path = _write(tmp_path / "e.csv", "src,dst,w\n0,1,1\n1,2,1\n2,3\n")
    _file_error(path, 4, "expected 3 fields like the header, got 2", weight="w")


def test_csv_long_row(tmp_path):
    path = _write(tmp_path / "e.csv", "src,dst\n0,1\n1,2,3\n")
    _file_error(path, 3, "got 3")


def test_csv_non_numeric_weight(tmp_path):
    path = _write(tmp_path / "e.csv", "src,dst,w\n0,1,1\n1,2,heavy\n")
    _file_error(path, 3, "weight 'heavy' is not a number", weight="w")


def test_csv_missing_id(tmp_path):
    path = _write(tmp_path / "e.csv", "src,dst\n0,1\n\n,2\n")
    _file_error(path, 4, "column 'src' is empty")


def test_csv_header_only(tmp_path):
    _file_error(_write(tmp_path / "e.csv", "src,dst\n"), None, "no edges")


def test_csv_weight_must_be_a_name(tmp_path):
    path = _write(tmp_path / "e.csv", "src,dst\n0,1\n")
    with pytest.raises(GpipeValueError, match="'weight'"):
        read_table(path, weight=True)


# --- parquet ------------------------------------------------------------------------------------

def test_parquet_file(tmp_path):
    path = tmp_path / "e.parquet"
    pd.DataFrame({"a": [3, 1], "b": [0, 2], "c": [1.5, 2], "extra": ["x", "y"]}).to_parquet(path)
    frame, num_vertices = read_table(path, src="a", dst="b", weight="c")
    assert list(frame.columns) == ["src", "dst", "weight"]
    assert frame["src"].dtype == np.int64 and frame["weight"].dtype == np.float64
    assert _rows(frame) == [[3, 0, 1.5], [1, 2, 2.0]]
    assert num_vertices is None


def test_parquet_directory_of_two_files(tmp_path):
    folder = tmp_path / "edges"
    folder.mkdir()
    pd.DataFrame({"src": [0, 1], "dst": [1, 2]}).to_parquet(folder / "part-0.parquet")
    pd.DataFrame({"src": [2], "dst": [0]}).to_parquet(folder / "part-1.parquet")
    frame, _ = read_table(folder)
    assert _rows(frame) == [[0, 1], [1, 2], [2, 0]]


def test_parquet_uint64_ids_above_int64_are_an_error_naming_the_column(tmp_path):
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"src": pa.array([1, 2**63], pa.uint64()), "dst": pa.array([2, 3], pa.uint64())}), path)
    _file_error(path, None, r"column 'src' holds id 9223372036854775808, above 2\*\*63 - 1")
    pq.write_table(pa.table({"src": pa.array([1, 2**63 - 1], pa.uint64()), "dst": pa.array([2, 3], pa.uint64())}),
                   path)
    assert _rows(read_table(path)[0]) == [[1, 2], [2**63 - 1, 3]]


def test_parquet_missing_column(tmp_path):
    path = tmp_path / "e.pq"
    pd.DataFrame({"src": [0], "dst": [1]}).to_parquet(path)
    err = _file_error(path, None, "no column 'weight'", weight="weight")
    assert "['src', 'dst']" in str(err)


def test_parquet_null_weight(tmp_path):
    path = tmp_path / "e.parquet"
    pd.DataFrame({"src": [0, 1], "dst": [1, 2], "w": [1.0, None]}).to_parquet(path)
    _file_error(path, None, "column 'w' has 1 null values", weight="w")


# --- npz ----------------------------------------------------------------------------------------

def test_npz_scipy_format_with_isolated_vertices(tmp_path):
    sparse = pytest.importorskip("scipy.sparse")
    matrix = sparse.csr_matrix((np.array([2.0, 3.0, 4.0]), (np.array([0, 0, 2]), np.array([1, 2, 0]))), shape=(6, 6))
    path = tmp_path / "g.npz"
    sparse.save_npz(path, matrix)
    frame, num_vertices = read_table(path, weight=True)
    assert num_vertices == 6
    assert _rows(frame) == [[0, 1, 2.0], [0, 2, 3.0], [2, 0, 4.0]]
    unweighted, _ = read_table(path)
    assert list(unweighted.columns) == ["src", "dst"]
    assert unweighted["src"].dtype == np.int64 and unweighted["dst"].dtype == np.int64


def test_npz_scipy_non_csr_format(tmp_path):
    sparse = pytest.importorskip("scipy.sparse")
    path = tmp_path / "g.npz"
    sparse.save_npz(path, sparse.coo_matrix(np.eye(2)))
    _file_error(path, None, "'coo'")


def test_npz_plain_savez(tmp_path):
    path = tmp_path / "g.npz"
    np.savez(path, indptr=np.array([0, 2, 2, 3, 3, 3]), indices=np.array([1, 3, 0]), weights=np.array([0.5, 1, 2]))
    frame, num_vertices = read_table(path, weight=True)
    assert num_vertices == 5
    assert _rows(frame) == [[0, 1, 0.5], [0, 3, 1.0], [2, 0, 2.0]]
    assert list(read_table(path, weight=None)[0].columns) == ["src", "dst"]


def test_npz_index_out_of_range(tmp_path):
    path = tmp_path / "g.npz"
    np.savez(path, indptr=np.array([0, 1, 2]), indices=np.array([1, 2]))
    _file_error(path, None, r"must lie in \[0, 2\); found 2")


def test_npz_bad_indptr(tmp_path):
    path = tmp_path / "g.npz"
    np.savez(path, indptr=np.array([0, 2, 1, 3]), indices=np.array([0, 1, 2]))
    _file_error(path, None, "non-decreasing")
    np.savez(path, indptr=np.array([0, 1, 2]), indices=np.array([0, 1, 1]))
    _file_error(path, None, "ends at 2 but there are 3 indices")


def test_npz_non_square_shape(tmp_path):
    sparse = pytest.importorskip("scipy.sparse")
    path = tmp_path / "g.npz"
    sparse.save_npz(path, sparse.csr_matrix(np.ones((2, 3))))
    _file_error(path, None, "square")


# --- mtx ----------------------------------------------------------------------------------------

_MTX = "%%MatrixMarket matrix coordinate {field} {symmetry}\n% a comment\n"


def test_mtx_entries_are_edges_between_0_based_rows_with_the_order_as_vertex_count(tmp_path):
    path = _write(tmp_path / "g.mtx", _MTX.format(field="real", symmetry="general") + "5 5 3\n1 2 0.5\n3 2 2\n5 1 1e1\n")
    frame, n = read_table(path)
    assert (_rows(frame), n) == ([[0, 1, 0.5], [2, 1, 2.0], [4, 0, 10.0]], 5)
    assert _rows(read_table(path, weight=False)[0]) == [[0, 1], [2, 1], [4, 0]]


def test_mtx_symmetric_entries_off_the_diagonal_are_read_both_ways(tmp_path):
    path = _write(tmp_path / "g.mtx.gz", "")
    path.write_bytes(gzip.compress((_MTX.format(field="pattern", symmetry="symmetric") +
                                    "%%\n\n3 3 2\n2 1\n3 3\n").encode()))
    frame, n = read_table(path)
    assert (sorted(_rows(frame)), n) == ([[0, 1], [1, 0], [2, 2]], 3)


def test_mtx_agrees_with_scipy(tmp_path):
    io, sparse = pytest.importorskip("scipy.io"), pytest.importorskip("scipy.sparse")
    matrix = sparse.random_array((40, 40), density=0.1, format="coo", rng=np.random.default_rng(1))
    io.mmwrite(tmp_path / "g.mtx", matrix)
    frame, n = read_table(tmp_path / "g.mtx")
    back = sparse.coo_array((frame["weight"], (frame["src"], frame["dst"])), shape=(n, n))
    np.testing.assert_allclose(back.toarray(), io.mmread(tmp_path / "g.mtx").toarray())


@pytest.mark.parametrize("text, line, message", [
    ("%%MatrixMarket matrix array real general\n2 2\n1\n", 1, "format 'array' is not read: .* 'coordinate'"),
    ("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 2 1 0\n", 1, "field 'complex' is not read"),
    ("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 1\n", 1, "symmetry 'skew-symmetric'"),
    ("1 2\n2 3\n", 1, "expected the MatrixMarket banner '%%MatrixMarket matrix coordinate"),
    (_MTX.format(field="real", symmetry="general") + "2 3 1\n1 2 1\n", 3, "the matrix is 2 x 3: .* square"),
    (_MTX.format(field="real", symmetry="general") + "2 2\n1 2 1\n", 3, "expected the size line"),
    (_MTX.format(field="pattern", symmetry="general") + "2 2 1\n1 2 1\n", 4, "expected 2 fields per entry"),
    (_MTX.format(field="real", symmetry="general") + "3 3 3\n1 2 1\n2 4 1\n3 1 1\n", 5,
     "column '4' is not an integer from 1 to 3"),
    (_MTX.format(field="real", symmetry="general") + "3 3 2\n1 2 1\n0 1 1\n", 5, "row '0' is not an integer"),
    (_MTX.format(field="integer", symmetry="general") + "3 3 2\n1 2 1\nx 1 1\n", 5, "row 'x' is not an integer"),
    (_MTX.format(field="real", symmetry="general") + "3 3 2\n1 2 1\n2 1 -1\n", 5, "weight '-1' is negative"),
    (_MTX.format(field="real", symmetry="general") + "3 3 0\n", None, "no edges"),
])
def test_a_bad_mtx_file_names_the_file_and_line(tmp_path, text, line, message):
    _file_error(_write(tmp_path / "g.mtx", text), line, message)


def test_mtx_pattern_has_no_weight_to_ask_for(tmp_path):
    path = _write(tmp_path / "g.mtx", _MTX.format(field="pattern", symmetry="general") + "2 2 1\n1 2\n")
    _file_error(path, None, "weight=True but a pattern matrix has no values", weight=True)


# --- weights float32 cannot hold ---------------------------------------------------------------

@pytest.mark.parametrize("value", ["1e300", "-4e38", "1e-60", "1e-40"])  # to inf; to 0 or subnormal
def test_snap_and_csv_weights_float32_cannot_hold_name_the_line(tmp_path, value):
    snap = _write(tmp_path / "g.txt", f"# w\n0 1 1.0\n1 2 {value}\n")
    _file_error(snap, 3, f"weight '{value}' does not fit float32")
    csv = _write(tmp_path / "g.csv", f"src,dst,w\n0,1,1.0\n1,2,{value}\n2,0,1\n")
    _file_error(csv, 3, f"weight '{value}' does not fit float32", weight="w")


def test_parquet_and_npz_weights_float32_cannot_hold_name_the_row(tmp_path):
    path = tmp_path / "e.parquet"
    pd.DataFrame({"src": [0, 1, 2], "dst": [1, 2, 0], "w": [1.0, 1e300, 1e-60]}).to_parquet(path)
    _file_error(path, None, r"column 'w' has 2 values that do not fit float32.*; row 1 is 1e\+300", weight="w")
    path = tmp_path / "g.npz"
    np.savez(path, indptr=np.array([0, 1, 2]), indices=np.array([1, 0]), weights=np.array([2.0, 1e-60]))
    _file_error(path, None, "'weights' has 1 values that do not fit float32.*; index 1 is 1e-60", weight=True)


def test_weights_float32_holds_are_read(tmp_path):
    path = _write(tmp_path / "g.txt", "0 1 0\n1 2 2e-38\n2 3 3e38\n")
    assert read_table(path)[0]["weight"].tolist() == [0.0, 2e-38, 3e38]


# --- format selection ---------------------------------------------------------------------------

def test_unknown_extension(tmp_path):
    path = _write(tmp_path / "g.dat", "0 1\n")
    with pytest.raises(GpipeValueError, match="'path'") as info:
        read_table(path)
    assert "fmt=" in str(info.value) and ".txt" in str(info.value) and "g.dat" in str(info.value)


def test_fmt_overrides_extension(tmp_path):
    path = _write(tmp_path / "g.dat", "# c\n0 1\n1 2\n")
    assert _rows(read_table(path, fmt="snap")[0]) == [[0, 1], [1, 2]]
    csv_named_txt = _write(tmp_path / "g.txt", "src,dst\n4,5\n")
    assert _rows(read_table(csv_named_txt, fmt="csv")[0]) == [[4, 5]]


def test_bad_fmt(tmp_path):
    path = _write(tmp_path / "g.txt", "0 1\n")
    with pytest.raises(GpipeValueError, match="'fmt'"):
        read_table(path, fmt="xml")


@pytest.mark.parametrize("make, message", [
    (lambda path: None, "missing: no such file or folder"),
    (lambda path: path.symlink_to("gone.txt"), r"a symbolic link that leads to no file \(gone.txt\)"),
    (lambda path: path.symlink_to(path), "a symbolic link in a loop"),
    (os.mkfifo, "not a regular file"),  # read, a FIFO with no writer blocked the client for ever
    (lambda path: path.symlink_to("/dev/zero"), "not a regular file"),
    (lambda path: (path.mkdir(), _write(path / "notes.txt", "0 1\n")), "a folder, not a snap edge file"),
], ids=["missing", "dangling-link", "looping-link", "fifo", "link-to-dev-zero", "folder"])
def test_an_input_that_is_not_a_file_to_read_is_an_error_naming_it_and_what_is_wrong(tmp_path, make, message):
    path = tmp_path / "g.el"
    make(path)
    with pytest.raises(GpipeFileError, match=message) as info:
        read_table(path)
    assert info.value.path == str(path)


@pytest.mark.parametrize("text", [
    "1\t2\n3\t4\n",
    "# SNAP header\n# Nodes: 5\n1 2\n3 4\n\n5 1\n",
    "\ufeff1\t2\r\n3\t4\r\n% a comment\r\n5\t6\r\n",
    "1\t2\t0.5\n3\t4\t2\n4\t1\t1e-3\n",
])
@pytest.mark.parametrize("piece_bytes, suffix", [(None, ""), (8, ""), (None, ".gz")])
def test_integer_edge_lists_parse_on_every_core_as_the_c_parser_reads_them(tmp_path, text, piece_bytes, suffix):
    from gpipe.graph._readers import plan_table
    from gpipe.graph._readers._snap import _snap_arrow, _snap_fast

    path = tmp_path / f"g.el{suffix}"
    path.write_bytes(gzip.compress(text.encode()) if suffix else text.encode())
    plan = plan_table(path, piece_bytes=piece_bytes)
    taken = 0
    for piece in plan.pieces:
        arrow, pandas = _snap_arrow(plan, piece, False), _snap_fast(plan, piece, False)
        if pandas is None:  # no data line in the piece: the scan reads it, on either path
            assert arrow is None
            continue
        pd.testing.assert_frame_equal(arrow, pandas)  # taken: the C parser's frame, column for column
        taken += 1
    assert taken


@pytest.mark.parametrize("text", ["1  2\n3 4\n", "1\t2\n3\tx\n", "1\t2\n3\t\n", "1\t2\t-1\n", "1\t2\t\n",
                                  '"1"\t2\n3\t4\n', "1\tNA\n"])
def test_edge_lists_pyarrow_cannot_read_as_given_go_to_the_c_parser(tmp_path, text):
    from gpipe.graph._readers import plan_table
    from gpipe.graph._readers._snap import _snap_arrow

    path = tmp_path / "g.el"
    path.write_bytes(text.encode())
    plan = plan_table(path)
    assert _snap_arrow(plan, plan.pieces[0], False) is None


@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, -1.0, 1e-38, 1.1754942e-38, 1.1754944e-38, 3.4028234e38, 3.4028236e38,
                                   3.5e38, np.inf, -np.inf, np.nan, 1e-45, 5e-324])
def test_the_one_pass_weight_check_takes_what_the_elementwise_rule_takes(value):
    from gpipe.graph._readers import float32_misfits, weights_fit

    values = np.array([0.5, value, 2.0])
    assert weights_fit(values) == (not (float32_misfits(values) | (values < 0)).any())


def _texts(seed: int) -> list[tuple[bytes, int]]:
    """SNAP texts the device parser takes (and pyarrow parses), each with its field count."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    m = 3000
    src, dst = rng.integers(-5, 2**40, m), rng.integers(0, 2**62, m)
    weight = ((rng.pareto(1.0, m) + 0.01) * 10.0 ** rng.integers(-6, 6, m)).astype(np.float32)
    out = []
    for delimiter in (" ", "\t"):
        sink = pa.BufferOutputStream()  # float32 weights as pyarrow writes them (the benchmark's files)
        pacsv.write_csv(pa.table({"s": src, "d": dst, "w": weight}), sink,
                        pacsv.WriteOptions(include_header=False, delimiter=delimiter, quoting_style="none"))
        out.append((sink.getvalue().to_pybytes(), 3))
        formats = ["{:.6g}", "{:.9e}", "{:.12g}", "{:.3f}", "{:.0f}"]  # digits and exponents of the fast path
        lines = [f"{s}{delimiter}{d}{delimiter}{formats[i % 5].format(float(w))}" for i, (s, d, w)
                 in enumerate(zip(src, dst, weight))]
        lines[10:10] = ["", ""]  # blank lines
        out.append(("\r\n".join(lines).encode(), 3))  # CRLF, and no newline at the end
        out.append(("\n".join(f"{s}{delimiter}{d}" for s, d in zip(src, dst)).encode() + b"\n", 2))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_device_parser_twin_gives_pyarrows_edges(seed):
    """The GPU parser's CPU twin on clean SNAP text: the edges pyarrow parses, weights to the bit."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from gpipe.graph._parse import parse_edges

    for text, width in _texts(seed):
        delimiter = "\t" if b"\t" in text.split(b"\n", 1)[0] else " "
        names = [str(i) for i in range(width)]
        table = pacsv.read_csv(pa.py_buffer(text), pacsv.ReadOptions(column_names=names),
                               pacsv.ParseOptions(delimiter=delimiter, quote_char=False),
                               pacsv.ConvertOptions(column_types={"0": pa.int64(), "1": pa.int64(), "2": pa.float64()}))
        for keep in (True, False):
            src, dst, weight = parse_edges(np, np.frombuffer(text, np.uint8), width, keep, ord(delimiter))
            np.testing.assert_array_equal(src, table.column("0").to_numpy())
            np.testing.assert_array_equal(dst, table.column("1").to_numpy())
            if width == 3 and keep:
                np.testing.assert_array_equal(weight, table.column("2").to_numpy())
            else:
                assert weight is None


@pytest.mark.parametrize("line", [b"1 2 3 4", b"1", b"1 2 ", b"a 2 0.5", b"+1 2 0.5", b"1  2 0.5", b"1 2 inf",
                                  b"1 2 0.12345678901234567890", b"1 2 1e400", b"99999999999999999999 2 1",
                                  b"9223372036854775808 2 1", b"1 2 1e", b"1\r2 0.5", b"1 2 0x10", b"1 2 ."])
def test_device_parser_leaves_other_lines_to_the_host(line):
    """A line outside the device parser's rule gives no edges there (the host's readers take the piece)."""
    from gpipe.graph._parse import parse_edges

    text = b"5 6 0.25\n" + line + b"\n7 8 1.5\n"
    assert parse_edges(np, np.frombuffer(text, np.uint8), 3, True, ord(" ")) is None


# --- graph folders ------------------------------------------------------------------------------

@pytest.fixture
def graph_folder(cpu, tmp_path):
    """A folder ``Graph.to_parquet`` wrote: R-MAT scale 6 (64 vertices, dense ids: no ids.parquet), 3 parts."""
    folder = tmp_path / "graph"
    gpipe.generators.rmat(scale=6, edge_factor=4, seed=1, partitions=3).to_parquet(folder)
    return folder


def _manifest(edit):
    def damage(meta_path):
        meta = json.loads(meta_path.read_text())
        edit(meta)
        meta_path.write_text(json.dumps(meta))
    return damage


def _replaced(make):
    def damage(meta_path):
        meta_path.unlink()
        make(meta_path)
    return damage


def _larger_than_any_manifest(meta_path):
    with open(meta_path, "r+b") as f:
        f.truncate(1 << 26)  # sparse: 64 MB of NULs after the JSON


@pytest.mark.parametrize("damage, message", [
    (os.unlink, "missing: the folder holds gpipe's part files .*part-00000.parquet.* but no _gpipe.json"),
    (_replaced(lambda path: path.symlink_to(path)), "unreadable: Too many levels of symbolic links"),
    (_replaced(lambda path: path.symlink_to("gone.json")), "a symbolic link that leads to no file"),
    (_replaced(lambda path: path.symlink_to("/dev/zero")), "not a regular file"),
    (_replaced(os.mkfifo), "not a regular file"),
    (_larger_than_any_manifest, r"is 67108864 bytes, larger than gpipe writes for a graph of 1048576 partitions"),
    (lambda path: path.write_text("[" * 4000), "not valid JSON: nested too deeply"),
    (_manifest(lambda m: (m.update(version=1, partitions=30_000_000), m.pop("part_edges"))),  # version 1: no counts
     "part-00003.parquet: missing: _gpipe.json lists 30000000 partitions"),
    (_manifest(lambda m: m.update(partitions=1024, part_edges=[100] * 1024)),  # the folder lost 1021 of its parts
     "part-00003.parquet: missing: _gpipe.json lists 1024 partitions"),
], ids=["removed", "looping-link", "dangling-link", "link-to-dev-zero", "fifo", "oversize", "nested",
        "3e7-partitions", "1024-partitions"])
def test_a_graph_folder_without_a_readable_manifest_is_an_error_naming_it_at_once(graph_folder, damage, message,
                                                                                   monkeypatch):
    damage(graph_folder / "_gpipe.json")

    def read_graph_part(*args):  # on a worker
        raise AssertionError("a part file was read")

    monkeypatch.setattr(gpipe.graph._io, "read_graph_part", read_graph_part)
    tracemalloc.start()
    try:
        with pytest.raises(GpipeFileError, match=message) as info:
            gpipe.read_edges(graph_folder)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # whatever the manifest claims (3e7 partitions took 2.8 GB, /dev/zero all memory)
    assert info.value.path in (str(graph_folder / "_gpipe.json"), str(graph_folder / "part-00003.parquet"))


def test_a_folder_that_cannot_be_listed_is_an_error_naming_it(graph_folder, monkeypatch):
    listdir = os.listdir

    def unreadable(path="."):
        if os.fspath(path) == str(graph_folder):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return listdir(path)

    monkeypatch.setattr(os, "listdir", unreadable)  # as a folder without read permission (this may run as root)
    with pytest.raises(GpipeFileError, match="cannot be listed: Permission denied") as info:
        gpipe.read_edges(graph_folder)
    assert info.value.path == str(graph_folder)


def test_a_renumbered_graph_folder_without_its_ids_says_they_are_missing(cpu, tmp_path):
    folder = gpipe.from_edges(pd.DataFrame({"src": ["a", "b"], "dst": ["b", "c"]})).to_parquet(tmp_path / "graph")
    os.unlink(os.path.join(folder, "ids.parquet"))
    with pytest.raises(GpipeFileError, match="missing: _gpipe.json says the graph was renumbered") as info:
        gpipe.read_edges(folder)
    assert info.value.path == os.path.join(folder, "ids.parquet")


@pytest.mark.parametrize("ids, message", [
    (["a"] * 4, "holds id 'a' 4 times; an id map names each vertex once"),
    ([7, 8, 7, 9], "holds id 7 2 times"),
    ([0.5, 1.5, 2.5, 3.5], "column 'id' has type double; ids must be integers or strings"),
])
def test_a_graph_folder_whose_id_map_is_not_a_map_is_an_error_naming_it(cpu, tmp_path, ids, message):
    folder = gpipe.from_edges(pd.DataFrame({"src": ["a", "b", "c"], "dst": ["b", "c", "d"]})).to_parquet(
        tmp_path / "graph")
    pd.DataFrame({"id": ids}).to_parquet(os.path.join(folder, "ids.parquet"))
    with pytest.raises(GpipeFileError, match=message) as info:
        gpipe.read_edges(folder)
    assert info.value.path == os.path.join(folder, "ids.parquet")


class _LateStream:
    """A stand-in for a CuPy stream whose copies run late, in order, on a thread of their own, as a GPU's do after
    the host has moved on: a host buffer refilled before its copy ran would reach the device damaged."""

    def __init__(self, non_blocking=False):
        import queue
        import threading

        self._queue = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            self._queue.get()()

    def enqueue(self, work):
        self._queue.put(work)

    def record(self):
        import threading
        import types

        done = threading.Event()
        self._queue.put(done.set)
        return types.SimpleNamespace(synchronize=done.wait)

    def synchronize(self):
        self.record().synchronize()


class _LateDevice:
    """A device array of :class:`_LateStream`'s late copies (numpy underneath)."""

    def __init__(self, array):
        self.array = array

    def __getitem__(self, where):
        return _LateDevice(self.array[where])

    @property
    def data(self):
        import ctypes
        import time
        import types

        def copy_from_host_async(source, count, stream):
            def copy():
                time.sleep(0.001)
                ctypes.memmove(self.array.ctypes.data, source, count)
            stream.enqueue(copy)

        return types.SimpleNamespace(copy_from_host_async=copy_from_host_async)


def test_a_file_that_ends_before_its_range_is_read_is_named_with_the_byte(tmp_path):
    """A file cut short while it is read (its plan made before): the error names the file and where it ended."""
    from gpipe.graph._readers._bytes import read_into

    path = tmp_path / "bytes"
    path.write_bytes(bytes(range(200)) * 50)
    into = np.zeros(3 << 20, np.uint8)
    with pytest.raises(GpipeFileError, match=r"bytes: the file ended at byte 10000 while it was read"):
        read_into(into, str(path), 0)
    read_into(into[:9_000], str(path), 1_000)
    assert into[:9_000].tobytes() == (bytes(range(200)) * 50)[1_000:]


@pytest.mark.parametrize("start, end", [(0, 9 << 20), (5, (9 << 20) - 3), (100, 4_196), (7, 8)])
def test_a_gpu_workers_piece_reaches_its_device_whole_though_the_copies_run_late(tmp_path, monkeypatch, start, end):
    """The GPU reader's stages and buffers (threads' ranges, each read in stages into two pinned buffers taken in
    turn) against copies that run after the host has moved on: each buffer is refilled only once its copy ran."""
    import contextlib
    import types

    from gpipe.graph._readers import _bytes

    monkeypatch.setattr(_bytes, "_STAGE_BYTES", 100_000)
    cuda = types.SimpleNamespace(Device=contextlib.nullcontext, Stream=_LateStream, alloc_pinned_memory=bytearray)
    x = types.SimpleNamespace(empty=lambda size, dtype: _LateDevice(np.zeros(size, dtype)), uint8=np.uint8,
                              cuda=cuda)
    data = np.random.default_rng(0).integers(0, 256, 9 << 20, dtype=np.uint8)
    path = tmp_path / "bytes"
    path.write_bytes(data.tobytes())
    np.testing.assert_array_equal(_bytes.read_to_device(x, str(path), start, end).array, data[start:end])
