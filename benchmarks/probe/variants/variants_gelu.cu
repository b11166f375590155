// bias_gelu launch configurations for benchmarks/probe/variants.py (the kernel is the production one).
#include <map>
#include <tuple>

#include "jk_torch.h"

#include "../../../kernels/bias_gelu/bias_gelu_kernel.cu"

// gelu(x + bias), erf form: U vectors a thread per step, fast (gelu_fast.cuh) or libm erff, grid capped at
// grid_per_sm blocks per SM (0: one thread per U vectors).
torch::Tensor bias_gelu_cfg(torch::Tensor x, torch::Tensor bias, int64_t u, bool fast, int64_t grid_per_sm) {
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), n = x.numel();
    TORCH_CHECK(u == 1 || u == 2 || u == 4, "u must be 1, 2 or 4, got ", u);
    jk::check_launch("bias_gelu_cfg", jk::dispatch_cuda(jk::dtype_of("bias_gelu_cfg", x), [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        const T* a = static_cast<const T*>(x.data_ptr());
        const T* b = static_cast<const T*>(bias.data_ptr());
        T* z = static_cast<T*>(out.data_ptr());
        const auto s = jk::stream();
        if (u == 1) return fast ? launch_config<T, N, false, false, 1, true>(nullptr, a, b, z, n, width, s, grid_per_sm)
                                : launch_config<T, N, false, false, 1, false>(nullptr, a, b, z, n, width, s, grid_per_sm);
        if (u == 2) return fast ? launch_config<T, N, false, false, 2, true>(nullptr, a, b, z, n, width, s, grid_per_sm)
                                : launch_config<T, N, false, false, 2, false>(nullptr, a, b, z, n, width, s, grid_per_sm);
        return fast ? launch_config<T, N, false, false, 4, true>(nullptr, a, b, z, n, width, s, grid_per_sm)
                    : launch_config<T, N, false, false, 4, false>(nullptr, a, b, z, n, width, s, grid_per_sm);
    }));
    return out;
}

// gelu(x + bias), or its backward's grad_x when grad is defined, with bias_gelu_rows_kernel (its loads as
// production's for the dtype): C column vectors in K rows a thread, block threads a block, for the shapes
// variants.py times.
template <bool BACKWARD>
torch::Tensor tile(const char* op, torch::Tensor grad, torch::Tensor x, torch::Tensor bias, int64_t c, int64_t k,
                   int64_t block) {
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), rows = width ? x.numel() / width : 0;
    jk::check_launch(op, jk::dispatch_cuda(jk::dtype_of(op, x), [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        TORCH_CHECK(width % N == 0, "width must be a multiple of ", N);
        using Launch = bool (*)(const T*, const T*, const T*, T*, int64_t, int64_t, cudaStream_t, cudaError_t&);
        static const std::map<std::tuple<int64_t, int64_t, int64_t>, Launch> shapes{
            {{1, 2, 512}, &launch_rows<T, N, BACKWARD, false, 1, 2, 512>},
            {{1, 2, 256}, &launch_rows<T, N, BACKWARD, false, 1, 2, 256>},
            {{1, 4, 256}, &launch_rows<T, N, BACKWARD, false, 1, 4, 256>},
            {{2, 1, 128}, &launch_rows<T, N, BACKWARD, false, 2, 1, 128>},
            {{2, 1, 256}, &launch_rows<T, N, BACKWARD, false, 2, 1, 256>},
            {{2, 1, 512}, &launch_rows<T, N, BACKWARD, false, 2, 1, 512>},
            {{4, 1, 256}, &launch_rows<T, N, BACKWARD, false, 4, 1, 256>},
        };
        const auto it = shapes.find({c, k, block});
        TORCH_CHECK(it != shapes.end(), op, ": no kernel for c ", c, ", k ", k, ", block ", block);
        cudaError_t err = cudaSuccess;
        TORCH_CHECK(it->second(BACKWARD ? static_cast<const T*>(grad.data_ptr()) : nullptr,
                               static_cast<const T*>(x.data_ptr()), static_cast<const T*>(bias.data_ptr()),
                               static_cast<T*>(out.data_ptr()), rows, width, jk::stream(), err),
                    op, ": the grid does not fit");
        return err;
    }));
    return out;
}

torch::Tensor bias_gelu_tile(torch::Tensor x, torch::Tensor bias, int64_t c, int64_t k, int64_t block) {
    return tile<false>("bias_gelu_tile", torch::Tensor(), x, bias, c, k, block);
}

