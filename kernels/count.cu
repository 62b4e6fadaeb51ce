// Random-walk subgraph-count estimators over a candidate graph (gSWORD): WanderJoin (alpha = 0), Alley (alpha = 1)
// and PartialRefine (each local candidate refined with probability alpha), one sample per thread, a warp per group
// of GP_COUNT_LANES samples. With `inherit`, a lane whose sample dies takes over the lowest live lane's partial
// sample, whose weight is first split evenly among its copies (Algorithm 2's push-down: the group's sum stays an
// unbiased estimate of GP_COUNT_LANES times the count). Each group's sum is added over its lanes in lane order.
// Picking at position d (draws of sample `id`): with alpha = 0, local candidate below(draw 0, count); otherwise
// draw 1 + j is local candidate j's block: its first word decides whether j is refined (unit < alpha), its second is
// j's A-Res reservoir key, and the kept candidate with the largest key is taken (the lowest j on a tie): uniform over
// the kept ones, in one pass. A list of GP_COUNT_STREAM local candidates or more is streamed over the whole warp
// (gSWORD's Algorithm 3), each lane taking every 32nd candidate, and the counts and keys reduced over the warp: the
// same pick as one lane's pass, so the CPU twin makes it in one loop.
// The candidate graph's layout: gpipe/counting/_candidates.py::CandidateGraph.
// CPU twin: gpipe/counting/_estimate.py::_estimate_cpu (same random stream, same sums).
// GP_COUNT_LANES (32, a warp), GP_COUNT_MAX_QUERY (positions a sample holds) and GP_COUNT_STREAM: defined by the
// loader, from gpipe/counting/_estimate.py.
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

// The candidate edges a candidate of position d must be among, but the parent's: one slice of edge_indices per
// other backward neighbor, for one partial match. A pass over the parent's local candidates in ascending order (one
// lane's, or a streaming lane's every 32nd) narrows each slice to start at the last candidate's lower bound.
struct GpBack {
    long long lo[GP_COUNT_MAX_QUERY - 2], hi[GP_COUNT_MAX_QUERY - 2];
    int n;
};

__device__ __forceinline__ void gp_back(GpBack& b, const long long* back_offsets, const int* back_pos,
                                        const long long* back_rows, const long long* edge_indptr, int d,
                                        const long long* match) {
    b.n = (int)(back_offsets[d + 1] - back_offsets[d] - 1);
    for (int i = 0; i < b.n; ++i) {
        const long long t = back_offsets[d] + 1 + i;
        const long long row = back_rows[t] + match[back_pos[t]];
        b.lo[i] = edge_indptr[row];
        b.hi[i] = edge_indptr[row + 1];
    }
}

// gp_extends for a candidate c no smaller than those checked before against the same slices `b`.
__device__ __forceinline__ bool gp_extends_ascending(const long long* cand_offsets, const long long* cand_vertices,
                                                     const int* edge_indices, int d, int c, const long long* matched,
                                                     GpBack& b) {
    const long long v = cand_vertices[cand_offsets[d] + c];
    for (int j = 0; j < d; ++j)
        if (matched[j] == v) return false;
    for (int i = 0; i < b.n; ++i) {
        long long lo = b.lo[i], hi = b.hi[i];
        while (lo < hi) {
            const long long mid = (lo + hi) >> 1;
            if (edge_indices[mid] < c) lo = mid + 1; else hi = mid;
        }
        b.lo[i] = lo;
        if (lo == b.hi[i] || edge_indices[lo] != c) return false;
    }
    return true;
}

// A pick in progress: the local candidates kept so far, and the one of them with the largest reservoir key.
struct GpPick {
    long long kept;
    unsigned long long best_key;
    long long best;  // its index into edge_indices, -1 while none is kept
};

// Local candidate j (of the list from lo) considered for the pick, in ascending order against the slices `b`: with
// alpha >= 1 every candidate is refined, so the check comes first and only a kept one draws its block.
__device__ __forceinline__ void gp_consider(GpPick& p, const long long* cand_offsets, const long long* cand_vertices,
                                            const int* edge_indices, unsigned long long key, unsigned long long id,
                                            int d, long long lo, long long j, double alpha, const long long* matched,
                                            GpBack& b) {
    if (alpha >= 1.0 && !gp_extends_ascending(cand_offsets, cand_vertices, edge_indices, d, edge_indices[j],
                                              matched, b))
        return;
    const ulonglong2 block = gp_bits(key, id, d, 1 + (j - lo));
    if (alpha < 1.0 && gp_unit(block) < alpha &&
        !gp_extends_ascending(cand_offsets, cand_vertices, edge_indices, d, edge_indices[j], matched, b))
        return;
    ++p.kept;
    if (p.best < 0 || block.y > p.best_key || (block.y == p.best_key && j < p.best)) {
        p.best_key = block.y;
        p.best = j;
    }
}

