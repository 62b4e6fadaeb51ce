// Per-vertex prefix sums of edge weights (float64), summed in edge order by one
// thread per vertex, so the CPU twin (gpipe/graph/_partition.py::_segment_cdf_cpu)
// gets the same bits. cdf[e] = w[start] + ... + w[e] within e's vertex.
extern "C" __global__ void gp_segment_cdf(long long n, const long long* indptr, const float* weights, double* cdf) {
    long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (v >= n) return;
    double total = 0.0;
    for (long long e = indptr[v]; e < indptr[v + 1]; ++e) {
        total += (double)weights[e];
        cdf[e] = total;
    }
}