torch::Tensor bias_gelu_tile_backward(torch::Tensor grad, torch::Tensor x, torch::Tensor bias, int64_t c, int64_t k,
                                      int64_t block) {
    TORCH_CHECK(grad.sizes() == x.sizes() && grad.is_contiguous() && x.is_contiguous(),
                "bias_gelu_tile_backward: contiguous grad and x of one shape");
    return tile<true>("bias_gelu_tile_backward", grad, x, bias, c, k, block);
}

// The backward with the bias gradient fused (bias_gelu_backward_sum_kernel, erf form): K rows in flight, COLS
// column vectors and ROWL threads a column a block, `slots` blocks a column stretch (0: production's rule, one
// wave); returns (grad_x, grad_bias).
template <class T, int N, int K, int COLS, int ROWL>
std::vector<torch::Tensor> fused(torch::Tensor grad, torch::Tensor x, torch::Tensor bias, int64_t slots) {
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), rows = width ? x.numel() / width : 0;
    if (slots == 0) slots = rows ? sum_slots<T, N, false, K, COLS, ROWL>(rows, width) : 1;
    const auto acc = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    auto partial = torch::empty({slots, width}, x.options().dtype(acc));
    if (rows > 0) {
        jk::check_launch("bias_gelu_backward_fused",
                         launch_sum<T, N, false, K, COLS, ROWL>(
                             static_cast<const T*>(grad.data_ptr()), static_cast<const T*>(x.data_ptr()),
                             static_cast<const T*>(bias.data_ptr()), static_cast<T*>(out.data_ptr()),
                             static_cast<jk::acc_t<T>*>(partial.data_ptr()), rows, width, slots, jk::stream()));
    }
    return {out, partial.sum(0).to(x.scalar_type())};
}

std::vector<torch::Tensor> bias_gelu_backward_fused(torch::Tensor grad, torch::Tensor x, torch::Tensor bias,
                                                    int64_t k, int64_t cols, int64_t rowl, int64_t slots) {
    TORCH_CHECK(grad.sizes() == x.sizes() && grad.is_contiguous() && x.is_contiguous() && slots >= 0,
                "bias_gelu_backward_fused: contiguous grad and x of one shape, slots >= 0");
    std::vector<torch::Tensor> result;
    jk::check_launch("bias_gelu_backward_fused", jk::dispatch_cuda(jk::dtype_of("bias_gelu_backward_fused", x),
                                                                   [&](auto tag) {
        using T = typename decltype(tag)::type;
        constexpr int N = jk::kVec<T>;
        TORCH_CHECK(x.size(-1) % N == 0, "width must be a multiple of ", N);
        using Fused = std::vector<torch::Tensor> (*)(torch::Tensor, torch::Tensor, torch::Tensor, int64_t);
        static const std::map<std::tuple<int64_t, int64_t, int64_t>, Fused> shapes{
            {{2, 64, 4}, &fused<T, N, 2, 64, 4>},   {{1, 64, 4}, &fused<T, N, 1, 64, 4>},
            {{4, 64, 4}, &fused<T, N, 4, 64, 4>},   {{2, 32, 8}, &fused<T, N, 2, 32, 8>},
            {{2, 128, 2}, &fused<T, N, 2, 128, 2>}, {{2, 256, 1}, &fused<T, N, 2, 256, 1>},
            {{1, 256, 1}, &fused<T, N, 1, 256, 1>}, {{1, 128, 4}, &fused<T, N, 1, 128, 4>},
            {{1, 32, 8}, &fused<T, N, 1, 32, 8>},
        };
        const auto it = shapes.find({k, cols, rowl});
        TORCH_CHECK(it != shapes.end(), "bias_gelu_backward_fused: no kernel for k ", k, ", cols ", cols, ", rowl ",
                    rowl);
        result = it->second(grad, x, bias, slots);
        return cudaSuccess;
    }));
    return result;
}

// Probe only: the rows kernel's float32 forward (C column vectors of one row a thread, as production's) under
// a register cap, a block order and the loads Triton emits, to see why Inductor's XBLOCK=1024 / 4-warp kernel
// reaches 98-100% of the copy where ours reaches 95-98% (run 10). Both spend ~36-38 instructions an element
// (sm_90 SASS read locally; -ftz=true changes nothing in erff's); they differ in
// - registers: its 31 (100% occupancy) against production's 56 (50%). MINB is __launch_bounds__'s blocks an
//   SM, a cap of 65536 / (BLOCK * MINB) registers;
// - block order: it walks memory in order with a 1-D grid; the rows kernel's 2-D grid (rows in x) does not when
//   a row takes several blocks. LINEAR: a 1-D grid, consecutive blocks on consecutive stretches;
// - loads: x with a plain ld.global (LDG.E.128) where nvcc makes __restrict__ const loads ld.global.nc
//   (LDG.E.128.CONSTANT), XLOAD = 1; the bias with L1::evict_last and an L2 evict_last policy, BLOAD = 1.
// The cache hints tried in run 10 on production's shape (.cs loads or stores, L1::no_allocate) all lost 1-8%.
using F4 = jk::Vec<float, 4>;

