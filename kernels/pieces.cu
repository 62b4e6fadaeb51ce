// Path pieces: the vertices a walker wrote while it stayed in one partition.
// A piece is (walk_id, start step, length, offset into a flat vertex buffer).
// CPU twins: gpipe/runtime/_pieces.py.

// Copy pieces into a dense flat buffer (compaction): dst[new_offset[i] + j] = src[offset[i] + j].
template <typename IdT>
__global__ void gp_copy_pieces(long long n, const long long* offset, const int* length, const long long* new_offset,
                               const IdT* src, IdT* dst) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const IdT* from = src + offset[i];
    IdT* to = dst + new_offset[i];
    for (int j = 0; j < length[i]; ++j) to[j] = from[j];
}

// Scatter pieces into a block of walks: out[(walk_id - base) * width + start + j] = flat[offset + j].
template <typename IdT>
__global__ void gp_scatter_pieces(long long n, const long long* walk_id, const int* start, const int* length,
                                  const long long* offset, const IdT* flat, long long base, int width, IdT* out) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    IdT* row = out + (walk_id[i] - base) * (long long)width + start[i];
    const IdT* from = flat + offset[i];
    for (int j = 0; j < length[i]; ++j) row[j] = from[j];
}
