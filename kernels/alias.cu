// Each segment's packed alias table (gpipe/_alias.py says the layout), a thread per segment: Vose's construction
// (alias.cuh) with prob, other, small and large as scratch, then one word per candidate; with `dead`, a segment
// of no positive bias gets words that draw no candidate (threshold 0, alias 2**32 - 1: a walk's end).
// CPU twin: gpipe/_alias.py::_tables_cpu.
#include "alias.cuh"

#define NO_CANDIDATE 0xFFFFFFFFULL  // gpipe/_alias.py: NO_CANDIDATE

extern "C" __global__ void gp_alias_tables(const long long* __restrict__ offsets, const double* __restrict__ bias,
                                           long long nseg, double* __restrict__ prob, int* __restrict__ other,
                                           int* __restrict__ small, int* __restrict__ large,
                                           int dead, unsigned long long* __restrict__ table) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= nseg) return;
    const long long a = offsets[i];
    const int d = (int)(offsets[i + 1] - a);
    gp_vose(bias + a, d, prob + a, other + a, small + a, large + a);
    bool positive = false;
    for (long long e = a; e < a + d && dead && !positive; ++e) positive = bias[e] > 0.0;
    if (dead && !positive) {
        for (long long e = a; e < a + d; ++e) table[e] = NO_CANDIDATE;
        return;
    }
    for (long long e = a; e < a + d; ++e) {
        const double threshold = fmin(floor(prob[e] * 4294967296.0), 4294967295.0);
        table[e] = ((unsigned long long)threshold << 32) | (unsigned long long)(unsigned int)other[e];
    }
}
