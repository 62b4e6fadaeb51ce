// Frequent pattern mining on edge-oriented embedding tables: edge extension and the raw pattern code of each
// embedding, one thread per embedding. An edge is named by its CSR slot in its lower endpoint's list; an
// embedding is a row of edge ids in canonical order (the least edge first, then each time the least edge
// adjacent to those before it), so every connected edge set is found once.
// GP_FPM_MAX_EDGES (edges per embedding) and GP_FPM_LABEL_BITS (bits per label rank in a code): defined by the
// loader, from gpipe/mining/_patterns.py, which also says how a code is packed.

#define GP_FPM_MAX_VERTICES (GP_FPM_MAX_EDGES + 1)
#define GP_FPM_ADJACENCY_SHIFT (GP_FPM_LABEL_BITS * GP_FPM_MAX_VERTICES)
#define GP_FPM_COUNT_SHIFT (GP_FPM_ADJACENCY_SHIFT + GP_FPM_MAX_VERTICES * (GP_FPM_MAX_VERTICES - 1) / 2)

// The adjacency bit of positions a < b, and the shift of position a's label (gpipe/mining/_patterns.py).
__device__ __forceinline__ int gp_fpm_pair(int a, int b) {
    return a * (2 * GP_FPM_MAX_VERTICES - a - 1) / 2 + b - a - 1;
}
__device__ __forceinline__ int gp_fpm_label_shift(int a) { return GP_FPM_LABEL_BITS * (GP_FPM_MAX_VERTICES - 1 - a); }

// The vertex whose CSR list holds slot e.
__device__ long long gp_fpm_source(const long long* indptr, long long num_vertices, long long e) {
    long long lo = 0, hi = num_vertices - 1;
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        if (indptr[mid + 1] <= e) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// The slot of w in v's sorted list (it is there).
template <typename IdT>
__device__ long long gp_fpm_slot(const long long* indptr, const IdT* indices, long long v, long long w) {
    long long lo = indptr[v], hi = indptr[v + 1];
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        if (indices[mid] < w) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// Edge extension (GAMMA's Ext_e): each edge adjacent to the embedding's vertices that is not in it and keeps the
// row canonical: above the row's first edge, and above every edge of the row after the first one it touches (from
// then on it was a candidate that the canonical order passed over). An edge between two of the embedding's
// vertices is met from the one that appeared first. Results go to the embedding's slot of out (offset[i]);
// count[i] says how many. CPU twin: gpipe/mining/_edges.py::_edge_extension_cpu.
template <typename IdT>
__global__ void gp_edge_extension(long long n, int width, long long num_vertices, const long long* indptr,
                                  const IdT* indices, const long long* prefix, const long long* offset,
                                  long long* out, long long* count) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long* row = prefix + i * width;
    long long ends[2 * GP_FPM_MAX_EDGES], verts[GP_FPM_MAX_VERTICES];
    int nv = 0;
    for (int j = 0; j < width; ++j) {
        ends[2 * j] = gp_fpm_source(indptr, num_vertices, row[j]);
        ends[2 * j + 1] = indices[row[j]];
        for (int t = 0; t < 2; ++t) {
            bool seen = false;
            for (int a = 0; a < nv; ++a) seen = seen || verts[a] == ends[2 * j + t];
            if (!seen) verts[nv++] = ends[2 * j + t];
        }
    }
    long long o = offset[i], c = 0;
    for (int p = 0; p < nv; ++p) {
        long long v = verts[p];
        for (long long s = indptr[v]; s < indptr[v + 1]; ++s) {
            long long w = indices[s];
            int q = nv;
            for (int a = 0; a < nv; ++a) if (verts[a] == w) q = a;
            if (w == v || q < p) continue;
            long long e = v < w ? s : gp_fpm_slot(indptr, indices, w, v);
            bool keep = e > row[0];
            int available = width;
            for (int j = 0; j < width; ++j) {
                keep = keep && row[j] != e;
                bool touches = ends[2 * j] == v || ends[2 * j + 1] == v || ends[2 * j] == w || ends[2 * j + 1] == w;
                if (available == width && touches) available = j;
            }
            for (int j = available + 1; j < width; ++j) keep = keep && row[j] < e;
            if (keep) out[o + c++] = e;
        }
    }
    count[i] = c;
}

// The raw pattern code of each embedding (its row of `edges`): its vertices numbered in order of appearance, the
// adjacency bit of each edge between them and each one's label rank, packed as gpipe/mining/_patterns.py says;
// `vertices` gets them in that order, -1 past the last. CPU twin: gpipe/mining/_edges.py::_pattern_code_cpu.
template <typename IdT>
__global__ void gp_pattern_code(long long n, int width, long long num_vertices, const long long* indptr,
                                const IdT* indices, const int* label, const long long* edges, long long* code,
                                IdT* vertices) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    IdT* verts = vertices + i * (width + 1);
    int nv = 0;
    long long adjacency = 0;
    for (int j = 0; j < width; ++j) {
        long long e = edges[i * width + j];
        long long ends[2] = {gp_fpm_source(indptr, num_vertices, e), (long long)indices[e]};
        int ab[2];
        for (int t = 0; t < 2; ++t) {
            ab[t] = nv;
            for (int a = 0; a < nv; ++a) if (verts[a] == ends[t]) ab[t] = a;
            if (ab[t] == nv) verts[nv++] = (IdT)ends[t];
        }
        int lo = min(ab[0], ab[1]), hi = max(ab[0], ab[1]);
        adjacency |= 1LL << gp_fpm_pair(lo, hi);
    }
    long long packed = ((long long)nv << GP_FPM_COUNT_SHIFT) | (adjacency << GP_FPM_ADJACENCY_SHIFT);
    for (int a = 0; a < nv; ++a) {
        packed |= (long long)label[verts[a]] << gp_fpm_label_shift(a);
    }
    for (int a = nv; a <= width; ++a) verts[a] = -1;
    code[i] = packed;
}

