// First-order walks: DeepWalk (uniform or edge-weight biased), walks with jump
// (teleport to a uniform vertex) and with restart (teleport to the walk's source).
// Each thread takes walkers from a shared counter and moves each for as many
// steps as it stays inside [lo, hi). Draws per step: 0 = teleport?, 1 = where.
// CPU twin: gpipe/walks/_first_order.py::_advance_cpu (same random stream).
// TELEPORT_NONE, TELEPORT_UNIFORM, TELEPORT_SOURCE: defined by the loader, from _first_order.py's TELEPORT.
#include "walk.cuh"

template <typename IdT>
__global__ void gp_walk_first_order(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                                    const double* __restrict__ cdf, int weighted, long long lo, long long hi,
                                    long long num_vertices, unsigned long long key, int length, double alpha,
                                    int teleport, long long n, const long long* __restrict__ walk_id,
                                    const long long* __restrict__ source, const long long* __restrict__ vertex,
                                    const int* __restrict__ step, const long long* __restrict__ offset,
                                    IdT* __restrict__ flat, int* __restrict__ piece_len,
                                    long long* __restrict__ out_vertex, int* __restrict__ out_step,
                                    signed char* __restrict__ moved, unsigned long long* __restrict__ next) {
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        const unsigned long long id = (unsigned long long)walk_id[i];
        long long v = vertex[i];
        int s = step[i];
        IdT* out = flat + offset[i];
        int k = 0;
        signed char left = 0;
        while (true) {
            out[k++] = (IdT)v;
            if (s >= length) break;
            long long u;
            if (teleport != TELEPORT_NONE && gp_unit(gp_bits(key, id, s, 0)) < alpha) {
                u = teleport == TELEPORT_UNIFORM ? gp_uniform_vertex(gp_bits(key, id, s, 1), num_vertices) : source[i];
            } else {
                const long long a = indptr[v - lo];
                const long long d = indptr[v - lo + 1] - a;
                if (d == 0) break;
                const long long e = gp_pick_edge(cdf, weighted, a, d, gp_bits(key, id, s, 1));
                if (e < 0) break;
                u = (long long)indices[e];
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
