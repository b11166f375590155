// bias_gelu: out = gelu(x + bias) in one pass (eager torch makes two: the add writes x + bias, gelu reads it).
// Rows of whole 16-byte vectors (width % N == 0, aligned) take bias_gelu_rows_kernel: a thread keeps its bias
// vectors for all the rows it computes. Otherwise (or for a row too wide for the grid) the flat kernel runs
// over rows * width elements, one element a thread (or in 16-byte vectors), carrying each thread's bias
// column as it loops. The backward of rows of whole vectors also sums the bias gradient as it writes grad_x
// (bias_gelu_backward_sum_kernel); otherwise it takes the flat kernel and the binding leaves the sum to torch.
//
// For float16/bfloat16 the kernel is limited by arithmetic, not memory, if it calls erff (about 40
// instructions an element against 8 elements per 16-byte load: 63% of the copy bandwidth on an H200, Nsight
// Compute: SM 77%, DRAM 49%). Those dtypes use gelu_fast.cuh instead, exact to 2e-5 relative (ten times
// below float16's half-ulp); float32 and float64 keep the libm functions. Even so the 16-bit kernels issue
// an instruction in ~80% of cycles (Nsight Compute on the bfloat16 forward), so every instruction an element
// counts: see add_bias and the rows kernel. README.md in this folder lists what else was measured and dropped.
//
// Launch knobs, for benchmarks/variants.py (a -D on the nvcc line sets one for every dtype; 0, the default,
// keeps the measured shape of each dtype, kCols/kRows/kRowsBlock below): BIAS_GELU_COLS column vectors and
// BIAS_GELU_ROWS rows a thread, BIAS_GELU_BLOCK threads a block, of the rows kernel (every row of whole
// 16-byte vectors). tests/test_variants.py builds a variant and reads the shape off its sm_90 object.
#ifndef BIAS_GELU_COLS
#define BIAS_GELU_COLS 0
#endif
#ifndef BIAS_GELU_ROWS
#define BIAS_GELU_ROWS 0
#endif
#ifndef BIAS_GELU_BLOCK
#define BIAS_GELU_BLOCK 0
#endif
#include "bias_gelu.h"
#include "gelu_fast.cuh"
#include "gelu_math.h"
#include "jk_cuda.cuh"

template <class T>
constexpr bool kFast = sizeof(T) == 2;  // float16, bfloat16

// u = x + bias as torch's gelu(x + bias) sees it: rounded to T. For the 16-bit types one packed add per two
// elements (add.rn.bf16x2 / f16x2 round the exact sum once; torch's float add then rounding to T gives the
// same value, since a float sum of two 16-bit numbers is exact unless one is too small to reach T's
// rounding bit); otherwise in float and rounded.
template <class T, int N>
__device__ __forceinline__ void add_bias(const jk::Vec<T, N>& x, const jk::Vec<T, N>& b, jk::acc_t<T> (&u)[N]) {
    if constexpr (kFast<T> && N % 2 == 0) {
        using P = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
        const P* xp = reinterpret_cast<const P*>(x.v);
        const P* bp = reinterpret_cast<const P*>(b.v);
#pragma unroll
        for (int e = 0; e < N; e += 2) {
            const P sum = __hadd2(xp[e / 2], bp[e / 2]);
            if constexpr (std::is_same_v<T, __nv_bfloat16>) {
                // a bfloat16 is a float's high half: one shift or one mask a value, where .x/.y and
                // __bfloat162float cost a byte permute and a shift for the high one
                uint32_t bits;
                memcpy(&bits, &sum, sizeof bits);
                u[e] = __uint_as_float(bits << 16);
                u[e + 1] = __uint_as_float(bits & 0xffff0000u);
            } else {
                const float2 f = __half22float2(sum);
                u[e] = f.x;
                u[e + 1] = f.y;
            }
        }
    } else {
#pragma unroll
        for (int e = 0; e < N; ++e) u[e] = jk::to_acc(jk::from_acc<T>(jk::to_acc(x.v[e]) + jk::to_acc(b.v[e])));
    }
}

