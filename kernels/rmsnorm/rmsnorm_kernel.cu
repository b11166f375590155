// rmsnorm fused with the residual add: one read of x and residual, one write of new_residual and out, where
// eager torch makes five kernels and re-reads its intermediates. A row is reduced by a warp (shuffles only)
// or a block (shuffles, then one value per warp through shared memory), in float32.
#include "jk_rows.cuh"
#include "rmsnorm.h"

// K: vectors of its row a thread keeps in registers between the passes (more are re-read). x and residual are
// read with ld.global.nc: Triton's plain ld.global (jk::load_vec_global) gained 0.6% at bfloat16 2^26 and lost
// 0.1% at 2^28.
template <class T, int N, bool WARP, int K = jk::kCached>
__global__ void rmsnorm_kernel(const T* __restrict__ x, const T* __restrict__ residual, const T* __restrict__ weight,
                               T* __restrict__ out, T* __restrict__ new_residual, int64_t rows, int64_t width,
                               double eps) {
    using A = jk::acc_t<T>;
    __shared__ A scratch[32];
    const jk::RowPos p = jk::row_pos<WARP>();
    if (WARP && p.row >= rows) return;  // whole warps only: no shuffle is left half-empty
    const int64_t offset = p.row * width, vectors = width / N;
    const T* xr = x + offset;
    const T* rr = residual + offset;
    T* nr = new_residual + offset;
    T* o = out + offset;

    // Pass 1: new_residual = x + residual (kept in registers for the first K vectors), sum of squares.
    jk::Vec<T, N> cached[K];
    A sum_sq = 0;
    auto load = [](const T* q) { return jk::load_vec<N>(q); };
    auto add_one = [&](int64_t v) {
        const jk::Vec<T, N> a = load(xr + v * N), b = load(rr + v * N);
        jk::Vec<T, N> s;
#pragma unroll
        for (int e = 0; e < N; ++e) {
            s.v[e] = jk::from_acc<T>(jk::to_acc(a.v[e]) + jk::to_acc(b.v[e]));
            const A f = jk::to_acc(s.v[e]);  // the stored (rounded) value, as the reference sees it
            sum_sq += f * f;
        }
        jk::store_vec<N>(nr + v * N, s);
        return s;
    };
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int64_t v = p.lane + static_cast<int64_t>(k) * p.width;
        if (v < vectors) cached[k] = add_one(v);
    }
    for (int64_t v = p.lane + static_cast<int64_t>(K) * p.width; v < vectors; v += p.width) add_one(v);

    sum_sq = WARP ? jk::warp_sum(sum_sq) : jk::block_sum(sum_sq, scratch);
    const A rstd = A(1) / sqrt(sum_sq / static_cast<A>(width) + static_cast<A>(eps));

    // Pass 2: out = new_residual * rstd * weight.
    auto scale_one = [&](int64_t v, const jk::Vec<T, N>& s) {
        const jk::Vec<T, N> w = jk::load_vec<N>(weight + v * N);
        jk::Vec<T, N> r;
#pragma unroll
        for (int e = 0; e < N; ++e) r.v[e] = jk::from_acc<T>(jk::to_acc(s.v[e]) * rstd * jk::to_acc(w.v[e]));
        jk::store_vec<N>(o + v * N, r);
    };
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int64_t v = p.lane + static_cast<int64_t>(k) * p.width;
        if (v < vectors) scale_one(v, cached[k]);
    }
    for (int64_t v = p.lane + static_cast<int64_t>(K) * p.width; v < vectors; v += p.width) {
        scale_one(v, jk::load_vec<N>(nr + v * N));  // this thread's own earlier store: visible to it
    }
}

// A block per row of 16-bit 16-byte vectors holds 2 of them a thread, not kCached: at width 4096 (512 vectors)
// 256 threads x 2 (43 registers) ran at 98.7-99.7% of the copy where 128 x 4 (54 registers) ran at 96.6-97.2%
// and Triton's row-a-program kernel at 96.0-97.8% (H200).
// float32 keeps kCached: 256 x 4 was level with the best there (98.5-99.0%). Rows of more than 2048 vectors
// keep kCached too, so that 1024 threads still hold 4096 of them.
template <class T, int N>
constexpr int kBlockCached = sizeof(T) == 2 && N > 1 ? 2 : jk::kCached;

template <class T, int N>
cudaError_t launch(const T* x, const T* r, const T* w, T* o, T* nr, int64_t rows, int64_t width, double eps,
                   cudaStream_t stream) {
    const int64_t vectors = width / N;
    constexpr int few = kBlockCached<T, N>;
    const bool fewer = few < jk::kCached && vectors <= 1024 * few;
    const jk::RowLaunch l = jk::row_launch(rows, vectors, fewer ? few : jk::kCached);
    const unsigned blocks = static_cast<unsigned>(l.blocks);
    if (l.warp_per_row) {
        rmsnorm_kernel<T, N, true><<<blocks, l.threads, 0, stream>>>(x, r, w, o, nr, rows, width, eps);
    } else if (fewer) {
        rmsnorm_kernel<T, N, false, few><<<blocks, l.threads, 0, stream>>>(x, r, w, o, nr, rows, width, eps);
    } else {
        rmsnorm_kernel<T, N, false><<<blocks, l.threads, 0, stream>>>(x, r, w, o, nr, rows, width, eps);
    }
    return cudaGetLastError();
}

cudaError_t rmsnorm_cuda(jk::DType dtype, const void* x, const void* residual, const void* weight, void* out,
                         void* new_residual, int64_t rows, int64_t width, double eps, cudaStream_t stream) {
    if (rows == 0 || width == 0) return cudaSuccess;
    return jk::dispatch_cuda(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        const T* a = static_cast<const T*>(x);
        const T* b = static_cast<const T*>(residual);
        const T* w = static_cast<const T*>(weight);
        T* o = static_cast<T*>(out);
        T* nr = static_cast<T*>(new_residual);
        // Whole vectors only when every row starts 16-byte aligned: width a multiple of N, aligned bases.
        const bool vec = width % N == 0 && jk::aligned16(a) && jk::aligned16(b) && jk::aligned16(w) &&
                         jk::aligned16(o) && jk::aligned16(nr);
        return vec ? launch<T, N>(a, b, w, o, nr, rows, width, eps, stream)
                   : launch<T, 1>(a, b, w, o, nr, rows, width, eps, stream);
    });
}
