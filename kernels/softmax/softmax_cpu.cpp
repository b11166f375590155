// softmax's CPU twin: the same online max/sum as the GPU, one element at a time. The running sum is a
// double: a float summed in sequence over a 65536-wide row drifts by ~1e-5, where the GPU's tree of
// per-thread partial sums does not.
#include <cmath>
#include <limits>

#include "jk_cpu.h"
#include "softmax.h"

void softmax_cpu(jk::DType dtype, const void* x, void* out, int64_t rows, int64_t width) {
    jk::dispatch_cpu(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = jk::acc_t<T>;
        for (int64_t r = 0; r < rows; ++r) {
            const T* xr = static_cast<const T*>(x) + r * width;
            T* o = static_cast<T*>(out) + r * width;
            A m = -std::numeric_limits<A>::infinity();
            double s = 0;
            for (int64_t c = 0; c < width; ++c) {  // one pass: rescale the running sum when the max grows
                const A v = static_cast<A>(xr[c]);
                if (v > m) {
                    s = s * std::exp(static_cast<double>(m - v));
                    m = v;
                }
                // -inf adds 0; exp(v - m) would be NaN for one before any other element (m still -inf).
                s += v == -std::numeric_limits<A>::infinity() ? 0.0 : std::exp(static_cast<double>(v - m));
            }
            const A inv = static_cast<A>(1.0 / s);
            for (int64_t c = 0; c < width; ++c) o[c] = static_cast<T>(std::exp(static_cast<A>(xr[c]) - m) * inv);
        }
    });
}
