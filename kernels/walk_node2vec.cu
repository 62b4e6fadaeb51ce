// node2vec, exact, by rejection sampling (as KnightKing): at v coming from t,
// propose x with probability proportional to w(v, x) (or uniformly), accept
// with probability bias(x) / M, where bias is 1/p if x == t, 1 if x is a
// neighbor of t, 1/q otherwise, and M = max(1/p, 1, 1/q). Most trials are
// decided by the bounds min(1, 1/q) and max(1, 1/q) alone; the rest need "is
// x a neighbor of t?". When t lives in another partition, the walker travels
// there as a query (state 1, carrying x and the trial number), t's owner
// answers, and the walker comes back to redo that trial with the answer
// (answer -2 once it is used). After `trials` rejections the step is drawn
// exactly (gp_n2v_exact), which reads all of t's neighbors. Both read them
// here, or borrowed from t's partition (`borrowed_*`: sorted ids, their lists
// as a CSR); a walker that needs them a second time in a step (or for the
// exact draw) and has neither stops with state 2, and the caller launches it
// again with t's neighbors borrowed.
// One body (gp_n2v_walker) over a static partition or a dynamic graph's snapshot (walk_graphs.cuh), and three
// kernels. gp_walk_node2vec<IdT, Bounded, Exact> walks a static partition:
// <true, true> as above; <true, false> stops a walker at the exact draw (state
// 2) instead of making it; <false, false>, with no fallback at all, for p and q
// whose every acceptance is at least 1/16 (the caller passes trials = -1 there,
// and the twin then never falls back either). The caller launches <false, false>,
// or <true, false>, on every walker and <true, true> on those stopped: the
// fallback in the hot loop, though almost never taken, cost node2vec 40 % of its
// speed at R-MAT 22 on an H200 (1.13 against 1.93 G steps/s), and its test alone
// 27 %. gp_walk_node2vec_whole<IdT> walks a graph whole in the partition, p and q tame: no walker asks, stops or
// leaves, t's row is kept from the step before, and the partition's arc filter answers most "is x a neighbor of t?"
// in one load.
// gp_walk_node2vec_dynamic<Bounded> walks a snapshot without queries: a
// walker that needs t's neighbors and has not got them stops there (state 2).
// Draws per step: trial k's candidate from k * TRIAL_DRAWS + CANDIDATE, its
// acceptance at k * TRIAL_DRAWS + ACCEPT (the graph's: 2k and 2k+1 on a static
// partition; the first step, first-order, is trial 0's candidate); the exact
// draw takes trials * TRIAL_DRAWS and the next.
// CPU twin: gpipe/walks/_node2vec.py::_walk_one (the <true, true> walker; same random stream). GP_N2V_BORROW
// (state 2): defined by the loader, from _node2vec.py's BORROW; the graphs' defines (walk_graphs.cuh) too.
#include "walk_graphs.cuh"

// The lists of previous vertices in other partitions, borrowed: sorted ids, their sorted neighbors as a CSR.
template <typename Id>
struct GpBorrowed {
    const long long* __restrict__ ids;
    const long long* __restrict__ indptr;
    const Id* indices;
    long long count;
};

// node2vec's parameters, as a step reads them.
struct GpN2v {
    long long lo, hi;
    unsigned long long key;
    int length;
    double inv_p, inv_q;
    int trials;
    double bound, sure, never;  // max(1/p, 1, 1/q); below `sure` every candidate is accepted, from `never` none but t
    const unsigned int* __restrict__ arcs;  // Whole: the partition's arc filter (walk.cuh's gp_arc_maybe)
    unsigned long long arc_size;  // its bits
};

// A walker where it stands: at v (the vertex it routes to: v, or t for a query), from t, its candidate x, trial kk,
// the answer it carries, its state (0, 1 a query, GP_N2V_BORROW) and whether it leaves.
struct GpN2vWalker {
    long long v, t, x, route;
    int s, kk;
    signed char known, st, left;
};

