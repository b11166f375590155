"""Probe only: gelu(x + bias) as torch.compile's Inductor writes it for float32 rows, to time each of its two
autotune candidates on purpose rather than whichever its autotuner picks in a process.

Inductor flattens x to one dimension, specialises the shapes (width a constant, so ``% width`` is a mask for a
power of two, and no bounds mask when the block divides the size), indexes in int32 and loads the bias with
evict_last. Its pointwise heuristic (torch/_inductor/heuristics/triton_codegen/pointwise.py) tries XBLOCK=1024
with 4 warps and XBLOCK=512 with 8 warps; variants.py times both beside our kernels.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _flat_kernel(x_ptr, b_ptr, out_ptr, n, WIDTH: tl.constexpr, XBLOCK: tl.constexpr, EVEN: tl.constexpr):
    offsets = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = None if EVEN else offsets < n
    u = tl.load(x_ptr + offsets, mask) + tl.load(b_ptr + offsets % WIDTH, mask, eviction_policy="evict_last")
    y = 0.5 * u * (1.0 + tl.math.erf(u * 0.7071067811865476))
    tl.store(out_ptr + offsets, y, mask)


def bias_gelu_flat(x: torch.Tensor, bias: torch.Tensor, xblock: int = 1024, num_warps: int = 4) -> torch.Tensor:
    if x.dtype != torch.float32 or not x.is_contiguous() or x.numel() >= 2**31:
        raise ValueError("the probe takes contiguous float32 with fewer than 2^31 elements (int32 indexing)")
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        _flat_kernel[(triton.cdiv(n, xblock),)](x, bias, out, n, WIDTH=x.shape[-1], XBLOCK=xblock,
                                                 EVEN=n % xblock == 0, num_warps=num_warps)
    return out
