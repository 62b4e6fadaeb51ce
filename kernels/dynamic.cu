// Sampling from Bingo's radix-factorized per-vertex sampling spaces (gpipe/dynamic/_space.py says the layout).
// One thread per query: draws 0 and 1 pick the group through the vertex's alias table, draws 2t+2 and 2t+3 are
// the t-th try within it (a uniform member, or in a dense group a uniform edge kept if in the group; then, in the
// decimal group, kept with probability frac).
// DECIMAL_GROUP, GROUP_ONE, GROUP_DENSE, GROUP_LISTED: defined by the loader, from _space.py.
// CPU twin: gpipe/dynamic/_space.py::_sample_cpu (same random stream).
#include "rng.cuh"

extern "C" __global__ void gp_dynamic_sample(const long long* __restrict__ indptr, const long long* __restrict__ dst,
                                             const long long* __restrict__ units, const double* __restrict__ frac,
                                             const long long* __restrict__ member_indptr,
                                             const long long* __restrict__ members,
                                             const long long* __restrict__ group_indptr,
                                             const signed char* __restrict__ group_kind,
                                             const int* __restrict__ group_bit,
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
    const long long row = group_indptr[v], count = group_indptr[v + 1] - row;
    if (count == 0) {
        out[i] = -1;
        return;
    }
    const long long slot = gp_below(gp_bits(key, id, 0, 0), (unsigned long long)count);
    const long long g = gp_unit(gp_bits(key, id, 0, 1)) < alias_prob[row + slot] ? slot : alias_other[row + slot];
    const int kind = group_kind[row + g], bit = group_bit[row + g];
    const long long a = indptr[v];
    if (kind == GROUP_ONE) {
        out[i] = dst[a + group_start[row + g]];
        return;
    }
    for (unsigned long long t = 0;; ++t) {
        const ulonglong2 r = gp_bits(key, id, 0, 2 * t + 2);
        long long e;
        if (kind == GROUP_LISTED) {
            e = a + members[member_indptr[v] + group_start[row + g] + gp_below(r, group_size[row + g])];
        } else {  // GROUP_DENSE: any edge of v, kept if in the group
            e = a + gp_below(r, (unsigned long long)(indptr[v + 1] - a));
            if (bit != DECIMAL_GROUP && !((units[e] >> bit) & 1)) continue;
        }
        if (bit != DECIMAL_GROUP || gp_unit(gp_bits(key, id, 0, 2 * t + 3)) < frac[e]) {
            out[i] = dst[e];
            return;
        }
    }
}
