// The torch-free interface of rmsnorm, fused with the residual add that precedes it in a transformer block:
//   new_residual = x + residual;  out = new_residual / sqrt(mean(new_residual^2) + eps) * weight
// over the last dimension (rows x width), accumulating in float32.
#pragma once
#include <cstdint>

#include "jk.h"

void rmsnorm_cpu(jk::DType dtype, const void* x, const void* residual, const void* weight, void* out,
                 void* new_residual, int64_t rows, int64_t width, double eps);

#ifdef JITLOAD_WITH_CUDA
#include <cuda_runtime.h>
cudaError_t rmsnorm_cuda(jk::DType dtype, const void* x, const void* residual, const void* weight, void* out,
                         void* new_residual, int64_t rows, int64_t width, double eps, cudaStream_t stream);
#endif
