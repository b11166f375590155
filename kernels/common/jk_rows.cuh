// How rmsnorm splits a row's work: a warp per row when a row is short, a block per row otherwise, each thread
// holding up to kCached 16-byte vectors of its row in registers so that the second pass over the row reads
// registers, not memory (longer rows re-read the rest, mostly from L2). softmax sizes its share itself
// (softmax_kernel.cu); both find their row and lane with row_pos.
#pragma once
#include "jk_cuda.cuh"

namespace jk {

constexpr int kCached = 4;

struct RowLaunch {
    bool warp_per_row;
    int threads;      // per block
    int64_t blocks;
};

// block_cached: the vectors a thread of a block-per-row launch is sized to hold (kCached or fewer).
inline RowLaunch row_launch(int64_t rows, int64_t vectors_per_row, int block_cached = kCached) {
    if (vectors_per_row <= 32 * kCached) {
        // 8 rows of 32 threads per block: short rows would leave most of a block-per-row idle
        return {true, 256, ceil_div<int64_t>(rows, 8)};
    }
    int threads = static_cast<int>(std::min<int64_t>(1024, ceil_div<int64_t>(vectors_per_row, block_cached)));
    threads = std::max(64, ceil_div(threads, 32) * 32);
    return {false, threads, rows};
}

// The lane of this thread within its row, the threads per row, and the row.
struct RowPos {
    int lane;
    int width;
    int64_t row;
};

template <bool WARP>
__device__ __forceinline__ RowPos row_pos() {
    if constexpr (WARP) {
        return {static_cast<int>(threadIdx.x % 32), 32,
                static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32};
    } else {
        return {static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), static_cast<int64_t>(blockIdx.x)};
    }
}

}  // namespace jk
