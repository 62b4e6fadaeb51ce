// SNAP edge lines parsed on the GPU, a thread per line (gpipe/graph/_parse.py says the rule): ids as decimal
// integers, a weight by Clinger's fast path (an integer below 2**53 times or over an exact power of ten: one IEEE
// rounding, correctly rounded). A line outside the rule gets GP_PARSE_OTHER, and the host's readers take the piece.
// CPU twin: gpipe/graph/_parse.py::_parse_cpu (parse_line).
// GP_PARSE_OK, GP_PARSE_BLANK, GP_PARSE_OTHER: defined by the loader, from _parse.py.

#define GP_PARSE_LIMIT 9223372036854775807ULL
#define GP_PARSE_MANTISSA (1LL << 53)

// The id at text[p..e) up to the delimiter or the end; p moves past it. Whether it is one.
__device__ __forceinline__ bool gp_parse_integer(const unsigned char* text, long long& p, long long e, int delimiter,
                                                 long long* out) {
    const bool negative = p < e && text[p] == '-';
    if (negative) ++p;
    const long long start = p;
    unsigned long long value = 0;
    while (p < e && text[p] != delimiter) {
        const unsigned char c = text[p];
        if (c < '0' || c > '9' || p - start == 19) return false;  // 19 digits fit 64 bits
        value = value * 10ULL + (unsigned long long)(c - '0');
        ++p;
    }
    if (p == start || value > GP_PARSE_LIMIT) return false;
    *out = negative ? -(long long)value : (long long)value;
    return true;
}

// The number text[p..e) (the whole field) when its digits give it exactly.
__device__ __forceinline__ bool gp_parse_decimal(const unsigned char* text, long long p, long long e,
                                                 const double* powers, double* out) {
    const bool negative = p < e && text[p] == '-';
    if (negative) ++p;
    long long mantissa = 0;
    int digits = 0, seen = 0, shift = 0;
    bool point = false;
    while (p < e && ((text[p] >= '0' && text[p] <= '9') || (text[p] == '.' && !point))) {
        const unsigned char c = text[p++];
        if (c == '.') {
            point = true;
            continue;
        }
        ++seen;
        if (digits == 0 && c == '0') {  // a leading zero
            if (point) --shift;
            continue;
        }
        if (digits == 19) return false;
        mantissa = mantissa * 10 + (c - '0');
        ++digits;
        if (point) --shift;
    }
    if (seen == 0) return false;
    if (p < e && (text[p] == 'e' || text[p] == 'E')) {
        ++p;
        int sign = 1;
        if (p < e && (text[p] == '-' || text[p] == '+')) {
            sign = text[p] == '-' ? -1 : 1;
            ++p;
        }
        const long long start = p;
        int exponent = 0;
        while (p < e && text[p] >= '0' && text[p] <= '9' && p - start < 4) exponent = exponent * 10 + (text[p++] - '0');
        if (p == start) return false;
        shift += sign * exponent;
    }
    if (p != e || mantissa >= GP_PARSE_MANTISSA) return false;
    double value;
    if (mantissa == 0) value = 0.0;
    else if (shift >= 0 && shift <= 22) value = (double)mantissa * powers[shift];
    else if (shift < 0 && shift >= -22) value = (double)mantissa / powers[-shift];
    else return false;
    *out = negative ? -value : value;
    return true;
}

extern "C" __global__ void gp_parse_edges(const unsigned char* __restrict__ text, const long long* __restrict__ bounds,
                                          long long n, int width, int keep_weight, int delimiter,
                                          const double* __restrict__ powers, long long* __restrict__ src,
                                          long long* __restrict__ dst, double* __restrict__ weight,
                                          signed char* __restrict__ status) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long a = bounds[i];
    long long e = bounds[i + 1];
    if (e > a && text[e - 1] == '\n') --e;
    if (e > a && text[e - 1] == '\r') --e;
    signed char s = GP_PARSE_OTHER;
    if (e == a) {
        s = GP_PARSE_BLANK;
    } else {
        bool lone_return = false;  // a line end to pyarrow
        for (long long p = a; p < e; ++p) lone_return |= text[p] == '\r';
        long long p = a;
        if (!lone_return && gp_parse_integer(text, p, e, delimiter, src + i) && p < e) {
            ++p;
            if (gp_parse_integer(text, p, e, delimiter, dst + i)) {
                if (width == 2) {
                    if (p == e) s = GP_PARSE_OK;
                } else if (p < e) {
                    long long q = p + 1;
                    while (q < e && text[q] != delimiter) ++q;
                    if (q == e && q != p + 1 && (!keep_weight || gp_parse_decimal(text, p + 1, e, powers, weight + i)))
                        s = GP_PARSE_OK;
                }
            }
        }
    }
    status[i] = s;
}
