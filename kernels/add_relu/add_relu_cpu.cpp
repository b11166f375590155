// add_relu's CPU twin: the sum is formed in float (double for double) and rounded once, as on the GPU.
#include "add_relu.h"
#include "jk_cpu.h"

void add_relu_forward_cpu(jk::DType dtype, const void* x, const void* y, void* out, int64_t n) {
    jk::dispatch_cpu(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = jk::acc_t<T>;
        const T* a = static_cast<const T*>(x);
        const T* b = static_cast<const T*>(y);
        T* z = static_cast<T*>(out);
        for (int64_t i = 0; i < n; ++i) {
            const A s = static_cast<A>(a[i]) + static_cast<A>(b[i]);
            z[i] = static_cast<T>(s < A(0) ? A(0) : s);  // NaN propagates, as in torch.relu
        }
    });
}

void add_relu_backward_cpu(jk::DType dtype, const void* grad, const void* x, const void* y, void* grad_in, int64_t n) {
    jk::dispatch_cpu(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = jk::acc_t<T>;
        const T* g = static_cast<const T*>(grad);
        const T* a = static_cast<const T*>(x);
        const T* b = static_cast<const T*>(y);
        T* gi = static_cast<T*>(grad_in);
        for (int64_t i = 0; i < n; ++i) {
            gi[i] = static_cast<A>(a[i]) + static_cast<A>(b[i]) > A(0) ? g[i] : T(0);
        }
    });
}
