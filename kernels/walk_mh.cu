// Metropolis-Hastings random walk: propose a uniform neighbor u of v, move there
// with probability min(1, deg(v) / deg(u)), else stay at v (the step is taken).
// When u lives in another partition, the walker goes there as a proposal
// (carrying deg(v)); u's owner decides, and a rejected walker comes back.
// Draws per step: 0 = proposal, 1 = acceptance. Walker fields: cur (the walk's
// vertex), degv, state (1 = proposal). CPU twin: gpipe/walks/_mh.py::_advance_cpu.
#include "walk.cuh"

template <typename IdT>
__global__ void __launch_bounds__(GP_SECTOR_THREADS)
gp_walk_mh(const long long* __restrict__ indptr, const IdT* __restrict__ indices, long long lo,
                           long long hi, unsigned long long key, int length, long long n,
                           const long long* __restrict__ walk_id, const long long* __restrict__ vertex,
                           const int* __restrict__ step, const long long* __restrict__ cur,
                           const long long* __restrict__ degv, const signed char* __restrict__ state,
                           const long long* __restrict__ offset, IdT* __restrict__ flat, int* __restrict__ piece_len,
                           long long* __restrict__ out_vertex, int* __restrict__ out_step,
                           long long* __restrict__ out_cur, long long* __restrict__ out_degv,
                           signed char* __restrict__ out_state, signed char* __restrict__ moved,
                           unsigned long long* __restrict__ next) {
    GP_SECTOR_STAGE;
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        const unsigned long long id = (unsigned long long)walk_id[i];
        long long v = cur[i];
        int s = step[i];
        GpSectorRow<IdT> out(flat + offset[i], gp_sector_stage);  // (rows.cuh)
        int k = 0;
        signed char left = 0, st = 0;
        long long route = -1, dv = 0;
        bool walking = true;
        if (state[i] == 1) {  // a proposal from v (elsewhere) to u (here)
            const long long u = vertex[i];
            const long long du = indptr[u - lo + 1] - indptr[u - lo];
            out.put(k++, (IdT)v);
            const bool accept = gp_unit(gp_bits(key, id, s, 1)) * (double)du < (double)degv[i];
            ++s;
            if (accept) {
                v = u;  // the loop below writes it
            } else {
                out.put(k++, (IdT)v);  // stayed; back to v's partition unless the walk is over
                walking = false;
                left = s < length;
            }
        }
        while (walking) {
            out.put(k++, (IdT)v);
            if (s >= length) break;
            const long long a = indptr[v - lo];
            const long long d = indptr[v - lo + 1] - a;
            if (d == 0) break;
            const long long u = (long long)indices[a + gp_below(gp_bits(key, id, s, 0), d)];
            if (u < lo || u >= hi) { left = 1; st = 1; route = u; dv = d; break; }
            const long long du = indptr[u - lo + 1] - indptr[u - lo];
            if (gp_unit(gp_bits(key, id, s, 1)) * (double)du < (double)d) v = u;
            ++s;
        }
        if (st == 0) route = v;
        out.done(k);
        piece_len[i] = k;
        out_vertex[i] = route;
        out_step[i] = s;
        out_cur[i] = v;
        out_degv[i] = dv;
        out_state[i] = st;
        moved[i] = left;
    }
}
