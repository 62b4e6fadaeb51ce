// SELECT's device functions (C-SAW, Fig. 5), shared by gp_select (select.cu) and the fused neighbor sampler
// (neighbor.cu); the rule is written in select.cu. GP_SELECT_ROUNDS, GP_LANES and the methods: defined by the
// loader, from gpipe/_select.py.
#pragma once
#include "alias.cuh"
#include "rng.cuh"

#define GP_FULL_MASK 0xffffffffu

// A bias of 1 for every candidate (uniform sampling): SELECT needs no CDF for it, as cdf[j] = j + 1 exactly.
struct GpUnitBias {
    __device__ __forceinline__ double operator[](long long) const { return 1.0; }
};
template <typename Bias> struct GpIsUnit { static constexpr bool value = false; };
template <> struct GpIsUnit<GpUnitBias> { static constexpr bool value = true; };

// gp_upper_groups over the CDF of d unit biases (cdf[j] = j + 1, exact in doubles): the first j with j + 1 > target.
__device__ __forceinline__ long long gp_unit_upper(long long d, double target) {
    return min((long long)floor(target), d - 1);
}

__device__ __forceinline__ bool gp_taken(const unsigned char* bits, long long B, long long j, int use_bitmap,
                                         const long long* out, long long o, int picked, long long e) {
    if (use_bitmap) return (bits[j % B] >> (j / B)) & 1;
    for (int i = 0; i < picked; ++i) if (out[o + i] == e) return true;
    return false;
}

// The sum of the chunk totals before this lane's, added left to right; `total` gets all of them.
__device__ __forceinline__ double gp_chunk_offset(double sum, int lane, double* total) {
    double offset = 0.0, all = 0.0;
    for (int j = 0; j < GP_LANES; ++j) {
        const double t = __shfl_sync(GP_FULL_MASK, sum, j);
        if (j < lane) offset += t;
        all += t;
    }
    *total = all;
    return offset;
}

// One updated-sampling pass over the unpicked candidates, the chunks in parallel.
template <typename Bias>
__device__ long long gp_updated_pick(const Bias bias, long long lo, long long hi, long long a, double r,
                                     const unsigned char* bits, long long B, int use_bitmap, const long long* out,
                                     long long o, int picked, int lane) {
    double rest = 0.0;
    for (long long e = lo; e < hi; ++e)
        if (!gp_taken(bits, B, e - a, use_bitmap, out, o, picked, e)) rest += bias[e];
    double all;
    const double offset = gp_chunk_offset(rest, lane, &all);
    const double target = r * all;
    long long mine = -1;
    double run = 0.0;
    for (long long e = lo; e < hi && mine < 0; ++e) {
        if (gp_taken(bits, B, e - a, use_bitmap, out, o, picked, e) || !(bias[e] > 0.0)) continue;
        run += bias[e];
        if (offset + run > target) mine = e;
    }
    unsigned found = __ballot_sync(GP_FULL_MASK, mine >= 0);
    if (found) return __shfl_sync(GP_FULL_MASK, mine, __ffs(found) - 1);
    long long last = -1;  // rounding at the very end: the last positive unpicked candidate
    for (long long e = hi - 1; e >= lo && last < 0; --e)
        if (bias[e] > 0.0 && !gp_taken(bits, B, e - a, use_bitmap, out, o, picked, e)) last = e;
    found = __ballot_sync(GP_FULL_MASK, last >= 0);
    return __shfl_sync(GP_FULL_MASK, last, 31 - __clz(found));
}

// The CDF of candidates a..a+d-1 of `bias` into cdf[0..d), by the whole warp: each lane sums a chunk, then adds the
// chunk totals before it, left to right. Returns the total (== cdf[d - 1], the same additions). SELECT's CDF, and
// gp_row_cdf's (neighbor.cu) for every row at once.
template <typename Bias>
__device__ __forceinline__ double gp_segment_cdf(const Bias bias, long long a, long long d, double* __restrict__ cdf,
                                                 int lane) {
    const long long chunk = (d + GP_LANES - 1) / GP_LANES;
    const long long lo = min(lane * chunk, d), hi = min((lane + 1) * chunk, d);
    double run = 0.0, total;
    for (long long j = lo; j < hi; ++j) { run += bias[a + j]; cdf[j] = run; }
    const double offset = gp_chunk_offset(run, lane, &total);
    for (long long j = lo; j < hi; ++j) cdf[j] = offset + cdf[j];
    return total;
}

