// First-order walks: DeepWalk (uniform or edge-weight biased), walks with jump
// (teleport to a uniform vertex) and with restart (teleport to the walk's source),
// on a static partition (GpCsr) or a dynamic graph's snapshot (GpSpace): one body.
// Each thread takes walkers from a shared counter and moves each for as many
// steps as it stays inside [lo, hi). Draws per step: 0 = teleport?, 1.. = where
// (the graph's pick from draw 1: one draw, or gp_space_pick's by weight).
// CPU twin: gpipe/walks/_first_order.py::_walk_one (same random stream).
// TELEPORT_NONE, TELEPORT_UNIFORM, TELEPORT_SOURCE: defined by the loader, from _first_order.py's TELEPORT; the
// graphs' defines (walk_graphs.cuh) too.
#include "bounds.cuh"
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

// Where GpCarriedRow stores a sector of a walk whose block this worker makes: straight to its row of `rows`.
template <typename Id>
struct GpRowSink {
    Id* rows;
    long long row_lo, row_hi;
    __device__ __forceinline__ void store(long long at, int lo, int hi, const Id* stage) {
        gp_store_cells(rows, at, lo, hi, stage, row_lo, row_hi);
    }
};

// Where GpCarriedRow stores a sector of a walk whose block another worker makes: as a piece, its cells at the
// range of `flat` it reserves on counts[0], the piece at the slot it reserves on counts[3] (walk id, the step of its
// first cell, cells, offset). The lanes storing together take one atomicAdd each (gp_reserve).
template <typename Id>
struct GpPieceSink {
    long long walk_id, row_lo;
    long long* __restrict__ piece_walk_id;
    int* __restrict__ piece_start;
    int* __restrict__ piece_len;
    long long* __restrict__ piece_offset;
    Id* __restrict__ flat;
    unsigned long long* __restrict__ counts;
    __device__ __forceinline__ void store(long long at, int lo, int hi, const Id* stage) {
        const unsigned long long to = gp_reserve(&counts[0], (unsigned)(hi - lo));
        const unsigned long long p = gp_reserve(&counts[3], 1u);
        piece_walk_id[p] = walk_id;
        piece_start[p] = (int)(at + lo - row_lo);
        piece_len[p] = hi - lo;
        piece_offset[p] = (long long)to;
        for (int j = lo; j < hi; ++j) flat[to + j - lo] = stage[j];
    }
};

// One visit of a walker to the partition (gp_first_order_walk) with its row written through GpCarriedRow into
// `sink`, at most `most` vertices; then, if it moves on to a partition of this worker (local[q]) holding every
// cell of its current sector that is not stored yet (lo 0), it carries them (`*carry` 1); else it stores them
// (flush) and carries none.
template <typename Graph, typename Sink>
__device__ __forceinline__ void gp_first_order_visit(const Graph& g, long long lo, long long hi, long long num_vertices,
                                                  unsigned long long key, int length, double alpha, int teleport,
                                                  long long w, const long long* __restrict__ source, long long& v,
                                                  int& s, long long pos0, int first_cell, Sink& sink,
                                                  typename Graph::Id* stage, int most,
                                                  const long long* __restrict__ bounds, int parts,
                                                  const signed char* __restrict__ local, bool& moves, int& q,
                                                  bool& carry) {
    GpCarriedRow<typename Graph::Id, Sink> out{stage, pos0, first_cell, sink};
    const int k = gp_first_order_walk(g, lo, hi, num_vertices, key, length, alpha, teleport, (unsigned long long)w,
                                      source, v, s, out, most, moves);
    q = moves ? gp_owner(bounds, parts, v) : 0;
    carry = moves && local[q] && out.lo == 0;
    if (!carry) out.flush(k);
}