// Where t's sorted neighbors are (tn[ta..ta+td-1]): this partition's, or borrowed; false if neither.
template <typename Graph>
__device__ __forceinline__ bool gp_n2v_neighbors(const Graph& g, const GpBorrowed<typename Graph::Id>& b,
                                                 long long t, long long lo, long long hi,
                                                 const typename Graph::Id** tn, long long* ta, long long* td) {
    if (t >= lo && t < hi) {
        *tn = g.sorted();
        *ta = g.start(t - lo);
        *td = g.degree(t - lo);
        return true;
    }
    const long long j = gp_lower_bound(b.ids, 0, b.count, t);
    if (j == b.count || b.ids[j] != t) return false;
    *tn = b.indices;
    *ta = b.indptr[j];
    *td = b.indptr[j + 1] - *ta;
    return true;
}

// Which bias x takes: 0 (x is t), 1 (a neighbor of t: tn[ta..ta+td-1]), 2 (neither).
template <typename IdT>
__device__ __forceinline__ int gp_n2v_class(long long x, long long t, const IdT* __restrict__ tn, long long ta,
                                            long long td) {
    if (x == t) return 0;
    return gp_has_edge(tn, ta, td, x) ? 1 : 2;
}

// The step from v (edges a..a+d-1) drawn exactly: a class by its mass (its edges' weight times its bias,
// the biases scaled by the largest present so that none overflows), then an edge of that class in
// proportion to its weight, each by inverse transform. Rounded products stay unfused so that the CPU
// twin computes the same bits.
template <typename Edges, typename Id>
__device__ __noinline__ long long gp_n2v_exact(const Edges edges, long long a, long long d, long long t,
                                               const Id* __restrict__ tn, long long ta, long long td,
                                               double inv_p, double inv_q, ulonglong2 r_class, ulonglong2 r_edge) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0;
    for (long long e = a; e < a + d; ++e) {
        const double w = edges.weight(a, e);
        const int c = gp_n2v_class(edges.head(e), t, tn, ta, td);
        if (c == 0) s0 += w; else if (c == 1) s1 += w; else s2 += w;
    }
    double top = 0.0;
    if (s0 > 0.0) top = inv_p;
    if (s1 > 0.0) top = fmax(top, 1.0);
    if (s2 > 0.0) top = fmax(top, inv_q);
    const double m0 = __dmul_rn(s0, inv_p / top), m1 = __dmul_rn(s1, 1.0 / top), m2 = __dmul_rn(s2, inv_q / top);
    const double u = gp_unit(r_class) * ((m0 + m1) + m2);
    int c = m0 > u ? 0 : (m0 + m1 > u ? 1 : 2);
    if (c == 2 && !(m2 > 0.0)) c = m1 > 0.0 ? 1 : 0;  // rounding reached the end: the last class with mass
    const double target = gp_unit(r_edge) * (c == 0 ? s0 : (c == 1 ? s1 : s2));
    double sum = 0.0;
    long long last = -1;
    for (long long e = a; e < a + d; ++e) {
        if (gp_n2v_class(edges.head(e), t, tn, ta, td) != c) continue;
        const double w = edges.weight(a, e);
        sum += w;
        if (w > 0.0) last = e;
        if (sum > target) return e;
    }
    return last;
}

