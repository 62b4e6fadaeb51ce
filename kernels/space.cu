// A batch of updates applied to Bingo's per-vertex sampling spaces on the device (gpipe/dynamic/_space.py says the
// layout and the semantics): the play of the batch's deletes and updates on each edge's copies, then the count and
// the rebuild of each touched vertex's groups, listed members and alias table.
// MAX_GROUPS, DECIMAL_GROUP, GROUP_ONE, GROUP_DENSE, GROUP_LISTED, OP_INSERT, OP_DELETE, OP_UPDATE, OP_HELD: defined
// by the loader, from gpipe/dynamic/_kernels.py.
// CPU twins: gpipe/dynamic/_kernels.py::_play_cpu, _count_groups, _build (the same results, to the bit); the alias
// tables' gpipe/_alias.py::vose.

#include "alias.cuh"

#define GP_FULL 0xffffffffu
#define GP_COPY(k) ((k) == OP_INSERT || (k) == OP_HELD)

// The elements of a batch's play, touched vertex by touched vertex (vertex i's from start[i]): the old_degree[i]
// copies it holds (from slot old_start[i] of the pool, kind OP_HELD, position -1), then its updates in log order
// (order[first[i] ..], the batch's positions). A thread per element, which finds its vertex by binary search.
extern "C" __global__ void gp_space_elements(
    long long n, const long long* __restrict__ start, const long long* __restrict__ old_start,
    const long long* __restrict__ old_degree, const long long* __restrict__ first, const long long* __restrict__ order,
    const signed char* __restrict__ codes, const long long* __restrict__ batch_dst,
    const double* __restrict__ batch_weight, const long long* __restrict__ pool_dst,
    const double* __restrict__ pool_weight, long long total, long long* __restrict__ vertex,
    signed char* __restrict__ kind, long long* __restrict__ dst, double* __restrict__ weight,
    long long* __restrict__ position) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= total) return;
    long long lo = 0, hi = n;  // the last vertex whose elements start at or before j
    while (hi - lo > 1) {
        const long long mid = (lo + hi) / 2;
        if (start[mid] <= j) lo = mid; else hi = mid;
    }
    const long long k = j - start[lo], held = old_degree[lo];
    vertex[j] = lo;
    if (k < held) {
        kind[j] = OP_HELD;
        dst[j] = pool_dst[old_start[lo] + k];
        weight[j] = pool_weight[old_start[lo] + k];
        position[j] = -1;
    } else {
        const long long q = order[first[lo] + k - held];
        kind[j] = codes[q];
        dst[j] = batch_dst[q];
        weight[j] = batch_weight[q];
        position[j] = q;
    }
}

// The batch's elements in the order by (by vertex, destination, then time: the copies a vertex held, then the batch's
// updates of the edge in log order) played run by run, a run the elements of one edge: a copy (held or inserted)
// joins the back of the edge's queue, a delete takes its front, an update re-weights every copy in it (weight, by
// element). kept[e]: element e is a copy that survives; alive[j]: the j-th in the order does; failed: the least
// batch position of a delete or update that found no copy (left as it was if none). A thread per element, which
// plays the run it starts, if it starts one.
extern "C" __global__ void gp_space_play(long long total, const long long* __restrict__ by,
                                         const long long* __restrict__ vertex, const long long* __restrict__ dst,
                                         const signed char* __restrict__ kind, const long long* __restrict__ position,
                                         double* __restrict__ weight, unsigned char* __restrict__ kept,
                                         unsigned char* __restrict__ alive, long long* __restrict__ failed) {
    const long long a = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= total) return;
    const long long v = vertex[by[a]], u = dst[by[a]];
    if (a > 0 && vertex[by[a - 1]] == v && dst[by[a - 1]] == u) return;  // not the run's first
    long long head = a;  // the queue's front: every copy from here to the current element is alive
    for (long long j = a; j < total; ++j) {
        const long long e = by[j];
        if (j > a && (vertex[e] != v || dst[e] != u)) return;
        const int k = kind[e];
        alive[j] = kept[e] = GP_COPY(k);
        if (GP_COPY(k)) continue;
        while (head < j && !GP_COPY(kind[by[head]])) ++head;
        if (head == j) {
            atomicMin((unsigned long long*)failed, (unsigned long long)position[e]);
            return;
        }
        if (k == OP_DELETE) {
            alive[head] = kept[by[head]] = 0;
            ++head;
        } else {
            for (long long m = head; m < j; ++m)
                if (GP_COPY(kind[by[m]])) weight[by[m]] = weight[e];
        }
    }
}

