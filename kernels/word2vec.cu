// word2vec's skip-gram with negative sampling on blocks of walks: a warp per walk, its lanes over the dimensions
// (lane l holds dims l * PER_LANE .. l * PER_LANE + PER_LANE - 1 of the context's syn0 row and of its gradient in
// registers, read and added a float4 (float2) at a time where the rows are aligned for it; a dot product is summed
// across the lanes with shuffles). `warps` warps take the rows, warp w rows w, w + warps, ...: with one
// (mode="serialized") the updates run in word2vec's order, a row after another; with a warp per row (mode="fast")
// the rows run at once without locks (Hogwild), each addition to a table an atomic one: on BlogCatalog plain
// read-modify-writes lost so many of the hubs' updates that Macro-F1 fell from the twin's 0.213 to 0.125 (an A/B on
// an H100; atomic, 0.213: benchmarks/results/embeddings_quality_h100.json).
// The rules, the draws and the tables (keep, cum) are written in gpipe/embeddings/_kernels.py, whose _train_cpu is
// the CPU twin (same random stream; _initial_cpu for gp_word2vec_init). W2V_MAX_EXP, W2V_INIT_STEP and W2V_DOMAIN:
// defined by the loader, from _kernels.py's MAX_EXP, INIT_STEP and DOMAIN.
#include "rng.cuh"

#define W2V_LANES 32

__device__ __forceinline__ unsigned int w2v_word(ulonglong2 block, long long k) {
    const unsigned long long w = k < 2 ? block.x : block.y;
    return (unsigned int)((k & 1) ? (w >> 32) : w);
}

// the vertex a 32-bit draw picks: the first v with cum[v] > r, from the guide table's (about one step on)
__device__ __forceinline__ long long w2v_negative(const long long* __restrict__ cum,
                                                  const long long* __restrict__ guide, long long shift, long long r) {
    long long v = guide[r >> shift];
    while (cum[v] <= r) ++v;
    return v;
}

__device__ __forceinline__ float w2v_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// A lane's PER_LANE dims of a row from d0: in groups of G (PER_LANE's, at most 4), one access a group where `packed`
// (dim a multiple of G, so every group is whole and aligned), else float by float; zeros past dim.
template <int PER_LANE>
struct W2vLane {
    static constexpr int G = PER_LANE < 4 ? PER_LANE : 4;
    __device__ __forceinline__ static void load(const float* __restrict__ row, long long d0, long long dim, bool packed,
                                                float (&x)[PER_LANE]) {
#pragma unroll
        for (int t = 0; t < PER_LANE; t += G) {
            if (packed && d0 + t < dim) {
                if constexpr (G == 4) {
                    const float4 q = *reinterpret_cast<const float4*>(row + d0 + t);
                    x[t] = q.x; x[t + 1] = q.y; x[t + 2] = q.z; x[t + 3] = q.w;
                } else if constexpr (G == 2) {
                    const float2 q = *reinterpret_cast<const float2*>(row + d0 + t);
                    x[t] = q.x; x[t + 1] = q.y;
                } else {
                    x[t] = row[d0 + t];
                }
            } else {
#pragma unroll
                for (int u = 0; u < G; ++u) x[t + u] = !packed && d0 + t + u < dim ? row[d0 + t + u] : 0.0f;
            }
        }
    }
    // row[d0 ..] += v, atomically (red.global.add: the float additions a plain += would make, none lost)
    __device__ __forceinline__ static void add(float* __restrict__ row, long long d0, long long dim, bool packed,
                                               const float (&v)[PER_LANE]) {
#pragma unroll
        for (int t = 0; t < PER_LANE; t += G) {
            if (packed) {
                if (d0 + t >= dim) continue;
                if constexpr (G == 4)
                    atomicAdd(reinterpret_cast<float4*>(row + d0 + t), make_float4(v[t], v[t + 1], v[t + 2], v[t + 3]));
                else if constexpr (G == 2)
                    atomicAdd(reinterpret_cast<float2*>(row + d0 + t), make_float2(v[t], v[t + 1]));
                else
                    atomicAdd(row + d0 + t, v[t]);
            } else {
#pragma unroll
                for (int u = 0; u < G; ++u)
                    if (d0 + t + u < dim) atomicAdd(row + d0 + t + u, v[t + u]);
            }
        }
    }
};

