// softmax over the last dimension in one pass over the data. Each thread holds VPT 16-byte vectors of its
// row in registers, takes their max and one exp per element, and sums those relative to its own max (online
// softmax's partial state, (max, sum)). The row's max is then reduced across the warp or block, each partial
// sum is rescaled to it by one exp per thread and summed, and the output is written from registers. A row
// longer than the registers hold continues online (the sum rescaled whenever the max grows) and re-reads the
// rest, mostly from L2.
//
// What made the bfloat16 kernel reach the copy bandwidth (74% -> 98% on an H200) was instructions, not
// the launch shape (with the old instructions it stayed at 72% whatever the threads a row): __expf's subnormal
// handling and a predicate per element for the row's end had made it issue-bound (~48 instructions an
// element). Now: -inf padding, one FFMA + ex2.approx.ftz per exp, and two cheap reductions (max, then the
// rescaled sums) instead of merging (max, sum) pairs pairwise.
#include "jk_rows.cuh"
#include "softmax.h"

// exp(x - r): for float one FFMA and one MUFU (ex2.approx), ~2 ulp plus 1 ulp per unit of |x - r|, well
// inside float32's check for logits of ordinary size. r * log2 e is rounded once per thread (r is each thread's
// own max for the elements it holds): the normalisation cancels that error within a thread, not between a row's
// threads, a relative error up to about |r| * 2^-24 (6e-5 with logits near 1e3, past float32's tolerance).
// Subtracting first (x - r, then a multiply) would cost one more instruction an element. x = -inf gives 0.
template <class A>
__device__ __forceinline__ A exp_diff(A x, A r) {
    if constexpr (std::is_same_v<A, float>) {
        return jk::exp2_approx(fmaf(x, jk::kLog2e, -r * jk::kLog2e));
    } else {
        return exp(x - r);
    }
}

// Bounds of 1024 threads: the long-row launch uses that many, and their registers must fit the SM's 64K.
template <class T, int N, int VPT, bool WARP>
__global__ void __launch_bounds__(1024) softmax_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t rows,
                                                       int64_t width) {
    using A = jk::acc_t<T>;
    __shared__ A scratch[32];
    const jk::RowPos p = jk::row_pos<WARP>();
    if (WARP && p.row >= rows) return;
    const int64_t vectors = width / N;
    const T* xr = x + p.row * width;
    T* o = out + p.row * width;

    // This thread's vectors, -inf past the row's end (exp(-inf) = 0: no per-element predicates below), their
    // max m, and exp(x - r) kept in float with r = m (0 for a thread with no elements), and their sum.
    jk::Vec<T, N> cached[VPT];
    A m = -INFINITY;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int64_t v = p.lane + static_cast<int64_t>(k) * p.width;
        if (v < vectors) {
            cached[k] = jk::load_vec<N>(xr + v * N);
        } else {
#pragma unroll
            for (int e = 0; e < N; ++e) cached[k].v[e] = jk::from_acc<T>(-INFINITY);
        }
#pragma unroll
        for (int e = 0; e < N; ++e) m = max(m, jk::to_acc(cached[k].v[e]));
    }
    const bool none_cached = m == -INFINITY;  // no finite or +inf element in registers: ex[] holds 0 (or NaN)
    const A r_cached = none_cached ? A(0) : m;   // ex[] is relative to this
    A r = r_cached, s = 0;
    A ex[VPT][N];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