__device__ __forceinline__ unsigned long long gp_warp_or(unsigned long long v) {
    for (int off = 16; off > 0; off >>= 1) v |= __shfl_xor_sync(GP_FULL, v, off);
    return v;
}

// Adds the size of each group of the edges a+lo .. a+hi-1 (at most SPACE_CHUNK of them) to this warp's
// sizes[MAX_GROUPS] (bit k at k, the decimal group last); returns, in lane 0, the sum of their decimal parts in the
// twin's order: lane l sums the edges lo+l, lo+l+32, .. in turn, then the lanes' sums are halved as lane i + lane
// i+16, i+8, i+4, i+2, i+1.
__device__ double gp_chunk_sizes(const long long* __restrict__ units, const double* __restrict__ frac, long long a,
                                 long long lo, long long hi, long long* sizes, int lane) {
    double partial = 0.0;
    for (long long base = lo; base < hi; base += 32) {
        const long long j = base + lane;
        const unsigned long long u = j < hi ? (unsigned long long)units[a + j] : 0ull;
        const double f = j < hi ? frac[a + j] : 0.0;
        if (f > 0.0) partial += f;
        for (unsigned long long any = gp_warp_or(u); any; any &= any - 1) {
            const int k = __ffsll((long long)any) - 1;
            const unsigned c = __popc(__ballot_sync(GP_FULL, (u >> k) & 1ull));
            if (lane == 0) sizes[k] += c;
        }
        const unsigned c = __popc(__ballot_sync(GP_FULL, f > 0.0));
        if (lane == 0) sizes[MAX_GROUPS - 1] += c;
    }
    for (int off = 16; off > 0; off >>= 1) partial += __shfl_down_sync(GP_FULL, partial, off);
    __syncwarp();
    return partial;
}

// The group sizes of touched vertex i into this warp's sizes[MAX_GROUPS], and (in lane 0) the sum of its decimal
// parts: chunk by chunk in order, each chunk's sum as gp_chunk_sizes adds it; a vertex of more than SPACE_CHUNK
// edges from its chunks' sums (gp_space_chunks), a smaller one from its edges.
__device__ double gp_vertex_sizes(const long long* __restrict__ units, const double* __restrict__ frac, long long a,
                                  long long d, long long first_chunk, long long chunks,
                                  const long long* __restrict__ chunk_sizes, const double* __restrict__ chunk_decimal,
                                  long long* sizes, int lane) {
    for (int k = lane; k < MAX_GROUPS; k += 32) {
        long long total = 0;
        for (long long c = first_chunk; c < first_chunk + chunks; ++c) total += chunk_sizes[c * MAX_GROUPS + k];
        sizes[k] = total;
    }
    __syncwarp();
    double decimal = 0.0;
    if (chunks == 0) {
        decimal += gp_chunk_sizes(units, frac, a, 0, d, sizes, lane);
    } else if (lane == 0) {
        for (long long c = first_chunk; c < first_chunk + chunks; ++c) decimal += chunk_decimal[c];
    }
    __syncwarp();
    return decimal;
}

// Each chunk c of a vertex of more than SPACE_CHUNK edges (edges chunk_index[c] * SPACE_CHUNK .. of touched vertex
// chunk_vertex[c]): its group sizes into chunk_sizes[c * MAX_GROUPS ..] and its decimal sum. A warp per chunk.
extern "C" __global__ void gp_space_chunks(const long long* __restrict__ indptr, const long long* __restrict__ units,
                                           const double* __restrict__ frac, long long n,
                                           const long long* __restrict__ chunk_vertex,
                                           const long long* __restrict__ chunk_index,
                                           long long* __restrict__ chunk_sizes, double* __restrict__ chunk_decimal) {
    __shared__ long long shared_sizes[1024 / 32][MAX_GROUPS];
    const long long c = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (c >= n) return;  // the whole warp
    long long* sizes = shared_sizes[threadIdx.x / 32];
    for (int k = lane; k < MAX_GROUPS; k += 32) sizes[k] = 0;
    __syncwarp();
    const long long a = indptr[chunk_vertex[c]], d = indptr[chunk_vertex[c] + 1] - a;
    const long long lo = chunk_index[c] * SPACE_CHUNK, hi = lo + SPACE_CHUNK < d ? lo + SPACE_CHUNK : d;
    const double decimal = gp_chunk_sizes(units, frac, a, lo, hi, sizes, lane);
    for (int k = lane; k < MAX_GROUPS; k += 32) chunk_sizes[c * MAX_GROUPS + k] = sizes[k];
    if (lane == 0) chunk_decimal[c] = decimal;
}

__device__ __forceinline__ int gp_group_kind(long long size, long long d, double dense_fraction) {
    if (size == 1) return GROUP_ONE;
    return size >= dense_fraction * d ? GROUP_DENSE : GROUP_LISTED;
}

