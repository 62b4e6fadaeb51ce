// A walker's vertices written to its row a 32-byte sector at a time. A walk writes one id a step, and a warp's
// 32 walkers write to 32 rows: stored as they come, each is a 4-byte write to a sector of its own, and those
// scattered partial writes, not the steps, bound the walk (the minimal uniform walk on the peers' R-MAT 20 on an
// H200: 3.7 ms, 1.7 ms with whole sectors, 1.2 ms writing nothing; out/ab/wr_walk.py). GpSectorRow stages a
// thread's ids in shared memory and stores a sector with two 16-byte writes once it holds every id of it; the
// sectors the row shares with its neighbors' (its first and last) are written id by id, so a thread writes only its
// own ids. Kernels that take rows through it run at most GP_SECTOR_THREADS threads a block
// (__launch_bounds__) and declare the stage with GP_SECTOR_STAGE.
#pragma once

#define GP_SECTOR_THREADS 256
#define GP_SECTOR_STAGE __shared__ __align__(16) unsigned char gp_sector_stage[GP_SECTOR_THREADS * 32]

template <typename Id>
struct GpSectorRow {
    static constexpr int PER = 32 / (int)sizeof(Id);
    Id* out;           // the row: out[k] is the k-th id put
    Id* stage;         // this thread's sector in shared memory
    int first;         // where out[0] falls in its sector

    __device__ __forceinline__ GpSectorRow(Id* row, unsigned char* stages)
        : out(row), stage(reinterpret_cast<Id*>(stages + threadIdx.x * 32)),
          first((int)(((unsigned long long)row / sizeof(Id)) & (PER - 1))) {}

    // out[k] = v (k: the row's ids put so far, in order).
    __device__ __forceinline__ void put(int k, Id v) {
        const int slot = (first + k) & (PER - 1);
        stage[slot] = v;
        if (slot == PER - 1) store(k - slot, PER);
    }

    // Every id put and not yet stored, once the row's last is put (k of them in all).
    __device__ __forceinline__ void done(int k) {
        const int slot = (first + k) & (PER - 1);
        if (slot) store(k - slot, slot);
    }

  private:
    // The staged ids of out[from .. from + count - 1], from a sector's start (before the row's where from < 0).
    __device__ __forceinline__ void store(int from, int count) {
        if (from >= 0 && count == PER) {
            int4* to = reinterpret_cast<int4*>(out + from);
            const int4* staged = reinterpret_cast<const int4*>(stage);
            to[0] = staged[0];
            to[1] = staged[1];
            return;
        }
        for (int j = from < 0 ? 0 : from; j < from + count; ++j) out[j] = stage[(first + j) & (PER - 1)];
    }
};

// A partitioned walk's row, written across its walker's visits to the partitions (walk_first_order.cu's routed
// kernel) a whole 32-byte sector at a time. A visit is a few steps (at two partitions or more about every other
// step leaves), so a row written as each visit ends takes a partial sector a visit: read, merged and stored whole
// (or partial, which the memory itself reads and writes back), scattered, and those, not the steps, bounded the
// kernel. A standalone A/B on an H100 (not tracked; R-MAT 23 cut in two): 9.8 G steps/s writing that way, 13.7
// carrying the partial sector along, 16.8 writing no rows, against the whole-graph kernel's 18.1. So the ids of
// the sector not yet full travel with the walker (its `carried` cells) where it moves within the worker, and a
// sector is stored once it is full, by whichever partition the walker is in then; a walker leaving the worker, or
// ending, stores its partial sector there (`Sink::store`, cells lo..hi-1). Positions are the row's in the rows of
// the worker making its block (row * width + step; the rows 32-byte aligned), so a sector is the same 32 bytes
// wherever the walker is. `lo`: the first cell of the current sector this walker holds (cells before it are its
// row's earlier ids already stored, or another row's).
template <typename Id, typename Sink>
struct GpCarriedRow {
    static constexpr int PER = 32 / (int)sizeof(Id);
    Id* stage;       // this thread's sector in shared memory: cell c holds position (pos & ~(PER - 1)) + c
    long long pos0;  // the position of the visit's first id
    int lo;
    Sink& sink;

    // out[k] = v: the visit's k-th id, at pos0 + k
    __device__ __forceinline__ void put(int k, Id v) {
        const long long p = pos0 + k;
        const int c = (int)(p & (PER - 1));
        stage[c] = v;
        if (c == PER - 1) {
            sink.store(p - c, lo, PER, stage);
            lo = 0;
        }
    }
    __device__ __forceinline__ void done(int) {}

    // Once k ids are put: the cells staged and not stored, lo .. cell(pos0 + k) - 1, stored (where it ends or
    // leaves the worker).
    __device__ __forceinline__ void flush(int k) {
        const long long p = pos0 + k;
        const int c = (int)(p & (PER - 1));
        if (c > lo) sink.store(p - c, lo, c, stage);
    }
};

// Cells lo..hi-1 of the sector at `at` (32-byte aligned) of a row [row_lo, row_hi) of `rows`: a whole sector
// stored in two 16-byte writes; a part of one inside the row read, merged and stored whole (no partial write
// reaches memory: with ECC a partial sector is read and written back by the memory itself, later and scattered);
// in a sector the row shares with its neighbor (its first and last), id by id, as only the row's own writer
// touches a sector inside it.
template <typename Id>
__device__ __forceinline__ void gp_store_cells(Id* __restrict__ rows, long long at, int lo, int hi,
                                               const Id* stage, long long row_lo, long long row_hi) {
    constexpr int PER = 32 / (int)sizeof(Id);
    Id* base = rows + at;
    if (at >= row_lo && at + PER <= row_hi) {
        int4* to = reinterpret_cast<int4*>(base);
        if (lo == 0 && hi == PER) {
            const int4* staged = reinterpret_cast<const int4*>(stage);
            to[0] = staged[0];
            to[1] = staged[1];
            return;
        }
        Id cells[PER];
        *reinterpret_cast<int4*>(cells) = to[0];
        *reinterpret_cast<int4*>(cells + PER / 2) = to[1];
#pragma unroll
        for (int j = 0; j < PER; ++j)
            if (j >= lo && j < hi) cells[j] = stage[j];
        to[0] = *reinterpret_cast<const int4*>(cells);
        to[1] = *reinterpret_cast<const int4*>(cells + PER / 2);
        return;
    }
    for (int j = lo; j < hi; ++j) base[j] = stage[j];
}

// A row written an id at a time (a stage of the thread's own: registers or local memory).
template <typename Id>
struct GpPlainRow {
    Id* out;
    __device__ __forceinline__ void put(int k, Id v) { out[k] = v; }
    __device__ __forceinline__ void done(int) {}
};
