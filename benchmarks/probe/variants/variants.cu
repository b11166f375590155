// Launch configurations the production launchers do not choose, for benchmarks/probe/variants.py: the
// kernels themselves are the production ones, included from kernels/.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

#include "../../../kernels/softmax/softmax_kernel.cu"

template <int VPT, class T>
void softmax_cfg(const T* x, T* o, int64_t rows, int64_t width, int threads) {
    constexpr int N = jk::kVec<T>;
    softmax_kernel<T, N, VPT, false><<<rows, threads, 0, at::cuda::getCurrentCUDAStream()>>>(x, o, rows, width);
}

// softmax with `threads` threads per row (block per row), each holding width / N / threads vectors.
torch::Tensor softmax_threads(torch::Tensor x, int64_t threads) {
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), rows = x.numel() / width;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "softmax_threads", [&] {
        using T = std::conditional_t<std::is_same_v<scalar_t, at::BFloat16>, __nv_bfloat16,
                  std::conditional_t<std::is_same_v<scalar_t, at::Half>, __half, scalar_t>>;
        const T* a = reinterpret_cast<const T*>(x.data_ptr());
        T* o = reinterpret_cast<T*>(out.data_ptr());
        const int64_t vpt = width / jk::kVec<T> / threads;
        TORCH_CHECK(vpt * threads * jk::kVec<T> == width, "width must be threads * vpt * N");
        switch (vpt) {
            case 1: softmax_cfg<1>(a, o, rows, width, threads); break;
            case 2: softmax_cfg<2>(a, o, rows, width, threads); break;
            case 4: softmax_cfg<4>(a, o, rows, width, threads); break;
            case 8: softmax_cfg<8>(a, o, rows, width, threads); break;
            default: TORCH_CHECK(false, "vpt ", vpt);
        }
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
