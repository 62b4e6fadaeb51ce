"""What the exact counter and the estimators share (``gp_extends`` of ``kernels/count.cu`` on the GPU): whether a
candidate extends a partial match, where a position's local candidates are, and the samples of a group; and how
their work reads the data graph's partitions where they are held."""

from __future__ import annotations

from .._csr import simple_rows
from ..backend import cpu_kernel
from ..runtime.calls import on_partitions
from ..runtime.workers import graph_array, held_partition, worker_xp

LANES = 32  # samples per group: a warp, whose lanes inherit from each other


@cpu_kernel()
def local_candidates(back_offsets, back_pos, back_rows, edge_indptr, d, match):
    """The slice ``[start, end)`` of ``edge_indices`` holding position ``d``'s candidates adjacent to its parent's."""
    t = back_offsets[d]
    row = back_rows[t] + match[back_pos[t]]
    return edge_indptr[row], edge_indptr[row + 1]


@cpu_kernel()
def extends(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows, edge_indptr, edge_indices, d, c,
            match, matched):
    """Whether candidate ``c`` of position ``d`` extends the partial match of positions ``0..d-1`` (candidate
    indices ``match``, data vertices ``matched``): a data vertex not matched yet, adjacent to the candidates of
    every backward neighbor but the parent (whose candidate edges it was taken from)."""
    v = cand_vertices[cand_offsets[d] + c]
    for j in range(d):
        if matched[j] == v:
            return False
    for t in range(back_offsets[d] + 1, back_offsets[d + 1]):
        row = back_rows[t] + match[back_pos[t]]
        lo, hi = edge_indptr[row], edge_indptr[row + 1]
        while lo < hi:  # lower bound of c in the sorted row
            mid = (lo + hi) >> 1
            if edge_indices[mid] < c:
                lo = mid + 1
            else:
                hi = mid
        if lo == edge_indptr[row + 1] or edge_indices[lo] != c:
            return False
    return True


def on_partition_rows(g, phase: str, function, *args) -> list:
    """``function(indptr, indices, lo, labels, *args)`` on the rows of each of the graph's partitions, where they
    are held (a replicated graph's one partition: on its first replica); the results in partition order.

    ``indptr`` (local) and ``indices`` (global vertex ids) are the partition's CSR of rows ``lo..`` in the simple
    graph underneath (each neighbor once, no self-loops: counting reads a multigraph as its simple graph) and
    ``labels`` the whole graph's vertex labels, all on the worker's device (numpy or cupy arrays)."""
    g.put_on_workers(["labels"])
    return on_partitions(g, phase, _with_rows, function, *args)


def _with_rows(graph_id: str, part: int, function, *args):
    p = held_partition(graph_id, part)
    x = worker_xp()
    labels = x.asarray(graph_array(graph_id, "labels"))
    rows = simple_rows(x, x.asarray(p.indptr), x.asarray(p.indices), first=int(p.lo))
    return function(rows.indptr, rows.indices, int(p.lo), labels, *args)
