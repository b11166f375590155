// The torch-free contract every kernel folder shares: an element-type tag that the bindings (which include
// torch) map from at::ScalarType, so that kernel sources never include a torch header and rebuild in about
// a second. Included by the CPU twins, the .cu files and the bindings alike.
#pragma once
#include <cstdint>

namespace jk {

enum class DType : int { f32 = 0, f16 = 1, bf16 = 2, f64 = 3 };

template <class T>
struct Tag {
    using type = T;
};

// Versions of the elementwise kernels, as the teaching notebooks number them.
enum Version : int { kNaive = 1, kGridStride = 2, kVectorized = 3 };

template <class T>
constexpr T ceil_div(T a, T b) {
    return (a + b - 1) / b;
}

}  // namespace jk
