// SELECT (C-SAW, Fig. 5): per segment of candidates, pick `k` of them without
// replacement, each with probability proportional to its bias among those not
// yet picked (the distribution of "updated sampling"). One warp per segment
// builds the segment's cumulative bias array (the CTPS) and draws by inverse
// transform sampling.
// The CTPS is summed in a fixed order, so the CPU twin gets the same bits: the
// segment is cut into GP_LANES chunks of ceil(d / GP_LANES) candidates; lane l
// sums chunk l from 0 (run), the chunk totals are added left to right into each
// chunk's offset, and cdf[e] = offset + run(e).
// method 0: bipartite region search — when a draw lands on an already picked
//   region [l, h), a second draw r2 is mapped onto the rest of the CTPS
//   (r2 * (total - δ), plus δ past l: Theorem 2's map from the updated CTPS) and
//   searched there; only if that lands on another picked region does a round
//   start over. (C-SAW maps the colliding draw itself, which is confined to
//   [l, h) and so favours the neighbours of the picked region; a fresh draw
//   makes every round pick each unpicked candidate in proportion to its bias.)
// method 1: updated sampling — the CTPS is rebuilt without the picked ones
//   (in parallel, with the same chunks: the first candidate, in chunk order,
//   whose chunk offset + run of unpicked biases exceeds the target);
// method 2: repeated sampling — draw again until an unpicked one comes up;
// method 3: with replacement — every pick is an independent draw.
// Collisions are found in a strided bitmap (candidate j at byte j % B, bit j / B)
// or, with use_bitmap = 0, by scanning the picks so far. A pick that has not
// succeeded after GP_SELECT_ROUNDS rounds (extremely skewed biases) is made by
// one updated-sampling pass, which keeps it exact. Draws: (step, 0, 1, ...);
// every lane makes the same draws and searches, lane 0 records the picks.
// CPU twin: gpipe/sampling/_select.py::_select_cpu.
// GP_SELECT_ROUNDS, GP_LANES and the methods GP_SELECT_BIPARTITE, GP_SELECT_UPDATED, GP_SELECT_WITH_REPLACEMENT:
// defined by the loader, from gpipe/sampling/_select.py (ROUNDS, LANES, METHODS).
#include "rng.cuh"

#define GP_FULL_MASK 0xffffffffu

__device__ __forceinline__ long long gp_upper(const double* cdf, long long a, long long d, double target) {
    long long lo = a, hi = a + d - 1;  // first e with cdf[e] > target (the last one if rounding reaches the end)
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if (cdf[mid] > target) hi = mid; else lo = mid + 1;
    }
    return lo;
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
__device__ long long gp_updated_pick(const double* bias, long long lo, long long hi, long long a, double r,
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

extern "C" __global__ void gp_select(long long nseg, const long long* __restrict__ offsets,
                                     const double* __restrict__ bias, const long long* __restrict__ out_offsets,
                                     unsigned long long key, const long long* __restrict__ streams, long long step,
                                     int method, int use_bitmap, double* __restrict__ cdf,
                                     unsigned char* __restrict__ bitmap, const long long* __restrict__ byte_offsets,
                                     long long* __restrict__ out, long long* __restrict__ iterations) {
    const long long s = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / GP_LANES;
    const int lane = threadIdx.x % GP_LANES;
    if (s >= nseg) return;  // the whole warp: blockDim is a multiple of GP_LANES
    const long long a = offsets[s], d = offsets[s + 1] - a, o = out_offsets[s];
    const int k = (int)(out_offsets[s + 1] - o);
    unsigned char* bits = bitmap + byte_offsets[s];
    const long long B = byte_offsets[s + 1] - byte_offsets[s];
    for (long long b = lane; b < B; b += GP_LANES) bits[b] = 0;
    const long long chunk = (d + GP_LANES - 1) / GP_LANES;
    const long long lo = a + min(lane * chunk, d), hi = a + min((lane + 1) * chunk, d);
    double run = 0.0;
    for (long long e = lo; e < hi; ++e) { run += bias[e]; cdf[e] = run; }
    double total;
    const double offset = gp_chunk_offset(run, lane, &total);
    for (long long e = lo; e < hi; ++e) cdf[e] = offset + cdf[e];
    __syncwarp();
    const unsigned long long id = (unsigned long long)streams[s];
    unsigned long long draw = 0;
    long long iters = 0;
    for (int i = 0; i < k; ++i) {
        long long pick = -1;
        int iters_pick = 0;
        while (pick < 0) {
            ++iters;
            const double r = gp_unit(gp_bits(key, id, (unsigned long long)step, draw++));
            if (method == GP_SELECT_UPDATED || iters_pick++ == GP_SELECT_ROUNDS) {
                pick = gp_updated_pick(bias, lo, hi, a, r, bits, B, use_bitmap, out, o, i, lane);
                break;
            }
            long long e = gp_upper(cdf, a, d, r * total);
            if (method == GP_SELECT_WITH_REPLACEMENT) { if (bias[e] > 0.0) pick = e; continue; }
            if (bias[e] > 0.0 && !gp_taken(bits, B, e - a, use_bitmap, out, o, i, e)) { pick = e; break; }
            if (method == GP_SELECT_BIPARTITE && bias[e] > 0.0) {  // region search around the picked region [l, h)
                const double l = e > a ? cdf[e - 1] : 0.0, delta = cdf[e] - l;
                double v = gp_unit(gp_bits(key, id, (unsigned long long)step, draw++)) * (total - delta);
                if (v >= l) v += delta;
                e = gp_upper(cdf, a, d, v);
                if (bias[e] > 0.0 && !gp_taken(bits, B, e - a, use_bitmap, out, o, i, e)) pick = e;
            }
        }
        if (lane == 0) {
            out[o + i] = pick;
            if (use_bitmap && method != GP_SELECT_WITH_REPLACEMENT) {
                const long long j = pick - a;
                bits[j % B] |= (unsigned char)(1u << (j / B));
            }
        }
        __syncwarp();
    }
    if (lane == 0) iterations[s] = iters;
}
