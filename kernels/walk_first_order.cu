// First-order walks: DeepWalk (uniform or edge-weight biased), walks with jump
// (teleport to a uniform vertex) and with restart (teleport to the walk's source),
// on a static partition (GpCsr) or a dynamic graph's snapshot (GpSpace): one body.
// Each thread takes walkers from a shared counter and moves each for as many
// steps as it stays inside [lo, hi). Draws per step: 0 = teleport?, 1.. = where
// (the graph's pick from draw 1: one draw, or gp_space_pick's by weight).
// CPU twin: gpipe/walks/_first_order.py::_walk_one (same random stream).
// TELEPORT_NONE, TELEPORT_UNIFORM, TELEPORT_SOURCE: defined by the loader, from _first_order.py's TELEPORT; the
// graphs' defines (walk_graphs.cuh) too.
#include "walk_graphs.cuh"

// Walk one walker from (v, s) while it stays inside [lo, hi), writing its vertices to its row `out` (rows.cuh), at
// most `most`; returns how many it wrote. `left`: it stepped out of [lo, hi) (v is then the vertex it stepped to)
// or filled `most` (v, s not written yet); else its walk ended (at `length`, or at a vertex it cannot leave).
template <typename Graph, typename Row>
__device__ __forceinline__ int gp_first_order_walk(const Graph& g, long long lo, long long hi, long long num_vertices,
                                                   unsigned long long key, int length, double alpha, int teleport,
                                                   unsigned long long id, const long long* __restrict__ source,
                                                   long long& v, int& s, Row& out, int most, bool& left) {
    int k = 0;
    left = false;
    while (true) {
        if (k == most) { left = true; break; }
        out.put(k++, (typename Graph::Id)v);
        if (s >= length) break;
        long long u;
        if (teleport != TELEPORT_NONE && gp_unit(gp_bits(key, id, s, 0)) < alpha) {
            u = teleport == TELEPORT_UNIFORM ? gp_uniform_vertex(gp_bits(key, id, s, 1), num_vertices) : *source;
        } else {
            const long long a = g.start(v - lo);
            const long long d = g.degree(v - lo);
            if (d == 0) break;
            const long long e = g.pick(key, id, s, 1, v - lo, a, d);
            if (e < 0) break;
            u = g.edges.head(e);
        }
        ++s;
        v = u;
        if (u < lo || u >= hi) { left = true; break; }
    }
    out.done(k);
    return k;
}

// `amount` more of `counter` for this thread: one atomicAdd for the lanes of its warp here now (whichever they are:
// the lanes of a queued kernel reach this point at their own pace), each given its range in lane order.
__device__ __forceinline__ unsigned long long gp_reserve(unsigned long long* counter, unsigned amount) {
    const unsigned active = __activemask();
    const unsigned lane = threadIdx.x & 31;
    unsigned before = 0, total = 0;
    for (unsigned rest = active; rest; rest &= rest - 1) {
        const unsigned j = __ffs(rest) - 1;
        const unsigned a = __shfl_sync(active, amount, j);
        if (j < lane) before += a;
        total += a;
    }
    const unsigned leader = __ffs(active) - 1;
    unsigned long long base = 0;
    if (lane == leader) base = atomicAdd(counter, (unsigned long long)total);
    return __shfl_sync(active, base, leader) + before;
}

