// First-order walks on a dynamic graph's snapshot (gpipe/dynamic: a partition's radix-factorized sampling space):
// DeepWalk (uniform over the edges, or biased by weight), walks with jump and with restart. Each thread takes
// walkers from a shared counter and moves each for as many steps as it stays inside [lo, hi). Draws per step:
// 0 = teleport?, then 1 = the edge (uniform), or 1.. = gp_space_pick's draws from draw 1 (weighted).
// CPU twin: gpipe/walks/_dynamic.py::_advance_cpu (same random stream).
// TELEPORT_*, DECIMAL_GROUP, GROUP_*: defined by the loader (_first_order.py's TELEPORT, dynamic/_kernels.py's PICK_DEFINES).
#include "dynamic.cuh"
#include "walk.cuh"

extern "C" __global__ void gp_walk_dynamic(
    const long long* __restrict__ edge_start, const long long* __restrict__ degree, const long long* __restrict__ dst,
    const long long* __restrict__ units, const double* __restrict__ frac, const long long* __restrict__ member_start,
    const long long* __restrict__ members, const long long* __restrict__ group_row,
    const long long* __restrict__ group_count, const signed char* __restrict__ group_kind,
    const int* __restrict__ group_bit, const long long* __restrict__ group_start,
    const long long* __restrict__ group_size,
    const double* __restrict__ alias_prob, const int* __restrict__ alias_other, int weighted, long long lo,
    long long hi, long long space_vertices, long long num_vertices, unsigned long long key, int length, double alpha,
    int teleport, long long n, const long long* __restrict__ walk_id, const long long* __restrict__ source,
    const long long* __restrict__ vertex, const int* __restrict__ step, const long long* __restrict__ offset,
    long long* __restrict__ flat, int* __restrict__ piece_len, long long* __restrict__ out_vertex,
    int* __restrict__ out_step, signed char* __restrict__ moved, unsigned long long* __restrict__ next) {
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        const unsigned long long id = (unsigned long long)walk_id[i];
        long long v = vertex[i];
        int s = step[i];
        long long* out = flat + offset[i];
        int k = 0;
        signed char left = 0;
        while (true) {
            out[k++] = v;
            if (s >= length) break;
            long long u;
            if (teleport != TELEPORT_NONE && gp_unit(gp_bits(key, id, s, 0)) < alpha) {
                u = teleport == TELEPORT_UNIFORM ? gp_uniform_vertex(gp_bits(key, id, s, 1), num_vertices) : source[i];
            } else {
                const long long local = v - lo;
                if (local >= space_vertices) break;  // a vertex only named as a destination so far: no edges
                const long long a = edge_start[local], d = degree[local];
                if (d == 0) break;
                const long long e = weighted ? gp_space_pick(edge_start, degree, units, frac, member_start, members,
                                                             group_row, group_count, group_kind, group_bit,
                                                             group_start, group_size, alias_prob, alias_other, key,
                                                             id, s, 1, local)
                                             : a + gp_below(gp_bits(key, id, s, 1), (unsigned long long)d);
                u = dst[e];
            }
            ++s;
            v = u;
            if (u < lo || u >= hi) { left = 1; break; }
        }
        piece_len[i] = k;
        out_vertex[i] = v;
        out_step[i] = s;
        moved[i] = left;
    }
}

// node2vec on a dynamic graph's snapshot, the static walk's rule (walk_node2vec.cu): a candidate x, drawn as a
// first-order step from v (uniform over its edges, or gp_space_pick by weight), is accepted with probability
// bias(x) / max(1/p, 1, 1/q), bias 1/p for x == t, 1 for a neighbor of t (binary search in t's sorted adjacency,
// this partition's or borrowed), else 1/q. After `trials` rejections (-1: never) the step is drawn exactly. A walker
// that needs the neighbors of a t in another partition that were not borrowed stops (stopped = 1) at the start of
// its step; the caller borrows them and launches it again, and it redoes the step from trial 0.
// Draws: trial k's acceptance is k * GP_TRIAL_DRAWS, its candidate k * GP_TRIAL_DRAWS + 1 ..; the exact draw takes
// trials * GP_TRIAL_DRAWS and the next. CPU twin: gpipe/walks/_dynamic.py::_advance_node2vec_cpu (same stream).

// Trial k's candidate edge from vertex local (which has edges).
__device__ __forceinline__ long long gp_n2v_dynamic_candidate(
    const long long* __restrict__ edge_start, const long long* __restrict__ degree, const long long* __restrict__ units,
    const double* __restrict__ frac, const long long* __restrict__ member_start, const long long* __restrict__ members,
    const long long* __restrict__ group_row, const long long* __restrict__ group_count,
    const signed char* __restrict__ group_kind,
    const int* __restrict__ group_bit, const long long* __restrict__ group_start,
    const long long* __restrict__ group_size, const double* __restrict__ alias_prob,
    const int* __restrict__ alias_other, int weighted, unsigned long long key, unsigned long long id, int s, long long k,
    long long local) {
    const unsigned long long first = (unsigned long long)k * GP_TRIAL_DRAWS + 1;
    if (weighted)
        return gp_space_pick(edge_start, degree, units, frac, member_start, members, group_row, group_count,
                             group_kind, group_bit, group_start, group_size, alias_prob, alias_other, key, id, s, first,
                             local);
    return edge_start[local] + gp_below(gp_bits(key, id, s, first), (unsigned long long)degree[local]);
}

