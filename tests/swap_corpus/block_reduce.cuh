// Device helpers only: a warp and a block reduction.
#pragma once

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}

template <int BLOCK>
__device__ float block_sum(float v) {
    __shared__ float partial[BLOCK / 32];
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x < BLOCK / 32 ? partial[threadIdx.x] : 0.0f;
    return threadIdx.x < 32 ? warp_sum(v) : 0.0f;
}