template <class T, bool BACKWARD, bool TANH>
__device__ __forceinline__ T apply(jk::acc_t<T> u, T g) {
    if constexpr (kFast<T>) {
        if constexpr (BACKWARD) {
            return jk::from_acc<T>(jk::to_acc(g) * (TANH ? gelu_fast::tanh_grad(u) : gelu_fast::erf_grad(u)));
        } else {
            return jk::from_acc<T>(TANH ? gelu_fast::tanh(u) : gelu_fast::erf(u));
        }
    } else if constexpr (BACKWARD) {
        return jk::from_acc<T>(jk::to_acc(g) * gelu_math::gelu_grad(u, TANH));
    } else {
        return jk::from_acc<T>(gelu_math::gelu(u, TANH));
    }
}

// One vector's result: gelu(x + bias), or grad * gelu'(x + bias) (g unused in the forward). The flat and the
// rows kernel share it; they differ only in where their vectors are. y is an out-parameter because returning
// it by value made ptxas reorder the 16-bit rows kernels (same instruction count, other schedule, unmeasured);
// this form leaves the SASS of every vector kernel as measured on an H200 (cuobjdump).
template <class T, int N, bool BACKWARD, bool TANH>
__device__ __forceinline__ void bias_gelu_vec(const jk::Vec<T, N>& x, const jk::Vec<T, N>& b, const jk::Vec<T, N>& g,
                                              jk::Vec<T, N>& y) {
    jk::acc_t<T> a[N];
    add_bias(x, b, a);
#pragma unroll
    for (int e = 0; e < N; ++e) y.v[e] = apply<T, BACKWARD, TANH>(a[e], BACKWARD ? g.v[e] : T{});
}

// Where a thread's vectors sit in the bias: the column of its first element and how far the column moves
// between its vectors (step) and between grid-stride iterations (jump), both reduced modulo width on the host,
// so the loop adds and wraps instead of dividing (a 64-bit division is a ~100-instruction subroutine).
struct Columns {
    int64_t width, step, jump;
};

// BACKWARD: out = grad * gelu'(x + bias); otherwise out = gelu(x + bias) (grad unused). U vectors per thread
// per iteration, all loaded before the first is used.
template <class T, int N, int U, bool BACKWARD, bool TANH>
__global__ void bias_gelu_kernel(const T* __restrict__ grad, const T* __restrict__ x, const T* __restrict__ bias,
                                 T* __restrict__ out, int64_t n, Columns c) {
    const int64_t chunk = static_cast<int64_t>(blockDim.x) * N;  // from one of a thread's vectors to the next
    const int64_t stride = static_cast<int64_t>(gridDim.x) * chunk * U;
    int64_t i = static_cast<int64_t>(blockIdx.x) * chunk * U + static_cast<int64_t>(threadIdx.x) * N;
    int64_t col = i < n ? i % c.width : 0;
    for (; i < n; i += stride) {
        jk::Vec<T, N> xv[U], bv[U], gv[U];
        int64_t cu = col;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t j = i + u * chunk;
            if (j < n) {
                xv[u] = jk::load_vec<N>(x + j);
                bv[u] = jk::load_vec<N>(bias + cu);
                if constexpr (BACKWARD) gv[u] = jk::load_vec<N>(grad + j);
            }
            cu += c.step;
            if (cu >= c.width) cu -= c.width;
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t j = i + u * chunk;
            if (j < n) {
                jk::Vec<T, N> r;
                bias_gelu_vec<T, N, BACKWARD, TANH>(xv[u], bv[u], gv[u], r);
                if constexpr (sizeof(r) == 16) {
                    jk::store_vec_global<N>(out + j, r);
                } else {
                    jk::store_vec<N>(out + j, r);
                }
            }
        }
        col += c.jump;
        if (col >= c.width) col -= c.width;
    }
}

