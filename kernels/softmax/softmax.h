// The torch-free interface of softmax over the last dimension (rows x width), width 1 to 65536 and beyond.
#pragma once
#include <cstdint>

#include "jk.h"

void softmax_cpu(jk::DType dtype, const void* x, void* out, int64_t rows, int64_t width);

#ifdef JITLOAD_WITH_CUDA
#include <cuda_runtime.h>
cudaError_t softmax_cuda(jk::DType dtype, const void* x, void* out, int64_t rows, int64_t width, cudaStream_t stream);
#endif