// Every walker of a graph's walk on its graph g, to its end or until it leaves [lo, hi): its vertices at
// flat[offset[i]..], how many, where it is and whether it left. The lanes of a warp take their next walkers
// together (gp_reserve: one atomicAdd, not one a walker, on the one counter every thread takes from). Rows are
// written a sector at a time (GpSectorRow): the kernels calling this declare GP_SECTOR_STAGE.
template <typename Graph>
__device__ __forceinline__ void gp_first_order_walkers(
    const Graph& g, long long lo, long long hi, long long num_vertices, unsigned long long key, int length,
    double alpha, int teleport, long long n, const long long* __restrict__ walk_id,
    const long long* __restrict__ source, const long long* __restrict__ vertex, const int* __restrict__ step,
    const long long* __restrict__ offset, typename Graph::Id* __restrict__ flat, int* __restrict__ piece_len,
    long long* __restrict__ out_vertex, int* __restrict__ out_step, signed char* __restrict__ moved,
    unsigned long long* __restrict__ next, unsigned char* stages) {
    for (long long i = (long long)gp_reserve(next, 1u); i < n; i = (long long)gp_reserve(next, 1u)) {
        long long v = vertex[i];
        int s = step[i];
        bool left;
        GpSectorRow<typename Graph::Id> row(flat + offset[i], stages);
        const int k = gp_first_order_walk(g, lo, hi, num_vertices, key, length, alpha, teleport,
                                          (unsigned long long)walk_id[i], source + i, v, s, row, 0x7fffffff, left);
        piece_len[i] = k;
        out_vertex[i] = v;
        out_step[i] = s;
        moved[i] = (signed char)left;
    }
}

// At most 32 registers a thread (8 blocks of 256 resident on an SM: every thread slot): the walk waits on its
// loads, and more walkers in flight hide more of them (40 registers left a quarter of the slots empty).
template <typename IdT>
__global__ void __launch_bounds__(GP_SECTOR_THREADS, 8) gp_walk_first_order(const long long* __restrict__ indptr,
                                    const IdT* __restrict__ indices,
                                    const unsigned long long* __restrict__ table, int weighted,
                                    long long lo, long long hi, long long num_vertices, unsigned long long key,
                                    int length, double alpha, int teleport, long long n,
                                    const long long* __restrict__ walk_id,
                                    const long long* __restrict__ source, const long long* __restrict__ vertex,
                                    const int* __restrict__ step, const long long* __restrict__ offset,
                                    IdT* __restrict__ flat, int* __restrict__ piece_len,
                                    long long* __restrict__ out_vertex, int* __restrict__ out_step,
                                    signed char* __restrict__ moved, unsigned long long* __restrict__ next) {
    GP_SECTOR_STAGE;
    const GpCsr<IdT> g{{indices, nullptr, weighted, table}, indptr};
    gp_first_order_walkers(g, lo, hi, num_vertices, key, length, alpha, teleport, n, walk_id, source, vertex, step,
                           offset, flat, piece_len, out_vertex, out_step, moved, next, gp_sector_stage);
}

// The same walk on a dynamic graph's snapshot of a partition (its sampling space, GpSpace).
extern "C" __global__ void __launch_bounds__(GP_SECTOR_THREADS)
gp_walk_first_order_dynamic(
    const long long* __restrict__ edge_start, const long long* __restrict__ degree, const long long* __restrict__ dst,
    const long long* __restrict__ units, const double* __restrict__ frac, const long long* __restrict__ member_start,
    const long long* __restrict__ members, const long long* __restrict__ group_row,
    const long long* __restrict__ group_count, const signed char* __restrict__ group_kind,
    const int* __restrict__ group_bit, const long long* __restrict__ group_start,
    const long long* __restrict__ group_size, const double* __restrict__ alias_prob,
    const int* __restrict__ alias_other, int weighted, long long lo, long long hi, long long space_vertices,
    long long num_vertices, unsigned long long key, int length, double alpha, int teleport, long long n,
    const long long* __restrict__ walk_id, const long long* __restrict__ source, const long long* __restrict__ vertex,
    const int* __restrict__ step, const long long* __restrict__ offset, long long* __restrict__ flat,
    int* __restrict__ piece_len, long long* __restrict__ out_vertex, int* __restrict__ out_step,
    signed char* __restrict__ moved, unsigned long long* __restrict__ next) {
    GP_SECTOR_STAGE;
    const GpSpace g{{dst, units, frac, weighted}, edge_start, degree, member_start, members, group_row, group_count,
                    group_kind, group_bit, group_start, group_size, alias_prob, alias_other, nullptr, space_vertices};
    gp_first_order_walkers(g, lo, hi, num_vertices, key, length, alpha, teleport, n, walk_id, source, vertex, step,
                           offset, flat, piece_len, out_vertex, out_step, moved, next, gp_sector_stage);
}