// The forward for rows of whole 16-byte vectors (width % N == 0), the common case: a thread owns C column
// vectors (BLOCK apart, so each of a warp's loads is one coalesced stretch) in K consecutive rows. It loads its
// C bias vectors once and needs no column arithmetic, and its C * K loads are all in flight before it
// computes. A 1-D grid of K-row groups times col_blocks stretches of BLOCK * C vectors, in memory order (a 2-D
// grid with the rows in x sent consecutive blocks a row apart when a row took several: 94.8-96.8% of the copy
// against 96.9-99.7% in order, float32, 2 vectors x 128 threads). No 64-bit division anywhere (the flat
// kernel's per-thread 64-bit modulo is ~100 instructions, a cost that made one thread per vector the slowest
// launch in bfloat16); a block divides its index by col_blocks, in 32 bits, only when a row takes several.
// No __launch_bounds__: with one (even (1024, 1)) ptxas gave the 16-bit kernels 47 registers instead of 32;
// float32's shape gets 32 without it (100% occupancy; tests/test_kernels.py holds it there). TRITON_LOADS: x
// with load_vec_global and the bias with load_vec_evict_last (jk_cuda.cuh says why).
// GUARD false: the launcher found every row and column in range (rows % K == 0, width a multiple of a block's
// stretch), the common shape. The bounds checks split the unrolled loads and math into guarded pieces: float32's
// exact forward is 335 SASS instructions with them, 278 without (sm_90, nvcc 13.0). Guarded, this kernel fell
// 1.3-5.9% behind torch.compile in some rounds at 2^28 where an unguarded copy of Inductor's indexing held
// 99.7-101.3% of the copy; unguarded, no such rounds were seen in 36 at 2^28 (ours and torch.compile 100.8%).
// 32-bit offsets saved 14 instructions with the checks and none without them (284 against 278), so the
// offsets stay 64-bit.
template <class T, int N, int C, int K, int BLOCK, bool TRITON_LOADS, bool TANH, bool GUARD>
__global__ void bias_gelu_rows_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out,
                                      int64_t rows, int64_t width, unsigned col_blocks) {
    unsigned group = blockIdx.x, col_block = 0;
    if (col_blocks > 1) {
        group = blockIdx.x / col_blocks;
        col_block = blockIdx.x - group * col_blocks;
    }
    const int64_t first = (static_cast<int64_t>(col_block) * BLOCK * C + threadIdx.x) * N;
    constexpr int64_t apart = int64_t(BLOCK) * N;
    const int64_t row = static_cast<int64_t>(group) * K;
    jk::Vec<T, N> b[C], xv[K][C];
    // the bias before x, or after it with Triton's loads: each order as measured on an H200
    const auto load_bias = [&] {
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const int64_t col = first + c * apart;
            if (GUARD && col >= width) continue;
            if constexpr (TRITON_LOADS) {
                b[c] = jk::load_vec_evict_last<N>(bias + col);
            } else {
                b[c] = jk::load_vec<N>(bias + col);
            }
        }
    };
    if constexpr (!TRITON_LOADS) load_bias();
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const int64_t col = first + c * apart;
            if (!GUARD || (row + k < rows && col < width)) {
                const int64_t at = (row + k) * width + col;
                if constexpr (TRITON_LOADS) {
                    xv[k][c] = jk::load_vec_global<N>(x + at);
                } else {
                    xv[k][c] = jk::load_vec<N>(x + at);
                }
            }
        }
    }
    if constexpr (TRITON_LOADS) load_bias();
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const int64_t col = first + c * apart;
            if (!GUARD || (row + k < rows && col < width)) {
                jk::Vec<T, N> y;
                bias_gelu_vec<T, N, false, TANH>(xv[k][c], b[c], xv[k][c], y);  // no grad: x stands in
                jk::store_vec_global<N>(out + (row + k) * width + col, y);
            }
        }
    }
}

// The rows kernel's shape: column vectors and rows a thread, threads a block, loads; the best measured on the
// H200 at rows of 4096. 16-bit: 1 x 2 rows, 512 threads, 97-98% of the copy bandwidth (4 rows: 95-97%; 1 row:
// 92-95%). float32: 2 vectors of one row, 128 threads, 32 registers (100% occupancy) and Triton's loads, the
// shape of torch.compile's XBLOCK=1024 / 4-warp kernel: 98.7-99.8% (4 vectors, 256 threads, 56 registers:
// 96.8-98.3%). float64 was not timed. The BIAS_GELU_* knobs above replace these for every dtype.
template <class T>
constexpr int kCols = BIAS_GELU_COLS > 0 ? BIAS_GELU_COLS : sizeof(T) == 4 ? 2 : 1;
template <class T>
constexpr int kRows = BIAS_GELU_ROWS > 0 ? BIAS_GELU_ROWS : sizeof(T) == 4 ? 1 : 2;
template <class T>
constexpr int kRowsBlock = BIAS_GELU_BLOCK > 0   ? BIAS_GELU_BLOCK
                           : sizeof(T) == 2     ? 512
                           : sizeof(T) == 4     ? 128
                                                : 256;
