// rmsnorm launch shapes for benchmarks/probe/variants.py (the kernel is the production one): threads a row and
// vectors a thread (K = vectors / threads, all in registers), with x and residual through ld.global.nc
// (production) or a plain ld.global (Triton's). Triton's row-a-program kernel (256 threads, 2 bfloat16 vectors
// each at width 4096) reached 98.4-98.7% of the copy at 2^26 where ours (128 threads, 4 vectors, 54 registers)
// reached 96.7% (runs 10-11): these launches separate its shape from its loads.
#include <map>
#include <tuple>

#include "jk_torch.h"

#include "../../../kernels/rmsnorm/rmsnorm_kernel.cu"

template <class T, int K, bool PLAIN>
cudaError_t launch_shape(const T* x, const T* r, const T* w, T* o, T* nr, int64_t rows, int64_t width,
                         int threads) {
    rmsnorm_kernel<T, jk::kVec<T>, false, K, PLAIN><<<rows, threads, 0, jk::stream()>>>(x, r, w, o, nr, rows,
                                                                                          width, 1e-6);
    return cudaGetLastError();
}

std::vector<torch::Tensor> rmsnorm_shape(torch::Tensor x, torch::Tensor residual, torch::Tensor weight,
                                         int64_t threads, bool plain) {
    auto out = torch::empty_like(x), new_residual = torch::empty_like(x);
    const int64_t width = x.size(-1), rows = width ? x.numel() / width : 0;
    TORCH_CHECK(x.is_contiguous() && residual.is_contiguous() && threads % 32 == 0 && threads <= 1024,
                "rmsnorm_shape: contiguous rows, threads a multiple of 32 up to 1024");
    if (rows == 0) return {out, new_residual};
    jk::check_launch("rmsnorm_shape", jk::dispatch_cuda(jk::dtype_of("rmsnorm_shape", x), [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        const int64_t k = width / N / threads;
        TORCH_CHECK(k * threads * N == width, "rmsnorm_shape: width must be threads * K * ", N);
        using Launch = cudaError_t (*)(const T*, const T*, const T*, T*, T*, int64_t, int64_t, int);
        static const std::map<std::tuple<int64_t, bool>, Launch> shapes{
            {{1, false}, &launch_shape<T, 1, false>}, {{2, false}, &launch_shape<T, 2, false>},
            {{4, false}, &launch_shape<T, 4, false>}, {{1, true}, &launch_shape<T, 1, true>},
            {{2, true}, &launch_shape<T, 2, true>},   {{4, true}, &launch_shape<T, 4, true>},
        };
        const auto it = shapes.find({k, plain});
        TORCH_CHECK(it != shapes.end(), "rmsnorm_shape: K must be 1, 2 or 4, got ", k);
        return it->second(static_cast<const T*>(x.data_ptr()), static_cast<const T*>(residual.data_ptr()),
                          static_cast<const T*>(weight.data_ptr()), static_cast<T*>(out.data_ptr()),
                          static_cast<T*>(new_residual.data_ptr()), rows, width, static_cast<int>(threads));
    }));
    return {out, new_residual};
}
