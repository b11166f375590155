// Device-side pieces every kernel uses: dtype dispatch, float conversion, 16-byte vectors, warp and block
// reductions, and the SM count for sizing grids. Torch-free, so a .cu that includes it rebuilds in ~1 s.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "jk.h"

namespace jk {

template <class F>
cudaError_t dispatch_cuda(DType dtype, F&& f) {
    switch (dtype) {
        case DType::f32: return f(Tag<float>{});
        case DType::f16: return f(Tag<__half>{});
        case DType::bf16: return f(Tag<__nv_bfloat16>{});
        case DType::f64: return f(Tag<double>{});
    }
    return cudaErrorInvalidValue;
}

// Arithmetic happens in acc_t: float for the 16-bit types (their own math is slower and less exact).
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T> __device__ __forceinline__ acc_t<T> to_acc(T v) { return static_cast<acc_t<T>>(v); }
template <> __device__ __forceinline__ float to_acc<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_acc<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T> __device__ __forceinline__ T from_acc(acc_t<T> v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_acc<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

constexpr int kBlock = 256;  // threads per block of the elementwise kernels

// N elements that move as one 16-byte load or store (LDG.128/STG.128): the widest a thread can issue.
template <class T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));

template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
    T v[N];
};

template <int N, class T>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
    return *reinterpret_cast<const Vec<T, N>*>(p);
}

template <int N, class T>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
    *reinterpret_cast<Vec<T, N>*>(p) = v;
}

// store_vec of a 16-byte vector to global memory as one st.global.v4, forced by inline PTX: nvcc split a plain
// copy of a Vec<float, 4> whose elements came from branchy code (libm's erff in bias_gelu) into four
// st.global.f32, four times the store instructions. CUDA's __stwb would do it too, but as a .STRONG.SM
// store. The "memory" clobber keeps it ordered with the thread's other accesses.
template <int N, class T>
__device__ __forceinline__ void store_vec_global(T* p, const Vec<T, N>& v) {
    static_assert(sizeof(Vec<T, N>) == 16, "store_vec_global stores 16-byte vectors");
    uint4 b;
    memcpy(&b, &v, sizeof b);
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(b.x), "r"(b.y), "r"(b.z), "r"(b.w)
                 : "memory");
}

// 16-byte loads as Triton emits them for torch.compile's float32 gelu(x + bias), for a kernel that streams x
// once and rereads a small vector (the bias) in every block: load_vec_global is a plain ld.global.v4 (nvcc
// makes a __restrict__ const load ld.global.nc, LDG.E.128.CONSTANT), load_vec_evict_last asks L1 and L2 to keep
// the line (L2 through an evict_last policy). Measured on an H200 only together with 100% occupancy: bias_gelu's
// float32 forward at 32 registers with them reached 98.7-99.8% of the copy; at 38-56 registers they cost 0-5%;
// 32 registers without them was not measured.
// Inline PTX: CUDA has no intrinsic for either.
template <int N, class T>
__device__ __forceinline__ Vec<T, N> load_vec_global(const T* p) {
    static_assert(sizeof(Vec<T, N>) == 16, "load_vec_global loads 16-byte vectors");
    uint4 b;
    asm("ld.global.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(b.x), "=r"(b.y), "=r"(b.z), "=r"(b.w) : "l"(p));
    Vec<T, N> v;
    memcpy(&v, &b, sizeof v);
    return v;
}

template <int N, class T>
__device__ __forceinline__ Vec<T, N> load_vec_evict_last(const T* p) {
    static_assert(sizeof(Vec<T, N>) == 16, "load_vec_evict_last loads 16-byte vectors");
    uint64_t policy;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    uint4 b;
    asm("ld.global.L1::evict_last.L2::cache_hint.v4.b32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(b.x), "=r"(b.y), "=r"(b.z), "=r"(b.w)
        : "l"(p), "l"(policy));
    Vec<T, N> v;
    memcpy(&v, &b, sizeof v);
    return v;
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// 2^x and 1/x as one MUFU instruction each, flushing subnormals. The library's __expf and __fdividef add a
// range check and rescaling around the same instruction when compiled without -ftz (about four more
// instructions and a predicate per call, which made softmax's bfloat16 kernel issue-bound); callers here
// never need a subnormal result. Hand-written PTX because CUDA has no intrinsic for the .ftz forms.
__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float rcp_approx(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

constexpr float kLog2e = 1.4426950408889634f;

// Sums and maxima over a warp with shuffles: no shared memory, no __syncthreads().
template <class A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

template <class A>
__device__ __forceinline__ A warp_max(A v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// The sum (max) over the whole block, returned to every thread. scratch holds one value per warp (32 at most).
template <class A, class WarpReduce>
__device__ __forceinline__ A block_reduce(A v, A* scratch, A identity, WarpReduce warp_reduce) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_reduce(v);
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : identity;
    return warp_reduce(v);
}

template <class A>
__device__ __forceinline__ A block_sum(A v, A* scratch) {
    return block_reduce(v, scratch, A(0), [](A a) { return warp_sum(a); });
}

template <class A>
__device__ __forceinline__ A block_max(A v, A* scratch) {
    return block_reduce(v, scratch, A(-INFINITY), [](A a) { return warp_max(a); });
}

// query(&value, device) for the current device, asked once per device (up to 64) and kept in `cached`;
// `fallback` past 64 devices or where the query gave nothing.
template <class Query>
int once_per_device(int (&cached)[64], int fallback, Query query) {
    int device = 0;
    cudaGetDevice(&device);
    if (device < 64 && cached[device] == 0) query(&cached[device], device);
    return device < 64 && cached[device] > 0 ? cached[device] : fallback;
}

// The number of SMs of the current device (the attribute query costs microseconds).
inline int sm_count() {
    static int cached[64] = {};
    return once_per_device(cached, 132, [](int* v, int device) {
        cudaDeviceGetAttribute(v, cudaDevAttrMultiProcessorCount, device);
    });
}

// How many blocks of KERNEL, at `threads` threads (always the same for one KERNEL), one SM holds at once: the
// occupancy calculator's answer.
template <auto KERNEL>
int blocks_per_sm(int threads) {
    static int cached[64] = {};
    return once_per_device(cached, 1, [threads](int* v, int) {
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(v, KERNEL, threads, 0);
    });
}

}  // namespace jk
