// One segment's exponential races (Efraimidis & Spirakis), shared by race.cu and gnn.cu; CPU twin:
// gpipe/_search.py::race_segment.
#pragma once
#include "rng.cuh"

// The (at most) k candidates a..a+d-1 with the shortest race -log(1 - u) / bias, shortest first, into out[0..k)
// (candidate indices) and out_race[0..k); candidate j draws u from stream id at (step, j); zero biases never race.
// Returns how many were written.
template <typename B>
__device__ __forceinline__ long long gp_race_segment(const B* __restrict__ bias, long long a, long long d, long long k,
                                                     unsigned long long key, unsigned long long id,
                                                     unsigned long long step, long long* __restrict__ out,
                                                     double* __restrict__ out_race) {
    long long held = 0;
    for (long long j = 0; j < d && k > 0; ++j) {
        const double b = (double)bias[a + j];
        if (!(b > 0.0)) continue;
        const double race = -log1p(-gp_unit(gp_bits(key, id, step, (unsigned long long)j))) / b;
        if (held == k && !(race < out_race[k - 1])) continue;
        long long i = held < k ? held++ : k - 1;  // insert, keeping the k shortest sorted
        while (i > 0 && race < out_race[i - 1]) {
            out_race[i] = out_race[i - 1];
            out[i] = out[i - 1];
            --i;
        }
        out_race[i] = race;
        out[i] = a + j;
    }
    return held;
}
