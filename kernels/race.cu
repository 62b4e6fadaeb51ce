// Exponential races (Efraimidis & Spirakis): per segment of candidates, the k
// whose race -log(1 - u) / bias is shortest, in order. Taking the k shortest
// races of a pool is selection without replacement in proportion to bias (the
// distribution of updated sampling), and the k shortest of a union are among
// the k shortest of each part: so each partition keeps only its k per segment.
// Candidate j of segment s draws u from stream streams[s] at (step, j).
// One thread per segment (gp_race_segment, race.cuh); its winners sit sorted in out[o .. o + count).
// CPU twin: gpipe/sampling/_race.py::_race_cpu.
#include "race.cuh"

extern "C" __global__ void gp_race(long long nseg, const long long* __restrict__ offsets,
                                   const double* __restrict__ bias, const long long* __restrict__ out_offsets,
                                   unsigned long long key, const long long* __restrict__ streams, long long step,
                                   long long* __restrict__ out, double* __restrict__ out_race) {
    const long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= nseg) return;
    const long long a = offsets[s], d = offsets[s + 1] - a, o = out_offsets[s];
    const long long k = out_offsets[s + 1] - o;
    gp_race_segment(bias, a, d, k, key, (unsigned long long)streams[s], (unsigned long long)step, out + o,
                    out_race + o);
}
