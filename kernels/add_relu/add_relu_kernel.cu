// add_relu: out = relu(x + y), the seed's slow_add (three launches, five tensor passes) fused into one pass,
// in the three versions the 02_fusion notebook walks through. Each reads x and y once and writes out once.
#include "add_relu.h"
#include "jk_elementwise.cuh"

template <class A>
__device__ __forceinline__ A add_relu_op(A a, A b) {
    const A s = a + b;
    return s < A(0) ? A(0) : s;  // NaN stays NaN, as in torch.relu (s > 0 ? s : 0 would turn it into 0)
}

// v1, the seed's kernel: one thread per element. The index is 64-bit: the seed's int overflows past 2^31.
template <class T>
__global__ void add_relu_v1(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = jk::from_acc<T>(add_relu_op(jk::to_acc(x[i]), jk::to_acc(y[i])));
}

// v2, grid-stride: a grid sized to the GPU (32 blocks of 256 per SM) loops over the tensor, so the launch
// does not grow with n and each thread does several elements.
template <class T>
__global__ void add_relu_v2(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out, int64_t n) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        out[i] = jk::from_acc<T>(add_relu_op(jk::to_acc(x[i]), jk::to_acc(y[i])));
    }
}

// v3, vectorised: each thread moves one 16-byte vector of x and one of y (4 floats, 8 halves), in blocks of
// kV3Block threads; the last n % N elements (the scalar tail) go one per thread. Needs 16-byte aligned pointers:
// the launcher falls back to v2. Why one vector in blocks of 128 (the shape of torch.compile's kernel): timed in
// turn on an H200, two vectors a thread in blocks of 256 were 0.4% (float32) and 0.7% (bfloat16) behind
// torch.compile in every round; blocks of 128 made them level, and one vector a thread (this kernel) put it
// 0.3% ahead in float32 and level in bfloat16.
// Why the smaller blocks help was not measured.
constexpr int kV3Block = 128;

template <class T, int N>
__global__ void __launch_bounds__(kV3Block)
    add_relu_v3(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out, int64_t n) {
    const int64_t n_main = n / N * N;
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t i = t * N;  // neighbours read neighbours: a warp's loads are one 512-byte run
    if (i < n_main) {
        const jk::Vec<T, N> a = jk::load_vec<N>(x + i);
        const jk::Vec<T, N> b = jk::load_vec<N>(y + i);
        jk::Vec<T, N> r;
#pragma unroll
        for (int e = 0; e < N; ++e) r.v[e] = jk::from_acc<T>(add_relu_op(jk::to_acc(a.v[e]), jk::to_acc(b.v[e])));
        jk::store_vec<N>(out + i, r);
    }
    if (t < n - n_main) {
        out[n_main + t] = jk::from_acc<T>(add_relu_op(jk::to_acc(x[n_main + t]), jk::to_acc(y[n_main + t])));
    }
}

cudaError_t add_relu_forward_cuda(jk::DType dtype, const void* x, const void* y, void* out, int64_t n, int version,
                                  cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    return jk::dispatch_cuda(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* a = static_cast<const T*>(x);
        const T* b = static_cast<const T*>(y);
        T* z = static_cast<T*>(out);
        constexpr int block = jk::kBlock;
        const bool aligned = jk::aligned16(a) && jk::aligned16(b) && jk::aligned16(z);
        if (version == jk::kNaive) {
            add_relu_v1<<<static_cast<unsigned>(jk::ceil_div<int64_t>(n, block)), block, 0, stream>>>(a, b, z, n);
        } else if (version == jk::kGridStride || (version == jk::kVectorized && !aligned)) {
            const int64_t grid = std::min<int64_t>(jk::ceil_div<int64_t>(n, block), int64_t(jk::sm_count()) * 32);
            add_relu_v2<<<static_cast<unsigned>(grid), block, 0, stream>>>(a, b, z, n);
        } else if (version == jk::kVectorized) {
            constexpr int N = jk::kVec<T>;
            const int64_t grid = jk::ceil_div<int64_t>(std::max<int64_t>(n / N, 1), kV3Block);
            add_relu_v3<T, N><<<static_cast<unsigned>(grid), kV3Block, 0, stream>>>(a, b, z, n);
        } else {
            return cudaErrorInvalidValue;  // the binding rejects other versions with a message first
        }
        return cudaGetLastError();
    });
}

struct AddReluBackwardOp {
    template <class A>
    __device__ __forceinline__ A operator()(const A (&v)[3]) const {  // v = grad, x, y
        return v[1] + v[2] > A(0) ? v[0] : A(0);
    }
};

cudaError_t add_relu_backward_cuda(jk::DType dtype, const void* grad, const void* x, const void* y, void* grad_in,
                                   int64_t n, cudaStream_t stream) {
    return jk::dispatch_cuda(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const jk::Inputs<T, 3> in{{static_cast<const T*>(grad), static_cast<const T*>(x), static_cast<const T*>(y)}};
        return jk::launch_map(in, static_cast<T*>(grad_in), n, AddReluBackwardOp{}, stream);
    });
}
