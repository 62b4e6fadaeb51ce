// Exponential races (Efraimidis & Spirakis): per segment of candidates, the k
// whose race -log(1 - u) / bias is shortest, in order. Taking the k shortest
// races of a pool is selection without replacement in proportion to bias (the
// distribution of updated sampling), and the k shortest of a union are among
// the k shortest of each part: so each partition keeps only its k per segment.
// Candidate j of segment s draws u from stream streams[s] at (step, j).
// One thread per segment; its winners sit sorted in out[o .. o + count).
// CPU twin: gpipe/sampling/_race.py::_race_cpu.
#include "rng.cuh"

extern "C" __global__ void gp_race(long long nseg, const long long* __restrict__ offsets,
                                   const double* __restrict__ bias, const long long* __restrict__ out_offsets,
                                   unsigned long long key, const long long* __restrict__ streams, long long step,
                                   long long* __restrict__ out, double* __restrict__ out_race) {
    const long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= nseg) return;
    const long long a = offsets[s], d = offsets[s + 1] - a, o = out_offsets[s];
    const long long k = out_offsets[s + 1] - o;
    if (k == 0) return;
    const unsigned long long id = (unsigned long long)streams[s];
    long long held = 0;
    for (long long j = 0; j < d; ++j) {
        const double b = bias[a + j];
        if (!(b > 0.0)) continue;
        const double race = -log1p(-gp_unit(gp_bits(key, id, (unsigned long long)step, (unsigned long long)j))) / b;
        if (held == k && !(race < out_race[o + k - 1])) continue;
        long long i = held < k ? held++ : k - 1;  // insert, keeping the k shortest sorted
        while (i > 0 && race < out_race[o + i - 1]) {
            out_race[o + i] = out_race[o + i - 1];
            out[o + i] = out[o + i - 1];
            --i;
        }
        out_race[o + i] = race;
        out[o + i] = a + j;
    }
}
