// The torch-free interface of add_relu: out = relu(x + y) (the seed's fused slow_add) and its backward,
// grad_in = grad * (x + y > 0), which is the gradient of both x and y.
#pragma once
#include <cstdint>

#include "jk.h"

void add_relu_forward_cpu(jk::DType dtype, const void* x, const void* y, void* out, int64_t n);
void add_relu_backward_cpu(jk::DType dtype, const void* grad, const void* x, const void* y, void* grad_in, int64_t n);

#ifdef JITLOAD_WITH_CUDA
#include <cuda_runtime.h>
// version: 1 the seed's one thread per element, 2 grid-stride, 3 16-byte vectors (jk::Version).
cudaError_t add_relu_forward_cuda(jk::DType dtype, const void* x, const void* y, void* out, int64_t n, int version,
                                  cudaStream_t stream);
cudaError_t add_relu_backward_cuda(jk::DType dtype, const void* grad, const void* x, const void* y, void* grad_in,
                                   int64_t n, cudaStream_t stream);
#endif
