// add: out = a + b, the seed article's first kernel, made safe for any size.
// One thread per element as in the seed; the index is 64-bit so tensors past 2^31 elements work, and the
// launch goes on the caller's stream (the binding passes torch's current stream) rather than stream 0.
#include "add.h"

__global__ void add_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                           int64_t n) {
    int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}

cudaError_t add_cuda(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
    constexpr int block = 256;
    const int64_t grid = (n + block - 1) / block;  // gridDim.x may be up to 2^31-1 blocks
    add_kernel<<<static_cast<unsigned int>(grid), block, 0, stream>>>(a, b, out, n);
    return cudaGetLastError();
}
