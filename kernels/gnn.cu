// Multi-hop neighbor sampling for GNN mini-batches (PGSampler, section III). Fused: one persistent kernel whose
// threads take (vertex, hop) tasks from a global queue until none is left, so every hop runs in one launch; then
// three small kernels that give every vertex its local id and lay each hop's edges out by destination, with no sort.
// A task (v, h) picks v's neighbors for hop h, writes their edge ids into hop h's region, records where
// (task_first, task_count: the picks held), and, below the last hop, enqueues (u, h + 1) for every picked neighbor
// u and (v, h + 1) for v itself (the destination nodes are source nodes of the next hop: reuse of a finished task,
// section IV-B) — each (vertex, hop) once, deduplicated by a bit of layer h + 1 of `seen` (Algorithm 2). Layer k of
// `seen` therefore ends up as hop k's frontier (layer 0 the seeds, marked by their hop-0 tasks, and layer `hops` the
// last hop's sources, marked without a task): the vertices found first by hop k - 1 are layer k less layer k - 1.
// Per hop (the bulk-synchronous baseline, DGL's NeighborSampler): gp_gnn_bounds and gp_gnn_hop sample one hop's
// frontier into slots laid out by a prefix sum of the bounds; the host then relabels (unique) between hops.
// Picks of (v, h) draw from stream batch * num_vertices + v at step h (draw i for the i-th): the same whatever the
// order the queue runs in, and in either mode. Fanout f of hop h: f < 0 every out-edge; with replacement f draws by
// gp_pick_edge; without, every edge when f >= degree (unweighted), else Floyd's f distinct uniform edges, or
// (weighted) the f shortest exponential races among the positive weights (gp_race_segment; the held ones first).
// Tasks are packed as vertex * hops + hop; an empty slot holds -1. counters: [GP_GNN_TAIL] tasks enqueued,
// [GP_GNN_PENDING] tasks enqueued and not finished (the queue is drained when it is 0), [GP_GNN_EDGES + h] hop
// h's edge slots, [GP_GNN_EDGES + hops + h] hop h's edges held. A thread whose ticket's slot is still empty waits
// for it until nothing is pending. Layers of `seen` are `words` 64-bit words apart (words = ceil(num_vertices/64)).
// CPU twins: gpipe/gnn/_fused.py (the queue in order).
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

// Whether fanout f takes every out-edge of a vertex of degree d.
__device__ __forceinline__ bool gp_gnn_every(int weighted, int replace, long long d, long long f) {
    return f < 0 || (!replace && !weighted && f >= d);
}

// The picks of a vertex whose out-edges are a..a+d-1 at fanout f: an upper bound on those held (exact but for
// weighted picks without replacement, which hold only positive weights).
__device__ __forceinline__ long long gp_gnn_bound(const double* __restrict__ cdf, int weighted, int replace,
                                                  long long a, long long d, long long f) {
    long long k = d == 0 ? 0 : gp_gnn_every(weighted, replace, d, f) ? d : replace ? f : min(f, d);
    if (k > 0 && replace && weighted && !(cdf[a + d - 1] > 0.0)) k = 0;
    return k;
}

// The k = gp_gnn_bound picks of vertex v at hop h into out[0..k) (race: their race scratch); returns those held.
__device__ __forceinline__ long long gp_gnn_pick(const double* __restrict__ cdf, const float* __restrict__ weights,
                                                 int weighted, int replace, long long num_vertices,
                                                 unsigned long long key, long long batch, long long v, int h,
                                                 long long a, long long d, long long f, long long k, long long* out,
                                                 double* race) {
    const unsigned long long id = (unsigned long long)batch * (unsigned long long)num_vertices +
                                  (unsigned long long)v;
    if (gp_gnn_every(weighted, replace, d, f)) {
        for (long long i = 0; i < k; ++i) out[i] = a + i;
    } else if (replace) {
        for (long long i = 0; i < k; ++i)
            out[i] = gp_pick_edge(cdf, weighted, a, d, gp_bits(key, id, h, (unsigned long long)i));
    } else if (weighted) {
        k = gp_race_segment(weights, a, d, k, key, id, h, out, race);
    } else {
        gp_floyd(a, d, k, key, id, h, out);
    }
    return k;
}