// At most 256 threads a block and 6 blocks a multiprocessor: 40 registers, a few of them spilled. The binary
// searches wait on memory, so 48 resident warps (rather than the 32 that 64 registers allow) take 0.160 s rather than
// 0.193 s for 10^7 Alley samples with inheritance on the dense 8-vertex query of the labeled R-MAT 20 on an H200.
extern "C" __global__ void __launch_bounds__(256, 6)
gp_count_estimate(const long long* __restrict__ cand_offsets, const long long* __restrict__ cand_vertices,
                  const long long* __restrict__ back_offsets, const int* __restrict__ back_pos,
                  const long long* __restrict__ back_rows, const long long* __restrict__ edge_indptr,
                  const int* __restrict__ edge_indices, int k, unsigned long long key, double alpha, int inherit,
                  long long first_group, long long groups, double* __restrict__ group_sum,
                  int* __restrict__ group_valid) {
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long group = thread / GP_COUNT_LANES;
    const int lane = (int)(thread % GP_COUNT_LANES);
    if (group >= groups) return;  // whole warps: the launch has groups x GP_COUNT_LANES threads
    const unsigned long long id = (unsigned long long)(first_group + group) * GP_COUNT_LANES + lane;
    long long match[GP_COUNT_MAX_QUERY], matched[GP_COUNT_MAX_QUERY];
    long long their_vertices[GP_COUNT_MAX_QUERY];  // a streamed lane's partial sample
    GpBack back, theirs;  // the slices of this lane's partial sample; a streamed lane's
    const long long roots = cand_offsets[1];
    match[0] = gp_below(gp_bits(key, id, 0, 0), (unsigned long long)roots);
    matched[0] = cand_vertices[match[0]];
    double weight = (double)roots;
    bool alive = true;
    for (int d = 1; d < k; ++d) {
        long long lo = 0, hi = 0;
        if (alive) {
            const long long t = back_offsets[d];
            const long long row = back_rows[t] + match[back_pos[t]];
            lo = edge_indptr[row];
            hi = edge_indptr[row + 1];
        }
        GpPick pick = {0, 0ULL, -1};
        if (alpha > 0.0) {
            if (alive) gp_back(back, back_offsets, back_pos, back_rows, edge_indptr, d, match);
            unsigned int streamed = __ballot_sync(0xffffffffu, alive && hi - lo >= GP_COUNT_STREAM);
            while (streamed) {  // the warp takes each long list in turn
                const int owner = __ffs(streamed) - 1;
                streamed &= streamed - 1;
                const long long owner_lo = __shfl_sync(0xffffffffu, lo, owner);
                const long long owner_hi = __shfl_sync(0xffffffffu, hi, owner);
                const unsigned long long owner_id = __shfl_sync(0xffffffffu, id, owner);
                for (int j = 0; j < d; ++j) their_vertices[j] = __shfl_sync(0xffffffffu, matched[j], owner);
                theirs.n = (int)(back_offsets[d + 1] - back_offsets[d] - 1);  // the same for every lane
                for (int i = 0; i < theirs.n; ++i) {
                    theirs.lo[i] = __shfl_sync(0xffffffffu, back.lo[i], owner);
                    theirs.hi[i] = __shfl_sync(0xffffffffu, back.hi[i], owner);
                }
                GpPick part = {0, 0ULL, -1};
                for (long long j = owner_lo + lane; j < owner_hi; j += GP_COUNT_LANES)
                    gp_consider(part, cand_offsets, cand_vertices, edge_indices, key, owner_id, d, owner_lo, j, alpha,
                                their_vertices, theirs);
                for (int offset = GP_COUNT_LANES / 2; offset > 0; offset /= 2) {
                    const long long kept = __shfl_xor_sync(0xffffffffu, part.kept, offset);
                    const unsigned long long best_key = __shfl_xor_sync(0xffffffffu, part.best_key, offset);
                    const long long best = __shfl_xor_sync(0xffffffffu, part.best, offset);
                    part.kept += kept;
                    if (best >= 0 && (part.best < 0 || best_key > part.best_key ||
                                      (best_key == part.best_key && best < part.best))) {
                        part.best_key = best_key;
                        part.best = best;
                    }
                }
                if (lane == owner) pick = part;
            }
            if (alive && hi - lo < GP_COUNT_STREAM)
                for (long long j = lo; j < hi; ++j)
                    gp_consider(pick, cand_offsets, cand_vertices, edge_indices, key, id, d, lo, j, alpha, matched,
                                back);
        } else if (alive && hi > lo) {  // WanderJoin: no refinement, every local candidate kept
            pick.kept = hi - lo;
            pick.best = lo + gp_below(gp_bits(key, id, d, 0), (unsigned long long)pick.kept);
        }
        if (alive) {
            // the pick is a valid extension if it was refined, else it is validated now
            const bool refined = alpha >= 1.0 || (alpha > 0.0 && pick.best >= 0 &&
                                                  gp_unit(gp_bits(key, id, d, 1 + (pick.best - lo))) < alpha);
            if (pick.kept > 0 && (refined || gp_extends(cand_offsets, cand_vertices, back_offsets, back_pos,
                                                        back_rows, edge_indptr, edge_indices, d,
                                                        edge_indices[pick.best], match, matched))) {
                match[d] = edge_indices[pick.best];
                matched[d] = cand_vertices[cand_offsets[d] + match[d]];
                weight *= (double)pick.kept;
            } else {
                alive = false;
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
