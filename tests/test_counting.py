"""gpipe.counting: labeled inputs, candidate graphs, exact counts and the random-walk estimators."""

from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import gpipe
from gpipe.counting import Query

HPRD = Path(__file__).resolve().parents[2] / "shared" / "data" / "hprd"


def write(tmp_path, text: str, name: str = "g.graph") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- inputs ------------------------------------------------------------------------------------------------------
def test_read_graph_keeps_ids_labels_and_isolated_vertices(cpu, tmp_path):
    path = write(tmp_path, "t 4 2\nv 0 3 1\nv 1 3 2\nv 2 0 1\nv 3 9 0\ne 0 1\ne 1 2\n")
    g = gpipe.counting.read_graph(path)
    assert (g.num_vertices, g.num_edges, g.labels.tolist()) == (4, 2, [3, 3, 0, 9])
    assert g.degrees().tolist() == [1, 2, 1, 0]


@pytest.mark.parametrize("text, where, reason", [
    ("v 0 1 0\n", 1, "must start with 't N M'"),
    ("t 2 1\nv 0 1 1\nv 1 x 1\ne 0 1\n", 3, r"expected a label \(a non-negative integer\), got .x."),
    ("t 2 1\nv 0 1 1\nv 0 1 1\ne 0 1\n", 3, "vertex 0 is listed twice"),
    ("t 2 1\nv 0 1 1\ne 0 1\nv 1 1 1\n", 3, r"edge \(0, 1\) has an end not listed"),
    ("t 2 1\nv 0 1 1\nv 1 1 1\nq 0 1\n", 4, "expected 'v id label degree' or 'e u v', got 'q 0 1'"),
    ("t 2 2\nv 0 1 1\nv 1 1 1\ne 0 1\n", None, "holds 1 edges, its 't' line announces 2"),
    ("t 2 1\nv 0 1 1\nv 1 1 2\ne 0 1\n", None, "vertex 1 has 1 edges, its 'v' line says degree 2"),
])
def test_a_malformed_graph_file_names_the_file_and_line(tmp_path, text, where, reason):
    path = write(tmp_path, text)
    with pytest.raises(gpipe.GpipeFileError, match=reason) as info:
        Query.from_file(path)
    assert (info.value.path, info.value.line) == (str(path), where)


def test_the_three_query_constructors_agree(tmp_path):
    path = write(tmp_path, "t 3 2\nv 0 5 1\nv 1 7 2\nv 2 5 1\ne 1 0\ne 2 1\n")
    nxg = nx.Graph([(0, 1), (1, 2)])
    nx.set_node_attributes(nxg, {0: 5, 1: 7, 2: 5}, "label")
    for q in (Query.from_file(path), Query.from_networkx(nxg), Query.from_edges([(1, 2), (0, 1), (1, 0)], [5, 7, 5])):
        assert q.labels.tolist() == [5, 7, 5] and q.edges.tolist() == [[0, 1], [1, 2]]


@pytest.mark.parametrize("edges, labels, message", [
    ([], [], "'query' must have at least one vertex"),
    ([(0, 1), (2, 3)], [1, 1, 1, 1], r"'query' must be connected, got vertices \[2, 3\] unreachable"),
    ([(0, 0)], [1], r"'query' must have no self-loops, got edge \[0, 0\]"),
    ([(0, 2)], [1, 1], r"'query' edges must join vertices 0..1, got \[\[0, 2\]\]"),
    ([(0, 1)], [1, -1], "'query' labels must be non-negative integers"),
    ([(i, i + 1) for i in range(32)], [0] * 33, "'query' must have at most 32 vertices, got 33"),
])
def test_a_bad_query_is_refused_naming_what_is_wrong(edges, labels, message):
    with pytest.raises(gpipe.GpipeValueError, match=message):
        Query.from_edges(edges, labels)


def test_a_networkx_query_needs_every_label():
    nxg = nx.path_graph(3)
    nxg.nodes[0]["label"] = 1
    with pytest.raises(gpipe.GpipeValueError, match=r"nodes must all have the attribute 'label'; \[1, 2\] do not"):
        Query.from_networkx(nxg)


def test_set_labels_takes_a_series_by_original_id_and_checks_it(cpu):
    g = gpipe.from_edges(pd.DataFrame({"src": ["a", "b"], "dst": ["b", "c"]}))
    g.set_labels(pd.Series([7, 8, 9], index=["c", "a", "b"]))
    assert g.labels[g.to_internal(["a", "b", "c"])].tolist() == [8, 9, 7]
    with pytest.raises(gpipe.GpipeValueError, match=r"one label per vertex \(3\), got shape \(2,\)"):
        g.set_labels([1, 2])
    with pytest.raises(gpipe.GpipeValueError, match="'labels' must be non-negative integers"):
        g.set_labels([1.5, 2, 3])