// The positions of `walk` whose tokens stay (min_count, `sample`'s draws), in order, into `kept`: how many. A warp's
// lanes take 32 positions at a time, compacted by ballot.
template <typename IdT>
__device__ __forceinline__ long long w2v_kept(const IdT* __restrict__ walk, long long width, int* __restrict__ kept,
                                              const long long* __restrict__ keep, unsigned long long key,
                                              unsigned long long walk_id, unsigned long long step0, int lane) {
    long long n = 0;
    for (long long base = 0; base < width; base += W2V_LANES) {
        const long long p = base + lane;
        const long long v = p < width ? (long long)walk[p] : -1;
        bool stays = v >= 0 && keep[v] > 0;
        if (stays && keep[v] < W2V_DOMAIN)
            stays = (long long)w2v_word(gp_bits(key, walk_id, step0 + p, 0), 0) < keep[v];
        const unsigned int mask = __ballot_sync(0xffffffffu, stays);
        if (stays) kept[n + __popc(mask & ((1u << lane) - 1u))] = (int)p;
        n += __popc(mask);
        if (__any_sync(0xffffffffu, v < 0)) break;  // padding only follows a walk's end
    }
    __syncwarp();
    return n;
}

// the learning rate at a center with `done` tokens of `total` before it: linear from alpha to min_alpha
__device__ __forceinline__ float w2v_alpha(float alpha, float min_alpha, long long done, long long total) {
    return (float)((double)alpha - (double)(alpha - min_alpha) * ((double)done / (double)total));
}

// One (center, context) pair's updates in word2vec's order (_kernels.py's _train_pair): the context's syn0 row
// (`context`) against syn1's row `center` (label 1) and `negative` draws of the negatives' table (label 0; cum and
// guide over syn1's rows; a draw equal to the center skipped), each term's change to a syn1 row added at once, the
// context's after the last; the terms' -log sigmoid added to `loss`, their count to `terms`.
template <int PER_LANE>
__device__ __forceinline__ void w2v_pair(float* __restrict__ context, long long center, float* __restrict__ syn1,
                                         long long dim, long long d0, bool packed, long long negative,
                                         unsigned long long key, unsigned long long walk_id, unsigned long long step,
                                         long long pq, const long long* __restrict__ cum,
                                         const long long* __restrict__ guide, long long shift, float a, double& loss,
                                         long long& terms) {
    const long long blocks = (negative + 3) / 4;
    float l1[PER_LANE], work[PER_LANE], row[PER_LANE], change[PER_LANE];
    W2vLane<PER_LANE>::load(context, d0, dim, packed, l1);
#pragma unroll
    for (int t = 0; t < PER_LANE; ++t) work[t] = 0.0f;
    for (long long k = 0; k <= negative; ++k) {
        long long target = center;
        float label = 1.0f;
        if (k > 0) {
            const ulonglong2 block = gp_bits(key, walk_id, step, 2 + pq * blocks + (k - 1) / 4);
            target = w2v_negative(cum, guide, shift, (long long)w2v_word(block, (k - 1) % 4));
            if (target == center) continue;
            label = 0.0f;
        }
        float* target_row = syn1 + target * dim;
        W2vLane<PER_LANE>::load(target_row, d0, dim, packed, row);
        float part = 0.0f;
#pragma unroll
        for (int t = 0; t < PER_LANE; ++t) part += l1[t] * row[t];
        const float f = w2v_warp_sum(part);
        // -log sigmoid(x) is this term's loss; in floats (the twin's doubles: the same up to rounding)
        const float x = k == 0 ? f : -f;
        loss += (double)(fmaxf(-x, 0.0f) + log1pf(expf(-fabsf(x))));
        ++terms;
        float g;
        if (f > W2V_MAX_EXP) g = (label - 1.0f) * a;
        else if (f < -W2V_MAX_EXP) g = label * a;
        else g = (label - 1.0f / (1.0f + expf(-f))) * a;
#pragma unroll
        for (int t = 0; t < PER_LANE; ++t) {
            work[t] += g * row[t];
            change[t] = g * l1[t];
        }
        W2vLane<PER_LANE>::add(target_row, d0, dim, packed, change);
    }
    W2vLane<PER_LANE>::add(context, d0, dim, packed, work);
}

