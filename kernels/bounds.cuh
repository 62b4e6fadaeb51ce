// Ranges cut at bounds: which one holds a vertex (a graph's partitions, a sharded table's shards). Its CPU twin:
// gpipe/_search.py's range_of.
#pragma once

// The partition of `parts` (cut at `bounds`, parts + 1 of them) owning vertex v: the last q with bounds[q] <= v, as
// numpy's searchsorted(bounds[1:-1], v, side="right") finds it (an empty partition owns nothing).
__device__ __forceinline__ int gp_owner(const long long* __restrict__ bounds, int parts, long long v) {
    int lo = 0, hi = parts - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (__ldg(bounds + mid) <= v) lo = mid; else hi = mid - 1;
    }
    return lo;
}
