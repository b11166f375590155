#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void add_kernel(const float* A, const float* B, float* C, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        C[idx] = A[idx] + B[idx];
    }
}

torch::Tensor add_tensors_cuda(torch::Tensor A, torch::Tensor B) {
    // 输入检查
    TORCH_CHECK(A.is_cuda(), "A must be a CUDA tensor");
    TORCH_CHECK(B.is_cuda(), "B must be a CUDA tensor");
    TORCH_CHECK(A.size(0) == B.size(0), "Size mismatch between tensors");

    int size = A.numel();
    auto C = torch::empty_like(A);

    dim3 block(256);
    dim3 grid((size + block.x - 1) / block.x);

    add_kernel<<<grid, block>>>(
        A.data_ptr<float>(),
        B.data_ptr<float>(),
        C.data_ptr<float>(),
        size
    );

    // 注意：仅用于调试，生产代码应异步执行
    // cudaDeviceSynchronize();

    return C;
}
