// Counter-based random numbers: the CUDA side of gpipe/_rng.py (same bits; the scheme and the bias bound of
// gp_below are written there).
//   key(seed) = mix64(seed + GOLDEN)
//   bits(key, id, step, draw) = Philox-4x32-10 of counter (draw, step, id_lo, id_hi) under key (key_lo, key_hi),
//                               words w0..w3 as the block {w0 | w1 << 32, w2 | w3 << 32}
//   unit(block) = (block.x >> 11) * 2^-53; below(block, n) = hi64(w * n), w = block.y if block.x is rejected
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

__device__ __forceinline__ uint4 gp_philox(uint4 c, uint2 k) {
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        const unsigned int hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
        const unsigned int hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k.x += 0x9E3779B9u;
        k.y += 0xBB67AE85u;
    }
    return c;
}

// The block of draw `draw` at `step` of stream `id`: one Philox call.
__device__ __forceinline__ ulonglong2 gp_bits(unsigned long long key, unsigned long long id, unsigned long long step,
                                              unsigned long long draw) {
    const uint4 w = gp_philox(make_uint4((unsigned int)draw, (unsigned int)step, (unsigned int)id,
                                         (unsigned int)(id >> 32)),
                              make_uint2((unsigned int)key, (unsigned int)(key >> 32)));
    return make_ulonglong2(w.x | ((unsigned long long)w.y << 32), w.z | ((unsigned long long)w.w << 32));
}

// uniform integer in [0, n) for 0 < n < 2^63: Lemire's rejection of the first word, the second in its place
__device__ __forceinline__ long long gp_below(ulonglong2 r, unsigned long long n) {
    const unsigned long long low = r.x * n;
    const bool rejected = low < n && low < (0ULL - n) % n;
    return (long long)__umul64hi(rejected ? r.y : r.x, n);
}

__device__ __forceinline__ double gp_unit(ulonglong2 r) {
    return (double)(r.x >> 11) * (1.0 / 9007199254740992.0);
}
