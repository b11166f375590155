// bias_gelu launch configurations for benchmarks/probe/variants.py (the kernel is the production one).
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

#include "../../../kernels/bias_gelu/bias_gelu_kernel.cu"

template <int U, bool FAST, class T>
void gelu_cfg(const T* a, const T* b, T* z, int64_t n, int64_t width, int64_t grid_per_sm) {
    constexpr int N = jk::kVec<T>, block = jk::kBlock;
    int64_t grid = jk::ceil_div<int64_t>(n / N, int64_t(block) * U);
    if (grid_per_sm > 0) grid = std::min<int64_t>(grid, jk::sm_count() * grid_per_sm);
    const int64_t chunk = int64_t(block) * N;
    const Columns c{width, chunk % width, (grid * chunk * U) % width};
    bias_gelu_kernel<T, N, U, false, false, FAST><<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        nullptr, a, b, z, n, c);
}

// gelu(x + bias), erf form: U vectors a thread per step, fast (gelu_fast.cuh) or libm erff, grid capped at
// grid_per_sm blocks per SM (0: one thread per U vectors).
torch::Tensor bias_gelu_cfg(torch::Tensor x, torch::Tensor bias, int64_t u, bool fast, int64_t grid_per_sm) {
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), n = x.numel();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "bias_gelu_cfg", [&] {
        using T = std::conditional_t<std::is_same_v<scalar_t, at::BFloat16>, __nv_bfloat16,
                  std::conditional_t<std::is_same_v<scalar_t, at::Half>, __half, scalar_t>>;
        const T* a = reinterpret_cast<const T*>(x.data_ptr());
        const T* b = reinterpret_cast<const T*>(bias.data_ptr());
        T* z = reinterpret_cast<T*>(out.data_ptr());
        if constexpr (!std::is_same_v<T, double>) {
            if (u == 1 && fast) gelu_cfg<1, true>(a, b, z, n, width, grid_per_sm);
            else if (u == 1) gelu_cfg<1, false>(a, b, z, n, width, grid_per_sm);
            else if (u == 2 && fast) gelu_cfg<2, true>(a, b, z, n, width, grid_per_sm);
            else if (u == 2) gelu_cfg<2, false>(a, b, z, n, width, grid_per_sm);
            else if (u == 4 && fast) gelu_cfg<4, true>(a, b, z, n, width, grid_per_sm);
            else if (u == 4) gelu_cfg<4, false>(a, b, z, n, width, grid_per_sm);
            else TORCH_CHECK(false, "u ", u);
        }
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

torch::Tensor softmax_threads(torch::Tensor x, int64_t threads);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("softmax_threads", &softmax_threads);
    m.def("bias_gelu_cfg", &bias_gelu_cfg);
}
