// Raw counter-based draws, for checking that the CUDA and CPU streams agree.
#include "rng.cuh"

extern "C" __global__ void gp_draws(unsigned long long seed, const long long* streams, long long n,
                                    long long step, long long draw, unsigned long long* out) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = gp_bits(gp_stream(gp_key(seed), (unsigned long long)streams[i]), step, draw);
}
