// GAMMA's multi-merge (Algorithm 3, the optimized variant): one subtask's
// pieces, each sorted, concatenated in `keys` (piece j is keys[starts[j]:starts[j+1]]).
// One thread per element x = piece j's p-th: it searches only the pieces k < j
// (one direction), adding to its rank the count of their elements <= x, and
// counts itself at that matched position of piece k in `hits`. The caller's
// prefix sum of `hits` within each piece then gives each element the count of
// later pieces' elements < it, which completes a stable merge's position. The
// CPU twin is gpipe/sort/_merge.py::_merge_rank_cpu.

__device__ long long gp_upper_bound(const unsigned long long* keys, long long lo, long long hi,
                                    unsigned long long x) {
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        if (keys[mid] <= x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

extern "C" __global__ void gp_merge_rank(long long total, int pieces, const long long* starts,
                                         const unsigned long long* keys, long long* rank,
                                         unsigned long long* hits) {
    long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (e >= total) return;
    int lo = 0, hi = pieces;  // the piece j holding e: the last start <= e
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (starts[mid] <= e) lo = mid; else hi = mid;
    }
    int j = lo;
    unsigned long long x = keys[e];
    long long r = e - starts[j];
    for (int k = 0; k < j; ++k) {
        long long m = gp_upper_bound(keys, starts[k], starts[k + 1], x);
        r += m - starts[k];
        if (m < starts[k + 1]) atomicAdd(&hits[m], 1ULL);
    }
    rank[e] = r;
}
