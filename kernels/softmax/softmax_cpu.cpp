// softmax's CPU twin: the same online max/sum as the GPU, one element at a time.
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
            A m = -std::numeric_limits<A>::infinity(), s = 0;
            for (int64_t c = 0; c < width; ++c) {  // one pass: rescale the running sum when the max grows
                const A v = static_cast<A>(xr[c]);
                if (v > m) {
                    s = s * std::exp(m - v);
                    m = v;
                }
                s += std::exp(v - m);
            }
            const A inv = A(1) / s;
            for (int64_t c = 0; c < width; ++c) o[c] = static_cast<T>(std::exp(static_cast<A>(xr[c]) - m) * inv);
        }
    });
}
