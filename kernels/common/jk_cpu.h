// CPU-twin helpers: the dtype dispatch with c10's Half and BFloat16, which are header-only and torch-free
// enough to keep a twin's rebuild at about a second (torch/extension.h costs tens of seconds).
#pragma once
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <stdexcept>

#include "jk.h"

namespace jk {

// f(Tag<T>{}) for the C++ type of dtype; accumulate in acc_t<T> (float, or double for double).
template <class F>
void dispatch_cpu(DType dtype, F&& f) {
    switch (dtype) {
        case DType::f32: return f(Tag<float>{});
        case DType::f16: return f(Tag<c10::Half>{});
        case DType::bf16: return f(Tag<c10::BFloat16>{});
        case DType::f64: return f(Tag<double>{});
    }
    throw std::invalid_argument("jk::dispatch_cpu: unknown dtype");
}

template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

}  // namespace jk