template <class T>
constexpr bool kTritonLoads = sizeof(T) == 4;

// Needs width % N == 0 and 16-byte alignment; false if the grid would not fit (the caller then takes the flat
// kernel).
template <class T, int N, bool TANH>
bool launch_rows(const T* a, const T* b, T* z, int64_t rows, int64_t width, cudaStream_t stream, cudaError_t& err) {
    constexpr int C = kCols<T>, K = kRows<T>, BLOCK = kRowsBlock<T>;
    constexpr bool TRITON_LOADS = kTritonLoads<T>;
    static_assert(BLOCK % 32 == 0 && BLOCK <= 1024 && C > 0 && K > 0, "BIAS_GELU_BLOCK: a multiple of 32, <= 1024");
    const int64_t col_blocks = jk::ceil_div<int64_t>(width / N, int64_t(BLOCK) * C);
    const int64_t blocks = jk::ceil_div<int64_t>(rows, K) * col_blocks;
    if (blocks > 0x7fffffff) return false;
    const auto kernel = rows % K == 0 && width % (int64_t(BLOCK) * C * N) == 0
                            ? bias_gelu_rows_kernel<T, N, C, K, BLOCK, TRITON_LOADS, TANH, false>
                            : bias_gelu_rows_kernel<T, N, C, K, BLOCK, TRITON_LOADS, TANH, true>;
    kernel<<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(a, b, z, rows, width,
                                                                static_cast<unsigned>(col_blocks));
    err = cudaGetLastError();
    return true;
}

// The backward with the bias gradient fused in. Torch's sum of grad_x over rows re-read grad_x at ~2.5 TB/s for 16384 x
// 4096 bfloat16 and cost the op a third of its time (84% of the copy, where grad_x's own kernel ran at 97.7%). Here a
// block covers COLS column vectors, ROWL threads a column, and strides down the rows: `slots` blocks a column stretch,
// one wave of them, each taking K * ROWL rows (K in flight a thread) in turn, so that the blocks of the wave walk
// memory together in order. Each thread adds up the grad_x it stores (as rounded to T, in acc_t, in row order), the
// block adds its ROWL partial sums through shared memory, and partial[slot][col] receives them for the binding to sum.
// Groups of 64 rows a block lost 7% to the last partial wave (bfloat16 2^26), one wave of contiguous groups up to 5% at
// float32 2^28; this stride was the fastest of the three in three of the four cases (bfloat16 2^26: 0.1133-0.1145 ms
// against 0.1260-0.1263 and 0.1176-0.1185; grad_x's kernel then torch's sum: 0.1568-0.1571) and 3.6% behind groups of
// 64 in the fourth (float32 2^28: 0.8044-0.8078 against 0.7747-0.7769 ms). The order of every sum follows from the
// shape and the GPU's SM count and occupancy: the same bits on every run on one kind of GPU.
template <class T, int N, int K, int COLS, int ROWL, bool TANH>
__global__ void bias_gelu_backward_sum_kernel(const T* __restrict__ grad, const T* __restrict__ x,
                                              const T* __restrict__ bias, T* __restrict__ out,
                                              jk::acc_t<T>* __restrict__ partial, int64_t rows, int64_t width,
                                              unsigned col_blocks) {
    using A = jk::acc_t<T>;
    unsigned slot = blockIdx.x, col_block = 0;
    if (col_blocks > 1) {
        slot = blockIdx.x / col_blocks;
        col_block = blockIdx.x - slot * col_blocks;
    }
    const int lane = threadIdx.x % COLS, rlane = threadIdx.x / COLS;
    const int64_t col = (static_cast<int64_t>(col_block) * COLS + lane) * N;
    const bool active = col < width;  // inactive threads still reach the barrier
    constexpr int64_t step = int64_t(K) * ROWL;
    const int64_t stride = static_cast<int64_t>(gridDim.x / col_blocks) * step;
    jk::Vec<T, N> b;
    if (active) b = jk::load_vec<N>(bias + col);
    A sum[N] = {};
    for (int64_t row = slot * step + rlane; active && row < rows; row += stride) {
        jk::Vec<T, N> xv[K], gv[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int64_t r = row + int64_t(k) * ROWL;
            if (r < rows) {
                xv[k] = jk::load_vec<N>(x + r * width + col);
                gv[k] = jk::load_vec<N>(grad + r * width + col);
            }
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int64_t r = row + int64_t(k) * ROWL;
            if (r < rows) {
                jk::Vec<T, N> y;
                bias_gelu_vec<T, N, true, TANH>(xv[k], b, gv[k], y);
                if constexpr (sizeof(y) == 16) {
                    jk::store_vec_global<N>(out + r * width + col, y);
                } else {
                    jk::store_vec<N>(out + r * width + col, y);
                }
#pragma unroll
                for (int e = 0; e < N; ++e) sum[e] += jk::to_acc(y.v[e]);
            }
        }
    }
    if constexpr (ROWL > 1) {
        __shared__ A others[ROWL - 1][N][COLS];  // [e][lane]: consecutive lanes, consecutive banks
        if (rlane > 0) {
#pragma unroll
            for (int e = 0; e < N; ++e) others[rlane - 1][e][lane] = sum[e];
        }
        __syncthreads();
        if (rlane > 0) return;
#pragma unroll
        for (int r = 0; r < ROWL - 1; ++r) {
#pragma unroll
            for (int e = 0; e < N; ++e) sum[e] += others[r][e][lane];
        }
    }
    if (!active) return;
    A* p = partial + static_cast<int64_t>(slot) * width + col;
#pragma unroll
    for (int e = 0; e < N; ++e) p[e] = sum[e];
}

