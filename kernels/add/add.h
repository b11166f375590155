// The torch-free interface between add's binding (add.cpp) and its kernels (add_kernel.cu, add_cpu.cpp).
// Only pointers, sizes and a dtype tag cross it, so editing a kernel recompiles that kernel alone (about a
// second) and never the binding, which includes torch's headers and takes tens of seconds to compile.
#pragma once
#include <cstdint>

#include "jk.h"

void add_cpu(jk::DType dtype, const void* a, const void* b, void* out, int64_t n);

#ifdef JITLOAD_WITH_CUDA
#include <cuda_runtime.h>
cudaError_t add_cuda(jk::DType dtype, const void* a, const void* b, void* out, int64_t n, cudaStream_t stream);
#endif
