// The torch-free interface of bias_gelu: out = gelu(x + bias), bias broadcast over the last dimension
// (x seen as rows x width), exact (erf) or tanh-approximated; and its backward for x (the bias gradient is
// that summed over rows, which the binding leaves to torch's reduction).
#pragma once
#include <cstdint>

#include "jk.h"

void bias_gelu_forward_cpu(jk::DType dtype, const void* x, const void* bias, void* out, int64_t rows, int64_t width,
                           bool tanh);
void bias_gelu_backward_cpu(jk::DType dtype, const void* grad, const void* x, const void* bias, void* grad_x,
                            int64_t rows, int64_t width, bool tanh);

#ifdef JITLOAD_WITH_CUDA
#include <cuda_runtime.h>
cudaError_t bias_gelu_forward_cuda(jk::DType dtype, const void* x, const void* bias, void* out, int64_t rows,
                                   int64_t width, bool tanh, cudaStream_t stream);
cudaError_t bias_gelu_backward_cuda(jk::DType dtype, const void* grad, const void* x, const void* bias, void* grad_x,
                                    int64_t rows, int64_t width, bool tanh, cudaStream_t stream);
#endif
