// R-MAT edge generation (Graph500 quadrant recursion), one thread per edge.
// CPU twin: gpipe/graph/generators.py::_rmat_cpu (same bits for the same seed).
#include "rng.cuh"

__device__ __forceinline__ unsigned long long gp_scramble(unsigned long long v, int scale, unsigned long long k) {
    const unsigned long long mask = (1ULL << scale) - 1ULL;
    const int half = (scale + 1) / 2;
    v = (v * 0x9E3779B97F4A7C15ULL + (k & mask)) & mask;
    v ^= v >> half;
    v = (v * 0xBF58476D1CE4E5B9ULL + ((k >> 32) & mask)) & mask;
    v ^= v >> half;
    return v;
}

extern "C" __global__ void gp_rmat(int scale, double t1, double t2, double t3, unsigned long long seed,
                                   long long start, long long count, int scramble, int weighted,
                                   long long* src, long long* dst, float* weight) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= count) return;
    const unsigned long long k = gp_key(seed);
    const unsigned long long e = (unsigned long long)(start + i);
    unsigned long long u = 0, v = 0;
    for (int level = 0; level < scale; ++level) {
        const double r = gp_unit(gp_bits(k, e, level, 0));
        const unsigned long long bit = 1ULL << (scale - 1 - level);
        if (r >= t3) { u |= bit; v |= bit; }
        else if (r >= t2) { u |= bit; }
        else if (r >= t1) { v |= bit; }
    }
    if (scramble) { u = gp_scramble(u, scale, k); v = gp_scramble(v, scale, k); }
    src[i] = (long long)u;
    dst[i] = (long long)v;
    if (weighted) weight[i] = (float)(1.0 - gp_unit(gp_bits(k, e, scale, 1)));
}
