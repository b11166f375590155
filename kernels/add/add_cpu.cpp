// add's CPU twin: the same contract as add_cuda, so the binding and the checks are shared.
#include "add.h"
#include "jk_cpu.h"

void add_cpu(jk::DType dtype, const void* a, const void* b, void* out, int64_t n) {
    jk::dispatch_cpu(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = static_cast<const T*>(a);
        const T* y = static_cast<const T*>(b);
        T* z = static_cast<T*>(out);
        for (int64_t i = 0; i < n; ++i) {
            z[i] = static_cast<T>(static_cast<jk::acc_t<T>>(x[i]) + static_cast<jk::acc_t<T>>(y[i]));
        }
    });
}
