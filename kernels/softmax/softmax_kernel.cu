// softmax over the last dimension in one pass over the data: each thread keeps a running (max, sum) of its
// elements (online softmax: the sum is rescaled when the max grows), the pairs are merged across the warp
// or block, and the output pass reads the row from registers (the first kCached vectors) or L2.
#include <cfloat>

#include "jk_rows.cuh"
#include "softmax.h"

template <class A>
__device__ __forceinline__ A fast_exp(A v) {
    if constexpr (std::is_same_v<A, float>) {
        return __expf(v);  // ex2.approx: ~2 ulp + 1.2 ulp per unit of |v|, well inside float32's check
    } else {
        return exp(v);
    }
}

// Merge (m2, s2) into (m, s): sums relative to their own maxima, so rescale to the larger. An empty part
// has m = -inf and s = 0 and must not produce exp(-inf - -inf) = NaN.
template <class A>
__device__ __forceinline__ void merge(A& m, A& s, A m2, A s2) {
    if (m2 > m) {
        s = s * fast_exp(m - m2) + s2;
        m = m2;
    } else if (m2 != -INFINITY) {
        s += s2 * fast_exp(m2 - m);
    }
}

template <class T, int N, bool WARP>
__global__ void softmax_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t rows, int64_t width) {
    using A = jk::acc_t<T>;
    __shared__ A scratch_m[32], scratch_s[32];
    const jk::RowPos p = jk::row_pos<WARP>();
    if (WARP && p.row >= rows) return;
    const int64_t vectors = width / N;
    const T* xr = x + p.row * width;
    T* o = out + p.row * width;

    // Pass 1a: the cached vectors: their max first, then one exp per element, kept (in float) for pass 2,
    // so that each element costs one exp in all (pass 2 rescales by one exp per thread, not per element).
    jk::Vec<T, N> cached[jk::kCached];
    A ex[jk::kCached][N];
    A m = -INFINITY, s = 0;
#pragma unroll
    for (int k = 0; k < jk::kCached; ++k) {
        const int64_t v = p.lane + static_cast<int64_t>(k) * p.width;
        if (v < vectors) {
            cached[k] = jk::load_vec<N>(xr + v * N);
#pragma unroll
            for (int e = 0; e < N; ++e) m = max(m, jk::to_acc(cached[k].v[e]));
        }
    }
    const A m_cached = m;  // ex[] is relative to this
#pragma unroll
    for (int k = 0; k < jk::kCached; ++k) {
        const int64_t v = p.lane + static_cast<int64_t>(k) * p.width;
        if (v < vectors) {
#pragma unroll
            for (int e = 0; e < N; ++e) {
                ex[k][e] = fast_exp(jk::to_acc(cached[k].v[e]) - m_cached);
                s += ex[k][e];
            }
        }
    }
    // Pass 1b: the rest of a long row, online: one rescale per vector whose max exceeds the running max.
    for (int64_t v = p.lane + static_cast<int64_t>(jk::kCached) * p.width; v < vectors; v += p.width) {
        const jk::Vec<T, N> a = jk::load_vec<N>(xr + v * N);
        A vm = m;
#pragma unroll
        for (int e = 0; e < N; ++e) vm = max(vm, jk::to_acc(a.v[e]));
        if (vm > m) {
            s *= fast_exp(m - vm);
            m = vm;
        }
#pragma unroll
        for (int e = 0; e < N; ++e) s += fast_exp(jk::to_acc(a.v[e]) - m);
    }

    // Merge the (max, sum) pairs: across the warp with shuffles, then (block per row) across warps.
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
    }
    if constexpr (!WARP) {
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        if (lane == 0) {
            scratch_m[warp] = m;
            scratch_s[warp] = s;
        }
        __syncthreads();
        m = -INFINITY;
        s = 0;
        for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) merge(m, s, scratch_m[w], scratch_s[w]);
    }
    const A inv = A(1) / s;

    // Pass 2: write exp(x - max) / sum; for the cached vectors, exp(x - m_cached) * exp(m_cached - max) / sum.
    auto write = [&](int64_t v, const jk::Vec<T, N>& a) {
        jk::Vec<T, N> r;
#pragma unroll
        for (int e = 0; e < N; ++e) r.v[e] = jk::from_acc<T>(fast_exp(jk::to_acc(a.v[e]) - m) * inv);
        jk::store_vec<N>(o + v * N, r);
    };
    const A scale = m_cached == -INFINITY ? A(0) : fast_exp(m_cached - m) * inv;  // -inf: this thread had none
#pragma unroll
    for (int k = 0; k < jk::kCached; ++k) {
        const int64_t v = p.lane + static_cast<int64_t>(k) * p.width;
        if (v < vectors) {
            jk::Vec<T, N> r;
#pragma unroll
            for (int e = 0; e < N; ++e) r.v[e] = jk::from_acc<T>(ex[k][e] * scale);
            jk::store_vec<N>(o + v * N, r);
        }
    }
    for (int64_t v = p.lane + static_cast<int64_t>(jk::kCached) * p.width; v < vectors; v += p.width) {
        write(v, jk::load_vec<N>(xr + v * N));
    }
}

template <class T, int N>
cudaError_t launch(const T* x, T* out, int64_t rows, int64_t width, cudaStream_t stream) {
    const jk::RowLaunch l = jk::row_launch(rows, width / N);
    const unsigned blocks = static_cast<unsigned>(l.blocks);
    if (l.warp_per_row) {
        softmax_kernel<T, N, true><<<blocks, l.threads, 0, stream>>>(x, out, rows, width);
    } else {
        softmax_kernel<T, N, false><<<blocks, l.threads, 0, stream>>>(x, out, rows, width);
    }
    return cudaGetLastError();
}

cudaError_t softmax_cuda(jk::DType dtype, const void* x, void* out, int64_t rows, int64_t width, cudaStream_t stream) {
    if (rows == 0 || width == 0) return cudaSuccess;
    return jk::dispatch_cuda(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        const T* a = static_cast<const T*>(x);
        T* o = static_cast<T*>(out);
        const bool vec = width % N == 0 && jk::aligned16(a) && jk::aligned16(o);
        return vec ? launch<T, N>(a, o, rows, width, stream) : launch<T, 1>(a, o, rows, width, stream);
    });
}
