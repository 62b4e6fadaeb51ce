// Drawing an edge from Bingo's radix-factorized per-vertex sampling space (gpipe/dynamic/_space.py says the layout).
// DECIMAL_GROUP, SPACE_TRIES, GROUP_ONE, GROUP_DENSE, GROUP_LISTED: defined by the loader (dynamic/_kernels.py's
// PICK_DEFINES).
// CPU twin: gpipe/_space_pick.py::pick_in_space (same random stream).
#pragma once
#include "rng.cuh"

// Edge e's weight within a group of bit `bit`: 1 if its bit is set, its decimal part in the decimal group.
__device__ __forceinline__ double gp_space_weight_in_group(const long long* __restrict__ units,
                                                           const double* __restrict__ frac, long long e, int bit) {
    if (bit == DECIMAL_GROUP) return frac[e];
    return ((units[e] >> bit) & 1) ? 1.0 : 0.0;
}

// The edge of a group of vertex v (edges from a; `listed` its members if it is GROUP_LISTED, else it is dense and a
// try takes from all n of v's edges) drawn exactly by u uniform in [0, 1): the inverse transform of the weights
// (gp_space_weight_in_group) of the edges a try takes from, in their order. CPU twin: _drawn_exactly.
__device__ long long gp_space_drawn_exactly(const long long* __restrict__ units, const double* __restrict__ frac,
                                            const long long* __restrict__ listed, long long a, long long n, int bit,
                                            double u) {
    double total = 0.0;
    for (long long j = 0; j < n; ++j)
        total = __dadd_rn(total, gp_space_weight_in_group(units, frac, a + (listed ? listed[j] : j), bit));
    const double target = __dmul_rn(u, total);
    double below = 0.0;
    long long last = -1;
    for (long long j = 0; j < n; ++j) {
        const long long e = a + (listed ? listed[j] : j);
        const double w = gp_space_weight_in_group(units, frac, e, bit);
        if (w > 0.0) {
            below = __dadd_rn(below, w);
            last = e;
            if (target < below) return e;
        }
    }
    return last;  // (target below total: never reached)
}

// The edge (its slot in the edge pool) drawn from vertex v (-1 if it has none), with the draws first.. of (key,
// stream, step): draws first and first+1 pick the group through v's alias table (the drawn slot's group read with
// its alias column), draws first+2t+2 and first+2t+3 are the t-th try within it (a
// uniform member, or in a dense group a uniform edge kept if in the group; then, in the decimal group, kept with
// probability frac); after SPACE_TRIES tries rejected, draw first+2*SPACE_TRIES+2 draws the edge exactly
// (gp_space_drawn_exactly), by the same law.
__device__ __forceinline__ long long gp_space_pick(
    const long long* __restrict__ edge_start, const long long* __restrict__ degree, const long long* __restrict__ units,
    const double* __restrict__ frac, const long long* __restrict__ member_start, const long long* __restrict__ members,
    const long long* __restrict__ group_row, const long long* __restrict__ group_count,
    const signed char* __restrict__ group_kind,
    const int* __restrict__ group_bit, const long long* __restrict__ group_start,
    const long long* __restrict__ group_size, const double* __restrict__ alias_prob,
    const int* __restrict__ alias_other, unsigned long long key, unsigned long long stream, unsigned long long step,
    unsigned long long first, long long v) {
    const long long row = group_row[v], count = group_count[v];
    if (count == 0) return -1;
    const long long a = edge_start[v];
    const long long slot = row + gp_below(gp_bits(key, stream, step, first), (unsigned long long)count);
    // the slot's own group read with its alias column, not after it: most draws keep the slot
    int kind = group_kind[slot], bit = group_bit[slot];
    long long start = group_start[slot], size = group_size[slot];
    if (!(gp_unit(gp_bits(key, stream, step, first + 1)) < alias_prob[slot])) {
        const long long g = row + alias_other[slot];
        kind = group_kind[g];
        bit = group_bit[g];
        start = group_start[g];
        size = group_size[g];
    }
    if (kind == GROUP_ONE) return a + start;
    for (unsigned long long t = 0; t < SPACE_TRIES; ++t) {
        const ulonglong2 r = gp_bits(key, stream, step, first + 2 * t + 2);
        long long e;
        if (kind == GROUP_LISTED) {
            e = a + members[member_start[v] + start + gp_below(r, size)];
        } else {  // GROUP_DENSE: any edge of v, kept if in the group
            e = a + gp_below(r, (unsigned long long)degree[v]);
            if (bit != DECIMAL_GROUP && !((units[e] >> bit) & 1)) continue;
        }
        if (bit != DECIMAL_GROUP || gp_unit(gp_bits(key, stream, step, first + 2 * t + 3)) < frac[e]) return e;
    }
    return gp_space_drawn_exactly(units, frac, kind == GROUP_LISTED ? members + member_start[v] + start : nullptr, a,
                                  kind == GROUP_LISTED ? size : degree[v], bit,
                                  gp_unit(gp_bits(key, stream, step, first + 2 * SPACE_TRIES + 2)));
}
