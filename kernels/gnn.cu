// Multi-hop neighbor sampling for GNN mini-batches (PGSampler, section III): the picks are the fused neighbor
// sampler's (neighbor.cu: a batch one instance, its hops the depths, a task's own vertex going on to the next hop:
// reuse of a finished task, section IV-B); these small kernels then give every vertex its local id and lay each
// hop's edges out by destination, with no sort. Tasks are vertex * hops + hop, each (vertex, hop) once.
// gp_gnn_layers marks layer h of `seen` with hop h's task vertices (layer 0 the seeds) and layer `hops` with the last
// hop's sources (its tasks' vertices and picks): the vertices found first by hop k - 1 are layer k less layer k - 1.
// Layers of `seen` are `words` 64-bit words apart (words = ceil(num_vertices / 64)).
// CPU twins: gpipe/gnn/_fused.py.

__device__ __forceinline__ void gp_gnn_mark(long long u, int layer, long long words, unsigned long long* seen) {
    atomicOr(seen + (long long)layer * words + (u >> 6), 1ULL << (u & 63));
}

// Task t's marks (a thread each): its vertex in its hop's layer; a last-hop task's vertex and picks in layer hops.
template <typename IdT>
__global__ void gp_gnn_layers(const long long* __restrict__ tasks, const long long* __restrict__ task_first,
                              const long long* __restrict__ task_count, const long long* __restrict__ edge_id,
                              const IdT* __restrict__ indices, int hops, long long words, long long n,
                              unsigned long long* __restrict__ seen) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const long long v = tasks[t] / hops;
    const int h = (int)(tasks[t] % hops);
    gp_gnn_mark(v, h, words, seen);
    if (h == hops - 1) {
        gp_gnn_mark(v, hops, words, seen);
        for (long long i = task_first[t], end = i + task_count[t]; i < end; ++i)
            gp_gnn_mark((long long)indices[edge_id[i]], hops, words, seen);
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

