// Multi-dimensional random walk (frontier sampling) as continuous-time walkers.
// Picking a pool member with probability proportional to its degree and moving
// it to a uniform neighbor is the same process as every member moving after an
// exponential wait of rate deg(v) (the next to move is member i with probability
// deg_i / sum deg); so each member walks on its own, recording (src, dst, time)
// for every move until its next move would come after `horizon`, and the host
// keeps each instance's first `budget` moves in time order. Draws per move s:
// 0 = the wait, 1 = the neighbor. status: 0 done, 1 moved on (another partition,
// or its room for records is full), 2 parked at the horizon.
// CPU twin: gpipe/walks/_frontier.py::_advance_cpu (same random stream). GP_MOVED (1) and GP_PARKED (2):
// defined by the loader, from _frontier.py's MOVED and PARKED.
#include "walk.cuh"

template <typename IdT>
__global__ void gp_walk_frontier(const long long* __restrict__ indptr, const IdT* __restrict__ indices, long long lo,
                                 long long hi, unsigned long long key, int budget, double horizon, int room,
                                 long long n, const long long* __restrict__ walk_id,
                                 const long long* __restrict__ vertex, const int* __restrict__ step,
                                 const double* __restrict__ time, long long* __restrict__ rec_src,
                                 long long* __restrict__ rec_dst, double* __restrict__ rec_time,
                                 int* __restrict__ rec_count, long long* __restrict__ out_vertex,
                                 int* __restrict__ out_step, double* __restrict__ out_time,
                                 signed char* __restrict__ status, unsigned long long* __restrict__ next) {
    for (long long i = (long long)atomicAdd(next, 1ULL); i < n; i = (long long)atomicAdd(next, 1ULL)) {
        const unsigned long long id = (unsigned long long)walk_id[i];
        long long v = vertex[i];
        int s = step[i];
        double t = time[i];
        const long long o = i * (long long)room;
        int c = 0;
        signed char st = 0;
        while (true) {
            if (s >= budget) break;
            const long long a = indptr[v - lo];
            const long long d = indptr[v - lo + 1] - a;
            if (d == 0) break;
            const double nt = t - log(1.0 - gp_unit(gp_bits(key, id, s, 0))) / (double)d;
            if (nt > horizon) { st = GP_PARKED; break; }
            if (c == room) { st = GP_MOVED; break; }
            const long long u = (long long)indices[a + gp_below(gp_bits(key, id, s, 1), d)];
            rec_src[o + c] = v;
            rec_dst[o + c] = u;
            rec_time[o + c] = nt;
            ++c;
            ++s;
            t = nt;
            v = u;
            if (u < lo || u >= hi) { st = GP_MOVED; break; }
        }
        rec_count[i] = c;
        out_vertex[i] = v;
        out_step[i] = s;
        out_time[i] = t;
        status[i] = st;
    }
}
