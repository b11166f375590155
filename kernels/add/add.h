// The torch-free interface between the binding (add.cpp) and the kernels (add_kernel.cu, add_cpu.cpp).
// Only plain pointers and sizes cross it, so editing a kernel recompiles that kernel alone (about a second)
// and never the binding, which includes torch's headers and takes tens of seconds to compile.
#pragma once
#include <cstdint>

void add_cpu(const float* a, const float* b, float* out, int64_t n);

#ifdef JITLOAD_WITH_CUDA
#include <cuda_runtime.h>
cudaError_t add_cuda(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
#endif
