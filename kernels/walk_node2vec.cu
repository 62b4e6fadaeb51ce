// node2vec, exact, by rejection sampling (as KnightKing): at v coming from t,
// propose x with probability proportional to w(v, x) (or uniformly), accept
// with probability bias(x) / M, where bias is 1/p if x == t, 1 if x is a
// neighbor of t, 1/q otherwise, and M = max(1/p, 1, 1/q). Most trials are
// decided by the bounds min(1, 1/q) and max(1, 1/q) alone; the rest need "is
// x a neighbor of t?". When t lives in another partition, the walker travels
// there as a query (state 1, carrying x and the trial number), t's owner
// answers, and the walker comes back to redo that trial with the answer.
// Draws per step: 2k and 2k+1 for trial k (the first step, first-order, uses 0).
// Walker fields: cur, prev, cand, trial, answer, state. CPU twin:
// gpipe/walks/_node2vec.py::_advance_cpu (same random stream).
#include "walk.cuh"

template <typename IdT>
__global__ void gp_walk_node2vec(const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                                 const double* __restrict__ cdf, int weighted, long long lo, long long hi,
                                 unsigned long long key, int length, double inv_p, double inv_q, long long n,
                                 const long long* __restrict__ walk_id, const int* __restrict__ step,
                                 const long long* __restrict__ cur, const long long* __restrict__ prev,
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
                    while (true) {
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
                            if (t >= lo && t < hi) {
                                const long long at = indptr[t - lo];
                                member = gp_has_edge(indices, at, indptr[t - lo + 1] - at, x);
                            } else if (known >= 0) {
                                member = known;
                            } else {
                                st = 1;  // ask t's partition
                                break;
                            }
                            ok = u < (member ? 1.0 : inv_q);
                        }
                        known = -1;
                        if (ok) break;
                        ++kk;
                    }
                    if (st == 1) { left = 1; route = t; break; }
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
