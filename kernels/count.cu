// Random-walk subgraph-count estimators over a candidate graph (gSWORD): WanderJoin (alpha = 0), Alley (alpha = 1)
// and PartialRefine (each local candidate refined with probability alpha), one sample per thread, a warp per group
// of GP_COUNT_LANES samples. With `inherit`, a lane whose sample dies takes over the lowest live lane's partial
// sample, whose weight is first split evenly among its copies (Algorithm 2's push-down: the group's sum stays an
// unbiased estimate of GP_COUNT_LANES times the count). Each group's sum is added over its lanes in lane order.
// Draws of sample `id` at position d: 0 = which kept candidate, 1 + j = refine local candidate j?
// The candidate graph's layout: gpipe/counting/_candidates.py::CandidateGraph.
// CPU twin: gpipe/counting/_estimate.py::_estimate_cpu (same random stream, same sums).
// GP_COUNT_LANES (32, a warp) and GP_COUNT_MAX_QUERY (positions a sample holds): defined by the loader.
#include "rng.cuh"

// Whether candidate c of position d extends the partial match (gpipe/counting/_common.py::extends).
__device__ __forceinline__ bool gp_extends(const long long* cand_offsets, const long long* cand_vertices,
                                           const long long* back_offsets, const int* back_pos,
                                           const long long* back_rows, const long long* edge_indptr,
                                           const int* edge_indices, int d, int c, const long long* match,
                                           const long long* matched) {
    const long long v = cand_vertices[cand_offsets[d] + c];
    for (int j = 0; j < d; ++j)
        if (matched[j] == v) return false;
    for (long long t = back_offsets[d] + 1; t < back_offsets[d + 1]; ++t) {
        const long long row = back_rows[t] + match[back_pos[t]];
        long long lo = edge_indptr[row], hi = edge_indptr[row + 1];
        const long long end = hi;
        while (lo < hi) {
            const long long mid = (lo + hi) >> 1;
            if (edge_indices[mid] < c) lo = mid + 1; else hi = mid;
        }
        if (lo == end || edge_indices[lo] != c) return false;
    }
    return true;
}

// Local candidate j of a sample is examined (refined) with probability alpha: always at 1, never at 0.
__device__ __forceinline__ bool gp_examined(unsigned long long key, unsigned long long id, int d, long long j,
                                            double alpha) {
    return alpha >= 1.0 || (alpha > 0.0 && gp_unit(gp_bits(key, id, d, 1 + j)) < alpha);
}

__global__ void gp_count_estimate(const long long* __restrict__ cand_offsets,
                                  const long long* __restrict__ cand_vertices,
                                  const long long* __restrict__ back_offsets, const int* __restrict__ back_pos,
                                  const long long* __restrict__ back_rows, const long long* __restrict__ edge_indptr,
                                  const int* __restrict__ edge_indices, int k, unsigned long long key, double alpha,
                                  int inherit, long long first_group, long long groups,
                                  double* __restrict__ group_sum, int* __restrict__ group_valid) {
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long group = thread / GP_COUNT_LANES;
    const int lane = (int)(thread % GP_COUNT_LANES);
    if (group >= groups) return;  // whole warps: the launch has groups x GP_COUNT_LANES threads
    const unsigned long long id = (unsigned long long)(first_group + group) * GP_COUNT_LANES + lane;
    long long match[GP_COUNT_MAX_QUERY], matched[GP_COUNT_MAX_QUERY];
    const long long roots = cand_offsets[1];
    match[0] = gp_below(gp_bits(key, id, 0, 0), (unsigned long long)roots);
    matched[0] = cand_vertices[match[0]];
    double weight = (double)roots;
    bool alive = true;
    for (int d = 1; d < k; ++d) {
        if (alive) {
            const long long t = back_offsets[d];
            const long long row = back_rows[t] + match[back_pos[t]];
            const long long lo = edge_indptr[row], hi = edge_indptr[row + 1];
            long long kept = 0;
            for (long long j = lo; j < hi; ++j)
                kept += !gp_examined(key, id, d, j - lo, alpha) ||
                        gp_extends(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows, edge_indptr,
                                   edge_indices, d, edge_indices[j], match, matched);
            if (kept == 0) {
                alive = false;
            } else {
                long long r = gp_below(gp_bits(key, id, d, 0), (unsigned long long)kept);
                long long j = lo;
                bool examined = false;
                for (;; ++j) {
                    examined = gp_examined(key, id, d, j - lo, alpha);
                    if (!examined || gp_extends(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows,
                                                edge_indptr, edge_indices, d, edge_indices[j], match, matched)) {
                        if (r == 0) break;
                        --r;
                    }
                }
                const int c = edge_indices[j];
                if (examined || gp_extends(cand_offsets, cand_vertices, back_offsets, back_pos, back_rows,
                                           edge_indptr, edge_indices, d, c, match, matched)) {
                    match[d] = c;
                    matched[d] = cand_vertices[cand_offsets[d] + c];
                    weight *= (double)kept;
                } else {
                    alive = false;
                }
            }
        }
        const unsigned int live = __ballot_sync(0xffffffffu, alive);
        if (live == 0u) break;
        if (inherit && d < k - 1 && live != 0xffffffffu) {
            const int parent = __ffs(live) - 1;
            const int idle = GP_COUNT_LANES - __popc(live);
            if (lane == parent) weight /= (double)(idle + 1);
            const double shared = __shfl_sync(0xffffffffu, weight, parent);
            for (int j = 0; j <= d; ++j) {
                const long long m = __shfl_sync(0xffffffffu, match[j], parent);
                const long long v = __shfl_sync(0xffffffffu, matched[j], parent);
                if (!alive) { match[j] = m; matched[j] = v; }
            }
            if (!alive) { weight = shared; alive = true; }
        }
    }
    const double value = alive ? weight : 0.0;
    double sum = 0.0;
    for (int l = 0; l < GP_COUNT_LANES; ++l) sum += __shfl_sync(0xffffffffu, value, l);
    const unsigned int valid = __ballot_sync(0xffffffffu, alive);
    if (lane == 0) {
        group_sum[group] = sum;
        group_valid[group] = __popc(valid);
    }
}
