// Blocks of the counter-based stream for many stream ids at one step: the GPU side of
// gpipe/_rng.py::draws (vectorized draws, and the check that the CUDA and CPU streams agree).
#include "rng.cuh"

extern "C" __global__ void gp_draws(unsigned long long run_key, const long long* __restrict__ stream_ids, long long n,
                                    long long step, const long long* __restrict__ draw,
                                    unsigned long long* __restrict__ out) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const ulonglong2 r = gp_bits(run_key, (unsigned long long)stream_ids[i], (unsigned long long)step,
                                 (unsigned long long)draw[i]);
    out[2 * i] = r.x;
    out[2 * i + 1] = r.y;
}
