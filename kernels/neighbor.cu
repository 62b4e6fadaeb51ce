// Fused neighbor sampling, the one sampler of gpipe.sampling.neighbor (a graph whole on one worker) and gpipe.gnn's
// mini-batches: every depth of every instance in one persistent kernel, its warps taking tasks from a global queue
// until none is left (PGSampler, section III, on C-SAW's SELECT). A task is (instance, vertex, depth), packed as
// item = (instance * num_vertices + vertex) * depth_count + depth; the (instance, vertex) pair is its random stream,
// as in the superstep path (a GNN batch is one instance: its number is the instance).
// The one picking rule: a warp's task picks fanouts[depth] of the vertex's out-edges with gp_select_segment
// (select.cuh) from stream instance * num_vertices + vertex at step `step` + depth: the very draws gp_select makes for
// that entry, so the sample is the superstep path's. Without replacement the count is min(fanout, the positive
// biases), with it fanout if any bias is positive; a fanout below 0 takes every out-edge, in order, with no draw.
// The task taken from queue slot t writes its picks (edge ids) into edge_id from t * per_vertex (per_vertex: at
// least any task's picks), or with per_vertex 0 (a fanout below 0: a hub's row may be any task's) into its depth's
// region, from edge_base[depth] + a share of [GP_NBR_EDGES + depth] taken at once; it says where in task_first[t]
// and task_count[t]. Below the last depth each picked vertex u is enqueued as (instance, u, depth + 1), and with
// `sources` the task's own vertex too (a GNN block's destinations are the next block's sources), unless it was
// before (an open-addressing set `seen` of item + 1, 0 empty: a vertex once per instance and depth), the warp's lanes
// together: at most one add to PENDING and one to TAIL per 32 picks.
// counters: [GP_NBR_TAIL] tasks enqueued, [GP_NBR_PENDING] tasks enqueued and not finished, or finished and not yet
// taken off (the queue is drained when it is 0; a warp takes its finished tasks off at its next push or before it
// waits), [GP_NBR_ITERATIONS] SELECT's draws (a warp's, as it leaves), [GP_NBR_EDGES + d] depth d's edge slots
// taken (per_vertex 0).
// A warp takes GP_NBR_TICKETS queue slots from `next` at once and runs their tasks in slot order (the lowest slot
// handed out and not yet run is always filled or about to be, so every task runs). The counters and `next` are hot:
// each add is one per many tasks.
// Weighted, `cdf` holds every row's CDF of the weights (gp_row_cdf, the very sums SELECT makes: a task reads its
// row's instead of summing the row again), or with use_table (the "alias" method) `table` every row's packed alias
// table (gpipe/_alias.py); uniform picks need neither. Warp w < slots uses
// bitmap[w * ((max_degree + 7) / 8) ..] with use_bitmap (else the array may hold one element); warps beyond `slots`
// leave at once. The rows are those of vertices lo.. (a partition's: indptr[v - lo]; 0 for the whole graph).
// CPU twin: gpipe/_neighbor.py::_sample_cpu (the queue in order).
// GP_NBR_*: defined by the loader, from gpipe/_neighbor.py; SELECT's constants from _select.py.
#include "select.cuh"

struct GpWeightBias {
    const float* w;
    __device__ __forceinline__ double operator[](long long e) const { return (double)w[e]; }
};

// Whether this lane put task `item` into `seen` (an open-addressing set of item + 1, 0 empty): false when it was
// there already, enqueued by another lane or warp.
__device__ __forceinline__ bool gp_nbr_claim(long long item, unsigned long long* seen, unsigned long long mask) {
    const unsigned long long want = (unsigned long long)item + 1ULL;
    for (unsigned long long slot = gp_mix64((unsigned long long)item) & mask;; slot = (slot + 1ULL) & mask) {
        const unsigned long long held = atomicCAS(seen + slot, 0ULL, want);
        if (held == 0ULL) return true;
        if (held == want) return false;
    }
}

// Enqueue `item` of each lane in `fresh`, by the whole warp, and with `done` finish the task that found them. A
// warp's finished tasks are `owed` (lane 0's count) until it takes them off PENDING: at its next push, in the one
// add that counts the pushed tasks before any of their slots is filled (a slot counted and not yet filled keeps
// PENDING above 0, so a warp reading 0 knows no task is left), or before it waits for a task.
__device__ __forceinline__ void gp_nbr_push(unsigned fresh, long long item, bool done, long long* tasks,
                                            unsigned long long* counters, unsigned long long& owed, int lane) {
    const int count = __popc(fresh);
    unsigned long long t = 0;
    if (lane == 0) {
        owed += done ? 1ULL : 0ULL;
        if (count > 0) {
            const long long change = (long long)count - (long long)owed;
            owed = 0;
            if (change != 0) {
                atomicAdd(counters + GP_NBR_PENDING, (unsigned long long)change);
                __threadfence();  // PENDING counts them before their slots are filled
            }
            t = atomicAdd(counters + GP_NBR_TAIL, (unsigned long long)count);
        }
    }
    t = __shfl_sync(GP_FULL_MASK, t, 0);
    if ((fresh >> lane) & 1u)
        atomicExch((unsigned long long*)(tasks + t + __popc(fresh & ((1u << lane) - 1u))), (unsigned long long)item);
}

