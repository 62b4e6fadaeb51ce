// The candidate graph of a subgraph-count query (gpipe/counting/_candidates.py), built on the device holding the
// data graph. Each kernel reads the rows lo.. of a CSR (local indptr, global indices; sorted per vertex, each
// neighbor once, no self-loop) and the candidate sets of all data vertices: bit u of sets[v] when v is a candidate
// of query vertex u (k <= GP_CAND_MAX_QUERY).
// CPU twins: gpipe/counting/_candidate_kernels.py.

// The label, degree and neighbor-label-frequency filters, one thread per row: the query vertices whose label
// (kind: the rank of a data vertex's label among the query's, -1 for none) a row's vertex has, with at most its
// degree and, for each kind j, at most as many neighbors of kind j (need[u * kinds + j]). The row is scanned until
// every wanted query vertex's needs are met, counting each kind up to the most any of them needs.
template <typename IdT>
__global__ void gp_candidate_filter(long long n, const long long* __restrict__ indptr,
                                    const IdT* __restrict__ indices, long long lo,
                                    const signed char* __restrict__ kind, int k, int kinds,
                                    const long long* __restrict__ query_kind,
                                    const long long* __restrict__ query_degree, const long long* __restrict__ need,
                                    unsigned int* __restrict__ sets) {
    const long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (r >= n) return;
    const long long v = lo + r, degree = indptr[r + 1] - indptr[r];
    unsigned int wanted = 0;
    for (int u = 0; u < k; ++u)
        if (query_kind[u] == kind[v] && degree >= query_degree[u]) wanted |= 1u << u;
    if (wanted == 0) return;
    long long most[GP_CAND_MAX_QUERY], counts[GP_CAND_MAX_QUERY];
    long long missing = 0;
    for (int j = 0; j < kinds; ++j) {
        most[j] = 0;
        for (int u = 0; u < k; ++u)
            if (wanted >> u & 1u) most[j] = max(most[j], need[u * kinds + j]);
        missing += most[j];
        counts[j] = 0;
    }
    for (long long e = indptr[r]; e < indptr[r + 1] && missing > 0; ++e) {
        const int j = kind[indices[e]];
        if (j >= 0 && counts[j] < most[j]) {
            ++counts[j];
            --missing;
        }
    }
    unsigned int passed = 0;
    for (int u = 0; u < k; ++u) {
        if (!(wanted >> u & 1u)) continue;
        bool passes = true;
        for (int j = 0; j < kinds; ++j) passes &= counts[j] >= need[u * kinds + j];
        if (passes) passed |= 1u << u;
    }
    sets[v] |= passed;
}

// One pass of the refinement, one thread per row: a candidate of query vertex u with no candidate neighbor of some
// query neighbor of u in `stale` (neighbor_bits[u]) is dropped, in place; the query vertices that lost candidates
// are or-ed into changed[0]. A neighbor read while another thread drops from it may be seen before the drop: the
// drop is in changed, so the next pass checks again, and the passes end at the same fixed point as the twin's.
template <typename IdT>
__global__ void gp_candidate_refine(long long n, const long long* __restrict__ indptr,
                                    const IdT* __restrict__ indices, long long lo, int k,
                                    const long long* __restrict__ neighbor_bits, long long stale, unsigned int* sets,
                                    unsigned long long* changed) {
    const long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (r >= n) return;
    const long long v = lo + r;
    const long long mine = sets[v];
    if (mine == 0) return;
    long long need = 0;  // the query vertices v must have a candidate neighbor of
    for (int u = 0; u < k; ++u)
        if (mine >> u & 1) need |= neighbor_bits[u] & stale;
    if (need == 0) return;
    long long seen = 0;
    for (long long e = indptr[r]; e < indptr[r + 1] && seen != need; ++e)
        seen |= (long long)((volatile unsigned int*)sets)[indices[e]] & need;
    if (seen == need) return;
    long long dropped = 0;
    for (int u = 0; u < k; ++u)
        if ((mine >> u & 1) && (neighbor_bits[u] & stale & ~seen)) dropped |= 1LL << u;
    sets[v] = (unsigned int)(mine & ~dropped);
    atomicOr(changed, (unsigned long long)dropped);
}

// A warp per row (data vertex rows[i]): how many of its neighbors are candidates of query vertex u.
template <typename IdT>
__global__ void gp_candidate_degree(long long n, const long long* __restrict__ rows,
                                    const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                                    long long lo, const unsigned int* __restrict__ sets, int u,
                                    long long* __restrict__ count) {
    const long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (i >= n) return;
    const long long row = rows[i] - lo;
    long long c = 0;
    for (long long e = indptr[row] + lane; e < indptr[row + 1]; e += 32) c += sets[indices[e]] >> u & 1u;
    for (int step = 16; step > 0; step >>= 1) c += __shfl_down_sync(0xffffffffu, c, step);
    if (lane == 0) count[i] = c;
}

// A warp per row: its neighbors that are candidates of query vertex u, as their indices among u's candidates
// (rank), in row order (so sorted), from entries[offset[i]].
template <typename IdT>
__global__ void gp_candidate_edges(long long n, const long long* __restrict__ rows,
                                   const long long* __restrict__ indptr, const IdT* __restrict__ indices,
                                   long long lo, const unsigned int* __restrict__ sets, int u,
                                   const int* __restrict__ rank, const long long* __restrict__ offset,
                                   int* __restrict__ entries) {
    const long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (i >= n) return;
    const long long row = rows[i] - lo, end = indptr[row + 1];
    long long at = offset[i];
    for (long long first = indptr[row]; first < end; first += 32) {  // the warp's lanes all run every round
        const long long e = first + lane;
        const long long w = e < end ? (long long)indices[e] : -1;
        const bool hit = w >= 0 && (sets[w] >> u & 1u);
        const unsigned int hits = __ballot_sync(0xffffffffu, hit);
        if (hit) entries[at + __popc(hits & ((1u << lane) - 1u))] = rank[w];
        at += __popc(hits);
    }
}