// Set u's bit of layer `layer`; whether it was clear.
__device__ __forceinline__ bool gp_gnn_mark(long long u, int layer, long long words, unsigned long long* seen) {
    unsigned long long* word = seen + (long long)layer * words + (u >> 6);
    const unsigned long long mask = 1ULL << (u & 63);
    if (*word & mask) return false;
    return !(atomicOr(word, mask) & mask);
}

// Enqueue (u, h) unless it was enqueued before.
__device__ __forceinline__ void gp_gnn_push(long long u, int h, long long words, int hops, long long* tasks,
                                            unsigned long long* counters, unsigned long long* seen) {
    if (!gp_gnn_mark(u, h, words, seen)) return;
    atomicAdd(counters + GP_GNN_PENDING, 1ULL);  // before the slot is filled: pending never reads 0 too early
    const unsigned long long slot = atomicAdd(counters + GP_GNN_TAIL, 1ULL);
    atomicExch((unsigned long long*)(tasks + slot), (unsigned long long)(u * hops + h));
}

template <typename IdT>
__global__ void gp_gnn_sample(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                              const double* __restrict__ cdf, const float* __restrict__ weights, int weighted,
                              int replace, long long num_vertices, unsigned long long key, long long batch, int hops,
                              const long long* __restrict__ fanouts, long long capacity, long long* tasks,
                              unsigned long long* counters, unsigned long long* seen,
                              const long long* __restrict__ edge_base, long long* __restrict__ edge_id,
                              long long* __restrict__ task_first, long long* __restrict__ task_count,
                              double* __restrict__ race, unsigned long long* __restrict__ next) {
    const long long words = (num_vertices + 63) >> 6;
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
        if (h == 0) gp_gnn_mark(v, 0, words, seen);
        const long long a = indptr[v], d = indptr[v + 1] - a, f = fanouts[h];
        long long k = gp_gnn_bound(cdf, weighted, replace, a, d, f);
        const long long o = edge_base[h] + (long long)atomicAdd(counters + GP_GNN_EDGES + h, (unsigned long long)k);
        long long* out = edge_id + o;
        k = gp_gnn_pick(cdf, weights, weighted, replace, num_vertices, key, batch, v, h, a, d, f, k, out, race + o);
        task_first[t] = o;
        task_count[t] = k;
        atomicAdd(counters + GP_GNN_EDGES + hops + h, (unsigned long long)k);
        if (h + 1 < hops) {
            gp_gnn_push(v, h + 1, words, hops, tasks, counters, seen);
            for (long long i = 0; i < k; ++i)
                gp_gnn_push((long long)indices[out[i]], h + 1, words, hops, tasks, counters, seen);
        } else {
            gp_gnn_mark(v, hops, words, seen);
            for (long long i = 0; i < k; ++i) gp_gnn_mark((long long)indices[out[i]], hops, words, seen);
        }
        atomicAdd(counters + GP_GNN_PENDING, ~0ULL);  // this task is done, after counting the tasks it enqueued
    }
}

// Per word w of layer k = 1..hops: the vertices it adds (set in layer k, clear in layer k - 1), counted.
extern "C" __global__ void gp_gnn_fresh(const unsigned long long* __restrict__ seen, long long words, long long n,
                                        long long* __restrict__ fresh) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fresh[i] = __popcll(seen[i + words] & ~seen[i]);
}