// The same walk over a partition of a graph cut in several, with what the runtime does around it fused in: each
// walker moves while it stays inside [lo, hi), and
//  - its vertices go to its walk's row through GpCarriedRow (rows.cuh): a sector stored once full, the cells of the
//    one not yet full carried along where the walker moves to a partition of this worker (`local`), stored where
//    it ends or leaves the worker. A walker arrives with the cells it carries (`carried` 1: in sector0..3, little
//    end first, words 8 bytes each) or none (`carried` 0: its sector's earlier cells are stored already);
//  - if this worker makes its walk's block (ranks > 0: block walk_id / block_rows, made by rank block % ranks),
//    a sector goes straight to the walk's row of `rows` (this worker's blocks, one after another, width wide, rows
//    32-byte aligned), for as long as the walker stays;
//  - else it is stored as a piece (GpPieceSink; several a visit), and the walker writes at most STAGE vertices in
//    an advance (then it stops where it is, to go on in its own partition's next advance);
//  - if it moves on (left the partition, or stopped at STAGE), it goes to the partition q owning its vertex (of
//    `parts`, cut at `bounds`): it is written at the slot it reserves on counts[4 + q], of q's movers at q * n..:
//    walk_id, vertex, step, carried and the sector words of the cells it carries (none to a peer: these fields
//    travel there in no bits, and arrive as 0), and source when keep_source; and counted in counts[1] (so the
//    runtime finds the leavers grouped by where they go, with no search or sort);
//  - the steps it took are added to counts[2] (once a thread).
// The lanes of a warp that reserve together take one atomicAdd (gp_reserve), for walkers too. Pieces and movers go
// where the reservations land: their order depends on the schedule, never their contents (a walker's draws depend
// on its walk_id and step alone).
// CPU twin: gpipe/walks/_first_order.py::_advance_routed_cpu (the same pieces and movers, in walker order).
template <typename IdT>
__global__ void __launch_bounds__(GP_SECTOR_THREADS, 4)
gp_walk_first_order_routed(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                           const unsigned long long* __restrict__ table, int weighted, long long lo, long long hi,
                           long long num_vertices, unsigned long long key, int length, double alpha, int teleport,
                           long long n, const long long* __restrict__ walk_id, const long long* __restrict__ source,
                           const long long* __restrict__ vertex, const int* __restrict__ step, int keep_source,
                           const signed char* __restrict__ carried, const unsigned long long* __restrict__ sector0,
                           const unsigned long long* __restrict__ sector1,
                           const unsigned long long* __restrict__ sector2,
                           const unsigned long long* __restrict__ sector3, IdT* __restrict__ rows,
                           long long block_rows, int ranks, int rank, int width,
                           long long* __restrict__ piece_walk_id, int* __restrict__ piece_start,
                           int* __restrict__ piece_len, long long* __restrict__ piece_offset, IdT* __restrict__ flat,
                           const long long* __restrict__ bounds, int parts, const signed char* __restrict__ local,
                           long long* __restrict__ mover_walk_id, long long* __restrict__ mover_source,
                           long long* __restrict__ mover_vertex, int* __restrict__ mover_step,
                           signed char* __restrict__ mover_carried, unsigned long long* __restrict__ mover_sector0,
                           unsigned long long* __restrict__ mover_sector1,
                           unsigned long long* __restrict__ mover_sector2,
                           unsigned long long* __restrict__ mover_sector3, unsigned long long* __restrict__ counts,
                           unsigned long long* __restrict__ next) {
    GP_SECTOR_STAGE;
    constexpr int PER = 32 / (int)sizeof(IdT);
    const GpCsr<IdT> g{{indices, nullptr, weighted, table}, indptr};
    IdT* stage = reinterpret_cast<IdT*>(gp_sector_stage + threadIdx.x * 32);
    constexpr int IDS = 8 / (int)sizeof(IdT);  // ids a word
    const unsigned long long* in[4] = {sector0, sector1, sector2, sector3};
    unsigned long long* out[4] = {mover_sector0, mover_sector1, mover_sector2, mover_sector3};
    unsigned long long taken = 0, moved = 0;
    for (long long i = (long long)gp_reserve(next, 1u); i < n; i = (long long)gp_reserve(next, 1u)) {
        const long long w = walk_id[i];
        const int first = step[i];
        long long v = vertex[i];
        int s = first;
        const long long block = ranks > 1 ? w / block_rows : 0;  // (one rank: every block, row w; no division)
        const long long row = ranks > 1 ? (block / ranks) * block_rows + w % block_rows : w;
        const long long row_lo = row * width, pos0 = row_lo + first;
        const int cell = (int)(pos0 & (PER - 1));
        const bool has = carried[i] != 0;
#pragma unroll
        for (int j = 0; j < 4; ++j)  // the words of the cells it carries, little end first
            if (has && j * IDS < cell) {
                const unsigned long long word = in[j][i];
#pragma unroll
                for (int b = 0; b < IDS; ++b) stage[j * IDS + b] = (IdT)(word >> (64 / IDS * b));
            }
        bool moves, carry;
        int q;
        if (ranks == 1 || (ranks > 1 && block % ranks == rank)) {
            GpRowSink<IdT> sink{rows, row_lo, row_lo + width};
            gp_first_order_visit(g, lo, hi, num_vertices, key, length, alpha, teleport, w, source + i, v, s, pos0,
                                 has ? 0 : cell, sink, stage, 0x7fffffff, bounds, parts, local, moves, q, carry);
        } else {
            GpPieceSink<IdT> sink{w, row_lo, piece_walk_id, piece_start, piece_len, piece_offset, flat, counts};
            gp_first_order_visit(g, lo, hi, num_vertices, key, length, alpha, teleport, w, source + i, v, s, pos0,
                                 has ? 0 : cell, sink, stage, STAGE, bounds, parts, local, moves, q, carry);
        }
        taken += (unsigned long long)(s - first);
        if (moves) {
            const long long slot = q * n + (long long)gp_reserve_in(counts + 4, q);
            mover_walk_id[slot] = w;
            mover_vertex[slot] = v;
            mover_step[slot] = s;
            mover_carried[slot] = (signed char)carry;
            const int held = carry ? (int)((row_lo + s) & (PER - 1)) : 0;  // cells
#pragma unroll
            for (int j = 0; j < 4; ++j)  // the words of the cells it carries
                if (j * IDS < held) {
                    unsigned long long word = 0;
#pragma unroll
                    for (int b = 0; b < IDS; ++b)
                        if (j * IDS + b < held)
                            word |= (IDS == 2 ? (unsigned long long)(unsigned int)stage[j * IDS + b]
                                              : (unsigned long long)stage[j * IDS + b]) << (64 / IDS * b);
                    out[j][slot] = word;
                }
            if (keep_source) mover_source[slot] = source[i];
            ++moved;
        }
    }
    if (taken) atomicAdd(&counts[2], taken);
    if (moved) atomicAdd(&counts[1], moved);
}
