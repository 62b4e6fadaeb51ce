// Vertex extension of an embedding table (GAMMA's extension primitive), one
// thread per embedding of a batch. Embeddings sharing a prefix are siblings,
// stored next to each other in increasing vertex order: the prefix's
// intersection of adjacency lists was computed once, when they were written.
// So embedding e (vertex u) extends by the siblings after it (larger ids: the
// symmetry breaking of cliques) that are also neighbors of u: one merge of two
// sorted lists, starting in u's list at the first sibling by binary search.
// Results go to e's slot of out (offset[i], room for the bound the caller
// computed); count[i] says how many were written, for the compression.
// CPU twin: gpipe/mining/_extend.py::_vertex_extension_cpu.

template <typename IdT>
__global__ void gp_vertex_extension(long long n, long long first, const long long* indptr, const IdT* indices,
                                    const IdT* vertex, const long long* group_end, const long long* offset,
                                    IdT* out, long long* count) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long e = first + i;
    long long a = e + 1, a_end = group_end[e];
    long long b = indptr[vertex[e]], b_end = indptr[vertex[e] + 1];
    long long o = offset[i], c = 0;
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
            out[o + c] = s;
            ++c;
            ++a;
            ++b;
        }
    }
    count[i] = c;
}
