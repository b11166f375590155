// bias_gelu: out = gelu(x + bias) in one pass (eager torch makes two: the add writes x + bias, gelu reads it).
// Flat over rows * width elements in 16-byte vectors; a vector never straddles two rows when width is a
// multiple of the vector length, so its bias is one aligned vector load too. Otherwise: one element a thread.
#include "bias_gelu.h"
#include "gelu_math.h"
#include "jk_cuda.cuh"

template <class T>
__device__ __forceinline__ jk::acc_t<T> biased(T x, T b) {
    // rounded to T first, as torch's gelu(x + bias) sees it
    return jk::to_acc(jk::from_acc<T>(jk::to_acc(x) + jk::to_acc(b)));
}

// BACKWARD: out = grad * gelu'(x + bias); otherwise out = gelu(x + bias) (grad unused).
template <class T, int N, bool BACKWARD>
__global__ void bias_gelu_kernel(const T* __restrict__ grad, const T* __restrict__ x, const T* __restrict__ bias,
                                 T* __restrict__ out, int64_t n, int64_t width, bool tanh) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * N;
    const int64_t start = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
    // The column advances by a fixed amount per step: one modulo per thread, not one per vector (a 64-bit
    // division is a ~100-instruction subroutine, which made the bfloat16 kernel compute-bound).
    const int64_t step = stride % width;
    int64_t col = start % width;
    for (int64_t i = start; i < n; i += stride) {
        const jk::Vec<T, N> xv = jk::load_vec<N>(x + i);
        const jk::Vec<T, N> bv = jk::load_vec<N>(bias + col);
        col += step;
        if (col >= width) col -= width;
        jk::Vec<T, N> gv;
        if constexpr (BACKWARD) gv = jk::load_vec<N>(grad + i);
        jk::Vec<T, N> r;
#pragma unroll
        for (int e = 0; e < N; ++e) {
            const auto u = biased(xv.v[e], bv.v[e]);
            if constexpr (BACKWARD) {
                r.v[e] = jk::from_acc<T>(jk::to_acc(gv.v[e]) * gelu_math::gelu_grad(u, tanh));
            } else {
                r.v[e] = jk::from_acc<T>(gelu_math::gelu(u, tanh));
            }
        }
        jk::store_vec<N>(out + i, r);
    }
}

template <bool BACKWARD>
cudaError_t launch(jk::DType dtype, const void* grad, const void* x, const void* bias, void* out, int64_t rows,
                   int64_t width, bool tanh, cudaStream_t stream) {
    const int64_t n = rows * width;
    if (n == 0) return cudaSuccess;
    return jk::dispatch_cuda(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* g = static_cast<const T*>(grad);
        const T* a = static_cast<const T*>(x);
        const T* b = static_cast<const T*>(bias);
        T* z = static_cast<T*>(out);
        constexpr int N = jk::kVec<T>, block = jk::kBlock;
        const bool vec = width % N == 0 && jk::aligned16(a) && jk::aligned16(b) && jk::aligned16(z) &&
                         (!BACKWARD || jk::aligned16(g));
        // Enough blocks to fill the GPU several times over; each thread loops over the rest.
        const int64_t items = vec ? n / N : n;
        const int64_t grid = std::min<int64_t>(jk::ceil_div<int64_t>(items, block), int64_t(jk::sm_count()) * 16);
        if (vec) {
            bias_gelu_kernel<T, N, BACKWARD><<<static_cast<unsigned>(grid), block, 0, stream>>>(g, a, b, z, n, width, tanh);
        } else {
            bias_gelu_kernel<T, 1, BACKWARD><<<static_cast<unsigned>(grid), block, 0, stream>>>(g, a, b, z, n, width, tanh);
        }
        return cudaGetLastError();
    });
}

cudaError_t bias_gelu_forward_cuda(jk::DType dtype, const void* x, const void* bias, void* out, int64_t rows,
                                   int64_t width, bool tanh, cudaStream_t stream) {
    return launch<false>(dtype, nullptr, x, bias, out, rows, width, tanh, stream);
}

cudaError_t bias_gelu_backward_cuda(jk::DType dtype, const void* grad, const void* x, const void* bias, void* grad_x,
                                    int64_t rows, int64_t width, bool tanh, cudaStream_t stream) {
    return launch<true>(dtype, grad, x, bias, grad_x, rows, width, tanh, stream);
}