// Task `item`, taken from queue slot t: its picks into its depth's edge region, its picked vertices (and with
// `sources` its own) enqueued, and the task finished. Returns SELECT's draws.
template <typename Bias, typename IdT>
__device__ __forceinline__ long long gp_nbr_task(const Bias bias, const long long* __restrict__ indptr,
                                                 const IdT* __restrict__ indices, int replace, int method,
                                                 int use_bitmap, long long num_vertices, unsigned long long key,
                                                 int depth, const long long* __restrict__ fanouts, long long step,
                                                 int sources, long long per_vertex, long long lo, long long item,
                                                 unsigned long long t,
                                                 long long* tasks, unsigned long long* counters,
                                                 unsigned long long* seen, unsigned long long mask,
                                                 const long long* __restrict__ edge_base,
                                                 long long* __restrict__ edge_id, long long* __restrict__ task_first,
                                                 long long* __restrict__ task_count, double* cdf,
                                                 const long long* __restrict__ positive, unsigned char* bits,
                                                 const unsigned long long* __restrict__ table,
                                                 unsigned long long& owed, int lane) {
    const long long stream = item / depth, v = stream % num_vertices, instance = stream / num_vertices;
    const int level = (int)(item % depth);
    const long long a = indptr[v - lo], d = indptr[v - lo + 1] - a, f = fanouts[level];
    const long long mine = GpIsUnit<Bias>::value ? d : positive[v - lo];  // the positive biases, at most d
    const long long k = f < 0 ? d : replace ? (mine > 0 ? f : 0) : min(mine, f);
    unsigned long long o = t * (unsigned long long)per_vertex;  // a region per slot: no shared counter
    if (lane == 0) {
        if (per_vertex == 0 && k > 0)
            o = edge_base[level] + atomicAdd(counters + GP_NBR_EDGES + level, (unsigned long long)k);
        task_first[t] = (long long)o;
        task_count[t] = k;
    }
    o = __shfl_sync(GP_FULL_MASK, o, 0);
    long long* out = edge_id + o;
    long long iters = 0;
    if (f < 0) {  // every out-edge, in order
        for (long long i = lane; i < k; i += GP_LANES) out[i] = a + i;
        __syncwarp();
    } else if (k > 0) {
        constexpr bool unit = GpIsUnit<Bias>::value;  // weights: the rows' CDFs are in cdf already (gp_row_cdf)
        iters = gp_select_segment(bias, a, d, (int)k, key, (unsigned long long)stream, step + level,
                                  replace ? GP_SELECT_WITH_REPLACEMENT : method, use_bitmap, unit ? cdf : cdf + a,
                                  !unit, bits, (d + 7) / 8, out, table ? table + a : nullptr, lane);
    }
    const bool below = level + 1 < depth;
    const long long pushes = k + (below && sources ? 1 : 0);  // the task's own vertex last
    for (long long base = 0;; base += GP_LANES) {  // every lane in each round, for one push per round
        const long long i = base + lane;
        long long pushed = -1;
        bool fresh = false;
        if (below && i < pushes) {
            const long long u = i < k ? (long long)indices[out[i]] : v;
            pushed = (instance * num_vertices + u) * depth + level + 1;
            fresh = gp_nbr_claim(pushed, seen, mask);
        }
        const bool last = base + GP_LANES >= pushes;
        gp_nbr_push(__ballot_sync(GP_FULL_MASK, fresh), pushed, last, tasks, counters, owed, lane);
        if (last) return iters;
    }
}

