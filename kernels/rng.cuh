// Counter-based random numbers: the CUDA side of gpipe/_rng.py (same bits).
//   key(seed) = mix64(seed + GOLDEN); stream(key, s) = mix64(key + s * GOLDEN)
//   bits(stream, step, draw) = mix64(stream + (((step << 32) | draw) + 1) * GOLDEN)
#pragma once

#define GPIPE_GOLDEN 0x9E3779B97F4A7C15ULL

__device__ __forceinline__ unsigned long long gp_mix64(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ unsigned long long gp_key(unsigned long long seed) {
    return gp_mix64(seed + GPIPE_GOLDEN);
}

__device__ __forceinline__ unsigned long long gp_stream(unsigned long long key, unsigned long long s) {
    return gp_mix64(key + s * GPIPE_GOLDEN);
}

__device__ __forceinline__ unsigned long long gp_bits(unsigned long long stream, unsigned long long step,
                                                      unsigned long long draw) {
    return gp_mix64(stream + (((step << 32) | draw) + 1ULL) * GPIPE_GOLDEN);
}

// uniform integer in [0, n) for n < 2^32
__device__ __forceinline__ long long gp_below(unsigned long long r, unsigned long long n) {
    return (long long)(((r >> 32) * n) >> 32);
}

__device__ __forceinline__ double gp_unit(unsigned long long r) {
    return (double)(r >> 11) * (1.0 / 9007199254740992.0);
}
