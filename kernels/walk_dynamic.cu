// First-order walks on a dynamic graph's snapshot (gpipe/dynamic: a partition's radix-factorized sampling space):
// DeepWalk (uniform over the edges, or biased by weight), walks with jump and with restart. Each thread takes
// walkers from a shared counter and moves each for as many steps as it stays inside [lo, hi). Draws per step:
// 0 = teleport?, then 1 = the edge (uniform), or 1.. = gp_space_pick's draws from draw 1 (weighted).
// CPU twin: gpipe/walks/_dynamic.py::_advance_cpu (same random stream).
// TELEPORT_*, DECIMAL_GROUP, GROUP_*: defined by the loader (_first_order.py's TELEPORT, _space.py's PICK_DEFINES).
#include "dynamic.cuh"
#include "walk.cuh"

extern "C" __global__ void gp_walk_dynamic(
    const long long* __restrict__ indptr, const long long* __restrict__ dst, const long long* __restrict__ units,
    const double* __restrict__ frac, const long long* __restrict__ member_indptr,
    const long long* __restrict__ members, const long long* __restrict__ group_indptr,
    const signed char* __restrict__ group_kind, const int* __restrict__ group_bit,
    const long long* __restrict__ group_start, const long long* __restrict__ group_size,
    const double* __restrict__ alias_prob, const int* __restrict__ alias_other, int weighted, long long lo,
    long long hi, long long space_vertices, long long num_vertices, unsigned long long key, int length, double alpha,
    int teleport, long long n, const long long* __restrict__ walk_id, const long long* __restrict__ source,
    const long long* __restrict__ vertex, const int* __restrict__ step, const long long* __restrict__ offset,
    long long* __restrict__ flat, int* __restrict__ piece_len, long long* __restrict__ out_vertex,
    int* __restrict__ out_step, signed char* __restrict__ moved, unsigned long long* __restrict__ next) {
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        const unsigned long long id = (unsigned long long)walk_id[i];
        long long v = vertex[i];
        int s = step[i];
        long long* out = flat + offset[i];
        int k = 0;
        signed char left = 0;
        while (true) {
            out[k++] = v;
            if (s >= length) break;
            long long u;
            if (teleport != TELEPORT_NONE && gp_unit(gp_bits(key, id, s, 0)) < alpha) {
                u = teleport == TELEPORT_UNIFORM ? gp_uniform_vertex(gp_bits(key, id, s, 1), num_vertices) : source[i];
            } else {
                const long long local = v - lo;
                if (local >= space_vertices) break;  // a vertex only named as a destination so far: no edges
                const long long a = indptr[local], d = indptr[local + 1] - a;
                if (d == 0) break;
                const long long e = weighted ? gp_space_pick(indptr, units, frac, member_indptr, members, group_indptr,
                                                             group_kind, group_bit, group_start, group_size,
                                                             alias_prob, alias_other, key, id, s, 1, local)
                                             : a + gp_below(gp_bits(key, id, s, 1), (unsigned long long)d);
                u = dst[e];
            }
            ++s;
            v = u;
            if (u < lo || u >= hi) { left = 1; break; }
        }
        piece_len[i] = k;
        out_vertex[i] = v;
        out_step[i] = s;
        moved[i] = left;
    }
}
