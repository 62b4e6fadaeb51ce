// Uniform random walk step kernel (DeepWalk). Each thread takes walkers from a
// shared counter, so a lane whose walker ended early takes the next one instead
// of idling, and moves each for as many steps as it stays inside [lo, hi).
// CPU twin: gpipe/walks/_uniform.py::_advance_cpu (same random stream).
#include "rng.cuh"

template <typename IdT>
__global__ void gp_walk_uniform(const long long* __restrict__ indptr, const IdT* __restrict__ indices, long long lo,
                                long long hi, unsigned long long key, int length, long long n,
                                const long long* __restrict__ walk_id, const long long* __restrict__ vertex,
                                const int* __restrict__ step, const long long* __restrict__ offset,
                                IdT* __restrict__ flat, int* __restrict__ piece_len,
                                long long* __restrict__ out_vertex, int* __restrict__ out_step,
                                signed char* __restrict__ moved, unsigned long long* __restrict__ next) {
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        const unsigned long long stream = gp_stream(key, (unsigned long long)walk_id[i]);
        long long v = vertex[i];
        int s = step[i];
        IdT* out = flat + offset[i];
        int k = 0;
        signed char left = 0;
        while (true) {
            out[k++] = (IdT)v;
            if (s >= length) break;
            const long long a = indptr[v - lo];
            const long long d = indptr[v - lo + 1] - a;
            if (d == 0) break;
            const long long u = (long long)indices[a + gp_below(gp_bits(stream, s, 0), d)];
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