// Lanes per draw of gp_spec: the most (a power of two) that k draws can each have.
__device__ __forceinline__ int gp_spec_lanes(int k) {
    int g = GP_LANES;
    while (g > 1 && g * k > GP_LANES) g >>= 1;
    return g;
}

// The first e in 0..d-2 with cdf[e] > target, else d - 1 (the last one if rounding reaches the end), for a target per
// group of g lanes (lanes j * g .. j * g + g - 1 share `target`; g a power of two), by the whole warp: a (g + 1)-way
// search, a probe per lane and round, so a row of d candidates takes about log(d) / log(g + 1) dependent reads, not a
// binary search's log2(d). The same index as the twin's binary search wherever cdf does not decrease, as a CTPS of
// non-negative biases summed in order does not. (More probes per lane and round, fewer rounds: slower on an H200,
// whose weighted neighbor sampling is bound by the probes' memory sectors.)
__device__ __forceinline__ long long gp_upper_groups(const double* cdf, long long d, double target, int g, int lane) {
    const int mine = lane & (g - 1), first_lane = lane - mine;
    const unsigned group = (g == GP_LANES ? GP_FULL_MASK : (1u << g) - 1u) << first_lane;
    long long lo = 0, hi = d - 1;  // the answer is in [lo, hi]; hi when no cdf reaches past target
    while (__any_sync(GP_FULL_MASK, hi - lo > g)) {
        const bool wide = hi - lo > g;
        const long long step = wide ? (hi - lo) / (g + 1) : 0;  // probes lo + step - 1 .. lo + g * step - 1 < hi
        const unsigned above = __ballot_sync(GP_FULL_MASK, wide && cdf[lo + (mine + 1) * step - 1] > target) & group;
        if (wide) {
            if (above) {
                const int first = __ffs(above) - 1 - first_lane;
                hi = lo + (first + 1) * step - 1;
                lo += first * step;
            } else {
                lo += g * step;
            }
        }
    }
    const long long probe = lo + mine;
    const unsigned above = __ballot_sync(GP_FULL_MASK, probe < hi && cdf[probe] > target) & group;
    return above ? lo + __ffs(above) - 1 - first_lane : hi;
}