// Move walker w (of walk `id`, in `state`) while it stays inside [lo, hi), writing its vertices to its row `out`
// (GpSectorRow, rows.cuh); returns how many it wrote. Bounded: draw a step exactly after `trials` rejections;
// Exact: make that draw here (else stop, state GP_N2V_BORROW); Queries: a walker whose t is elsewhere asks t's
// partition (else stops, to borrow t's list); Whole: the graph is whole in [lo, hi), so no walker leaves and t's
// row is the one of the vertex it just left, kept from that step rather than read again, and a candidate is asked
// of the arc filter (n2v.arcs) before t's row is searched for it.
template <typename Graph, bool Bounded, bool Exact, bool Queries, bool Whole = false>
__device__ __forceinline__ int gp_n2v_walker(const Graph& g, const GpBorrowed<typename Graph::Id>& b,
                                             const GpN2v& n2v, unsigned long long id, signed char state,
                                             GpN2vWalker& w, GpSectorRow<typename Graph::Id>& out) {
    using Id = typename Graph::Id;
    const long long lo = n2v.lo, hi = n2v.hi;
    const unsigned long long key = n2v.key;
    long long v = w.v, t = w.t, x = w.x;
    int s = w.s, kk = w.kk;
    signed char known = w.known, st = 0, left = 0;
    long long route = v;
    int k = 0;
    long long ra = -1, rd = 0;  // Whole: the row of the vertex just left (t), once the walker has stepped here
    if (Queries && state == 1) {  // a query: is x a neighbor of t (here)?
        out.put(k++, (Id)v);
        known = gp_has_edge(g.sorted(), g.start(t - lo), g.degree(t - lo), x) ? 1 : 0;
        left = 1;  // back to v's partition with the answer
    } else {
        while (true) {
            out.put(k++, (Id)v);
            if (s >= n2v.length) break;
            const long long a = g.start(v - lo);
            const long long d = g.degree(v - lo);
            if (d == 0) break;
            long long e;
            // t's row here is read at once, its loads in flight with the first candidate's; a borrowed one is
            // searched for only when a trial needs it (most steps are decided by the bounds alone)
            const Id* tn = g.sorted();
            long long ta = 0, td = 0;
            int near = -1;  // not looked up yet
            if (Whole && ra >= 0) {
                ta = ra;
                td = rd;
                near = 1;
            } else if (t >= lo && t < hi) {
                near = gp_n2v_neighbors(g, b, t, lo, hi, &tn, &ta, &td);
            }
            while (true) {
                const unsigned long long base = (unsigned long long)kk * Graph::TRIAL_DRAWS;
                if (Bounded && kk == n2v.trials && t >= 0) {  // rejection is slow at this step: draw it exactly
                    if (Exact && near < 0) near = gp_n2v_neighbors(g, b, t, lo, hi, &tn, &ta, &td);
                    if (!Exact || !near) {
                        st = GP_N2V_BORROW;  // to the exact walker (with t's neighbors if not here)
                        break;
                    }
                    e = gp_n2v_exact(g.edges, a, d, t, tn, ta, td, n2v.inv_p, n2v.inv_q, gp_bits(key, id, s, base),
                                     gp_bits(key, id, s, base + 1));
                    break;
                }
                e = g.pick(key, id, s, base + Graph::CANDIDATE, v - lo, a, d);
                if (e < 0 || t < 0) break;  // the first step is first-order: trial 0's candidate
                x = g.edges.head(e);
                const double u = gp_unit(gp_bits(key, id, s, base + Graph::ACCEPT)) * n2v.bound;
                bool ok;
                if (x == t) {
                    ok = u < n2v.inv_p;
                } else if (u < n2v.sure) {
                    ok = true;
                } else if (u >= n2v.never) {
                    ok = false;
                } else {
                    int member;
                    if (near < 0) near = gp_n2v_neighbors(g, b, t, lo, hi, &tn, &ta, &td);
                    if (near) {  // Whole: most candidates asked of are not t's neighbors, and the filter says so
                        member = (!Whole || gp_arc_maybe(n2v.arcs, n2v.arc_size, t, x)) &&
                                 gp_has_edge(tn, ta, td, x);
                    } else if (known >= 0) {
                        member = known;
                    } else {
                        // ask t's partition; a second time, borrow t's neighbors
                        st = Queries && known == -1 ? 1 : GP_N2V_BORROW;
                        break;
                    }
                    ok = u < (member ? 1.0 : n2v.inv_q);
                }
                if (known >= 0) known = -2;  // an answer serves one trial
                if (ok) break;
                ++kk;
            }
            if (st == 1) { left = 1; route = t; break; }
            if (st == GP_N2V_BORROW) break;
            if (e < 0) break;
            const long long nx = g.edges.head(e);
            t = v;
            v = nx;
            ++s;
            kk = 0;
            known = -1;
            if (Whole) {
                ra = a;
                rd = d;
            } else if (nx < lo || nx >= hi) {
                left = 1;
                route = nx;
                break;
            }
        }
        if (!left) route = v;
    }
    out.done(k);
    w = GpN2vWalker{v, t, x, route, s, kk, known, st, left};
    return k;
}