// Which bias x takes: 0 (x is t), 1 (a neighbor of t: in the sorted tn[ta..ta+td-1]), 2 (neither).
__device__ __forceinline__ int gp_n2v_dynamic_class(long long x, long long t, const long long* __restrict__ tn,
                                                    long long ta, long long td) {
    if (x == t) return 0;
    return gp_has_edge(tn, ta, td, x) ? 1 : 2;
}

// The step from v (edges a..a+d-1) drawn exactly, as walk_node2vec.cu's gp_n2v_exact, an edge's weight its scaled
// bias units + frac (or 1). Rounded products stay unfused so that the CPU twin computes the same bits.
__device__ __noinline__ long long gp_n2v_dynamic_exact(
    const long long* __restrict__ dst, const long long* __restrict__ units, const double* __restrict__ frac,
    int weighted, long long a, long long d, long long t, const long long* __restrict__ tn, long long ta, long long td,
    double inv_p, double inv_q, ulonglong2 r_class, ulonglong2 r_edge) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0;
    for (long long e = a; e < a + d; ++e) {
        const double w = weighted ? __dadd_rn((double)units[e], frac[e]) : 1.0;
        const int c = gp_n2v_dynamic_class(dst[e], t, tn, ta, td);
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
        if (gp_n2v_dynamic_class(dst[e], t, tn, ta, td) != c) continue;
        sum += weighted ? __dadd_rn((double)units[e], frac[e]) : 1.0;
        last = e;
        if (sum > target) return e;
    }
    return last;
}

extern "C" __global__ void gp_walk_node2vec_dynamic(
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
    const double bound = fmax(inv_p, fmax(1.0, inv_q)), sure = fmin(1.0, inv_q), never = fmax(1.0, inv_q);
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        const unsigned long long id = (unsigned long long)walk_id[i];
        long long v = vertex[i], t = prev[i];
        int s = step[i];
        long long* out = flat + offset[i];
        int k = 0;
        signed char left = 0, stop = 0;
        while (true) {
            out[k++] = v;
            if (s >= length) break;
            const long long local = v - lo;
            if (local >= space_vertices) break;  // a vertex only named as a destination so far: no edges
            const long long a = edge_start[local], d = degree[local];
            if (d == 0) break;
            long long e;
            if (t < 0) {  // the first step is first-order
                e = gp_n2v_dynamic_candidate(edge_start, degree, units, frac, member_start, members, group_row,
                                             group_count, group_kind, group_bit, group_start, group_size, alias_prob,
                                             alias_other, weighted, key, id, s, 0, local);
            } else {
                bool near = true;  // t's sorted neighbors: tn[ta..ta+td-1]
                const long long* tn = adjacency;
                long long ta = 0, td = 0;
                if (t >= lo && t < hi) {
                    if (t - lo < space_vertices) {
                        ta = edge_start[t - lo];
                        td = degree[t - lo];
                    }
                } else {
                    const long long b = gp_lower_bound(borrowed_ids, 0, borrowed_count, t);
                    near = b < borrowed_count && borrowed_ids[b] == t;
                    if (near) {
                        tn = borrowed_indices;
                        ta = borrowed_indptr[b];
                        td = borrowed_indptr[b + 1] - ta;
                    }
                }
                for (long long kk = 0;; ++kk) {
                    const unsigned long long base = (unsigned long long)kk * GP_TRIAL_DRAWS;
                    if (kk == trials) {  // rejection is slow at this step: draw it exactly (never if trials < 0)
                        if (!near) { stop = 1; break; }
                        e = gp_n2v_dynamic_exact(dst, units, frac, weighted, a, d, t, tn, ta, td, inv_p, inv_q,
                                                 gp_bits(key, id, s, base), gp_bits(key, id, s, base + 1));
                        break;
                    }
                    e = gp_n2v_dynamic_candidate(edge_start, degree, units, frac, member_start, members, group_row,
                                                 group_count, group_kind, group_bit, group_start, group_size,
                                                 alias_prob, alias_other, weighted, key, id, s, kk, local);
                    const long long x = dst[e];
                    const double u = gp_unit(gp_bits(key, id, s, base)) * bound;
                    bool ok;
                    if (x == t) ok = u < inv_p;
                    else if (u < sure) ok = true;
                    else if (u >= never) ok = false;
                    else if (!near) { stop = 1; break; }  // for t's neighbors, borrowed
                    else ok = u < (gp_has_edge(tn, ta, td, x) ? 1.0 : inv_q);
                    if (ok) break;
                }
                if (stop) break;
            }
            const long long nx = dst[e];
            t = v;
            v = nx;
            ++s;
            if (nx < lo || nx >= hi) { left = 1; break; }
        }
        piece_len[i] = k;
        out_vertex[i] = v;
        out_step[i] = s;
        out_prev[i] = t;
        stopped[i] = stop;
        moved[i] = left;
    }
}