// SELECT of one segment: k picks of candidates a..a+d-1 of `bias` (anything indexed by a candidate: an array, or
// the fused neighbor sampler's edge weights or ones) into out[0..k), drawn from stream `id` at `step`, by the whole
// warp; cdf[0..d) (not for GpUnitBias; with cdf_ready it holds gp_segment_cdf's already) and bits[0..B) (with
// use_bitmap) are its scratch. With a `table` (the segment's packed alias table, alias.cuh; not for GpUnitBias, whose
// draws need none) the draws read it instead of a CDF, and `method` is repeated sampling's or with replacement; a
// table leads to no candidate of zero bias (Vose's construction leaves none full unless none is positive, when k = 0),
// and k = d picks without replacement are every candidate in order, with no draw.
// Returns the draws taken. The one rule of every SELECT: gp_select runs it per segment, gp_sample_neighbors
// (neighbor.cu) per task. CPU twin: _select.py::select_segment.
// Without the bitmap and with k <= GP_LANES, lane i holds pick i (a collision is a ballot; `out` is written at the
// end), and the plain searches of the first draws are made at once, a group of lanes each (gp_spec): a pick whose
// try takes one of those draws reads its answer rather than searching alone. The draws and picks are the same.
template <typename Bias>
__device__ long long gp_select_segment(const Bias bias, long long a, long long d, int k, unsigned long long key,
                                       unsigned long long id, long long step, int method, int use_bitmap,
                                       double* __restrict__ cdf, int cdf_ready, unsigned char* __restrict__ bits,
                                       long long B, long long* __restrict__ out,
                                       const unsigned long long* __restrict__ table, int lane) {
    constexpr bool unit = GpIsUnit<Bias>::value;  // no CDF written: the same picks, in O(k) instead of O(d)
    const bool alias = !unit && table != nullptr;  // no CDF either: a draw reads one word
    if (use_bitmap)
        for (long long b = lane; b < B; b += GP_LANES) bits[b] = 0;
    const long long chunk = (d + GP_LANES - 1) / GP_LANES;
    const long long lo = min(lane * chunk, d), hi = min((lane + 1) * chunk, d);
    const double total = unit        ? (double)d
                         : alias     ? 0.0
                         : cdf_ready ? (d > 0 ? cdf[d - 1] : 0.0)
                                     : gp_segment_cdf(bias, a, d, cdf, lane);
    __syncwarp();
    const bool in_lanes = !use_bitmap && k <= GP_LANES;
    int g = GP_LANES;            // lanes per speculated draw
    long long spec = 0;          // the number of draws searched ahead
    long long spec_e = -1;       // this lane's group's draw's answer,
    int spec_ok = 0;             // and whether its bias is positive
    if (in_lanes && method != GP_SELECT_UPDATED && k > 0) {
        g = unit || alias ? 1 : gp_spec_lanes(k);
        // A table's draws each read a word of it: a long row's from as many sectors, so no more are made ahead than
        // its picks may well take (a short row's words share a few sectors).
        spec = alias && d > GP_LANES ? min(GP_LANES, 2 * k) : GP_LANES / g;
        if (lane < spec * g) {
            const double r = gp_unit(gp_bits(key, id, (unsigned long long)step, (unsigned long long)(lane / g)));
            spec_e = a + (unit    ? gp_unit_upper(d, r * total)
                          : alias ? gp_alias_draw(table, d, r)
                                  : gp_upper_groups(cdf, d, r * total, g, lane));
            spec_ok = alias || bias[spec_e] > 0.0;
        }
    }
    long long held = -1;  // in_lanes: lane i's pick i
    unsigned long long draw = 0;
    long long iters = 0;
    if (alias && k == d && method != GP_SELECT_WITH_REPLACEMENT) {  // every candidate, in order: no draw
        for (long long i = lane; i < k; i += GP_LANES) out[i] = a + i;
        __syncwarp();
        return 0;
    }
    for (int i = 0; i < k; ++i) {
        long long pick = -1;
        int iters_pick = 0;
        while (pick < 0) {
            ++iters;
            const unsigned long long here = draw++;
            if (method == GP_SELECT_UPDATED || iters_pick++ == GP_SELECT_ROUNDS) {
                const double r = gp_unit(gp_bits(key, id, (unsigned long long)step, here));
                if (in_lanes) {  // the pass reads the picks so far from `out`
                    if (lane < i) out[lane] = held;
                    __syncwarp();
                }
                pick = gp_updated_pick(bias, a + lo, a + hi, a, r, bits, B, use_bitmap, out, 0, i, lane);
                break;
            }
            long long e;
            bool positive;
            if (here < (unsigned long long)spec) {
                e = __shfl_sync(GP_FULL_MASK, spec_e, (int)here * g);
                positive = __shfl_sync(GP_FULL_MASK, spec_ok, (int)here * g);
            } else {
                const double r = gp_unit(gp_bits(key, id, (unsigned long long)step, here));
                e = a + (unit    ? gp_unit_upper(d, r * total)
                         : alias ? gp_alias_draw(table, d, r)
                                 : gp_upper_groups(cdf, d, r * total, GP_LANES, lane));
                positive = alias || bias[e] > 0.0;
            }
            if (method == GP_SELECT_WITH_REPLACEMENT) { if (positive) pick = e; continue; }
            bool taken = in_lanes ? __ballot_sync(GP_FULL_MASK, lane < i && held == e) != 0u
                                  : gp_taken(bits, B, e - a, use_bitmap, out, 0, i, e);
            if (positive && !taken) { pick = e; break; }
            if (method == GP_SELECT_BIPARTITE && positive) {  // region search around the picked region [l, h)
                const double l = unit ? (double)(e - a) : e > a ? cdf[e - a - 1] : 0.0;
                const double delta = unit ? 1.0 : cdf[e - a] - l;
                double v = gp_unit(gp_bits(key, id, (unsigned long long)step, draw++)) * (total - delta);
                if (v >= l) v += delta;
                e = a + (unit ? gp_unit_upper(d, v) : gp_upper_groups(cdf, d, v, GP_LANES, lane));
                taken = in_lanes ? __ballot_sync(GP_FULL_MASK, lane < i && held == e) != 0u
                                 : gp_taken(bits, B, e - a, use_bitmap, out, 0, i, e);
                if (bias[e] > 0.0 && !taken) pick = e;
            }
        }
        if (in_lanes) {
            if (lane == i) held = pick;
        } else {
            if (lane == 0) {
                out[i] = pick;
                if (use_bitmap && method != GP_SELECT_WITH_REPLACEMENT) {
                    const long long j = pick - a;
                    bits[j % B] |= (unsigned char)(1u << (j / B));
                }
            }
            __syncwarp();
        }
    }
    if (in_lanes && lane < k) out[lane] = held;
    __syncwarp();
    return iters;
}