__device__ __forceinline__ GpN2v gp_n2v(long long lo, long long hi, unsigned long long key, int length, double inv_p,
                                        double inv_q, int trials, const unsigned int* arcs = nullptr,
                                        unsigned long long arc_size = 0) {
    return GpN2v{lo, hi, key, length, inv_p, inv_q, trials, fmax(inv_p, fmax(1.0, inv_q)), fmin(1.0, inv_q),
                 fmax(1.0, inv_q), arcs, arc_size};
}

// The exact walker, launched on the few stopped, is not bounded (it would spill); the others are, as the whole kernel.
template <typename IdT, bool Bounded, bool Exact>
__global__ void __launch_bounds__(GP_SECTOR_THREADS, Exact ? 1 : 4)
gp_walk_node2vec(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                                 const double* __restrict__ cdf, const long long* __restrict__ borrowed_ids,
                                 const long long* __restrict__ borrowed_indptr,
                                 const IdT* __restrict__ borrowed_indices, int weighted, long long lo, long long hi,
                                 unsigned long long key, int length, double inv_p, double inv_q, int trials,
                                 long long borrowed_count, long long n, const long long* __restrict__ walk_id,
                                 const int* __restrict__ step, const long long* __restrict__ cur,
                                 const long long* __restrict__ prev,
                                 const long long* __restrict__ cand, const int* __restrict__ trial,
                                 const signed char* __restrict__ answer, const signed char* __restrict__ state,
                                 const long long* __restrict__ offset, IdT* __restrict__ flat,
                                 int* __restrict__ piece_len, long long* __restrict__ out_vertex,
                                 int* __restrict__ out_step, long long* __restrict__ out_cur,
                                 long long* __restrict__ out_prev, long long* __restrict__ out_cand,
                                 int* __restrict__ out_trial, signed char* __restrict__ out_answer,
                                 signed char* __restrict__ out_state, signed char* __restrict__ moved,
                                 unsigned long long* __restrict__ next) {
    GP_SECTOR_STAGE;
    const GpCsr<IdT> g{{indices, cdf, weighted}, indptr};
    const GpBorrowed<IdT> b{borrowed_ids, borrowed_indptr, borrowed_indices, borrowed_count};
    const GpN2v n2v = gp_n2v(lo, hi, key, length, inv_p, inv_q, trials);
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        GpN2vWalker w{cur[i], prev[i], cand[i], cur[i], step[i], trial[i], answer[i], 0, 0};
        GpSectorRow<IdT> row(flat + offset[i], gp_sector_stage);
        piece_len[i] = gp_n2v_walker<GpCsr<IdT>, Bounded, Exact, true>(g, b, n2v, (unsigned long long)walk_id[i],
                                                                     state[i], w, row);
        out_vertex[i] = w.route;
        out_step[i] = w.s;
        out_cur[i] = w.v;
        out_prev[i] = w.t;
        out_cand[i] = w.x;
        out_trial[i] = w.kk;
        out_answer[i] = w.known;
        out_state[i] = w.st;
        moved[i] = w.left;
    }
}

