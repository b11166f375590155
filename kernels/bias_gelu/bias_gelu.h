// The torch-free interface of bias_gelu: out = gelu(x + bias), bias broadcast over the last dimension
// (x seen as rows x width), exact (erf) or tanh-approximated; and its backward: grad_x, and the bias gradient
// (grad_x summed over rows), on CUDA fused into grad_x's kernel as partial sums of its blocks that the
// binding adds up (on the CPU, and where the fused kernel does not apply, torch's reduction).
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

// The fused backward: rows of whole 16-byte vectors and all four pointers 16-byte aligned.
bool bias_gelu_backward_fuses(jk::DType dtype, const void* grad, const void* x, const void* bias,
                              const void* grad_x, int64_t rows, int64_t width);
// The partial sums' rows on this GPU: the fused kernel's blocks a column stretch (one wave of them).
int64_t bias_gelu_sum_slots(jk::DType dtype, int64_t rows, int64_t width, bool tanh);
// grad_x, and partial[slots][width] in float (double for float64): each block's column sums
cudaError_t bias_gelu_backward_sum_cuda(jk::DType dtype, const void* grad, const void* x, const void* bias,
                                        void* grad_x, void* partial, int64_t rows, int64_t width, int64_t slots,
                                        bool tanh, cudaStream_t stream);
#endif
