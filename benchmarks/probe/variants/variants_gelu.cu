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

// gelu(x + bias) with bias_gelu_rows_kernel: C column vectors in K rows a thread, block threads a block.
torch::Tensor bias_gelu_tile(torch::Tensor x, torch::Tensor bias, int64_t c, int64_t k, int64_t block) {
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), rows = width ? x.numel() / width : 0;
    jk::check_launch("bias_gelu_tile", jk::dispatch_cuda(jk::dtype_of("bias_gelu_tile", x), [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        TORCH_CHECK(width % N == 0, "width must be a multiple of ", N);
        const T* a = static_cast<const T*>(x.data_ptr());
        const T* b = static_cast<const T*>(bias.data_ptr());
        T* z = static_cast<T*>(out.data_ptr());
        const auto s = jk::stream();
        cudaError_t err = cudaSuccess;
        const int bl = static_cast<int>(block);
        bool done = false;
        if (c == 1 && k == 1) done = launch_rows<T, N, false, false, 1, 1>(nullptr, a, b, z, rows, width, s, err, bl);
        else if (c == 1 && k == 2) done = launch_rows<T, N, false, false, 1, 2>(nullptr, a, b, z, rows, width, s, err, bl);
        else if (c == 1 && k == 4) done = launch_rows<T, N, false, false, 1, 4>(nullptr, a, b, z, rows, width, s, err, bl);
        else if (c == 2 && k == 1) done = launch_rows<T, N, false, false, 2, 1>(nullptr, a, b, z, rows, width, s, err, bl);
        else if (c == 2 && k == 2) done = launch_rows<T, N, false, false, 2, 2>(nullptr, a, b, z, rows, width, s, err, bl);
        else if (c == 4 && k == 1) done = launch_rows<T, N, false, false, 4, 1>(nullptr, a, b, z, rows, width, s, err, bl);
        else TORCH_CHECK(false, "(c, k) must be one of (1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (4, 1), got (", c, ", ", k, ")");
        TORCH_CHECK(done, "bias_gelu_tile: the grid does not fit");
        return err;
    }));
    return out;
}

torch::Tensor softmax_threads(torch::Tensor x, int64_t threads);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("softmax_threads", &softmax_threads);
    m.def("bias_gelu_cfg", &bias_gelu_cfg);
    m.def("bias_gelu_tile", &bias_gelu_tile);
}
