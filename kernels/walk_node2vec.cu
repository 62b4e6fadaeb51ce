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
// Three kernels share one body and one argument list: gp_walk_node2vec_exact as
// above; gp_walk_node2vec, which stops a walker at the exact draw (state 2)
// instead of making it; gp_walk_node2vec_rejection, with no fallback at all,
// for p and q whose every acceptance is at least 1/16 (the caller passes
// trials = -1 there, and the twin then never falls back either). The caller
// launches the rejection kernel, or gp_walk_node2vec, on every walker and the
// exact one on those stopped: the fallback in the hot loop, though almost never
// taken, cost node2vec 40 % of its speed at R-MAT 22 on an H200 (1.13 against
// 1.93 G steps/s), and its test alone 27 %.
// Draws per step: 2k and 2k+1 for trial k (the first step, first-order, uses 0);
// 2 * trials and 2 * trials + 1 for the exact draw.
// Walker fields: cur, prev, cand, trial, answer, state. CPU twin:
// gpipe/walks/_node2vec.py::_advance_cpu (gp_walk_node2vec_exact; same random stream). GP_N2V_BORROW
// (state 2): defined by the loader, from _node2vec.py's BORROW.
#include "walk.cuh"

// Where t's sorted neighbors are (tn[ta..ta+td-1]): this partition's, or borrowed; false if neither.
template <typename IdT>
__device__ __forceinline__ bool gp_n2v_neighbors(long long t, long long lo, long long hi,
                                                 const long long* __restrict__ indptr, const IdT* indices,
                                                 long long borrowed_count, const long long* __restrict__ borrowed_ids,
                                                 const long long* __restrict__ borrowed_indptr,
                                                 const IdT* borrowed_indices, const IdT** tn, long long* ta,
                                                 long long* td) {
    if (t >= lo && t < hi) {
        *tn = indices;
        *ta = indptr[t - lo];
        *td = indptr[t - lo + 1] - *ta;
        return true;
    }
    const long long b = gp_lower_bound(borrowed_ids, 0, borrowed_count, t);
    if (b == borrowed_count || borrowed_ids[b] != t) return false;
    *tn = borrowed_indices;
    *ta = borrowed_indptr[b];
    *td = borrowed_indptr[b + 1] - *ta;
    return true;
}

// The weight of edge e among a vertex's edges a..: from the prefix sums `cdf`, or 1.
__device__ __forceinline__ double gp_n2v_weight(const double* __restrict__ cdf, int weighted, long long a,
                                                long long e) {
    if (!weighted) return 1.0;
    return e > a ? cdf[e] - cdf[e - 1] : cdf[e];
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
template <typename IdT>
__device__ __noinline__ long long gp_n2v_exact(const IdT* __restrict__ indices, const double* __restrict__ cdf, int weighted,
                                  long long a, long long d, long long t, const IdT* __restrict__ tn, long long ta,
                                  long long td, double inv_p, double inv_q, ulonglong2 r_class, ulonglong2 r_edge) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0;
    for (long long e = a; e < a + d; ++e) {
        const double w = gp_n2v_weight(cdf, weighted, a, e);
        const int c = gp_n2v_class((long long)indices[e], t, tn, ta, td);
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
        if (gp_n2v_class((long long)indices[e], t, tn, ta, td) != c) continue;
        const double w = gp_n2v_weight(cdf, weighted, a, e);
        sum += w;
        if (w > 0.0) last = e;
        if (sum > target) return e;
    }
    return last;
}

