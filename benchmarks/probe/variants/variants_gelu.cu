// bias_gelu launch configurations for benchmarks/probe/variants.py (the kernel is the production one).
#include "jk_torch.h"

#include "../../../kernels/bias_gelu/bias_gelu_kernel.cu"

// gelu(x + bias), erf form: U vectors a thread per step, fast (gelu_fast.cuh) or libm erff, grid capped at
// grid_per_sm blocks per SM (0: one thread per U vectors).
torch::Tensor bias_gelu_cfg(torch::Tensor x, torch::Tensor bias, int64_t u, bool fast, int64_t grid_per_sm) {
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), n = x.numel();
    TORCH_CHECK(u == 1 || u == 2 || u == 4, "u must be 1, 2 or 4, got ", u);
    jk::check_launch("bias_gelu_cfg", jk::dispatch_cuda(jk::dtype_of("bias_gelu_cfg", x), [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        const T* a = static_cast<const T*>(x.data_ptr());
        const T* b = static_cast<const T*>(bias.data_ptr());
        T* z = static_cast<T*>(out.data_ptr());
        const auto s = jk::stream();
        if (u == 1) return fast ? launch_config<T, N, false, false, 1, true>(nullptr, a, b, z, n, width, s, grid_per_sm)
                                : launch_config<T, N, false, false, 1, false>(nullptr, a, b, z, n, width, s, grid_per_sm);
        if (u == 2) return fast ? launch_config<T, N, false, false, 2, true>(nullptr, a, b, z, n, width, s, grid_per_sm)
                                : launch_config<T, N, false, false, 2, false>(nullptr, a, b, z, n, width, s, grid_per_sm);
        return fast ? launch_config<T, N, false, false, 4, true>(nullptr, a, b, z, n, width, s, grid_per_sm)
                    : launch_config<T, N, false, false, 4, false>(nullptr, a, b, z, n, width, s, grid_per_sm);
    }));
    return out;
}

torch::Tensor softmax_threads(torch::Tensor x, int64_t threads);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("softmax_threads", &softmax_threads);
    m.def("bias_gelu_cfg", &bias_gelu_cfg);
}
