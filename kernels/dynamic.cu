// Sampling from Bingo's radix-factorized per-vertex sampling spaces (gpipe/dynamic/_space.py says the layout).
// One thread per query, drawing from stream stream[i] at step 0 (gp_space_pick in dynamic.cuh says the draws).
// DECIMAL_GROUP, GROUP_ONE, GROUP_DENSE, GROUP_LISTED: defined by the loader, from gpipe/dynamic/_kernels.py.
// CPU twin: gpipe/dynamic/_kernels.py::_sample_cpu (same random stream).
#include "dynamic.cuh"

extern "C" __global__ void gp_dynamic_sample(
    const long long* __restrict__ edge_start, const long long* __restrict__ degree, const long long* __restrict__ dst,
    const long long* __restrict__ units, const double* __restrict__ frac, const long long* __restrict__ member_start,
    const long long* __restrict__ members, const long long* __restrict__ group_row,
    const long long* __restrict__ group_count, const signed char* __restrict__ group_kind,
    const int* __restrict__ group_bit, const long long* __restrict__ group_start,
    const long long* __restrict__ group_size, const double* __restrict__ alias_prob,
    const int* __restrict__ alias_other, unsigned long long key, long long n, const long long* __restrict__ vertex,
    const long long* __restrict__ stream, long long* __restrict__ out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long e = gp_space_pick(edge_start, degree, units, frac, member_start, members, group_row, group_count,
                                      group_kind, group_bit, group_start, group_size, alias_prob, alias_other, key,
                                      (unsigned long long)stream[i], 0, 0, vertex[i]);
    out[i] = e < 0 ? -1 : dst[e];
}