// Local ids: seeds 0..size-1 in their order, then layer 1's new vertices by id, then layer 2's, ...; `start` is the
// exclusive prefix sum of gp_gnn_fresh's counts. Writes `nodes` (local id -> vertex) and `local` (vertex -> local
// id) for every sampled vertex; thread i < size places seed i, the others a word.
extern "C" __global__ void gp_gnn_nodes(const unsigned long long* __restrict__ seen, long long words, long long size,
                                        const long long* __restrict__ seeds, const long long* __restrict__ start,
                                        long long n, long long* __restrict__ nodes, long long* __restrict__ local) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (i < size) {
        nodes[i] = seeds[i];
        local[seeds[i]] = i;
        return;
    }
    const long long w = i - size;
    unsigned long long bits = seen[w + words] & ~seen[w];
    long long at = size + start[w];
    const long long base = (w % words) << 6;
    while (bits) {
        const long long u = base + __ffsll((long long)bits) - 1;
        bits &= bits - 1;
        nodes[at] = u;
        local[u] = at++;
    }
}

// Each task's edges: its destination's row `row` = (first row of its hop) + local id, and its edge count there.
extern "C" __global__ void gp_gnn_rows(const long long* __restrict__ tasks, const long long* __restrict__ task_count,
                                       const long long* __restrict__ local, const long long* __restrict__ hop_row,
                                       int hops, long long n, long long* __restrict__ row_count) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    row_count[hop_row[tasks[t] % hops] + local[tasks[t] / hops]] = task_count[t];
}

// Each task's edges in local ids at their destination's place (`row_start`: the exclusive prefix sums of
// gp_gnn_rows' counts), in draw order; a warp per task, a lane per edge (the writes of a task's run coalesce).
template <typename IdT>
__global__ void gp_gnn_place(const long long* __restrict__ tasks, const long long* __restrict__ task_first,
                             const long long* __restrict__ task_count, const long long* __restrict__ edge_id,
                             const IdT* __restrict__ indices, const long long* __restrict__ local,
                             const long long* __restrict__ hop_row, const long long* __restrict__ row_start, int hops,
                             long long n, long long* __restrict__ src, long long* __restrict__ dst,
                             long long* __restrict__ eid) {
    const long long t = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (t >= n) return;
    const long long v = local[tasks[t] / hops];
    const long long at = row_start[hop_row[tasks[t] % hops] + v], first = task_first[t], k = task_count[t];
    for (long long i = lane; i < k; i += 32) {
        const long long e = edge_id[first + i];
        src[at + i] = local[(long long)indices[e]];
        dst[at + i] = v;
        eid[at + i] = e;
    }
}

// Per hop: the bound on each frontier vertex's picks at fanout f (its slots).
extern "C" __global__ void gp_gnn_bounds(const long long* __restrict__ indptr, const double* __restrict__ cdf,
                                         int weighted, int replace, long long fanout,
                                         const long long* __restrict__ frontier, long long n,
                                         long long* __restrict__ bound) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long v = frontier[i], a = indptr[v];
    bound[i] = gp_gnn_bound(cdf, weighted, replace, a, indptr[v + 1] - a, fanout);
}

// Per hop: frontier vertex i's picks at hop `hop` into its slots from first[i] (the exclusive prefix sums of
// gp_gnn_bounds), and how many it holds.
extern "C" __global__ void gp_gnn_hop(const long long* __restrict__ indptr, const double* __restrict__ cdf,
                                      const float* __restrict__ weights, int weighted, int replace,
                                      long long num_vertices, unsigned long long key, long long batch, int hop,
                                      long long fanout, const long long* __restrict__ frontier, long long n,
                                      const long long* __restrict__ first, long long* __restrict__ edge_id,
                                      long long* __restrict__ held, double* __restrict__ race) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long v = frontier[i], a = indptr[v], d = indptr[v + 1] - a, o = first[i];
    const long long k = gp_gnn_bound(cdf, weighted, replace, a, d, fanout);
    held[i] = gp_gnn_pick(cdf, weights, weighted, replace, num_vertices, key, batch, v, hop, a, d, fanout, k,
                          edge_id + o, race + o);
}
