// The graphs a walk is written over, once for both: a walk's body is a template on its graph, which says where a
// vertex's edges are and picks one. GpCsr is a static partition, GpSpace a dynamic graph's snapshot of one. The
// twins take the same graphs: gpipe/walks/_graphs.py's Csr and Space.
// GP_TRIAL_DRAWS, GP_PICK_ALIAS, DECIMAL_GROUP, GROUP_*: defined by the loader (gpipe/walks/_graphs.py's DEFINES).
#pragma once
#include "alias.cuh"
#include "dynamic.cuh"
#include "walk.cuh"

// A static partition's edges: their heads (`indices`, each vertex's row sorted) and weights, as per-vertex prefix
// sums `cdf` when weighted is GP_PICK_CDF, as per-vertex packed alias tables `table` (gpipe/_alias.py) when it is
// GP_PICK_ALIAS (a walk that only picks: weight() is not asked of it).
template <typename IdT>
struct GpCsrEdges {
    const IdT* __restrict__ indices;
    const double* __restrict__ cdf;
    int weighted;
    const unsigned long long* __restrict__ table;

    __device__ __forceinline__ long long head(long long e) const { return (long long)indices[e]; }
    // The weight of edge e among its vertex's edges a..: from the prefix sums, or 1.
    __device__ __forceinline__ double weight(long long a, long long e) const {
        if (!weighted) return 1.0;
        return e > a ? cdf[e] - cdf[e - 1] : cdf[e];
    }
};

// A static partition as the walks read it: the CSR rows of vertices lo.. (local ids: v - lo). An edge is picked
// with one draw: uniform, by inverse transform, or through the vertex's alias table, one word whatever its degree
// (-1 when every weight is zero). A node2vec trial takes
// TRIAL_DRAWS draws: its candidate at CANDIDATE, its acceptance at ACCEPT. CPU twin: gpipe/walks/_graphs.py's Csr.
template <typename IdT>
struct GpCsr {
    using Id = IdT;
    using Edges = GpCsrEdges<IdT>;
    static constexpr unsigned long long TRIAL_DRAWS = 2, CANDIDATE = 0, ACCEPT = 1;
    Edges edges;
    const long long* __restrict__ indptr;

    __device__ __forceinline__ long long start(long long v) const { return indptr[v]; }
    __device__ __forceinline__ long long degree(long long v) const { return indptr[v + 1] - indptr[v]; }
    // The edge of v (edges a..a+d-1, d > 0) drawn from draw `first` of (key, id, s).
    __device__ __forceinline__ long long pick(unsigned long long key, unsigned long long id, int s,
                                              unsigned long long first, long long v, long long a, long long d) const {
        const ulonglong2 r = gp_bits(key, id, s, first);
        if (edges.weighted == GP_PICK_ALIAS) {
            const long long j = gp_alias_draw(edges.table + a, d, gp_unit(r));
            return j < d ? a + j : -1;
        }
        return gp_pick_edge(edges.cdf, edges.weighted, a, d, r);
    }
    // The array holding each vertex's neighbors sorted at start(v)..start(v)+degree(v)-1.
    __device__ __forceinline__ const IdT* sorted() const { return edges.indices; }
};

// A dynamic graph's edges: their heads (`dst`, the edge pool in insertion order) and weights, the scaled biases
// units + frac (the sum rounded as the twin rounds it), or 1.
struct GpSpaceEdges {
    const long long* __restrict__ dst;
    const long long* __restrict__ units;
    const double* __restrict__ frac;
    int weighted;

    __device__ __forceinline__ long long head(long long e) const { return dst[e]; }
    __device__ __forceinline__ double weight(long long a, long long e) const {
        return weighted ? __dadd_rn((double)units[e], frac[e]) : 1.0;
    }
};

// A dynamic graph's snapshot of one partition as the walks read it (GpCsr above says what a graph offers): vertex v
// (local) has degree[v] edges at edge_start[v].. of the edge pool (the same slots of `adjacency` hold them sorted);
// vertices past space_vertices are only named as destinations so far and have none. An edge is picked uniformly
// with one draw, or by weight from the sampling space (gp_space_pick, from draw `first` on). A node2vec trial takes
// TRIAL_DRAWS draws (room for gp_space_pick's tries): its acceptance at ACCEPT, its candidate from CANDIDATE.
// CPU twin: gpipe/walks/_graphs.py's Space.
struct GpSpace {
    using Id = long long;
    using Edges = GpSpaceEdges;
    static constexpr unsigned long long TRIAL_DRAWS = GP_TRIAL_DRAWS, CANDIDATE = 1, ACCEPT = 0;
    Edges edges;
    const long long* __restrict__ edge_start;
    const long long* __restrict__ degrees;
    const long long* __restrict__ member_start;
    const long long* __restrict__ members;
    const long long* __restrict__ group_row;
    const long long* __restrict__ group_count;
    const signed char* __restrict__ group_kind;
    const int* __restrict__ group_bit;
    const long long* __restrict__ group_start;
    const long long* __restrict__ group_size;
    const double* __restrict__ alias_prob;
    const int* __restrict__ alias_other;
    const long long* __restrict__ adjacency;
    long long space_vertices;

    __device__ __forceinline__ long long start(long long v) const { return v < space_vertices ? edge_start[v] : 0; }
    __device__ __forceinline__ long long degree(long long v) const { return v < space_vertices ? degrees[v] : 0; }
    __device__ __forceinline__ long long pick(unsigned long long key, unsigned long long id, int s,
                                              unsigned long long first, long long v, long long a, long long d) const {
        if (!edges.weighted) return a + gp_below(gp_bits(key, id, s, first), (unsigned long long)d);
        return gp_space_pick(edge_start, degrees, edges.units, edges.frac, member_start, members, group_row,
                             group_count, group_kind, group_bit, group_start, group_size, alias_prob, alias_other,
                             key, id, s, first, v);
    }
    __device__ __forceinline__ const long long* sorted() const { return adjacency; }
};
