"""rmsnorm: the residual add and RMSNorm of a transformer block fused, over the last dimension, forward.

Op: ``torch.ops.jitload.rmsnorm(x, residual, weight, eps=1e-6) -> (out, new_residual)`` where
``new_residual = x + residual`` and ``out = new_residual * rsqrt(mean(new_residual**2) + eps) * weight``.
"""

import torch

from jitload.kernels import row_shape, triton_baseline

NAME = "rmsnorm"
SOURCES = ["rmsnorm.cpp", "rmsnorm_cpu.cpp"]
CUDA_SOURCES = ["rmsnorm_kernel.cu"]
FUNCTION = "rmsnorm"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
BENCH_SIZES = {"cpu": [2**16, 2**20, 2**22], "cuda": [2**16, 2**20, 2**24, 2**26, 2**28]}
WIDTH = 4096  # a transformer's hidden size
# (rows, width) where rmsnorm_kernel.cu changes path: a warp a row up to 128 vectors (512 float32, 1024 half
# elements), a block caching 4096 vectors (16384 float32, 32768 half elements), re-reading past that.
EXTRA_CHECK_SIZES = [(64, 32), (8, 512), (8, 1024), (4, 4096), (4, 4097), (2, 16384), (2, 16392), (2, 32768),
                     (2, 32776)]
EPS = 1e-6


def candidates(ext) -> dict:
    return {"rmsnorm": torch.ops.jitload.rmsnorm}


def baselines(device: torch.device) -> dict:
    """Triton's version (a row a program, in registers), where Triton and a GPU exist."""
    return triton_baseline(__file__, "triton_rmsnorm", "rmsnorm", device)


def reference_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                      eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor]:
    # Eager: the add writes new_residual; the float copy, square, mean, rsqrt, two products and the cast
    # back make ~6 more passes. The fused kernel reads x and residual and writes out and new_residual:
    # 4 passes over x's size (the weight row is noise).
    new_residual = x + residual
    r = new_residual.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
    out = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * weight.to(r.dtype)
    return out.to(x.dtype), new_residual


def make_inputs(size: int, dtype: torch.dtype, device: str | torch.device) -> tuple[torch.Tensor, ...]:
    rows, width = row_shape(size, WIDTH)
    return (torch.randn(rows, width, dtype=dtype, device=device), torch.randn(rows, width, dtype=dtype, device=device),
            1 + 0.1 * torch.randn(width, dtype=dtype, device=device))


def bytes_moved(size: int, dtype: torch.dtype) -> int:
    rows, width = row_shape(size, WIDTH)
    return (4 * rows * width + width) * torch.tensor([], dtype=dtype).element_size()