template <typename IdT>
__global__ void __launch_bounds__(GP_NBR_BLOCK, GP_NBR_MIN_BLOCKS) gp_sample_neighbors(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                                    const float* __restrict__ weights, int weighted, int replace, int method,
                                    int use_bitmap, long long num_vertices, unsigned long long key, int depth,
                                    const long long* __restrict__ fanouts, long long step, int sources,
                                    long long per_vertex, long long capacity, long long* tasks,
                                    unsigned long long* counters,
                                    unsigned long long* seen, long long table_size,
                                    const long long* __restrict__ edge_base, long long* __restrict__ edge_id,
                                    long long* __restrict__ task_first, long long* __restrict__ task_count,
                                    long long slots, long long max_degree, long long lo,
                                    double* __restrict__ cdf, const long long* __restrict__ positive,
                                    unsigned char* __restrict__ bitmap, int use_table,
                                    const unsigned long long* __restrict__ table,
                                    unsigned long long* __restrict__ next) {
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / GP_LANES;
    const int lane = threadIdx.x % GP_LANES;
    if (warp >= slots) return;  // the whole warp: blockDim is a multiple of GP_LANES
    unsigned char* bits = bitmap + (use_bitmap ? warp * ((max_degree + 7) / 8) : 0);
    const unsigned long long mask = (unsigned long long)table_size - 1ULL;
    long long draws = 0;  // this warp's, added to ITERATIONS once
    unsigned long long t = 0, end = 0;  // lane 0: this warp's queue slots t .. end - 1, taken GP_NBR_TICKETS at once
    unsigned long long owed = 0;        // lane 0: tasks finished and not yet taken off PENDING (gp_nbr_push)
    while (true) {
        long long item = -1;
        if (lane == 0) {
            if (t == end) {
                t = atomicAdd(next, (unsigned long long)GP_NBR_TICKETS);
                end = t + GP_NBR_TICKETS;
            }
            while (true) {
                if (t < (unsigned long long)capacity) item = *(volatile long long*)(tasks + t);
                if (item >= 0) break;
                if (owed > 0) {  // before waiting: a warp waits until PENDING is 0
                    atomicAdd(counters + GP_NBR_PENDING, (unsigned long long)(-(long long)owed));
                    owed = 0;
                }
                if (*(volatile unsigned long long*)(counters + GP_NBR_PENDING) == 0ULL) break;
                __nanosleep(100);
            }
        }
        item = __shfl_sync(GP_FULL_MASK, item, 0);
        if (item < 0) break;
        const unsigned long long slot = __shfl_sync(GP_FULL_MASK, t, 0);
        if (weighted)
            draws += gp_nbr_task(GpWeightBias{weights}, indptr, indices, replace, method, use_bitmap, num_vertices,
                                 key, depth, fanouts, step, sources, per_vertex, lo, item, slot, tasks, counters, seen,
                                 mask, edge_base, edge_id, task_first, task_count, cdf, positive, bits,
                                 use_table ? table : nullptr, owed, lane);
        else
            draws += gp_nbr_task(GpUnitBias{}, indptr, indices, replace, method, use_bitmap, num_vertices, key,
                                 depth, fanouts, step, sources, per_vertex, lo, item, slot, tasks, counters, seen,
                                 mask, edge_base, edge_id, task_first, task_count, cdf, positive, bits, nullptr, owed,
                                 lane);
        if (lane == 0) ++t;
    }
    if (lane == 0 && draws > 0) atomicAdd(counters + GP_NBR_ITERATIONS, (unsigned long long)draws);
}

// Every row's CDF of the weights, a warp per row: gp_segment_cdf's sums, into cdf[indptr[v] .. indptr[v + 1]),
// and its count of positive weights into positive[v]. CPU twin: gpipe/_neighbor.py::_row_cdf_cpu.
extern "C" __global__ void gp_row_cdf(const long long* __restrict__ indptr, const float* __restrict__ weights,
                                      long long num_rows, double* __restrict__ cdf, long long* __restrict__ positive) {
    const long long v = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / GP_LANES;
    const int lane = threadIdx.x % GP_LANES;
    if (v >= num_rows) return;  // the whole warp: blockDim is a multiple of GP_LANES
    const long long a = indptr[v];
    const long long d = indptr[v + 1] - a;
    gp_segment_cdf(GpWeightBias{weights}, a, d, cdf + a, lane);
    long long mine = 0;
    for (long long e = a + lane; e < a + d; e += GP_LANES) mine += weights[e] > 0.0f;
    for (int s = GP_LANES / 2; s > 0; s /= 2) mine += __shfl_xor_sync(GP_FULL_MASK, mine, s);
    if (lane == 0) positive[v] = mine;
}

// The edges of task t (a warp each) at `at[t]` on (exclusive prefix sums of task_count, in queue order):
// (instance, depth, src) from its item, dst each pick's head, in pick order. CPU twin:
// gpipe/_neighbor.py::_pieces_cpu.
template <typename IdT>
__global__ void gp_nbr_pieces(const long long* __restrict__ tasks, const long long* __restrict__ task_first,
                              const long long* __restrict__ task_count, const long long* __restrict__ at,
                              const long long* __restrict__ edge_id, const IdT* __restrict__ indices, long long n,
                              long long num_vertices, int depth, long long* __restrict__ instance,
                              int* __restrict__ level, long long* __restrict__ src, long long* __restrict__ dst) {
    const long long t = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / GP_LANES;
    const int lane = threadIdx.x % GP_LANES;
    if (t >= n) return;
    const long long item = tasks[t], stream = item / depth, o = at[t], first = task_first[t], k = task_count[t];
    for (long long i = lane; i < k; i += GP_LANES) {
        instance[o + i] = stream / num_vertices;
        level[o + i] = (int)(item % depth);
        src[o + i] = stream % num_vertices;
        dst[o + i] = (long long)indices[edge_id[first + i]];
    }
}
