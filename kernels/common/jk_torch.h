// Binding-side helpers (these include torch): the dtype tag of a tensor, the argument checks every op makes,
// and the op registration that survives jitload's hot rebuild.
#pragma once
#include <torch/extension.h>
#include <torch/library.h>

#include <iostream>
#include <string>

#include "jk.h"

#ifdef JITLOAD_WITH_CUDA
// c10's guard and stream headers, not ATen/cuda/CUDAContext.h: they need no cuBLAS/cuSPARSE headers.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace jk {

inline DType dtype_of(const char* op, const at::Tensor& t) {
    switch (t.scalar_type()) {
        case at::kFloat: return DType::f32;
        case at::kHalf: return DType::f16;
        case at::kBFloat16: return DType::bf16;
        case at::kDouble: return DType::f64;
        default:
            TORCH_CHECK(false, op, ": expected a float32, float16, bfloat16 or float64 tensor, got ", t.scalar_type());
    }
}

// Same device and dtype as the first tensor, with a message that names both arguments.
inline void check_like(const char* op, const at::Tensor& first, const char* first_name, const at::Tensor& other,
                       const char* other_name) {
    TORCH_CHECK(first.device() == other.device(), op, ": ", first_name, " is on ", first.device(), " but ",
                other_name, " is on ", other.device());
    TORCH_CHECK(first.scalar_type() == other.scalar_type(), op, ": ", first_name, " is ", first.scalar_type(),
                " but ", other_name, " is ", other.scalar_type(), " (no implicit type promotion)");
}

inline void check_same_shape(const char* op, const at::Tensor& a, const char* a_name, const at::Tensor& b,
                             const char* b_name) {
    // sym_sizes: the same check runs on fake tensors with symbolic shapes under torch.compile and export.
    TORCH_CHECK(a.sym_sizes() == b.sym_sizes(), op, ": shape mismatch, ", a_name, " is ", a.sym_sizes(), " and ",
                b_name, " is ", b.sym_sizes(), " (no broadcasting)");
}

inline void check_device_supported(const char* op, const at::Tensor& t) {
    TORCH_CHECK(t.is_cpu() || t.is_cuda() || t.is_meta(), op, ": unsupported device ", t.device());
#ifndef JITLOAD_WITH_CUDA
    TORCH_CHECK(!t.is_cuda(), op, ": this build has no CUDA kernels (no CUDA toolkit was found when it was built)");
#endif
}

#ifdef JITLOAD_WITH_CUDA
// Launchers return cudaGetLastError(); a bad launch becomes a Python RuntimeError naming the op.
inline void check_launch(const char* op, cudaError_t err) {
    TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
}

inline cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream(); }
#endif

// Defines `name(args) -> ret` in the jitload namespace the first time a library is loaded and returns true;
// on a rebuilt library (jitload's hot rebuild loads a new .so into the same process) it returns true when the
// schema is unchanged, so the new kernels replace the old ones (torch warns once that it overrides them), and
// false, after saying so, when it changed: torch cannot redefine an op in a live process, and a mismatched
// kernel registered from a library's static initialiser would abort the process.
inline bool define(torch::Library& m, const std::string& schema) {
    const std::string full = "jitload::" + schema;
    const auto parsed = torch::jit::parseSchema(full);
    const auto existing = c10::Dispatcher::singleton().findSchema({parsed.name(), parsed.overload_name()});
    if (!existing) {
        m.def(schema.c_str());
        return true;
    }
    if (c10::toString(existing->schema()) == c10::toString(parsed)) {
        return true;
    }
    std::cerr << "jitload: " << parsed.name() << " was defined in this process as " << existing->schema()
              << "; the rebuilt library declares " << parsed << ". An op's schema cannot change in a live "
              << "process: restart Python to use the new one (the old kernels stay registered)." << std::endl;
    return false;
}

// For the Autograd kernel of a forward-only op: without one, torch would warn and return a result whose
// gradient is silently missing; with this, backprop through the op is an error that says what to do.
inline void forbid_grad(const char* op, std::initializer_list<at::Tensor> inputs) {
    if (!at::GradMode::is_enabled()) return;
    for (const auto& t : inputs) {
        TORCH_CHECK(!t.requires_grad(), op, " is forward only (it has no backward kernel), but an input requires "
                    "grad: call it under torch.no_grad() or on detached tensors");
    }
}

}  // namespace jk

// Registers fn for CPU and, in CUDA builds, CUDA: one binding checks arguments and picks the kernel by device.
#ifdef JITLOAD_WITH_CUDA
#define JK_IMPL_CPU_CUDA(m, name, fn)                               \
    m.impl(name, torch::dispatch(c10::DispatchKey::CPU, TORCH_FN(fn))); \
    m.impl(name, torch::dispatch(c10::DispatchKey::CUDA, TORCH_FN(fn)))
#else
#define JK_IMPL_CPU_CUDA(m, name, fn) m.impl(name, torch::dispatch(c10::DispatchKey::CPU, TORCH_FN(fn)))
#endif
