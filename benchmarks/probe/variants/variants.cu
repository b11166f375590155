// Launch configurations the production launchers do not choose, for benchmarks/probe/variants.py: the
// kernels themselves are the production ones, included from kernels/.
#include "jk_torch.h"

#include "../../../kernels/softmax/softmax_kernel.cu"

template <int VPT, class T>
cudaError_t softmax_cfg(const T* x, T* o, int64_t rows, int64_t width, int threads) {
    softmax_kernel<T, jk::kVec<T>, VPT, false><<<rows, threads, 0, jk::stream()>>>(x, o, rows, width);
    return cudaGetLastError();
}

// softmax with `threads` threads per row (block per row), each holding width / N / threads vectors.
torch::Tensor softmax_threads(torch::Tensor x, int64_t threads) {
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), rows = x.numel() / width;
    jk::check_launch("softmax_threads", jk::dispatch_cuda(jk::dtype_of("softmax_threads", x), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* a = static_cast<const T*>(x.data_ptr());
        T* o = static_cast<T*>(out.data_ptr());
        const int64_t vpt = width / jk::kVec<T> / threads;
        TORCH_CHECK(vpt * threads * jk::kVec<T> == width, "width must be threads * vpt * N");
        switch (vpt) {
            case 1: return softmax_cfg<1>(a, o, rows, width, threads);
            case 2: return softmax_cfg<2>(a, o, rows, width, threads);
            case 4: return softmax_cfg<4>(a, o, rows, width, threads);
            case 8: return softmax_cfg<8>(a, o, rows, width, threads);
        }
        TORCH_CHECK(false, "vectors a thread must be 1, 2, 4 or 8, got ", vpt);
    }));
    return out;
}