// How many groups each touched vertex i (edges indptr[i] .. indptr[i+1]-1; chunk_count[i] chunks from
// chunk_start[i] if it has more than SPACE_CHUNK) has, and how many members its LISTED groups list. A warp per vertex.
extern "C" __global__ void gp_space_count(const long long* __restrict__ indptr, const long long* __restrict__ units,
                                          const double* __restrict__ frac, double dense_fraction, long long n,
                                          const long long* __restrict__ chunk_start,
                                          const long long* __restrict__ chunk_count,
                                          const long long* __restrict__ chunk_sizes,
                                          const double* __restrict__ chunk_decimal, long long* __restrict__ groups,
                                          long long* __restrict__ listed) {
    __shared__ long long shared_sizes[1024 / 32][MAX_GROUPS];
    const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (i >= n) return;  // the whole warp
    long long* sizes = shared_sizes[threadIdx.x / 32];
    const long long a = indptr[i], d = indptr[i + 1] - a;
    gp_vertex_sizes(units, frac, a, d, chunk_start[i], chunk_count[i], chunk_sizes, chunk_decimal, sizes, lane);
    long long count = 0, members = 0;  // lane l looks at the groups of bits l and l + 32
    for (int k = lane; k < MAX_GROUPS; k += 32) {
        if (sizes[k] == 0) continue;
        ++count;
        if (gp_group_kind(sizes[k], d, dense_fraction) == GROUP_LISTED) members += sizes[k];
    }
    for (int off = 16; off > 0; off >>= 1) {
        count += __shfl_down_sync(GP_FULL, count, off);
        members += __shfl_down_sync(GP_FULL, members, off);
    }
    if (lane != 0) return;
    groups[i] = count;
    listed[i] = members;
}

// Places the members of edges a+lo .. a+hi-1 (local offsets, in edge order) in the LISTED groups of a vertex's
// count groups (rows row.. of the group tables), group g's after the offset[g] placed before them (filled[g], this
// warp's, counts from 0), and writes a ONE group's edge into its group_start.
__device__ void gp_place_members(const long long* __restrict__ units, const double* __restrict__ frac, long long a,
                                 long long lo, long long hi, int count, long long row, long long m,
                                 const signed char* __restrict__ group_kind, const int* __restrict__ group_bit,
                                 long long* __restrict__ group_start, const long long* __restrict__ offset,
                                 long long* __restrict__ members, long long* filled, int lane) {
    for (int g = lane; g < count; g += 32) filled[g] = 0;
    __syncwarp();
    for (long long base = lo; base < hi; base += 32) {
        const long long j = base + lane;
        const unsigned long long u = j < hi ? (unsigned long long)units[a + j] : 0ull;
        const double f = j < hi ? frac[a + j] : 0.0;
        for (int g = 0; g < count; ++g) {
            const int kind = group_kind[row + g], bit = group_bit[row + g];
            if (kind == GROUP_DENSE) continue;
            const bool in = bit == DECIMAL_GROUP ? f > 0.0 : ((u >> bit) & 1ull) != 0;
            const unsigned ballot = __ballot_sync(GP_FULL, in);
            if (!ballot) continue;
            if (kind == GROUP_ONE) {
                if (in) group_start[row + g] = j;
                continue;
            }
            if (in) {
                members[m + group_start[row + g] + (offset ? offset[g] : 0) + filled[g] +
                        __popc(ballot & ((1u << lane) - 1u))] = j;
            }
            __syncwarp();
            if (lane == 0) filled[g] += __popc(ballot);
            __syncwarp();
        }
    }
}

