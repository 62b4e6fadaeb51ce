// Sampling from Bingo's radix-factorized per-vertex sampling spaces (gpipe/dynamic/_space.py says the layout).
// One thread per query: draws 0 and 1 pick the group through the vertex's alias table, draws 2t+2 and 2t+3 are
// the t-th try within it (a uniform member; in the decimal group, kept with probability frac).
// MAX_GROUPS, DECIMAL_GROUP: defined by the loader, from _space.py.
// CPU twin: gpipe/dynamic/_space.py::_sample_cpu (same random stream).
#include "rng.cuh"

extern "C" __global__ void gp_dynamic_sample(const long long* __restrict__ indptr, const long long* __restrict__ dst,
                                             const double* __restrict__ frac,
                                             const long long* __restrict__ member_indptr,
                                             const long long* __restrict__ members,
                                             const int* __restrict__ group_count, const int* __restrict__ group_bit,
                                             const long long* __restrict__ group_start,
                                             const long long* __restrict__ group_size,
                                             const double* __restrict__ alias_prob,
                                             const int* __restrict__ alias_other, unsigned long long key, long long n,
                                             const long long* __restrict__ vertex, const long long* __restrict__ stream,
                                             long long* __restrict__ out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long v = vertex[i];
    const unsigned long long id = (unsigned long long)stream[i];
    const long long count = group_count[v];
    if (count == 0) {
        out[i] = -1;
        return;
    }
    const long long row = v * MAX_GROUPS;
    const long long slot = gp_below(gp_bits(key, id, 0, 0), (unsigned long long)count);
    const long long g = gp_unit(gp_bits(key, id, 0, 1)) < alias_prob[row + slot] ? slot : alias_other[row + slot];
    const long long base = member_indptr[v] + group_start[row + g];
    for (unsigned long long t = 0;; ++t) {
        const long long e = indptr[v] + members[base + gp_below(gp_bits(key, id, 0, 2 * t + 2),
                                                                (unsigned long long)group_size[row + g])];
        if (group_bit[row + g] != DECIMAL_GROUP || gp_unit(gp_bits(key, id, 0, 2 * t + 3)) < frac[e]) {
            out[i] = dst[e];
            return;
        }
    }
}
