// A batch of updates applied to Bingo's per-vertex sampling spaces on the device (gpipe/dynamic/_space.py says the
// layout and the semantics): the play of the batch's deletes and updates on each edge's copies, then the count and
// the rebuild of each touched vertex's groups, listed members and alias table.
// MAX_GROUPS, DECIMAL_GROUP, GROUP_ONE, GROUP_DENSE, GROUP_LISTED, OP_INSERT, OP_DELETE, OP_UPDATE, OP_HELD: defined
// by the loader, from _space.py.
// CPU twins: gpipe/dynamic/_space.py::_play_cpu, _count_groups, _build (the same results, to the bit).

#define GP_FULL 0xffffffffu
#define GP_COPY(k) ((k) == OP_INSERT || (k) == OP_HELD)

// Each run of one edge's elements, in time order (the copies a vertex held, then the batch's updates of the edge in
// log order): a copy (held or inserted) joins the back of the edge's queue, a delete takes its front, an update
// re-weights every copy in it. alive[j]: copy j survives; failed[s]: the batch position of run s's first delete or
// update that found no copy (-1: none). One thread per run.
extern "C" __global__ void gp_space_play(long long n, const long long* __restrict__ seg_start,
                                         const signed char* __restrict__ kind, const long long* __restrict__ position,
                                         double* __restrict__ weight, unsigned char* __restrict__ alive,
                                         long long* __restrict__ failed) {
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    const long long a = seg_start[s], b = seg_start[s + 1];
    long long head = a;  // the queue's front: every copy from here to the current element is alive
    failed[s] = -1;
    for (long long j = a; j < b; ++j) {
        const int k = kind[j];
        alive[j] = GP_COPY(k);
        if (GP_COPY(k)) continue;
        while (head < j && !GP_COPY(kind[head])) ++head;
        if (head == j) {
            failed[s] = position[j];
            return;
        }
        if (k == OP_DELETE) {
            alive[head++] = 0;
        } else {
            for (long long m = head; m < j; ++m)
                if (GP_COPY(kind[m])) weight[m] = weight[j];
        }
    }
}

__device__ __forceinline__ unsigned long long gp_warp_or(unsigned long long v) {
    for (int off = 16; off > 0; off >>= 1) v |= __shfl_xor_sync(GP_FULL, v, off);
    return v;
}

