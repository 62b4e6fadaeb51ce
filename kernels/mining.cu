// Vertex extension of an embedding table (GAMMA's extension primitive), one
// thread per embedding of a batch. Embeddings sharing a prefix are siblings,
// stored next to each other in increasing vertex order: the prefix's
// intersection of adjacency lists was computed once, when they were written.
// So embedding e (vertex u) extends by the siblings after it (larger ids: the
// symmetry breaking of cliques) that are also neighbors of u: one merge of two
// sorted lists, starting in u's list at the first sibling by binary search.
// gp_vertex_extension writes them to e's slot of out (offset[i], room for the
// bound the caller computed) and says in count[i] how many, for the
// compression; gp_vertex_count only counts them (a count's last column).
// CPU twins: gpipe/mining/_extend.py::_vertex_extension_cpu, _vertex_count_cpu.

// Embedding e's extensions (into out with Write); how many.
template <typename IdT, bool Write>
__device__ __forceinline__ long long gp_sibling_merge(long long e, const long long* indptr, const IdT* indices,
                                                      const IdT* vertex, const long long* group_end, IdT* out) {
    long long a = e + 1, a_end = group_end[e];
    long long b = indptr[vertex[e]], b_end = indptr[vertex[e] + 1];
    long long c = 0;
    if (a < a_end) {  // start at u's first neighbor not below the first sibling
        long long lo = b, hi = b_end;
        while (lo < hi) {
            long long mid = lo + (hi - lo) / 2;
            if (indices[mid] < vertex[a]) lo = mid + 1; else hi = mid;
        }
        b = lo;
    }
    while (a < a_end && b < b_end) {
        IdT s = vertex[a], t = indices[b];
        if (s < t) {
            ++a;
        } else if (t < s) {
            ++b;
        } else {
            if (Write) out[c] = s;
            ++c;
            ++a;
            ++b;
        }
    }
    return c;
}

template <typename IdT>
__global__ void gp_vertex_extension(long long n, long long first, const long long* indptr, const IdT* indices,
                                    const IdT* vertex, const long long* group_end, const long long* offset,
                                    IdT* out, long long* count) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    count[i] = gp_sibling_merge<IdT, true>(first + i, indptr, indices, vertex, group_end, out + offset[i]);
}

template <typename IdT>
__global__ void gp_vertex_count(long long n, const long long* indptr, const IdT* indices, const IdT* vertex,
                                const long long* group_end, long long* count) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    count[i] = gp_sibling_merge<IdT, false>(i, indptr, indices, vertex, group_end, nullptr);
}

// A neighbor test by binary search in v's sorted adjacency list.
template <typename IdT>
__device__ bool gp_adjacent(const long long* indptr, const IdT* indices, IdT v, IdT w) {
    long long lo = indptr[v], hi = indptr[v + 1];
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        if (indices[mid] < w) lo = mid + 1; else hi = mid;
    }
    return lo < indptr[v + 1] && indices[lo] == w;
}

// Extension of a pattern match by its next pattern vertex, a warp per
// embedding (its row of `prefix`: the graph vertices matched so far, in the
// matching order), its lanes reading 32 neighbors at a time. The candidates
// are the neighbors of the matched vertex of least degree among the next
// vertex's pattern neighbors (`back`), kept when they neighbor the others too
// (by binary search in their sorted lists), are not matched already, have at
// least `min_degree` neighbors (filtering) and, for induced matches, neighbor
// none of the matched vertices the pattern keeps apart (`apart`).
// gp_match_extension writes them to the embedding's slot of out, ascending
// (placed by ballot), and says in count[i] how many; gp_match_count only counts
// them (a count's last column) or, when the last pattern vertex is a leaf
// (`leaf` >= 0), adds up each one's leaf matches (the column before a count's
// last). CPU twins: gpipe/mining/_extend.py::_match_extension_cpu, _match_count_cpu.

