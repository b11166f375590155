// bias_gelu's CPU twin. x + bias is rounded to the dtype before gelu, as torch's gelu(x + bias) does.
#include "bias_gelu.h"
#include "gelu_math.h"
#include "jk_cpu.h"

void bias_gelu_forward_cpu(jk::DType dtype, const void* x, const void* bias, void* out, int64_t rows, int64_t width,
                           bool tanh) {
    jk::dispatch_cpu(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = jk::acc_t<T>;
        const T* a = static_cast<const T*>(x);
        const T* b = static_cast<const T*>(bias);
        T* z = static_cast<T*>(out);
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < width; ++c) {
                const int64_t i = r * width + c;
                const A u = static_cast<A>(static_cast<T>(static_cast<A>(a[i]) + static_cast<A>(b[c])));
                z[i] = static_cast<T>(gelu_math::gelu(u, tanh));
            }
        }
    });
}

void bias_gelu_backward_cpu(jk::DType dtype, const void* grad, const void* x, const void* bias, void* grad_x,
                            int64_t rows, int64_t width, bool tanh) {
    jk::dispatch_cpu(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = jk::acc_t<T>;
        const T* g = static_cast<const T*>(grad);
        const T* a = static_cast<const T*>(x);
        const T* b = static_cast<const T*>(bias);
        T* gx = static_cast<T*>(grad_x);
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < width; ++c) {
                const int64_t i = r * width + c;
                const A u = static_cast<A>(static_cast<T>(static_cast<A>(a[i]) + static_cast<A>(b[c])));
                gx[i] = static_cast<T>(static_cast<A>(g[i]) * gelu_math::gelu_grad(u, tanh));
            }
        }
    });
}