template <typename IdT, bool Bounded, bool Exact>
__device__ __forceinline__ void gp_n2v_walk(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
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
    const double bound = fmax(inv_p, fmax(1.0, inv_q));
    const double sure = fmin(1.0, inv_q), never = fmax(1.0, inv_q);
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        const unsigned long long id = (unsigned long long)walk_id[i];
        long long v = cur[i], t = prev[i], x = cand[i], route = v;
        int s = step[i], kk = trial[i];
        signed char known = answer[i], st = 0, left = 0;
        IdT* out = flat + offset[i];
        int k = 0;
        if (state[i] == 1) {  // a query: is x a neighbor of t (here)?
            out[k++] = (IdT)v;
            const long long a = indptr[t - lo];
            known = gp_has_edge(indices, a, indptr[t - lo + 1] - a, x) ? 1 : 0;
            left = 1;  // back to v's partition with the answer
        } else {
            while (true) {
                out[k++] = (IdT)v;
                if (s >= length) break;
                const long long a = indptr[v - lo];
                const long long d = indptr[v - lo + 1] - a;
                if (d == 0) break;
                long long e;
                if (t < 0) {  // the first step is first-order
                    e = gp_pick_edge(cdf, weighted, a, d, gp_bits(key, id, s, 0));
                } else {
                    // t's neighbors are looked up only when a trial needs them: most steps are decided by
                    // the bounds alone, without reading t's row
                    const IdT* tn = indices;
                    long long ta = 0, td = 0;
                    int near = -1;  // not looked up yet
                    while (true) {
                        if (Bounded && kk == trials) {  // rejection is slow at this step: draw it exactly
                            if (Exact && near < 0) near = gp_n2v_neighbors(t, lo, hi, indptr, indices, borrowed_count,
                                                                  borrowed_ids, borrowed_indptr, borrowed_indices,
                                                                  &tn, &ta, &td);
                            if (!Exact || !near) {
                                st = GP_N2V_BORROW;  // to gp_walk_node2vec_exact (with t's neighbors if not here)
                                break;
                            }
                            e = gp_n2v_exact(indices, cdf, weighted, a, d, t, tn, ta, td, inv_p, inv_q,
                                             gp_bits(key, id, s, 2ULL * trials),
                                             gp_bits(key, id, s, 2ULL * trials + 1));
                            break;
                        }
                        e = gp_pick_edge(cdf, weighted, a, d, gp_bits(key, id, s, 2ULL * kk));
                        if (e < 0) break;
                        x = (long long)indices[e];
                        const double u = gp_unit(gp_bits(key, id, s, 2ULL * kk + 1)) * bound;
                        bool ok;
                        if (x == t) {
                            ok = u < inv_p;
                        } else if (u < sure) {
                            ok = true;
                        } else if (u >= never) {
                            ok = false;
                        } else {
                            int member;
                            if (near < 0) near = gp_n2v_neighbors(t, lo, hi, indptr, indices, borrowed_count,
                                                                  borrowed_ids, borrowed_indptr, borrowed_indices,
                                                                  &tn, &ta, &td);
                            if (near) {
                                member = gp_has_edge(tn, ta, td, x);
                            } else if (known >= 0) {
                                member = known;
                            } else {
                                // ask t's partition; a second time, borrow t's neighbors
                                st = known == -1 ? 1 : GP_N2V_BORROW;
                                break;
                            }
                            ok = u < (member ? 1.0 : inv_q);
                        }
                        if (known >= 0) known = -2;  // an answer serves one trial
                        if (ok) break;
                        ++kk;
                    }
                    if (st == 1) { left = 1; route = t; break; }
                    if (st == GP_N2V_BORROW) break;
                }
                if (e < 0) break;
                const long long nx = (long long)indices[e];
                t = v;
                v = nx;
                ++s;
                kk = 0;
                known = -1;
                if (nx < lo || nx >= hi) { left = 1; route = nx; break; }
            }
            if (!left) route = v;
        }
        piece_len[i] = k;
        out_vertex[i] = route;
        out_step[i] = s;
        out_cur[i] = v;
        out_prev[i] = t;
        out_cand[i] = x;
        out_trial[i] = kk;
        out_answer[i] = known;
        out_state[i] = st;
        moved[i] = left;
    }
}

template <typename IdT>
__global__ void gp_walk_node2vec_rejection(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
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
    gp_n2v_walk<IdT, false, false>(indptr, indices, cdf, borrowed_ids, borrowed_indptr, borrowed_indices, weighted,
                                   lo, hi, key, length, inv_p, inv_q, trials, borrowed_count, n, walk_id, step, cur,
                                   prev, cand, trial, answer, state, offset, flat, piece_len, out_vertex, out_step,
                                   out_cur, out_prev, out_cand, out_trial, out_answer, out_state, moved, next);
}

template <typename IdT>
__global__ void gp_walk_node2vec(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
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
    gp_n2v_walk<IdT, true, false>(indptr, indices, cdf, borrowed_ids, borrowed_indptr, borrowed_indices, weighted,
                                  lo, hi, key, length, inv_p, inv_q, trials, borrowed_count, n, walk_id, step, cur,
                                  prev, cand, trial, answer, state, offset, flat, piece_len, out_vertex, out_step,
                                  out_cur, out_prev, out_cand, out_trial, out_answer, out_state, moved, next);
}

template <typename IdT>
__global__ void gp_walk_node2vec_exact(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
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
    gp_n2v_walk<IdT, true, true>(indptr, indices, cdf, borrowed_ids, borrowed_indptr, borrowed_indices, weighted,
                                 lo, hi, key, length, inv_p, inv_q, trials, borrowed_count, n, walk_id, step, cur,
                                 prev, cand, trial, answer, state, offset, flat, piece_len, out_vertex, out_step,
                                 out_cur, out_prev, out_cand, out_trial, out_answer, out_state, moved, next);
}
