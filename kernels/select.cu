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
// method 2: repeated sampling — draw again until an unpicked one comes up; with use_table (the "alias" method) the
//   draws read each segment's packed alias table (gpipe/_alias.py) instead of a CTPS: one word per draw;
// method 3: with replacement — every pick is an independent draw.
// Collisions are found in a strided bitmap (candidate j at byte j % B, bit j / B)
// or, with use_bitmap = 0, by scanning the picks so far. A pick that has not
// succeeded after GP_SELECT_ROUNDS rounds (extremely skewed biases) is made by
// one updated-sampling pass, which keeps it exact. Draws: (step, 0, 1, ...);
// every lane makes the same draws and searches, lane 0 records the picks.
// CPU twin: gpipe/_select.py::_select_cpu.
// GP_SELECT_ROUNDS, GP_LANES and the methods GP_SELECT_BIPARTITE, GP_SELECT_UPDATED, GP_SELECT_WITH_REPLACEMENT:
// defined by the loader, from gpipe/_select.py (ROUNDS, LANES, METHODS).
#include "select.cuh"

extern "C" __global__ void gp_select(long long nseg, const long long* __restrict__ offsets,
                                     const double* __restrict__ bias, const long long* __restrict__ out_offsets,
                                     unsigned long long key, const long long* __restrict__ streams, long long step,
                                     int method, int use_bitmap, double* __restrict__ cdf,
                                     unsigned char* __restrict__ bitmap, const long long* __restrict__ byte_offsets,
                                     long long* __restrict__ out, long long* __restrict__ iterations,
                                     int use_table, const unsigned long long* __restrict__ table) {
    const long long s = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / GP_LANES;
    const int lane = threadIdx.x % GP_LANES;
    if (s >= nseg) return;  // the whole warp: blockDim is a multiple of GP_LANES
    const long long a = offsets[s], o = out_offsets[s];
    const long long iters = gp_select_segment(bias, a, offsets[s + 1] - a, (int)(out_offsets[s + 1] - o), key,
                                              (unsigned long long)streams[s], step, method, use_bitmap, cdf + a, 0,
                                              bitmap + byte_offsets[s], byte_offsets[s + 1] - byte_offsets[s],
                                              out + o, use_table ? table + a : nullptr, lane);
    if (lane == 0) iterations[s] = iters;
}
