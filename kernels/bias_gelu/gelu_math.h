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

template <class A>
JK_HD A gelu(A u, bool tanh_approx) {
    if (tanh_approx) {
        const A t = std::tanh(A(kSqrt2OverPi) * (u + A(kCubic) * u * u * u));
        return A(0.5) * u * (A(1) + t);
    }
    return A(0.5) * u * (A(1) + std::erf(u * A(kSqrt1_2)));
}

template <class A>
JK_HD A gelu_grad(A u, bool tanh_approx) {
    if (tanh_approx) {
        const A inner = A(kSqrt2OverPi) * (u + A(kCubic) * u * u * u);
        const A t = std::tanh(inner);
        const A dinner = A(kSqrt2OverPi) * (A(1) + A(3 * kCubic) * u * u);
        return A(0.5) * (A(1) + t) + A(0.5) * u * (A(1) - t * t) * dinner;
    }
    return A(0.5) * (A(1) + std::erf(u * A(kSqrt1_2))) + u * A(kInvSqrt2Pi) * std::exp(A(-0.5) * u * u);
}

}  // namespace gelu_math
