"""A partition: the out-edges of one contiguous vertex range, as CSR on one worker's device."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

import numpy as np

from .._alias import tables
from .._search import arc_bit
from ..backend import cpu_kernel, device_of, prange, to_device, xp
from ..kernels import Arg, Kernel

# The arc filter's bits an arc. On the peers' R-MAT 20 on an H200, node2vec's kernel (p 2, q 0.5) took 7.6 ms with a
# filter that spared no search, 5.5 ms at 8 bits an arc (one bit in nine set), 5.3 ms at 16 (half the memory of the
# graph's int32 ids).
ARC_FILTER_BITS = 16


@dataclass
class Partition:
    """Vertices ``lo..hi-1`` with every out-edge, sorted by (src, dst).

    ``indptr`` is local (``indptr[v - lo]``), ``indices`` hold global vertex ids
    (int32 when the graph has fewer than 2**31 vertices), ``weights`` float32 or
    None. ``bounds`` are the P+1 partition bounds of the whole graph (host), so
    a task can tell which partition owns any vertex.
    """

    part: int
    lo: int
    hi: int
    bounds: np.ndarray
    indptr: Any
    indices: Any
    weights: Any
    _kept: dict = field(default_factory=dict, init=False, repr=False)  # name -> arrays built from these

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    @property
    def whole(self) -> bool:
        """Whether this partition holds every vertex of the graph (one partition, a replica, or a span of all): a
        walk on it never leaves it."""
        return self.lo == 0 and self.hi == int(self.bounds[-1])

    @property
    def parts(self) -> range:
        """The graph's partitions this one holds: itself, or those joined in it (:meth:`join`)."""
        return range(self.part, int(np.searchsorted(self.bounds, self.hi)))

    @property
    def nbytes(self) -> int:
        arrays = [self.indptr, self.indices, self.weights, *(a for kept in self._kept.values() for a in kept)]
        return int(sum(a.nbytes for a in arrays if a is not None))

    def with_arrays(self, indptr, indices, weights) -> Partition:
        """This partition with its arrays elsewhere (staged in host memory, on the device, read in place).

        What :meth:`kept` built is not carried over: it belonged to the old arrays, and is built again where it is
        first used.
        """
        return replace(self, indptr=indptr, indices=indices, weights=weights)

    def kept(self, name: str, build) -> tuple:
        """The arrays ``build(self)`` returns (a tuple), built on first use and kept with the partition's: counted in
        :attr:`nbytes`, dropped with them (derived data a kernel reads at every call, such as per-vertex CDFs)."""
        if name not in self._kept:
            self._kept[name] = tuple(build(self))
        return self._kept[name]

    @staticmethod
    def join(parts: list[Partition]) -> tuple[Partition, list[Partition]]:
        """Consecutive partitions ``parts`` as one over all their vertices, and each of them again as a view of its
        arrays (their edges are not held twice; only each one's ``indptr`` is its own): a worker's partitions
        walked as one span (see ``runtime.Partitions.span``)."""
        x = xp(device_of(parts[0].indptr))
        ends = np.cumsum([0] + [p.num_edges for p in parts])
        indptr = x.concatenate([p.indptr[:-1] + int(e) for p, e in zip(parts, ends[:-1], strict=True)] +
                               [x.full(1, int(ends[-1]), parts[0].indptr.dtype)])
        indices = x.concatenate([p.indices for p in parts])
        weights = None if parts[0].weights is None else x.concatenate([p.weights for p in parts])
        span = Partition(parts[0].part, parts[0].lo, parts[-1].hi, parts[0].bounds, indptr, indices, weights)
        views = []
        for p, (a, b) in zip(parts, pairwise(ends), strict=True):
            rows = slice(p.lo - span.lo, p.hi - span.lo + 1)
            views.append(p.with_arrays(indptr[rows] - int(a), indices[a:b], None if weights is None else weights[a:b]))
        return span, views

    def cdf(self) -> Any:
        """Per-vertex prefix sums of the edge weights (float64), built once and kept (CUDA: ``kernels/cdf.cu``)."""
        return self.kept("cdf", _build_cdf)[0]

    def arc_filter(self) -> Any:
        """This partition's arc filter, built once and kept: a uint32 array of ``ARC_FILTER_BITS`` bits an arc (32 at
        least) in which every arc ``(t, x)`` set bit ``arc_bit(t, x, size)`` of its ``size`` bits (``gpipe._search``).
        A clear bit says in one load that ``x`` is not a neighbor of ``t``, which a search of t's sorted list says in
        log d (CUDA: ``kernels/arcs.cu``; ``walk.cuh``'s ``gp_arc_maybe``)."""
        return self.kept("arc_filter", _build_arc_filter)[0]

    def device_bounds(self) -> Any:
        """:attr:`bounds` on the partition's device, copied once and kept (a routed walk's kernel reads them at
        every advance)."""
        return self.kept("bounds", lambda p: (to_device(p.bounds, device_of(p.indptr)),))[0]

    def alias(self) -> Any:
        """Per-vertex packed alias tables of the edge weights (:mod:`gpipe._alias`: a draw reads one word, whatever
        the degree), a vertex whose every weight is zero all ``NO_CANDIDATE`` (a draw names no edge), built once
        and kept."""
        return self.kept("alias", _build_alias)[0]