// One slot for this thread among `counters[q]`'s: one atomicAdd for the lanes of its warp here now that reserve on
// the same q (gp_reserve's, for lanes that go to different counters), each given its slot in lane order.
__device__ __forceinline__ unsigned long long gp_reserve_in(unsigned long long* counters, int q) {
    const unsigned same = __match_any_sync(__activemask(), q);
    const unsigned lane = threadIdx.x & 31;
    const unsigned leader = __ffs(same) - 1;
    unsigned long long base = 0;
    if (lane == leader) base = atomicAdd(&counters[q], (unsigned long long)__popc(same));
    return __shfl_sync(same, base, leader) + __popc(same & ((1u << lane) - 1));
}

// The partition of `parts` (cut at `bounds`, parts + 1 of them) owning vertex v: the last q with bounds[q] <= v, as
// numpy's searchsorted(bounds[1:-1], v, side="right") finds it (an empty partition owns nothing).
__device__ __forceinline__ int gp_owner(const long long* __restrict__ bounds, int parts, long long v) {
    int lo = 0, hi = parts - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (__ldg(bounds + mid) <= v) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// A walker of the routed kernel whose block another worker makes: at most STAGE of its vertices, staged in its own
// stage, then stored as a piece (see gp_walk_first_order_routed). Not inlined: the stage and the reservations stay
// out of the registers of the kernel's path where every walk's row is here.
template <typename Graph>
__device__ __noinline__ void gp_first_order_piece(const Graph& g, long long lo, long long hi, long long num_vertices,
                                                  unsigned long long key, int length, double alpha, int teleport,
                                                  long long w, const long long* __restrict__ source, long long& v,
                                                  int& s, int first, long long* __restrict__ piece_walk_id,
                                                  int* __restrict__ piece_start, int* __restrict__ piece_len,
                                                  long long* __restrict__ piece_offset,
                                                  typename Graph::Id* __restrict__ flat,
                                                  unsigned long long* __restrict__ counts, unsigned char* stages,
                                                  bool& moves) {
    typename Graph::Id stage[STAGE];
    GpPlainRow<typename Graph::Id> staged{stage};
    const int k = gp_first_order_walk(g, lo, hi, num_vertices, key, length, alpha, teleport, (unsigned long long)w,
                                      source, v, s, staged, STAGE, moves);
    const unsigned long long at = gp_reserve(&counts[0], (unsigned)k);
    const unsigned long long p = gp_reserve(&counts[3], 1u);
    piece_walk_id[p] = w;
    piece_start[p] = first;
    piece_len[p] = k;
    piece_offset[p] = (long long)at;
    GpSectorRow<typename Graph::Id> out(flat + at, stages);  // (pieces side by side share sectors: id by id)
    for (int j = 0; j < k; ++j) out.put(j, stage[j]);
    out.done(k);
}

// The same walk over a partition of a graph cut in several, with what the runtime does around it fused in: each
// walker moves while it stays inside [lo, hi), and
//  - if this worker makes its walk's block (ranks > 0: block walk_id / block_rows, made by rank block % ranks),
//    its vertices go straight to the walk's row of `rows` (this worker's blocks, one after another, width wide), a
//    whole sector at a time (GpMergedRow: a partial one read and merged first), for as long as it stays;
//  - else it writes at most STAGE vertices (then it stops where it is, to go on in its own partition's next advance),
//    kept in a stage of its own and then stored at the range of `flat` it reserves on counts[0], as a piece at the
//    slot it reserves on counts[3]: piece_walk_id, piece_start (its first step), piece_len vertices at piece_offset;
//  - if it moves on (left the partition, or stopped at STAGE), it goes to the partition q owning its vertex (of
//    `parts`, cut at `bounds`): it is written at the slot it reserves on counts[4 + q], of q's movers at q * n..:
//    walk_id, vertex, step, and source when keep_source; and counted in counts[1] (so the runtime finds the leavers
//    grouped by where they go, with no search or sort);
//  - the steps it took are added to counts[2] (once a thread).
// The lanes of a warp that reserve together take one atomicAdd (gp_reserve), for walkers too. Pieces and movers go
// where the reservations land: their order depends on the schedule, never their contents (a walker's draws depend
// on its walk_id and step alone). What bounds it is the rows: a walker writes the few vertices of its visit to a
// row of its own, scattered, each visit a partial sector. On an H100 (R-MAT 23, a partition of two) a superstep's
// kernels stepped at 7.7 G steps/s against the whole-graph kernel's 16.5, the call 0.50 s against 0.23
// (benchmarks/results/superstep_kernel_rmat23_h100.json); writing each partial sector as it came, at 32 registers
// a thread, 6.1 G steps/s and 0.63 s; the same body writing no rows, at the whole-graph kernel's speed. 64
// registers a thread (4 blocks of 256 an SM) hold the merged sector without spilling.
// CPU twin: gpipe/walks/_first_order.py::_advance_routed_cpu (the same pieces and movers, in walker order).
template <typename IdT>
__global__ void __launch_bounds__(GP_SECTOR_THREADS, 4)
gp_walk_first_order_routed(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                           const unsigned long long* __restrict__ table, int weighted, long long lo, long long hi,
                           long long num_vertices, unsigned long long key, int length, double alpha, int teleport,
                           long long n, const long long* __restrict__ walk_id, const long long* __restrict__ source,
                           const long long* __restrict__ vertex, const int* __restrict__ step, int keep_source,
                           IdT* __restrict__ rows, long long block_rows, int ranks, int rank, int width,
                           long long* __restrict__ piece_walk_id, int* __restrict__ piece_start,
                           int* __restrict__ piece_len, long long* __restrict__ piece_offset, IdT* __restrict__ flat,
                           const long long* __restrict__ bounds, int parts, long long* __restrict__ mover_walk_id,
                           long long* __restrict__ mover_source, long long* __restrict__ mover_vertex,
                           int* __restrict__ mover_step, unsigned long long* __restrict__ counts,
                           unsigned long long* __restrict__ next) {
    GP_SECTOR_STAGE;
    const GpCsr<IdT> g{{indices, nullptr, weighted, table}, indptr};
    unsigned long long taken = 0, moved = 0;
    for (long long i = (long long)gp_reserve(next, 1u); i < n; i = (long long)gp_reserve(next, 1u)) {
        const long long w = walk_id[i];
        const int first = step[i];
        long long v = vertex[i];
        int s = first;
        bool moves;
        const long long block = ranks > 0 ? w / block_rows : 0;
        if (ranks > 0 && block % ranks == rank) {
            IdT* row = rows + ((block / ranks) * block_rows + w % block_rows) * (long long)width;
            GpMergedRow<IdT> out(row + first, gp_sector_stage, row, row + width);
            gp_first_order_walk(g, lo, hi, num_vertices, key, length, alpha, teleport, (unsigned long long)w,
                                source + i, v, s, out, 0x7fffffff, moves);
        } else {
            gp_first_order_piece(g, lo, hi, num_vertices, key, length, alpha, teleport, w, source + i, v, s, first,
                                 piece_walk_id, piece_start, piece_len, piece_offset, flat, counts, gp_sector_stage,
                                 moves);
        }
        taken += (unsigned long long)(s - first);
        if (moves) {
            const int q = gp_owner(bounds, parts, v);
            const long long slot = q * n + (long long)gp_reserve_in(counts + 4, q);
            mover_walk_id[slot] = w;
            mover_vertex[slot] = v;
            mover_step[slot] = s;
            if (keep_source) mover_source[slot] = source[i];
            ++moved;
        }
    }
    if (taken) atomicAdd(&counts[2], taken);
    if (moved) atomicAdd(&counts[1], moved);
}
