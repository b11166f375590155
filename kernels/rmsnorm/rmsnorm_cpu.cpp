// rmsnorm's CPU twin: the sum of squares is taken over new_residual as stored (rounded to the dtype), as the
// reference computes it from the tensor it returns, and summed in double: a float summed in sequence over
// a wide row drifts where the reference's and the GPU's tree reductions do not.
#include <cmath>

#include "jk_cpu.h"
#include "rmsnorm.h"

void rmsnorm_cpu(jk::DType dtype, const void* x, const void* residual, const void* weight, void* out,
                 void* new_residual, int64_t rows, int64_t width, double eps) {
    jk::dispatch_cpu(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = jk::acc_t<T>;
        const T* w = static_cast<const T*>(weight);
        for (int64_t r = 0; r < rows; ++r) {
            const T* xr = static_cast<const T*>(x) + r * width;
            const T* rr = static_cast<const T*>(residual) + r * width;
            T* nr = static_cast<T*>(new_residual) + r * width;
            T* o = static_cast<T*>(out) + r * width;
            double sum_sq = 0;
            for (int64_t c = 0; c < width; ++c) {
                nr[c] = static_cast<T>(static_cast<A>(xr[c]) + static_cast<A>(rr[c]));
                const A s = static_cast<A>(nr[c]);
                sum_sq += s * s;
            }
            const A rstd = static_cast<A>(1.0 / std::sqrt(sum_sq / static_cast<double>(width) + eps));
            for (int64_t c = 0; c < width; ++c) {
                o[c] = static_cast<T>(static_cast<A>(nr[c]) * rstd * static_cast<A>(w[c]));
            }
        }
    });
}
