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

// gelu(x + bias) with bias_gelu_rows_kernel: K rows a thread, block threads a block.
torch::Tensor bias_gelu_rows(torch::Tensor x, torch::Tensor bias, int64_t k, int64_t block) {
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), rows = width ? x.numel() / width : 0;
    TORCH_CHECK(k == 1 || k == 2 || k == 4, "k must be 1, 2 or 4, got ", k);
    jk::check_launch("bias_gelu_rows", jk::dispatch_cuda(jk::dtype_of("bias_gelu_rows", x), [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        TORCH_CHECK(width % N == 0, "width must be a multiple of ", N);
        const T* a = static_cast<const T*>(x.data_ptr());
        const T* b = static_cast<const T*>(bias.data_ptr());
        T* z = static_cast<T*>(out.data_ptr());
        const auto s = jk::stream();
        cudaError_t err = cudaSuccess;
        const int bl = static_cast<int>(block);
        const bool done =
            k == 1   ? launch_rows<T, N, false, false, 1>(nullptr, a, b, z, rows, width, s, err, bl)
            : k == 2 ? launch_rows<T, N, false, false, 2>(nullptr, a, b, z, rows, width, s, err, bl)
                     : launch_rows<T, N, false, false, 4>(nullptr, a, b, z, rows, width, s, err, bl);
        TORCH_CHECK(done, "bias_gelu_rows: the grid does not fit");
        return err;
    }));
    return out;
}

// Triton's layout, for comparison with the rows kernel: a thread takes K vectors of one row, block vectors
// apart (blockIdx.x the row, blockIdx.y the stretch of block * K vectors), and loads a bias vector for each.
template <class T, int N, int K>
__global__ void bias_gelu_cols_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out,
                                      int64_t width) {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * width;
    const int64_t first = (static_cast<int64_t>(blockIdx.y) * blockDim.x * K + threadIdx.x) * N;
    const int64_t step = static_cast<int64_t>(blockDim.x) * N;
    jk::Vec<T, N> xv[K], bv[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int64_t col = first + k * step;
        if (col < width) {
            xv[k] = jk::load_vec<N>(x + row + col);
            bv[k] = jk::load_vec<N>(bias + col);
        }
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int64_t col = first + k * step;
        if (col < width) {
            jk::acc_t<T> a[N];
            add_bias(xv[k], bv[k], a);
            jk::Vec<T, N> y;
#pragma unroll
            for (int e = 0; e < N; ++e) y.v[e] = apply<T, false, false, kFast<T>>(a[e], T{});
            jk::store_vec_global<N>(out + row + col, y);
        }
    }
}

torch::Tensor bias_gelu_cols(torch::Tensor x, torch::Tensor bias, int64_t k, int64_t block) {
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), rows = width ? x.numel() / width : 0;
    TORCH_CHECK(k == 2 || k == 4, "k must be 2 or 4, got ", k);
    jk::check_launch("bias_gelu_cols", jk::dispatch_cuda(jk::dtype_of("bias_gelu_cols", x), [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        TORCH_CHECK(width % N == 0, "width must be a multiple of ", N);
        if (rows == 0) return cudaSuccess;
        const T* a = static_cast<const T*>(x.data_ptr());
        const T* b = static_cast<const T*>(bias.data_ptr());
        T* z = static_cast<T*>(out.data_ptr());
        const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(jk::ceil_div<int64_t>(width / N, block * k)));
        const auto s = jk::stream();
        if (k == 2) {
            bias_gelu_cols_kernel<T, N, 2><<<grid, static_cast<unsigned>(block), 0, s>>>(a, b, z, width);
        } else {
            bias_gelu_cols_kernel<T, N, 4><<<grid, static_cast<unsigned>(block), 0, s>>>(a, b, z, width);
        }
        return cudaGetLastError();
    }));
    return out;
}

torch::Tensor softmax_threads(torch::Tensor x, int64_t threads);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("softmax_threads", &softmax_threads);
    m.def("bias_gelu_cfg", &bias_gelu_cfg);
    m.def("bias_gelu_rows", &bias_gelu_rows);
    m.def("bias_gelu_cols", &bias_gelu_cols);
}