// The fused backward's shape: column vectors and threads a column a block, rows in flight a thread. Of the
// shapes timed, K = 1 with 128 columns was 0.5-2% faster in float32 and 2.5-3% slower in bfloat16; one shape
// serves all dtypes.
constexpr int kSumCols = 64, kSumRowLanes = 4, kSumK = 2;

// Blocks a column stretch (the partial sums' rows): one wave of blocks, at most one a K * ROWL rows.
template <class T, int N, bool TANH>
int64_t sum_slots(int64_t rows, int64_t width) {
    constexpr int K = kSumK, COLS = kSumCols, ROWL = kSumRowLanes;
    const int64_t col_blocks = jk::ceil_div<int64_t>(width / N, COLS);
    const int64_t wave = int64_t(jk::sm_count()) *
                         jk::blocks_per_sm<bias_gelu_backward_sum_kernel<T, N, K, COLS, ROWL, TANH>>(COLS * ROWL);
    return std::max<int64_t>(1, std::min<int64_t>(wave / col_blocks, jk::ceil_div<int64_t>(rows, K * ROWL)));
}

template <class T, int N, bool TANH>
cudaError_t launch_sum(const T* g, const T* a, const T* b, T* z, jk::acc_t<T>* partial, int64_t rows,
                       int64_t width, int64_t slots, cudaStream_t stream) {
    constexpr int K = kSumK, COLS = kSumCols, ROWL = kSumRowLanes;
    const int64_t col_blocks = jk::ceil_div<int64_t>(width / N, COLS);
    bias_gelu_backward_sum_kernel<T, N, K, COLS, ROWL, TANH>
        <<<static_cast<unsigned>(slots * col_blocks), COLS * ROWL, 0, stream>>>(
            g, a, b, z, partial, rows, width, static_cast<unsigned>(col_blocks));
    return cudaGetLastError();
}

// The flat kernel's vectors per thread per step and blocks per SM (each thread loops over the rest): the best
// measured on an H200 at rows of 4096, before the rows kernel took the common case. 16-bit types: 2 and 32,
// 91-92% of the copy bandwidth (one thread per vector pair, no cap: 83%, its 64-bit modulo costs ~100
// instructions). float32: 1 and 16, 92% (2 and 16: 86%). Software prefetching of the next step's vectors
// gained nothing (83-92%).
template <class T>
constexpr int kUnroll = sizeof(T) == 2 ? 2 : 1;
template <class T>
constexpr int kBlocksPerSM = sizeof(T) == 2 ? 32 : 16;