// A graph whole in the partition (vertices 0..vertices-1), p and q tame: each walker from vertex cur at step `step`,
// coming from `prev` (-1 at its first step), to its walk's end; none asks, stops or leaves, so all it writes is its
// row, how many vertices that is (piece_len) and the step it ended at (out_step). t's row is kept from the step
// before, and "is x a neighbor of t?" asked of the partition's arc filter (`arcs`, of `arc_size` bits) before
// t's list is searched. Bounded to 4 blocks a multiprocessor (64 registers): at the 70-72 registers it took unbounded
// only 3 fit, and the walk bound by its searches' loads took 12 % longer (peers' R-MAT 20, H200); below 64 it spills
// in the hot loop.
template <typename IdT>
__global__ void __launch_bounds__(GP_SECTOR_THREADS, 4)
gp_walk_node2vec_whole(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                       const double* __restrict__ cdf, int weighted, const unsigned int* __restrict__ arcs,
                       long long arc_size, long long vertices, unsigned long long key, int length, double inv_p,
                       double inv_q, long long n, const long long* __restrict__ walk_id, const int* __restrict__ step,
                       const long long* __restrict__ cur, const long long* __restrict__ prev,
                       const long long* __restrict__ offset, IdT* __restrict__ flat, int* __restrict__ piece_len,
                       int* __restrict__ out_step, unsigned long long* __restrict__ next) {
    GP_SECTOR_STAGE;
    const GpCsr<IdT> g{{indices, cdf, weighted}, indptr};
    const GpBorrowed<IdT> none{nullptr, nullptr, nullptr, 0};
    const GpN2v n2v = gp_n2v(0, vertices, key, length, inv_p, inv_q, -1, arcs, (unsigned long long)arc_size);
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        GpN2vWalker w{cur[i], prev[i], -1, cur[i], step[i], 0, -1, 0, 0};
        GpSectorRow<IdT> row(flat + offset[i], gp_sector_stage);
        piece_len[i] = gp_n2v_walker<GpCsr<IdT>, false, false, false, true>(g, none, n2v,
                                                                          (unsigned long long)walk_id[i], 0, w, row);
        out_step[i] = w.s;
    }
}

// The walk on a dynamic graph's snapshot of a partition (GpSpace), exact and without queries: a walker that needs
// the neighbors of a t in another partition that were not borrowed stops (stopped = 1) at the start of its step;
// the caller borrows them and launches it again, and it redoes the step from trial 0 (the same draws). Bounded as
// gp_walk_node2vec's: <false> for tame p and q (trials -1), without the fallback's code in the loop.
template <bool Bounded>
__global__ void __launch_bounds__(GP_SECTOR_THREADS)
gp_walk_node2vec_dynamic(
    const long long* __restrict__ edge_start, const long long* __restrict__ degree, const long long* __restrict__ dst,
    const long long* __restrict__ units, const double* __restrict__ frac, const long long* __restrict__ member_start,
    const long long* __restrict__ members, const long long* __restrict__ group_row,
    const long long* __restrict__ group_count, const signed char* __restrict__ group_kind,
    const int* __restrict__ group_bit, const long long* __restrict__ group_start,
    const long long* __restrict__ group_size,
    const double* __restrict__ alias_prob, const int* __restrict__ alias_other,
    const long long* __restrict__ adjacency, const long long* __restrict__ borrowed_ids,
    const long long* __restrict__ borrowed_indptr, const long long* __restrict__ borrowed_indices, int weighted,
    long long lo, long long hi, long long space_vertices, unsigned long long key, int length, double inv_p,
    double inv_q, int trials, long long borrowed_count, long long n, const long long* __restrict__ walk_id,
    const long long* __restrict__ vertex, const int* __restrict__ step, const long long* __restrict__ prev,
    const long long* __restrict__ offset, long long* __restrict__ flat, int* __restrict__ piece_len,
    long long* __restrict__ out_vertex, int* __restrict__ out_step, long long* __restrict__ out_prev,
    signed char* __restrict__ stopped, signed char* __restrict__ moved, unsigned long long* __restrict__ next) {
    const GpSpace g{{dst, units, frac, weighted}, edge_start, degree, member_start, members, group_row, group_count,
                    group_kind, group_bit, group_start, group_size, alias_prob, alias_other, adjacency, space_vertices};
    const GpBorrowed<long long> b{borrowed_ids, borrowed_indptr, borrowed_indices, borrowed_count};
    GP_SECTOR_STAGE;
    const GpN2v n2v = gp_n2v(lo, hi, key, length, inv_p, inv_q, trials);
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        GpN2vWalker w{vertex[i], prev[i], -1, vertex[i], step[i], 0, -1, 0, 0};
        GpSectorRow<long long> row(flat + offset[i], gp_sector_stage);
        piece_len[i] = gp_n2v_walker<GpSpace, Bounded, true, false>(g, b, n2v, (unsigned long long)walk_id[i], 0, w,
                                                                 row);
        out_vertex[i] = w.v;
        out_step[i] = w.s;
        out_prev[i] = w.t;
        stopped[i] = w.st == GP_N2V_BORROW;
        moved[i] = w.left;
    }
}
