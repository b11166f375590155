// out[i] = op(in_0[i], ..., in_{K-1}[i]) for K same-typed inputs: the vectorised loop add and add_relu's
// backward share (add_relu's forward spells the same steps out as v1-v3, for teaching).
#pragma once
#include "jk_cuda.cuh"

namespace jk {

template <class T, int K>
struct Inputs {
    const T* p[K];
};

constexpr int kUnroll = 2;  // 16-byte vectors per thread per input: loads in flight before the first use

// Each thread loads kUnroll vectors of every input before computing, so it has 2*K loads in flight;
// elements past the last whole vector (fewer than N) are done one by one by the first threads.
template <class T, int K, int N, class Op>
__global__ void map_vec_kernel(Inputs<T, K> in, T* __restrict__ out, int64_t n, Op op) {
    const int64_t n_main = n / N * N;
    const int64_t base = (static_cast<int64_t>(blockIdx.x) * kUnroll * blockDim.x + threadIdx.x) * N;
    Vec<T, N> v[kUnroll][K];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + static_cast<int64_t>(u) * blockDim.x * N;
        if (i < n_main) {
#pragma unroll
            for (int k = 0; k < K; ++k) v[u][k] = load_vec<N>(in.p[k] + i);
        }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + static_cast<int64_t>(u) * blockDim.x * N;
        if (i < n_main) {
            Vec<T, N> r;
#pragma unroll
            for (int e = 0; e < N; ++e) {
                acc_t<T> args[K];
#pragma unroll
                for (int k = 0; k < K; ++k) args[k] = to_acc(v[u][k].v[e]);
                r.v[e] = from_acc<T>(op(args));
            }
            store_vec<N>(out + i, r);
        }
    }
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t < n - n_main) {
        acc_t<T> args[K];
#pragma unroll
        for (int k = 0; k < K; ++k) args[k] = to_acc(in.p[k][n_main + t]);
        out[n_main + t] = from_acc<T>(op(args));
    }
}

// For pointers that are not 16-byte aligned (a tensor that starts inside another's storage): one element
// per thread per step of a grid-stride loop.
template <class T, int K, class Op>
__global__ void map_scalar_kernel(Inputs<T, K> in, T* __restrict__ out, int64_t n, Op op) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        acc_t<T> args[K];
#pragma unroll
        for (int k = 0; k < K; ++k) args[k] = to_acc(in.p[k][i]);
        out[i] = from_acc<T>(op(args));
    }
}

template <class T, int K, class Op>
cudaError_t launch_map(Inputs<T, K> in, T* out, int64_t n, Op op, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    bool aligned = aligned16(out);
    for (int k = 0; k < K; ++k) aligned = aligned && aligned16(in.p[k]);
    if (aligned) {
        constexpr int N = kVec<T>;
        // enough threads for every whole vector, and at least one block for the tail
        const int64_t blocks = ceil_div<int64_t>(std::max<int64_t>(n / N, 1), int64_t(kBlock) * kUnroll);
        map_vec_kernel<T, K, N><<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(in, out, n, op);
    } else {
        const int64_t blocks = std::min<int64_t>(ceil_div<int64_t>(n, kBlock), int64_t(sm_count()) * 32);
        map_scalar_kernel<T, K><<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(in, out, n, op);
    }
    return cudaGetLastError();
}

}  // namespace jk