// the loads production's float32 forward took from this probe (jk_cuda.cuh), or the plain ones
template <int XLOAD>
__device__ __forceinline__ F4 load_x(const float* p) {
    return XLOAD ? jk::load_vec_global<4>(p) : jk::load_vec<4>(p);
}

template <int BLOAD>
__device__ __forceinline__ F4 load_bias(const float* p) {
    return BLOAD ? jk::load_vec_evict_last<4>(p) : jk::load_vec<4>(p);
}

template <int BLOCK, int C, int MINB, bool LINEAR, int XLOAD, int BLOAD>
__global__ void __launch_bounds__(BLOCK, MINB)
    bias_gelu_occ_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ out,
                         int64_t rows, int64_t width, unsigned col_blocks) {
    unsigned row_block = blockIdx.x, col_block = blockIdx.y;
    if constexpr (LINEAR) {
        row_block = blockIdx.x / col_blocks;
        col_block = blockIdx.x - row_block * col_blocks;
    }
    const int64_t first = (static_cast<int64_t>(col_block) * BLOCK * C + threadIdx.x) * 4;
    const int64_t row = row_block;
    F4 b[C], xv[C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
        const int64_t col = first + c * BLOCK * 4;
        if (col < width) xv[c] = load_x<XLOAD>(x + row * width + col);
    }
#pragma unroll
    for (int c = 0; c < C; ++c) {
        const int64_t col = first + c * BLOCK * 4;
        if (col < width) b[c] = load_bias<BLOAD>(bias + col);
    }
#pragma unroll
    for (int c = 0; c < C; ++c) {
        const int64_t col = first + c * BLOCK * 4;
        if (col < width) {
            F4 y;
            bias_gelu_vec<float, 4, false, false, false>(xv[c], b[c], F4{}, y);
            jk::store_vec_global<4>(out + row * width + col, y);
        }
    }
}

template <int BLOCK, int C, int MINB, bool LINEAR, int XLOAD, int BLOAD>
void launch_occ(const float* a, const float* b, float* z, int64_t rows, int64_t width) {
    const int64_t col_blocks = jk::ceil_div<int64_t>(width / 4, int64_t(BLOCK) * C);
    TORCH_CHECK(LINEAR ? rows * col_blocks <= 0x7fffffff : col_blocks <= 65535 && rows <= 0x7fffffff,
                "bias_gelu_occ: the grid does not fit");
    const dim3 grid = LINEAR ? dim3(static_cast<unsigned>(rows * col_blocks))
                             : dim3(static_cast<unsigned>(rows), static_cast<unsigned>(col_blocks));
    bias_gelu_occ_kernel<BLOCK, C, MINB, LINEAR, XLOAD, BLOAD>
        <<<grid, BLOCK, 0, jk::stream()>>>(a, b, z, rows, width, static_cast<unsigned>(col_blocks));
}

// Probe only, not yet run on a GPU: Inductor's float32 kernel in CUDA, for the last 0.5% at 2^26 (run 13).
// After run 11 production has its occupancy, block order and loads; what is left is its indexing: int32
// offsets, one block per 1024 consecutive elements of the flattened tensor (no rows, no division of the block
// index, no bounds guard: the launcher needs n % 1024 == 0), and the bias column as offset % width, a mask when
// width is a power of two (MASK) and an unsigned 32-bit modulo otherwise. 305 SASS instructions for 8
// elements in Triton's build against production's 334.
template <bool MASK>
__global__ void __launch_bounds__(128, 16)
    bias_gelu_flat1024_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ out,
                              unsigned width) {
    const unsigned at = blockIdx.x * 1024u + threadIdx.x * 4u;
    F4 xv[2], b[2];
#pragma unroll
    for (int c = 0; c < 2; ++c) xv[c] = jk::load_vec_global<4>(x + at + c * 512u);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
        const unsigned i = at + c * 512u;
        b[c] = jk::load_vec_evict_last<4>(bias + (MASK ? i & (width - 1u) : i % width));
    }
#pragma unroll
    for (int c = 0; c < 2; ++c) {
        F4 y;
        bias_gelu_vec<float, 4, false, false, false>(xv[c], b[c], F4{}, y);
        jk::store_vec_global<4>(out + at + c * 512u, y);
    }
}

