// Fused multi-hop neighbor sampling for GNN mini-batches (PGSampler, section III): one persistent kernel whose
// threads take (vertex, hop) tasks from a global queue until none is left, so every hop runs in one launch.
// A task (v, h) with h < stop picks v's neighbors for hop h, writes them as edges (v, edge id) into hop h's
// region, and, below the last hop, enqueues (u, h + 1) for every picked neighbor u and (v, h + 1) for v itself
// (the destination nodes are source nodes of the next hop: reuse of a finished task, section IV-B) — each
// (vertex, hop) once, deduplicated by a bit in `seen` (Algorithm 2). A task with h >= stop is only recorded:
// the per-hop mode runs one launch per hop with stop = h + 1.
// Picks of (v, h) draw from stream batch * num_vertices + v at step h (draw i for the i-th): the same whatever the
// order the queue runs in. Fanout f of hop h: f < 0 every out-edge; with replacement f draws by gp_pick_edge;
// without, every edge when f >= degree (unweighted), else Floyd's f distinct uniform edges, or (weighted) the f
// shortest exponential races among the positive weights (gp_race_segment; unused slots get edge id -1).
// Tasks are packed as vertex * hops + hop; an empty slot holds -1. counters: [GP_GNN_TAIL] tasks enqueued,
// [GP_GNN_PENDING] tasks enqueued and not finished (the queue is drained when it is 0), [GP_GNN_EDGES + h] hop
// h's edges. A thread whose ticket's slot is still empty waits for it until nothing is pending.
// CPU twin: gpipe/gnn/_fused.py::_sample_cpu (the queue in order).
// GP_GNN_TAIL, GP_GNN_PENDING, GP_GNN_EDGES: defined by the loader, from gpipe/gnn/_fused.py.
#include "race.cuh"
#include "walk.cuh"

// Floyd's algorithm: k distinct edges of a..a+d-1 (k < d), uniformly, one draw each.
__device__ __forceinline__ void gp_floyd(long long a, long long d, long long k, unsigned long long key,
                                         unsigned long long id, unsigned long long step, long long* out) {
    for (long long i = 0; i < k; ++i) {
        const long long m = d - k + i;
        long long e = a + gp_below(gp_bits(key, id, step, (unsigned long long)i), (unsigned long long)(m + 1));
        for (long long j = 0; j < i; ++j)
            if (out[j] == e) { e = a + m; break; }
        out[i] = e;
    }
}

// Enqueue (u, h) unless it was enqueued before.
__device__ __forceinline__ void gp_gnn_push(long long u, int h, long long num_vertices, int hops, long long* tasks,
                                            unsigned long long* counters, unsigned long long* seen) {
    const unsigned long long bit = (unsigned long long)h * (unsigned long long)num_vertices + (unsigned long long)u;
    const unsigned long long mask = 1ULL << (bit & 63ULL);
    if (seen[bit >> 6] & mask) return;
    if (atomicOr(seen + (bit >> 6), mask) & mask) return;
    atomicAdd(counters + GP_GNN_PENDING, 1ULL);  // before the slot is filled: pending never reads 0 too early
    const unsigned long long slot = atomicAdd(counters + GP_GNN_TAIL, 1ULL);
    atomicExch((unsigned long long*)(tasks + slot), (unsigned long long)(u * hops + h));
}

template <typename IdT>
__global__ void gp_gnn_sample(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                              const double* __restrict__ cdf, const float* __restrict__ weights, int weighted,
                              int replace, long long num_vertices, unsigned long long key, long long batch, int hops,
                              int stop, const long long* __restrict__ fanouts, long long capacity, long long* tasks,
                              unsigned long long* counters, unsigned long long* seen,
                              const long long* __restrict__ edge_base, long long* __restrict__ edge_dst,
                              long long* __restrict__ edge_id, double* __restrict__ race,
                              unsigned long long* __restrict__ next) {
    for (unsigned long long t = atomicAdd(next, 1ULL);; t = atomicAdd(next, 1ULL)) {
        long long task = -1;
        while (true) {
            if (t < (unsigned long long)capacity) task = *(volatile long long*)(tasks + t);
            if (task >= 0) break;
            if (*(volatile unsigned long long*)(counters + GP_GNN_PENDING) == 0ULL) return;
            __nanosleep(100);
        }
        const long long v = task / hops;
        const int h = (int)(task % hops);
        if (h < stop) {
            const long long a = indptr[v], d = indptr[v + 1] - a, f = fanouts[h];
            const bool all = f < 0 || (!replace && !weighted && f >= d);
            long long k = d == 0 ? 0 : all ? d : replace ? f : min(f, d);
            if (k > 0 && replace && weighted && !(cdf[a + d - 1] > 0.0)) k = 0;
            const long long o =
                edge_base[h] + (long long)atomicAdd(counters + GP_GNN_EDGES + h, (unsigned long long)k);
            const unsigned long long id = (unsigned long long)batch * (unsigned long long)num_vertices +
                                          (unsigned long long)v;
            long long* out = edge_id + o;
            if (all) {
                for (long long i = 0; i < k; ++i) out[i] = a + i;
            } else if (replace) {
                for (long long i = 0; i < k; ++i)
                    out[i] = gp_pick_edge(cdf, weighted, a, d, gp_bits(key, id, h, (unsigned long long)i));
            } else if (weighted) {
                const long long held = gp_race_segment(weights, a, d, k, key, id, h, out, race + o);
                for (long long i = held; i < k; ++i) out[i] = -1;
            } else {
                gp_floyd(a, d, k, key, id, h, out);
            }
            for (long long i = 0; i < k; ++i) edge_dst[o + i] = v;
            if (h + 1 < hops) {
                gp_gnn_push(v, h + 1, num_vertices, hops, tasks, counters, seen);
                for (long long i = 0; i < k; ++i)
                    if (out[i] >= 0) gp_gnn_push((long long)indices[out[i]], h + 1, num_vertices, hops, tasks, counters,
                                                 seen);
            }
        }
        atomicAdd(counters + GP_GNN_PENDING, ~0ULL);  // this task is done, after counting the tasks it enqueued
    }
}
