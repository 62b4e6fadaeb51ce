// Device helpers shared by the walk kernels; CPU twins in gpipe/walks/_common.py (gp_pick_edge: gpipe/_search.py).
#pragma once
#include "rng.cuh"
#include "rows.cuh"

// The edge taken from a vertex whose out-edges are a..a+d-1: uniform, or by
// inverse transform sampling over the per-vertex weight prefix sums `cdf`
// (O(log d)). -1 when every weight is zero.
__device__ __forceinline__ long long gp_pick_edge(const double* __restrict__ cdf, int weighted, long long a,
                                                  long long d, ulonglong2 r) {
    if (!weighted) return a + gp_below(r, d);
    const double total = cdf[a + d - 1];
    if (!(total > 0.0)) return -1;
    const double target = gp_unit(r) * total;
    long long lo = a, hi = a + d - 1;  // first e with cdf[e] > target; the last edge if rounding reaches total
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if (cdf[mid] > target) hi = mid; else lo = mid + 1;
    }
    return lo;
}

// The first index in a..a+d-1 whose sorted value is >= x; a + d if none is.
template <typename T>
__device__ __forceinline__ long long gp_lower_bound(const T* __restrict__ sorted, long long a, long long d,
                                                    long long x) {
    long long lo = a, hi = a + d;
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if ((long long)sorted[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// Whether x is among the sorted neighbors indices[a..a+d-1].
template <typename IdT>
__device__ __forceinline__ bool gp_has_edge(const IdT* __restrict__ indices, long long a, long long d, long long x) {
    const long long e = gp_lower_bound(indices, a, d, x);
    return e < a + d && (long long)indices[e] == x;
}

// A partition's arc filter (gpipe/graph/_partition.py's arc_filter, built by kernels/arcs.cu): an array of `size`
// bits in which every arc (t, x) of the partition set the bit gp_arc_bit names. A clear bit says in one load that x is
// not t's neighbor, where a search of t's sorted list takes log d dependent ones; a set bit says nothing (another arc
// may have set it). The bit: a 64-bit hash of (t, x), scaled to [0, size) by its product's high word. CPU twin:
// gpipe/_search.py::arc_bit (and arc_maybe).
__device__ __forceinline__ unsigned long long gp_arc_bit(long long t, long long x, unsigned long long size) {
    unsigned long long z = (unsigned long long)t * 0x9E3779B97F4A7C15ULL ^ (unsigned long long)x;
    z ^= z >> 29;
    z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 32;
    return __umul64hi(z, size);
}

// Whether (t, x) may be an arc of the partition whose filter is `arcs` (`size` bits): false only if it is not.
__device__ __forceinline__ bool gp_arc_maybe(const unsigned int* __restrict__ arcs, unsigned long long size,
                                             long long t, long long x) {
    const unsigned long long b = gp_arc_bit(t, x, size);
    return (__ldg(arcs + (b >> 5)) >> (b & 31)) & 1u;
}

// A vertex uniform in [0, n) (for jumps): floor(unit * n), in double on both devices.
__device__ __forceinline__ long long gp_uniform_vertex(ulonglong2 r, long long n) {
    const long long v = (long long)(gp_unit(r) * (double)n);
    return v < n ? v : n - 1;
}