// The groups (by bit, the decimal group last) and alias table of each touched vertex i, into its block of the group
// pool from group_row[i], and its listed members (in edge order) into its block of the member pool from
// member_start[i]; for a vertex of more than SPACE_CHUNK edges, where each of its chunks' members go
// (chunk_offset[c * MAX_GROUPS + g]: group g's placed before chunk c), which gp_space_place places. A warp per vertex.
extern "C" __global__ void gp_space_build(
    const long long* __restrict__ indptr, const long long* __restrict__ units, const double* __restrict__ frac,
    double dense_fraction, long long n, const long long* __restrict__ chunk_start,
    const long long* __restrict__ chunk_count, const long long* __restrict__ chunk_sizes,
    const double* __restrict__ chunk_decimal, long long* __restrict__ chunk_offset,
    const long long* __restrict__ member_start, long long* __restrict__ members,
    const long long* __restrict__ group_row, signed char* __restrict__ group_kind, int* __restrict__ group_bit,
    long long* __restrict__ group_start, long long* __restrict__ group_size, double* __restrict__ alias_prob,
    int* __restrict__ alias_other) {
    __shared__ long long shared_sizes[1024 / 32][MAX_GROUPS];  // then each group's members placed so far
    __shared__ double shared_weights[1024 / 32][MAX_GROUPS];
    const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (i >= n) return;  // the whole warp
    long long* sizes = shared_sizes[threadIdx.x / 32];
    double* weights = shared_weights[threadIdx.x / 32];
    const long long a = indptr[i], d = indptr[i + 1] - a, row = group_row[i], m = member_start[i];
    const long long first_chunk = chunk_start[i], chunks = chunk_count[i];
    const double decimal = __shfl_sync(GP_FULL, gp_vertex_sizes(units, frac, a, d, first_chunk, chunks, chunk_sizes,
                                                                chunk_decimal, sizes, lane), 0);
    // groups in the order of their bits (the decimal group last), found by the lanes at once: lane l looks at the
    // groups of bits l (the first 32) and l + 32
    const unsigned below = (1u << lane) - 1u;
    int count = 0;
    long long start = 0;  // the members listed before, the warp's first half, then its second
    for (int half = 0; half < 2; ++half) {
        const int k = lane + 32 * half;
        const long long size = sizes[k];
        const int kind = size > 0 ? gp_group_kind(size, d, dense_fraction) : GROUP_DENSE;
        const unsigned present = __ballot_sync(GP_FULL, size > 0);
        long long listed = size > 0 && kind == GROUP_LISTED ? size : 0, before = listed;
        for (int off = 1; off < 32; off <<= 1) {  // inclusive scan of the listed sizes
            const long long up = __shfl_up_sync(GP_FULL, before, off);
            if (lane >= off) before += up;
        }
        if (size > 0) {
            const long long g = row + count + __popc(present & below);
            const int bit = k == MAX_GROUPS - 1 ? DECIMAL_GROUP : k;
            group_kind[g] = (signed char)kind;
            group_bit[g] = bit;
            group_start[g] = kind == GROUP_LISTED ? start + before - listed : 0;
            group_size[g] = size;
            weights[count + __popc(present & below)] = bit == DECIMAL_GROUP ? decimal : (double)size * ldexp(1.0, k);
        }
        count += __popc(present);
        start += __shfl_sync(GP_FULL, before, 31);
    }
    __syncwarp();
    if (lane == 0 && count > 0) {
        int small[MAX_GROUPS], large[MAX_GROUPS];
        gp_vose(weights, count, alias_prob + row, alias_other + row, small, large);
    }
    __syncwarp();
    if (chunks == 0) {
        gp_place_members(units, frac, a, 0, d, count, row, m, group_kind, group_bit, group_start, nullptr, members,
                         sizes, lane);
        return;
    }
    for (int g = lane; g < count; g += 32) {  // each group's members before each chunk
        const int bit = group_bit[row + g], k = bit == DECIMAL_GROUP ? MAX_GROUPS - 1 : bit;
        long long before = 0;
        for (long long c = first_chunk; c < first_chunk + chunks; ++c) {
            chunk_offset[c * MAX_GROUPS + g] = before;
            before += chunk_sizes[c * MAX_GROUPS + k];
        }
    }
}

// The members of each chunk c of a vertex of more than SPACE_CHUNK edges, placed after chunk_offset[c * MAX_GROUPS +
// g] of group g's (gp_space_build), and its ONE groups' edges. A warp per chunk.
extern "C" __global__ void gp_space_place(
    const long long* __restrict__ indptr, const long long* __restrict__ units, const double* __restrict__ frac,
    long long n, const long long* __restrict__ chunk_vertex, const long long* __restrict__ chunk_index,
    const long long* __restrict__ chunk_offset, const long long* __restrict__ member_start,
    long long* __restrict__ members, const long long* __restrict__ group_row,
    const long long* __restrict__ group_count, const signed char* __restrict__ group_kind,
    const int* __restrict__ group_bit, long long* __restrict__ group_start) {
    __shared__ long long shared_filled[1024 / 32][MAX_GROUPS];
    const long long c = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (c >= n) return;  // the whole warp
    const long long v = chunk_vertex[c], a = indptr[v], d = indptr[v + 1] - a;
    const long long lo = chunk_index[c] * SPACE_CHUNK, hi = lo + SPACE_CHUNK < d ? lo + SPACE_CHUNK : d;
    gp_place_members(units, frac, a, lo, hi, (int)group_count[v], group_row[v], member_start[v], group_kind,
                     group_bit, group_start, chunk_offset + c * MAX_GROUPS, members, shared_filled[threadIdx.x / 32],
                     lane);
}