def _build_arc_filter(part: Partition) -> tuple:
    x = xp(device_of(part.indptr))
    bits = x.zeros(max(1, -(-part.num_edges * ARC_FILTER_BITS // 32)), x.uint32)
    ARC_FILTER.launch(n=part.hi - part.lo, indptr=part.indptr, indices=part.indices, lo=part.lo,
                      size=bits.shape[0] * 32, bits=bits)
    return (bits,)


@cpu_kernel()
def _arc_filter_cpu(n, indptr, indices, lo, size, bits):
    for v in range(n):
        for e in range(indptr[v], indptr[v + 1]):
            b = arc_bit(lo + v, indices[e], size)
            bits[b >> np.uint64(5)] |= np.uint32(1 << (b & np.uint64(31)))


ARC_FILTER = Kernel("arcs.cu", "gp_arc_filter", twin=_arc_filter_cpu, items="n", args=(
    Arg("n", "i64", note="vertices"), Arg("indptr", "i64[n+1]"), Arg("indices", "IdT[]"),
    Arg("lo", "i64", note="the first vertex"), Arg("size", "i64", note="the filter's bits"),
    Arg("bits", "u32[]", out=True)))


def _build_alias(part: Partition) -> tuple:
    x = xp(device_of(part.indptr))
    weights = part.weights if part.weights is not None else x.ones(part.num_edges, x.float32)
    return (tables(part.indptr, weights.astype(x.float64), dead=True),)


def _build_cdf(part: Partition) -> tuple:
    x = xp(device_of(part.indptr))
    weights = part.weights if part.weights is not None else x.ones(part.num_edges, x.float32)
    cdf = x.empty(part.num_edges, x.float64)
    SEGMENT_CDF.launch(n=part.hi - part.lo, indptr=part.indptr, weights=weights, cdf=cdf)
    return (cdf,)


@cpu_kernel(parallel=True)
def _segment_cdf_cpu(n, indptr, weights, cdf):
    for v in prange(n):
        total = 0.0
        for e in range(indptr[v], indptr[v + 1]):
            total += np.float64(weights[e])
            cdf[e] = total


SEGMENT_CDF = Kernel("cdf.cu", "gp_segment_cdf", twin=_segment_cdf_cpu, items="n", args=(
    Arg("n", "i64", note="vertices"), Arg("indptr", "i64[n+1]"), Arg("weights", "f32[]"),
    Arg("cdf", "f64[]", out=True)))