// The size of each group of the edges a..a+d-1 into this warp's sizes[MAX_GROUPS] (bit k at k, the decimal group
// last); returns, in lane 0, the sum of their decimal parts in the twin's order: lane l sums the edges l, l+32, ..
// in turn, then the lanes' sums are halved as lane i + lane i+16, i+8, i+4, i+2, i+1.
__device__ double gp_group_sizes(const long long* __restrict__ units, const double* __restrict__ frac, long long a,
                                 long long d, long long* sizes, int lane) {
    for (int k = lane; k < MAX_GROUPS; k += 32) sizes[k] = 0;
    __syncwarp();
    double partial = 0.0;
    for (long long base = 0; base < d; base += 32) {
        const long long j = base + lane;
        const unsigned long long u = j < d ? (unsigned long long)units[a + j] : 0ull;
        const double f = j < d ? frac[a + j] : 0.0;
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

__device__ __forceinline__ int gp_group_kind(long long size, long long d, double dense_fraction) {
    if (size == 1) return GROUP_ONE;
    return size >= dense_fraction * d ? GROUP_DENSE : GROUP_LISTED;
}

// Vose's alias table of weights[0..count-1] into prob[base..] and other[base..] (local indices), as the twin
// (_space.py::_alias) builds it, operation for operation.
__device__ void gp_alias(const double* weights, int count, double* __restrict__ prob, int* __restrict__ other,
                         long long base) {
    double total = 0.0, scaled[MAX_GROUPS];
    int small[MAX_GROUPS], large[MAX_GROUPS], ns = 0, nl = 0;
    for (int g = 0; g < count; ++g) total += weights[g];
    for (int g = 0; g < count; ++g) {
        scaled[g] = weights[g] * count / total;
        if (scaled[g] < 1.0) small[ns++] = g;
        else large[nl++] = g;
    }
    while (ns > 0 && nl > 0) {
        const int s = small[--ns], g = large[nl - 1];
        prob[base + s] = scaled[s];
        other[base + s] = g;
        scaled[g] = (scaled[g] + scaled[s]) - 1.0;
        if (scaled[g] < 1.0) {
            --nl;
            small[ns++] = g;
        }
    }
    for (int j = 0; j < nl; ++j) {
        prob[base + large[j]] = 1.0;
        other[base + large[j]] = large[j];
    }
    for (int j = 0; j < ns; ++j) {
        prob[base + small[j]] = 1.0;
        other[base + small[j]] = small[j];
    }
}

// How many groups each vertex i (edges indptr[i] .. indptr[i+1]-1) has, and how many members its LISTED groups
// list. A warp per vertex.
extern "C" __global__ void gp_space_count(const long long* __restrict__ indptr, const long long* __restrict__ units,
                                          const double* __restrict__ frac, double dense_fraction, long long n,
                                          long long* __restrict__ groups, long long* __restrict__ listed) {
    __shared__ long long shared_sizes[1024 / 32][MAX_GROUPS];
    const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (i >= n) return;  // the whole warp
    long long* sizes = shared_sizes[threadIdx.x / 32];
    const long long a = indptr[i], d = indptr[i + 1] - a;
    gp_group_sizes(units, frac, a, d, sizes, lane);
    if (lane != 0) return;
    long long count = 0, members = 0;
    for (int k = 0; k < MAX_GROUPS; ++k) {
        if (sizes[k] == 0) continue;
        ++count;
        if (gp_group_kind(sizes[k], d, dense_fraction) == GROUP_LISTED) members += sizes[k];
    }
    groups[i] = count;
    listed[i] = members;
}

// The groups (by bit, the decimal group last), listed members (in edge order) and alias table of each vertex i, into
// its blocks: the member pool from member_start[i], the group pool from group_row[i]. A warp per vertex.
extern "C" __global__ void gp_space_build(
    const long long* __restrict__ indptr, const long long* __restrict__ units, const double* __restrict__ frac,
    double dense_fraction, long long n, const long long* __restrict__ member_start, long long* __restrict__ members,
    const long long* __restrict__ group_row, signed char* __restrict__ group_kind, int* __restrict__ group_bit,
    long long* __restrict__ group_start, long long* __restrict__ group_size, double* __restrict__ alias_prob,
    int* __restrict__ alias_other) {
    __shared__ long long shared_sizes[1024 / 32][MAX_GROUPS];  // then each group's members placed so far
    const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (i >= n) return;  // the whole warp
    long long* sizes = shared_sizes[threadIdx.x / 32];
    const long long a = indptr[i], d = indptr[i + 1] - a, row = group_row[i], m = member_start[i];
    const double decimal = gp_group_sizes(units, frac, a, d, sizes, lane);
    int count = 0;
    if (lane == 0) {
        double weights[MAX_GROUPS];
        long long start = 0;
        for (int k = 0; k < MAX_GROUPS; ++k) {
            if (sizes[k] == 0) continue;
            const int bit = k == MAX_GROUPS - 1 ? DECIMAL_GROUP : k;
            const int kind = gp_group_kind(sizes[k], d, dense_fraction);
            group_kind[row + count] = (signed char)kind;
            group_bit[row + count] = bit;
            group_start[row + count] = kind == GROUP_LISTED ? start : 0;
            group_size[row + count] = sizes[k];
            weights[count] = bit == DECIMAL_GROUP ? decimal : (double)sizes[k] * ldexp(1.0, k);
            start += kind == GROUP_LISTED ? sizes[k] : 0;
            ++count;
        }
        for (int g = 0; g < count; ++g) sizes[g] = 0;  // now: members placed, by group
        if (count > 0) gp_alias(weights, count, alias_prob, alias_other, row);
    }
    count = __shfl_sync(GP_FULL, count, 0);
    __syncwarp();
    for (long long base = 0; base < d; base += 32) {
        const long long j = base + lane;
        const unsigned long long u = j < d ? (unsigned long long)units[a + j] : 0ull;
        const double f = j < d ? frac[a + j] : 0.0;
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
            if (in) members[m + group_start[row + g] + sizes[g] + __popc(ballot & ((1u << lane) - 1u))] = j;
            __syncwarp();
            if (lane == 0) sizes[g] += __popc(ballot);
            __syncwarp();
        }
    }
}