// PER_LANE: the dims a lane holds in registers, dim <= 32 * PER_LANE (_kernels.py's train_kernel picks it). A
// sharded table's block (shard s of `shards`: the vertices v with v % shards == s, row v / shards): only the pairs
// whose context is in `context_shard` (syn0: its rows) and whose center is in `center_shard` (syn1, cum and guide:
// its); every pair where `shards` is 1
template <typename IdT, int PER_LANE>
__global__ void gp_word2vec(const IdT* __restrict__ walks, long long rows, long long width, long long warps,
                            long long first_walk, const long long* __restrict__ offset, long long done,
                            long long total, long long epoch, float* __restrict__ syn0, float* __restrict__ syn1,
                            long long dim, const long long* __restrict__ keep, const long long* __restrict__ cum,
                            long long vocab, const long long* __restrict__ guide, long long shift, long long window,
                            long long negative, unsigned long long key, float alpha, float min_alpha,
                            long long shards, long long context_shard, long long center_shard,
                            int* __restrict__ effective, double* __restrict__ loss, long long* __restrict__ terms) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / W2V_LANES;
    const int lane = threadIdx.x % W2V_LANES;
    if (warp >= warps) return;  // the launch rounds up to whole blocks: only `warps` warps take rows
    const long long d0 = (long long)lane * PER_LANE;
    const bool packed = dim % W2vLane<PER_LANE>::G == 0;
    for (long long r = warp; r < rows; r += warps) {
        const IdT* walk = walks + r * width;
        int* kept = effective + r * width;
        const unsigned long long walk_id = (unsigned long long)(first_walk + r);
        const unsigned long long step0 = (unsigned long long)(epoch * width);
        const long long n = w2v_kept(walk, width, kept, keep, key, walk_id, step0, lane);
        double row_loss = 0.0;
        long long row_terms = 0;
        for (long long i = 0; i < n; ++i) {
            const long long pc = kept[i];
            const long long center = (long long)walk[pc];
            if (center % shards != center_shard) continue;
            const unsigned long long step = step0 + pc;
            const float a = w2v_alpha(alpha, min_alpha, done + offset[r] + pc, total);
            const long long b = gp_below(gp_bits(key, walk_id, step, 1), (unsigned long long)window);
            const long long lo = i - window + b > 0 ? i - window + b : 0;
            const long long hi = i + window + 1 - b < n ? i + window + 1 - b : n;
            for (long long j = lo; j < hi; ++j) {
                const long long context = (long long)walk[kept[j]];
                if (j == i || context % shards != context_shard) continue;
                w2v_pair<PER_LANE>(syn0 + context / shards * dim, center / shards, syn1, dim, d0, packed, negative,
                                   key, walk_id, step, kept[j], cum, guide, shift, a, row_loss, row_terms);
            }
        }
        if (lane == 0) {
            loss[r] = row_loss;
            terms[r] = row_terms;
        }
        __syncwarp();
    }
}

// syn0 uniform in [-0.5 / dim, 0.5 / dim): element i is draw (i % dim) of vertex first + (i / dim) * stride at step
// W2V_INIT_STEP (a shard's rows are its vertices first, first + stride, ...)
extern "C" __global__ void gp_word2vec_init(float* __restrict__ syn0, long long n, long long dim, long long first,
                                            long long stride, unsigned long long key) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        syn0[i] = (float)((gp_unit(gp_bits(key, (unsigned long long)(first + i / dim * stride), W2V_INIT_STEP,
                                           (unsigned long long)(i % dim))) - 0.5) / (double)dim);
}