#pragma unroll
        for (int e = 0; e < N; ++e) {
            ex[k][e] = exp_diff(jk::to_acc(cached[k].v[e]), r_cached);
            s += ex[k][e];
        }
    }
    // The rest of a long row, online: the sum rescaled whenever a vector raises the running max m (r = m from
    // the first element that is not -inf on; before it, s is 0 or NaN and stays so). The max starts at m, not
    // at r: a thread whose registers held only -inf would otherwise take 0 for its max, and a row whose logits
    // all lie below exp's underflow (about -87) would sum to 0.
    for (int64_t v = p.lane + static_cast<int64_t>(VPT) * p.width; v < vectors; v += p.width) {
        const jk::Vec<T, N> a = jk::load_vec<N>(xr + v * N);
        A vm = m;
#pragma unroll
        for (int e = 0; e < N; ++e) vm = max(vm, jk::to_acc(a.v[e]));
        if (vm > m) {
            s = m == -INFINITY ? s : s * exp_diff(r, vm);
            r = m = vm;
        }
#pragma unroll
        for (int e = 0; e < N; ++e) s += exp_diff(jk::to_acc(a.v[e]), r);
    }

    // The row's max, then each partial sum rescaled to it. A thread whose max is -inf holds exactly 0 (no
    // elements, or -inf ones) or NaN (max() skips NaN, exp(NaN) does not): kept as it is, so that a NaN in the
    // row makes its sum, and with it the whole row, NaN, as torch's softmax does.
    const A row_max = WARP ? jk::warp_max(m) : jk::block_max(m, scratch);
    s = m == -INFINITY ? s : s * exp_diff(r, row_max);
    const A inv = A(1) / (WARP ? jk::warp_sum(s) : jk::block_sum(s, scratch));

    // exp(x - r_cached) * exp(r_cached - row_max) / sum for the vectors in registers; the rest re-read. A
    // thread of -inf elements scales by 0 * inv: 0, but NaN where the row's sum is NaN or 0 (a row of -inf).
    const A scale = none_cached ? A(0) * inv : exp_diff(r_cached, row_max) * inv;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int64_t v = p.lane + static_cast<int64_t>(k) * p.width;
        if (v < vectors) {
            jk::Vec<T, N> y;
#pragma unroll
            for (int e = 0; e < N; ++e) y.v[e] = jk::from_acc<T>(ex[k][e] * scale);
            jk::store_vec<N>(o + v * N, y);
        }
    }
    for (int64_t v = p.lane + static_cast<int64_t>(VPT) * p.width; v < vectors; v += p.width) {
        const jk::Vec<T, N> a = jk::load_vec<N>(xr + v * N);
        jk::Vec<T, N> y;
#pragma unroll
        for (int e = 0; e < N; ++e) y.v[e] = jk::from_acc<T>(exp_diff(jk::to_acc(a.v[e]), row_max) * inv);
        jk::store_vec<N>(o + v * N, y);
    }
}

// Vectors a thread holds: 32 elements' worth (4 of bfloat16, 8 of float32), at most 8, which fits the 64
// registers that 1024 threads a row allow; rows longer than 1024 threads hold re-read the rest. On an H200,
// rows of 4096: 32 elements a thread (128 threads a row) 97-98% of the copy bandwidth in both dtypes, 16
// elements (256 threads) 91-94%.
// The scalar fallback (odd widths, unaligned rows) holds 4: with 8, ptxas spilled 8-16 bytes to the stack.
template <int N>
constexpr int kVPT = N == 1 ? 4 : std::min(8, 32 / N);

template <class T, int N>
cudaError_t launch(const T* x, T* out, int64_t rows, int64_t width, cudaStream_t stream) {
    constexpr int vpt = kVPT<N>;
    const int64_t vectors = width / N;
    const int64_t warps = jk::ceil_div<int64_t>(jk::ceil_div<int64_t>(vectors, vpt), 32);
    const int threads = static_cast<int>(std::min<int64_t>(1024, warps * 32));
    if (threads == 32) {  // a warp per row, 8 rows a block
        const unsigned blocks = static_cast<unsigned>(jk::ceil_div<int64_t>(rows, 8));
        softmax_kernel<T, N, vpt, true><<<blocks, 256, 0, stream>>>(x, out, rows, width);
    } else {
        softmax_kernel<T, N, vpt, false><<<static_cast<unsigned>(rows), threads, 0, stream>>>(x, out, rows, width);
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
