// add_relu v3's differences from Inductor's kernel, one knob each, for `ab_gelu.py --kernel add_relu --variants`.
// Timed in turn (run 23), v3 was 0.35-0.45% behind torch.compile in float32 and 0.6-0.7% in bfloat16 in every
// round. Inductor's kernel: blocks of 128 threads over 1024 elements (8 a thread: two 16-byte vectors 512 elements
// apart in float32, one vector in bfloat16), plain ld.global loads, no bounds checks when numel is a multiple of
// 1024. v3 then: 256 threads, two vectors a thread with the block's threads side by side, ld.global.nc, checks.
#include <string>
#include <utility>
#include <vector>

#include "jk_cuda.cuh"
#include "jk_torch.h"

template <class A>
__device__ __forceinline__ A relu_sum(A a, A b) {
    const A s = a + b;
    return s > A(0) ? s : A(0);
}

// U vectors of N a thread per input. CONTIG: a thread's U vectors adjacent, else a block's threads take one
// vector each before the next (v3's order, and Inductor's: "inductor-like" below, with CONTIG, was a wrong
// guess). PLAIN: ld.global, not ld.global.nc. GUARD: bounds checks (off: the launcher needs numel a multiple of
// a block's elements). MINB 8: at most 32 registers.
template <class T, int N, int U, bool CONTIG, bool PLAIN, bool GUARD, int MINB>
__global__ void __launch_bounds__(256, MINB)
    add_relu_knobs(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out, int64_t n) {
    const int64_t block0 = static_cast<int64_t>(blockIdx.x) * U * blockDim.x * N;
    const auto at = [&](int u) {
        return CONTIG ? block0 + (static_cast<int64_t>(threadIdx.x) * U + u) * N
                      : block0 + (static_cast<int64_t>(u) * blockDim.x + threadIdx.x) * N;
    };
    jk::Vec<T, N> a[U], b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int64_t i = at(u);
        if (!GUARD || i < n) {
            a[u] = PLAIN ? jk::load_vec_global<N>(x + i) : jk::load_vec<N>(x + i);
            b[u] = PLAIN ? jk::load_vec_global<N>(y + i) : jk::load_vec<N>(y + i);
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int64_t i = at(u);
        if (!GUARD || i < n) {
            jk::Vec<T, N> r;
#pragma unroll
            for (int e = 0; e < N; ++e) {
                r.v[e] = jk::from_acc<T>(relu_sum(jk::to_acc(a[u].v[e]), jk::to_acc(b[u].v[e])));
            }
            jk::store_vec<N>(out + i, r);
        }
    }
}

struct Knobs {
    const char* name;
    int threads, u;
    bool contig, plain, guard, cap32;
};

// The list ab_gelu.py times (its labels are these names); config 0 is v3 itself.
constexpr Knobs kKnobs[] = {
    {"v3 shape", 256, 2, false, false, true, false},
    {"128 thr", 128, 2, false, false, true, false},
    {"plain ld", 256, 2, false, true, true, false},
    {"128 thr plain", 128, 2, false, true, true, false},
    {"128 thr plain contig", 128, 2, true, true, true, false},
    {"128 thr plain unchecked", 128, 2, false, true, false, false},
    {"plain <=32 regs", 256, 2, false, true, true, true},
    {"128 thr 1 vec plain", 128, 1, false, true, true, false},
    {"inductor-like", 128, 2, true, true, false, false},
    {"inductor-like 1 vec", 128, 1, false, true, false, false},
};
constexpr int kKnobCount = sizeof(kKnobs) / sizeof(kKnobs[0]);

// Knob I's kernel: its template arguments read off kKnobs[I], so the table is the only list of the knobs.
template <class T, int I>
cudaError_t go(const T* x, const T* y, T* out, int64_t n, cudaStream_t s) {
    constexpr Knobs k = kKnobs[I];
    constexpr int N = jk::kVec<T>;
    const int64_t per_block = int64_t(k.threads) * k.u * N;
    TORCH_CHECK(n % N == 0 && (k.guard || n % per_block == 0), "add_relu_cfg: numel must be a multiple of ",
                k.guard ? N : per_block);
    const auto grid = static_cast<unsigned>(jk::ceil_div<int64_t>(n, per_block));
    add_relu_knobs<T, N, k.u, k.contig, k.plain, k.guard, k.cap32 ? 8 : 1><<<grid, k.threads, 0, s>>>(x, y, out, n);
    return cudaGetLastError();
}

template <class T, int... I>
cudaError_t go_knob(int64_t cfg, const T* x, const T* y, T* out, int64_t n, cudaStream_t s,
                    std::integer_sequence<int, I...>) {
    cudaError_t err = cudaErrorInvalidValue;
    ((cfg == I ? (err = go<T, I>(x, y, out, n, s), true) : false) || ...);
    return err;
}

torch::Tensor add_relu_cfg(torch::Tensor x, torch::Tensor y, int64_t cfg) {
    TORCH_CHECK(cfg >= 0 && cfg < kKnobCount, "add_relu_cfg: cfg must be in [0, ", kKnobCount, ")");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && x.sizes() == y.sizes() &&
                    x.scalar_type() == y.scalar_type(), "add_relu_cfg: contiguous x and y of one shape and dtype");
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return out;
    jk::check_launch("add_relu_cfg", jk::dispatch_cuda(jk::dtype_of("add_relu_cfg", x), [&](auto tag) {
        using T = typename decltype(tag)::type;
        return go_knob(cfg, static_cast<const T*>(x.data_ptr()), static_cast<const T*>(y.data_ptr()),
                       static_cast<T*>(out.data_ptr()), n, jk::stream(), std::make_integer_sequence<int, kKnobCount>{});
    }));
    return out;
}

std::vector<std::string> add_relu_cfg_names() {
    std::vector<std::string> names;
    for (const auto& k : kKnobs) names.emplace_back(k.name);
    return names;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("add_relu_cfg", &add_relu_cfg);
    m.def("add_relu_cfg_names", &add_relu_cfg_names);
}