// The canonical form of each raw pattern code (gpipe/mining/_patterns.py): the least packing of the pattern over
// every order of its vertices (order k of nv! decoded from the factorial number system), and, for each raw
// position, its orbit: the least canonical position it takes in an order reaching that least packing (those
// orders are one optimal order composed with each automorphism). orbit has GP_FPM_MAX_VERTICES columns, -1 past
// the pattern's vertices. CPU twin: gpipe/mining/_patterns.py::_canonical_cpu.
extern "C" __global__ void gp_canonical(long long n, const long long* raw, long long* code, long long* orbit) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long r = raw[i];
    const int nv = (int)(r >> GP_FPM_COUNT_SHIFT);
    int label[GP_FPM_MAX_VERTICES], ea[GP_FPM_MAX_VERTICES * (GP_FPM_MAX_VERTICES - 1) / 2],
        eb[GP_FPM_MAX_VERTICES * (GP_FPM_MAX_VERTICES - 1) / 2], least[GP_FPM_MAX_VERTICES];
    int ne = 0, total = 1;
    for (int a = 0; a < nv; ++a) {
        label[a] = (int)((r >> gp_fpm_label_shift(a)) & ((1 << GP_FPM_LABEL_BITS) - 1));
        total *= a + 1;
        for (int b = a + 1; b < nv; ++b) {
            if ((r >> (GP_FPM_ADJACENCY_SHIFT + gp_fpm_pair(a, b))) & 1) {
                ea[ne] = a;
                eb[ne++] = b;
            }
        }
    }
    long long best = 0x7fffffffffffffffLL;
    for (int k = 0; k < total; ++k) {
        int order[GP_FPM_MAX_VERTICES], left[GP_FPM_MAX_VERTICES];  // order[a]: the new position of position a
        for (int a = 0; a < nv; ++a) left[a] = a;
        int f = k, radix = total;
        for (int a = 0; a < nv; ++a) {
            radix /= nv - a;
            int d = f / radix;
            f %= radix;
            order[a] = left[d];
            for (int t = d; t < nv - a - 1; ++t) left[t] = left[t + 1];
        }
        long long c = (long long)nv << GP_FPM_COUNT_SHIFT;
        for (int e = 0; e < ne; ++e) {
            int lo = min(order[ea[e]], order[eb[e]]), hi = max(order[ea[e]], order[eb[e]]);
            c |= 1LL << (GP_FPM_ADJACENCY_SHIFT + gp_fpm_pair(lo, hi));
        }
        for (int a = 0; a < nv; ++a) {
            c |= (long long)label[a] << gp_fpm_label_shift(order[a]);
        }
        if (c < best) {
            best = c;
            for (int a = 0; a < nv; ++a) least[a] = order[a];
        } else if (c == best) {
            for (int a = 0; a < nv; ++a) least[a] = min(least[a], order[a]);
        }
    }
    code[i] = best;
    for (int a = 0; a < GP_FPM_MAX_VERTICES; ++a) orbit[i * GP_FPM_MAX_VERTICES + a] = a < nv ? least[a] : -1;
}
