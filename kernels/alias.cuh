// Walker's alias tables (Vose's construction) and their draws; the layout of a packed table is written in
// gpipe/_alias.py. CPU twins: gpipe/_alias.py (vose, draw), the same operations.
#pragma once

// Vose's alias table of weights[0..count) into prob[0..count) and other[0..count) (local indices), with small and
// large (count each) as its worklists; prob holds the scaled weights as it goes.
template <typename W, typename I>
__device__ void gp_vose(const W* weights, I count, double* prob, int* __restrict__ other, I* __restrict__ small,
                        I* __restrict__ large) {
    double total = 0.0;
    I ns = 0, nl = 0;
    for (I g = 0; g < count; ++g) total += (double)weights[g];
    for (I g = 0; g < count; ++g) {
        if (!(total > 0.0)) {  // no positive weight: every column full
            prob[g] = 1.0;
            other[g] = (int)g;
            continue;
        }
        prob[g] = (double)weights[g] * (double)count / total;
        if (prob[g] < 1.0) small[ns++] = g;
        else large[nl++] = g;
    }
    while (ns > 0 && nl > 0) {
        const I j = small[--ns], g = large[nl - 1];
        other[j] = (int)g;
        prob[g] = (prob[g] + prob[j]) - 1.0;
        if (prob[g] < 1.0) {
            --nl;
            small[ns++] = g;
        }
    }
    for (I i = 0; i < nl; ++i) {  // what rounding leaves: full columns
        prob[large[i]] = 1.0;
        other[large[i]] = (int)large[i];
    }
    for (I i = 0; i < ns; ++i) {
        prob[small[i]] = 1.0;
        other[small[i]] = (int)small[i];
    }
}

// The candidate (0..d-1) that draw r in [0, 1) takes from the packed table table[0..d).
__device__ __forceinline__ long long gp_alias_draw(const unsigned long long* __restrict__ table, long long d, double r) {
    const double x = __dmul_rn(r, (double)d);  // not fused into x - j below: the twin rounds it
    const long long j = min((long long)floor(x), d - 1);
    const unsigned long long cell = table[j];
    return __dmul_rn(x - (double)j, 4294967296.0) < (double)(cell >> 32) ? j : (long long)(cell & 0xFFFFFFFFULL);
}
