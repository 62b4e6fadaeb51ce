// Frequent pattern mining by existence checks (GraMi's MNI): whether some embedding of a small labeled pattern maps
// a given pattern vertex to a given data vertex, one search per (task, data vertex), and the canonical form of a
// pattern. GP_FPM_MAX_EDGES (edges per pattern) and GP_FPM_LABEL_BITS (bits per label rank in a code): defined by
// the loader, from gpipe/mining/_patterns.py, which also says how a code is packed.

#define GP_FPM_MAX_VERTICES (GP_FPM_MAX_EDGES + 1)
#define GP_FPM_ADJACENCY_SHIFT (GP_FPM_LABEL_BITS * GP_FPM_MAX_VERTICES)
#define GP_FPM_COUNT_SHIFT (GP_FPM_ADJACENCY_SHIFT + GP_FPM_MAX_VERTICES * (GP_FPM_MAX_VERTICES - 1) / 2)
// A task's int32 fields: its vertex count, then per place of its matching order the label rank, the pattern degree
// and the mask of earlier places adjacent to it (gpipe/mining/_mni.py::FIELDS).
#define GP_MNI_FIELDS (1 + 3 * GP_FPM_MAX_VERTICES)

// The adjacency bit of positions a < b, and the shift of position a's label (gpipe/mining/_patterns.py).
__device__ __forceinline__ int gp_fpm_pair(int a, int b) {
    return a * (2 * GP_FPM_MAX_VERTICES - a - 1) / 2 + b - a - 1;
}
__device__ __forceinline__ int gp_fpm_label_shift(int a) { return GP_FPM_LABEL_BITS * (GP_FPM_MAX_VERTICES - 1 - a); }

// Place k entered: its candidates are the row of its earlier adjacent vertex of least degree.
__device__ __forceinline__ void gp_mni_enter(int k, const int* back, const long long* m, const long long* indptr,
                                             int* scan, long long* pos, long long* end) {
    int s = -1;
    for (int j = 0; j < k; ++j) {
        if ((back[k] >> j & 1) &&
            (s < 0 || indptr[m[j] + 1] - indptr[m[j]] < indptr[m[s] + 1] - indptr[m[s]])) s = j;
    }
    scan[k] = s;
    pos[k] = indptr[m[s]];
    end[k] = indptr[m[s] + 1];
}

// Whether the pattern of task fields f (its vertex count, then per place k of the matching order its label rank,
// pattern degree and a mask of the earlier places it is adjacent to) has an embedding mapping place 0 to data vertex
// v: a depth-first search over the simple graph's sorted rows, place k taking the neighbors of its earlier adjacent
// vertex of least degree that carry its label, have its degree, are not matched already and neighbor every other
// earlier adjacent vertex (a binary search in the shorter row). It stops at the first embedding.
// CPU twin: gpipe/mining/_mni.py::_embeds.
template <typename IdT>
__device__ bool gp_mni_embeds(const int* f, long long v, const long long* indptr, const IdT* indices,
                              const int* label) {
    const int nv = f[0];
    const int* lab = f + 1;
    const int* deg = f + 1 + GP_FPM_MAX_VERTICES;
    const int* back = f + 1 + 2 * GP_FPM_MAX_VERTICES;
    if (label[v] != lab[0] || indptr[v + 1] - indptr[v] < deg[0]) return false;
    if (nv == 1) return true;
    long long m[GP_FPM_MAX_VERTICES], pos[GP_FPM_MAX_VERTICES], end[GP_FPM_MAX_VERTICES];
    int scan[GP_FPM_MAX_VERTICES];
    m[0] = v;
    gp_mni_enter(1, back, m, indptr, scan, pos, end);
    int k = 1;
    while (k > 0) {
        bool found = false;
        while (!found && pos[k] < end[k]) {
            const long long c = (long long)indices[pos[k]++];
            if (label[c] != lab[k] || indptr[c + 1] - indptr[c] < deg[k]) continue;
            found = true;
            for (int j = 0; j < k && found; ++j) {
                found = m[j] != c;
                if (found && j != scan[k] && (back[k] >> j & 1)) {
                    long long a = m[j], b = c;  // search the shorter row
                    if (indptr[a + 1] - indptr[a] > indptr[b + 1] - indptr[b]) { a = c; b = m[j]; }
                    long long lo = indptr[a], hi = indptr[a + 1];
                    while (lo < hi) {
                        const long long mid = lo + (hi - lo) / 2;
                        if ((long long)indices[mid] < b) lo = mid + 1; else hi = mid;
                    }
                    found = lo < indptr[a + 1] && (long long)indices[lo] == b;
                }
            }
            if (found) m[k] = c;
        }
        if (!found) {
            --k;
        } else if (++k == nv) {
            return true;
        } else {
            gp_mni_enter(k, back, m, indptr, scan, pos, end);
        }
    }
    return false;
}

// For items first .. first + n - 1 of a round: the item's task (the last t with start[t] <= item, of `tasks`) and
// data vertex (domain[offset[t] + item - start[t]]), and whether the task's pattern embeds with its place 0 there.
// Resident threads take the items from `next`: a hub's search can take far longer than its neighbors'.
// CPU twin: gpipe/mining/_mni.py::_exists_cpu.
template <typename IdT>
__global__ void gp_mni_exists(long long n, long long first, int tasks, const long long* start, const int* task,
                              const long long* offset, const IdT* domain, const long long* indptr,
                              const IdT* indices, const int* label, unsigned char* valid,
                              unsigned long long* next) {
    for (long long i = (long long)atomicAdd(next, 1ull); i < n; i = (long long)atomicAdd(next, 1ull)) {
        const long long item = first + i;
        int lo = 0, hi = tasks - 1;
        while (lo < hi) {
            const int mid = lo + (hi - lo + 1) / 2;
            if (start[mid] <= item) lo = mid; else hi = mid - 1;
        }
        const long long v = (long long)domain[offset[lo] + item - start[lo]];
        valid[i] = gp_mni_embeds(task + (long long)lo * GP_MNI_FIELDS, v, indptr, indices, label) ? 1 : 0;
    }
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
