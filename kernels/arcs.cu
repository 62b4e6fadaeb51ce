// A partition's arc filter of `size` bits (walk.cuh's gp_arc_bit): every arc (v, indices[e]) of the partition sets
// its bit, one thread a vertex (lo + its local id). CPU twin: gpipe/graph/_partition.py::_arc_filter_cpu (the same
// bits).
#include "walk.cuh"

template <typename IdT>
__global__ void gp_arc_filter(long long n, const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                              long long lo, long long size, unsigned int* __restrict__ bits) {
    const long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (v >= n) return;
    for (long long e = indptr[v]; e < indptr[v + 1]; ++e) {
        const unsigned long long b = gp_arc_bit(lo + v, (long long)indices[e], (unsigned long long)size);
        atomicOr(bits + (b >> 5), 1u << (b & 31));
    }
}
