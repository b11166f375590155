// gelu and its derivative, shared by the CPU twin and the CUDA kernel (host and device), in A = float or double.
#pragma once
#include <cmath>

#if defined(__CUDACC__)
#define JK_HD __host__ __device__ __forceinline__
#else
#define JK_HD inline
#endif

namespace gelu_math {

constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
constexpr double kCubic = 0.044715;

// erf to about 1.5e-7 absolute (Abramowitz & Stegun 7.1.26: one reciprocal, one exp, five FMAs) instead
// of erff's longer polynomial: the CUDA kernel uses it for float16/bfloat16, whose own rounding (5e-4,
// 4e-3) is thousands of times coarser, because erff made the bfloat16 kernel compute-bound (63% of the
// copy on the H200). float32 and float64 keep the library erf.
template <class A>
JK_HD A erf_fast(A x) {
    const A ax = x < A(0) ? -x : x;
    const A t = A(1) / (A(1) + A(0.3275911) * ax);
    const A poly = t * (A(0.254829592) + t * (A(-0.284496736) + t * (A(1.421413741) + t * (A(-1.453152027) +
                   t * A(1.061405429)))));
    const A y = A(1) - poly * std::exp(-ax * ax);
    return x < A(0) ? -y : y;
}

template <class A, bool FAST = false>
JK_HD A erf_of(A x) {
    if constexpr (FAST) {
        return erf_fast(x);
    } else {
        return std::erf(x);
    }
}

template <class A, bool FAST = false>
JK_HD A gelu(A u, bool tanh_approx) {
    if (tanh_approx) {
        const A t = std::tanh(A(kSqrt2OverPi) * (u + A(kCubic) * u * u * u));
        return A(0.5) * u * (A(1) + t);
    }
    return A(0.5) * u * (A(1) + erf_of<A, FAST>(u * A(kSqrt1_2)));
}

template <class A, bool FAST = false>
JK_HD A gelu_grad(A u, bool tanh_approx) {
    if (tanh_approx) {
        const A inner = A(kSqrt2OverPi) * (u + A(kCubic) * u * u * u);
        const A t = std::tanh(inner);
        const A dinner = A(kSqrt2OverPi) * (A(1) + A(3 * kCubic) * u * u);
        return A(0.5) * (A(1) + t) + A(0.5) * u * (A(1) - t * t) * dinner;
    }
    return A(0.5) * (A(1) + erf_of<A, FAST>(u * A(kSqrt1_2))) + u * A(kInvSqrt2Pi) * std::exp(A(-0.5) * u * u);
}

}  // namespace gelu_math
