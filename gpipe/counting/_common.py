"""What the exact counter and the estimators share (``gp_extends`` of ``kernels/count.cu`` on the GPU): whether a
candidate extends a partial match, where a position's local candidates are, and the samples of a group."""

from __future__ import annotations

from ..backend import cpu_kernel

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