torch::Tensor bias_gelu_flat1024(torch::Tensor x, torch::Tensor bias) {
    const int64_t n = x.numel(), width = x.size(-1);
    TORCH_CHECK(x.scalar_type() == torch::kFloat && x.is_contiguous() && width % 4 == 0 && n % 1024 == 0 &&
                    n < (int64_t(1) << 31),
                "bias_gelu_flat1024: contiguous float32, width % 4 == 0, numel % 1024 == 0 and < 2^31");
    auto out = torch::empty_like(x);
    if (n == 0) return out;
    const auto grid = static_cast<unsigned>(n / 1024);
    const bool mask = (width & (width - 1)) == 0;
    mask ? bias_gelu_flat1024_kernel<true><<<grid, 128, 0, jk::stream()>>>(
               x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), static_cast<unsigned>(width))
         : bias_gelu_flat1024_kernel<false><<<grid, 128, 0, jk::stream()>>>(
               x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), static_cast<unsigned>(width));
    jk::check_launch("bias_gelu_flat1024", cudaGetLastError());
    return out;
}

// float32 gelu(x + bias) with bias_gelu_occ_kernel, for the shapes variants.py times (spilling caps left out:
// 256 threads x 4 vectors under 32 or 40 registers spill 88 or 24 bytes).
torch::Tensor bias_gelu_occ(torch::Tensor x, torch::Tensor bias, int64_t block, int64_t c, int64_t minb,
                            bool linear, int64_t xload, int64_t bload) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat && x.size(-1) % 4 == 0, "bias_gelu_occ: float32, width % 4 == 0");
    using Launch = void (*)(const float*, const float*, float*, int64_t, int64_t);
    using Key = std::tuple<int64_t, int64_t, int64_t, bool, int64_t, int64_t>;
    static const std::map<Key, Launch> shapes{
        {{128, 2, 1, false, 0, 0}, &launch_occ<128, 2, 1, false, 0, 0>},
        {{128, 2, 1, true, 0, 0}, &launch_occ<128, 2, 1, true, 0, 0>},
        {{128, 2, 1, true, 1, 0}, &launch_occ<128, 2, 1, true, 1, 0>},
        {{128, 2, 1, true, 1, 1}, &launch_occ<128, 2, 1, true, 1, 1>},
        {{128, 2, 16, true, 1, 1}, &launch_occ<128, 2, 16, true, 1, 1>},
        {{256, 4, 1, true, 0, 0}, &launch_occ<256, 4, 1, true, 0, 0>},
        {{256, 4, 1, true, 1, 0}, &launch_occ<256, 4, 1, true, 1, 0>},
        {{256, 4, 1, true, 1, 1}, &launch_occ<256, 4, 1, true, 1, 1>},
        {{512, 2, 1, true, 0, 0}, &launch_occ<512, 2, 1, true, 0, 0>},
        {{512, 2, 1, true, 1, 0}, &launch_occ<512, 2, 1, true, 1, 0>},
        {{512, 2, 1, true, 1, 1}, &launch_occ<512, 2, 1, true, 1, 1>},
        {{512, 2, 4, true, 1, 1}, &launch_occ<512, 2, 4, true, 1, 1>},
    };
    const auto it = shapes.find({block, c, minb, linear, xload, bload});
    TORCH_CHECK(it != shapes.end(), "bias_gelu_occ: no kernel for block ", block, ", c ", c, ", minb ", minb,
                ", linear ", linear, ", xload ", xload, ", bload ", bload);
    auto out = torch::empty_like(x);
    const int64_t width = x.size(-1), rows = width ? x.numel() / width : 0;
    if (rows == 0) return out;
    it->second(x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), rows, width);
    jk::check_launch("bias_gelu_occ", cudaGetLastError());
    return out;
}

torch::Tensor softmax_threads(torch::Tensor x, int64_t threads);
std::vector<torch::Tensor> rmsnorm_shape(torch::Tensor x, torch::Tensor residual, torch::Tensor weight,
                                         int64_t threads, bool plain);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("softmax_threads", &softmax_threads);
    m.def("bias_gelu_cfg", &bias_gelu_cfg);
    m.def("bias_gelu_tile", &bias_gelu_tile);
    m.def("bias_gelu_tile_backward", &bias_gelu_tile_backward);
    m.def("bias_gelu_backward_fused", &bias_gelu_backward_fused);
    m.def("bias_gelu_occ", &bias_gelu_occ);
    m.def("bias_gelu_flat1024", &bias_gelu_flat1024);
    m.def("rmsnorm_shape", &rmsnorm_shape);
}
