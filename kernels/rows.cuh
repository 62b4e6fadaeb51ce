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

template <typename Id, bool Merge = false>
struct GpSectorRow {
    static constexpr int PER = 32 / (int)sizeof(Id);
    Id* out;           // the row: out[k] is the k-th id put
    Id* stage;         // this thread's sector in shared memory
    int first;         // where out[0] falls in its sector
    const Id* row_lo;  // Merge: the whole row, [row_lo, row_hi)
    const Id* row_hi;

    __device__ __forceinline__ GpSectorRow(Id* row, unsigned char* stages, const Id* lo = nullptr,
                                           const Id* hi = nullptr)
        : out(row), stage(reinterpret_cast<Id*>(stages + threadIdx.x * 32)),
          first((int)(((unsigned long long)row / sizeof(Id)) & (PER - 1))), row_lo(lo), row_hi(hi) {}

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
        if (Merge) {  // a sector of the row's own (inside [row_lo, row_hi)) read, merged and stored whole
            Id* base = out + from;
            int4* to = reinterpret_cast<int4*>(base);
            const int lo = from < 0 ? -from : 0;  // cells [lo, count) of the sector are staged
            if (lo == 0 && count == PER) {
                const int4* staged = reinterpret_cast<const int4*>(stage);
                to[0] = staged[0];
                to[1] = staged[1];
                return;
            }
            if (base >= row_lo && base + PER <= row_hi) {
                Id cells[PER];
                *reinterpret_cast<int4*>(cells) = to[0];
                *reinterpret_cast<int4*>(cells + PER / 2) = to[1];
#pragma unroll
                for (int j = 0; j < PER; ++j)
                    if (j >= lo && j < count) cells[j] = stage[j];
                to[0] = *reinterpret_cast<const int4*>(cells);
                to[1] = *reinterpret_cast<const int4*>(cells + PER / 2);
                return;
            }
            for (int j = lo; j < count; ++j) base[j] = stage[j];
            return;
        }
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

// GpSectorRow for a row written in several visits (a partitioned walk's, whose row is [lo, hi)): a partial sector
// that lies inside the row is read, merged with the staged ids and stored whole, so no partial write reaches
// memory (with ECC, a partial sector is read and written back by the memory itself, later and scattered). Only the
// row's own writer touches a sector inside it; the sectors it shares with its neighbors (its first and last) are
// written id by id. On an H100 (a partition of R-MAT 23 at random steps, out/ab_routed.cu) 9.3 G steps/s against
// 8.2 sector by sector.
template <typename Id>
using GpMergedRow = GpSectorRow<Id, true>;

// A row written an id at a time (a stage of the thread's own: registers or local memory).
template <typename Id>
struct GpPlainRow {
    Id* out;
    __device__ __forceinline__ void put(int k, Id v) { out[k] = v; }
    __device__ __forceinline__ void done(int) {}
};