// The matches of a count's last pattern vertex when it is a leaf: the neighbors of the vertex at position `leaf`
// of the row extended by w (`width`: w itself) that are above the vertices at `leaf_above` (its symmetry
// conditions) and not matched already; no list is walked, two binary searches per matched vertex.
template <typename IdT>
__device__ long long gp_leaf_matches(const IdT* row, int width, IdT w, const long long* indptr, const IdT* indices,
                                     int leaf, int nleaf_above, const int* leaf_above) {
    const IdT t = leaf == width ? w : row[leaf];
    long long low = -1;
    for (int a = 0; a < nleaf_above; ++a) low = max(low, (long long)(leaf_above[a] == width ? w : row[leaf_above[a]]));
    long long lo = indptr[t], hi = indptr[t + 1];
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        if ((long long)indices[mid] <= low) lo = mid + 1; else hi = mid;
    }
    long long c = indptr[t + 1] - lo;
    for (int j = 0; j <= width; ++j) {
        const IdT m = j < width ? row[j] : w;
        if ((long long)m > low && gp_adjacent(indptr, indices, t, m)) --c;
    }
    return c;
}

// The extensions of the embedding `row` (into out with Write), by the warp: how many (each lane gets the total),
// or with `leaf` >= 0 the sum of their leaf matches. A count whose pattern has symmetries keeps one map of each
// copy: the new vertex above the vertices at `above`.
template <typename IdT, bool Write>
__device__ __forceinline__ long long gp_match_candidates(const IdT* row, int width, const long long* indptr,
                                                         const IdT* indices, int nback, const int* back, int napart,
                                                         const int* apart, int nabove, const int* above,
                                                         long long min_degree, int leaf, int nleaf_above,
                                                         const int* leaf_above, IdT* out) {
    const int lane = threadIdx.x % 32;
    int least = back[0];
    for (int b = 1; b < nback; ++b) {
        IdT v = row[back[b]], u = row[least];
        if (indptr[v + 1] - indptr[v] < indptr[u + 1] - indptr[u]) least = back[b];
    }
    long long c = 0;
    const long long end = indptr[row[least] + 1];
    for (long long first = indptr[row[least]]; first < end; first += 32) {  // the warp's lanes all run every round
        const long long e = first + lane;
        bool keep = e < end;
        const IdT w = keep ? indices[e] : (IdT)0;
        keep = keep && indptr[w + 1] - indptr[w] >= min_degree;
        for (int a = 0; keep && a < nabove; ++a) keep = w > row[above[a]];
        for (int j = 0; keep && j < width; ++j) keep = row[j] != w;
        for (int b = 0; keep && b < nback; ++b) {
            keep = back[b] == least || gp_adjacent(indptr, indices, row[back[b]], w);
        }
        for (int a = 0; keep && a < napart; ++a) keep = !gp_adjacent(indptr, indices, row[apart[a]], w);
        if (Write) {
            const unsigned int hits = __ballot_sync(0xffffffffu, keep);
            if (keep) out[c + __popc(hits & ((1u << lane) - 1u))] = w;
            c += __popc(hits);
        } else if (keep) {
            c += leaf < 0 ? 1 : gp_leaf_matches(row, width, w, indptr, indices, leaf, nleaf_above, leaf_above);
        }
    }
    if (!Write) {
        for (int step = 16; step > 0; step >>= 1) c += __shfl_down_sync(0xffffffffu, c, step);
    }
    return c;
}

template <typename IdT>
__global__ void gp_match_extension(long long n, int width, const long long* indptr, const IdT* indices,
                                   const IdT* prefix, int nback, const int* back, int napart, const int* apart,
                                   int nabove, const int* above, long long min_degree, const long long* offset,
                                   IdT* out, long long* count) {
    const long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    if (i >= n) return;  // the whole warp: i is the warp's
    const long long c = gp_match_candidates<IdT, true>(prefix + i * width, width, indptr, indices, nback, back, napart,
                                                       apart, nabove, above, min_degree, -1, 0, nullptr,
                                                       out + offset[i]);
    if (threadIdx.x % 32 == 0) count[i] = c;
}

template <typename IdT>
__global__ void gp_match_count(long long n, int width, const long long* indptr, const IdT* indices,
                               const IdT* prefix, int nback, const int* back, int napart, const int* apart,
                               int nabove, const int* above, long long min_degree, int leaf, int nleaf_above,
                               const int* leaf_above, long long* count) {
    const long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
    if (i >= n) return;  // the whole warp: i is the warp's
    const long long c = gp_match_candidates<IdT, false>(prefix + i * width, width, indptr, indices, nback, back,
                                                        napart, apart, nabove, above, min_degree, leaf, nleaf_above,
                                                        leaf_above, nullptr);
    if (threadIdx.x % 32 == 0) count[i] = c;
}