template <class T, int N, bool BACKWARD, bool TANH>
cudaError_t launch_flat(const T* g, const T* a, const T* b, T* z, int64_t n, int64_t width, cudaStream_t stream) {
    constexpr int block = jk::kBlock, U = kUnroll<T>;
    const int64_t grid = std::min<int64_t>(jk::ceil_div<int64_t>(n / N, int64_t(block) * U),
                                           int64_t(jk::sm_count()) * kBlocksPerSM<T>);
    const int64_t chunk = int64_t(block) * N;
    const Columns c{width, chunk % width, (grid * chunk * U) % width};
    bias_gelu_kernel<T, N, U, BACKWARD, TANH><<<static_cast<unsigned>(grid), block, 0, stream>>>(g, a, b, z, n, c);
    return cudaGetLastError();
}

template <class T, int N, bool BACKWARD>
cudaError_t launch_n(const T* g, const T* a, const T* b, T* z, int64_t n, int64_t width, bool tanh,
                     cudaStream_t stream) {
    return tanh ? launch_flat<T, N, BACKWARD, true>(g, a, b, z, n, width, stream)
                : launch_flat<T, N, BACKWARD, false>(g, a, b, z, n, width, stream);
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
        constexpr int N = jk::kVec<T>;
        const bool vec = width % N == 0 && jk::aligned16(a) && jk::aligned16(b) && jk::aligned16(z) &&
                         (!BACKWARD || jk::aligned16(g));
        if (vec) {
            // the backward's rows of whole vectors take bias_gelu_backward_sum_kernel (the binding asks
            // bias_gelu_backward_fuses first); only a grid too large for it comes here
            if constexpr (!BACKWARD) {
                cudaError_t err;
                const bool done = tanh ? launch_rows<T, N, true>(a, b, z, rows, width, stream, err)
                                       : launch_rows<T, N, false>(a, b, z, rows, width, stream, err);
                if (done) return err;
            }
            return launch_n<T, N, BACKWARD>(g, a, b, z, n, width, tanh, stream);
        }
        return launch_n<T, 1, BACKWARD>(g, a, b, z, n, width, tanh, stream);
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

bool bias_gelu_backward_fuses(jk::DType dtype, const void* grad, const void* x, const void* bias,
                              const void* grad_x, int64_t rows, int64_t width) {
    bool fuses = false;
    jk::dispatch_cuda(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        // the grid is at most one wave, or one block a column stretch: fits unless that is past 2^31 - 1
        fuses = rows > 0 && width % N == 0 && jk::ceil_div<int64_t>(width / N, kSumCols) <= 0x7fffffff &&
                jk::aligned16(grad) && jk::aligned16(x) && jk::aligned16(bias) && jk::aligned16(grad_x);
        return cudaSuccess;
    });
    return fuses;
}

int64_t bias_gelu_sum_slots(jk::DType dtype, int64_t rows, int64_t width, bool tanh) {
    int64_t slots = 1;
    jk::dispatch_cuda(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        slots = tanh ? sum_slots<T, N, true>(rows, width) : sum_slots<T, N, false>(rows, width);
        return cudaSuccess;
    });
    return slots;
}

cudaError_t bias_gelu_backward_sum_cuda(jk::DType dtype, const void* grad, const void* x, const void* bias,
                                        void* grad_x, void* partial, int64_t rows, int64_t width, int64_t slots,
                                        bool tanh, cudaStream_t stream) {
    return jk::dispatch_cuda(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        const T* g = static_cast<const T*>(grad);
        const T* a = static_cast<const T*>(x);
        const T* b = static_cast<const T*>(bias);
        T* z = static_cast<T*>(grad_x);
        auto* p = static_cast<jk::acc_t<T>*>(partial);
        return tanh ? launch_sum<T, N, true>(g, a, b, z, p, rows, width, slots, stream)
                    : launch_sum<T, N, false>(g, a, b, z, p, rows, width, slots, stream);
    });
}
