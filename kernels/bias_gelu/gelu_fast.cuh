// gelu and its derivative for float16/bfloat16 results, computed in float: the forward is 14 instructions and
// two MUFU operations an element (SASS), against ~40 with erff. Relative error <= 2e-5, ten times below
// float16's half-ulp (2.4e-4) and a hundred below bfloat16's, so results round as the exact ones do but for
// rare ties (tests/test_kernels.py checks every 16-bit value in [-16, 16] against the exact value). A factor
// below float's smallest normal (1.2e-38) flushes to zero, as ex2/rcp.approx.ftz do, so results below
// |x| * 1.2e-38 (bfloat16 only, x < -10) come out as zero. The derivative, which cancels near x = -0.75 in any
// float formula, is within 1e-5 there.
// float32/float64 keep gelu_math.h (libm), whose tolerances are tighter than this.
#pragma once
#include "jk_cuda.cuh"

namespace gelu_fast {

constexpr float kSqrt1_2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kCubic = 0.044715f;

// a = |u| capped where 0.5 erfc(a / sqrt 2) has underflowed float (erfc(20) ~ 1e-176), so that phi(+-inf) is
// 1 or 0, not inf * 0; NaN becomes the cap too (erf_grad carries NaN through u itself).
__device__ __forceinline__ float abs_capped(float u) { return fminf(fabsf(u), 20.0f / kSqrt1_2); }

// 0.5 erfc(a / sqrt 2) for a >= 0, as 0.5 exp(-a^2 / 2) erfcx(t), t = a / sqrt 2, with erfcx
// (smooth, no cancellation anywhere) fitted as w P(w), w = 1 / (1 + p t): a minimax fit of the relative
// error (8e-6), made by benchmarks/fit_gelu_erfc.py (which also prints this formula's float32 error). Written
// in a, not t, to save the scaling multiply.
// e returns exp(-a^2 / 2), which the derivative reuses.
__device__ __forceinline__ float half_erfc(float a, float& e) {
    constexpr float p = 0.447f * kSqrt1_2;
    const float w = jk::rcp_approx(fmaf(p, a, 1.0f));
    float q = -6.942165792e-02f;
    q = fmaf(q, w, 1.544432574e-01f);
    q = fmaf(q, w, 3.811969552e-02f);
    q = fmaf(q, w, 1.261075704e-01f);
    q = fmaf(q, w, 1.245833364e-01f);
    q = fmaf(q, w, 1.261637939e-01f);
    e = jk::exp2_approx(a * (a * (-0.5f * jk::kLog2e)));
    return q * w * e;  // the coefficients are 0.5 erfcx's, the 0.5 included
}

// NaN-propagating min (min.NaN, sm_80 and later; one instruction where fminf would drop the NaN).
__device__ __forceinline__ float min_keep_nan(float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float z;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(z) : "f"(x), "f"(y));
    return z;
#else
    return x != x ? x : fminf(x, y);
#endif
}

// u Phi(u) = max(u, 0) - |u| h, h = 0.5 erfc(|u| / sqrt 2): u - u h for u >= 0 and u h below, in one FMA
// (no select, no separate multiply by u), and neither tail loses digits to cancellation. A huge finite |u|
// gives h = 0 (w flushes, a^2 overflows to -inf under ex2), so +inf is first capped at the largest float:
// FLT_MAX - FLT_MAX * 0 rounds to +inf in T, as torch's gelu(+inf) is, where inf - inf * 0 would be NaN. -inf
// gives NaN (-inf * 0) and NaN stays NaN, as in torch.
__device__ __forceinline__ float erf(float u) {
    const float v = min_keep_nan(u, 3.402823466e38f);  // FLT_MAX
    const float a = fabsf(v);
    float e;
    return fmaf(-a, half_erfc(a, e), fmaxf(v, 0.0f));
}

// Phi(u), the normal distribution's CDF: 1 - h for u >= 0 and h below.
__device__ __forceinline__ float phi(float u, float& e) {
    const float h = half_erfc(abs_capped(u), e);
    return u >= 0.0f ? 1.0f - h : h;
}

// d/du u Phi(u) = Phi(u) + u phi'(u), phi'(u) = exp(-u^2 / 2) / sqrt(2 pi) = e / sqrt(2 pi).
__device__ __forceinline__ float erf_grad(float u) {
    float e;
    const float p = phi(u, e);
    return fmaf(u * kInvSqrt2Pi, e, p);
}

// The tanh form: 0.5 (1 + tanh z) is the logistic function of 2z, exactly, and 1 / (1 + exp(-2z)) keeps its
// relative accuracy in both tails where 1 + tanh z cancels.
__device__ __forceinline__ float sigmoid_2z(float z) {
    return jk::rcp_approx(1.0f + jk::exp2_approx(-2.0f * jk::kLog2e * z));  // rcp(inf) = 0 for z << 0
}

__device__ __forceinline__ float tanh_inner(float u) { return kSqrt2OverPi * fmaf(kCubic * u, u * u, u); }

__device__ __forceinline__ float tanh(float u) { return u * sigmoid_2z(tanh_inner(u)); }

// d/du [u s], s = (1 + tanh z) / 2: s + u (1 - tanh^2 z) / 2 z' = s + 2 u s (1 - s) z'.
__device__ __forceinline__ float tanh_grad(float u) {
    const float s = sigmoid_2z(tanh_inner(u));
    const float dz = kSqrt2OverPi * fmaf(3.0f * kCubic * u, u, 1.0f);
    return fmaf(2.0f * u * s * (1.0f - s), dz, s);
}

}  // namespace gelu_fast
