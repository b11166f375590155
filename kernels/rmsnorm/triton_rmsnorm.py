"""Residual add + RMSNorm in Triton, the baseline our CUDA kernel is timed against: one program per row, the row
in registers (as Triton's layer-norm tutorial and Liger-Kernel's RMSNorm), so each element is read once.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, res_ptr, width, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < width
    at = tl.program_id(0).to(tl.int64) * width + cols
    # x + residual in the tensors' dtype (rounded as torch's x + residual is), then the norm in float32
    s = tl.load(x_ptr + at, mask=mask, other=0.0) + tl.load(r_ptr + at, mask=mask, other=0.0)
    tl.store(res_ptr + at, s, mask=mask)
    f = s.to(tl.float32)
    scale = 1.0 / tl.sqrt(tl.sum(f * f, axis=0) / width + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + at, (f * scale * w).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
            eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    width = x.shape[-1]
    if residual.shape != x.shape or weight.shape != (width,):
        raise ValueError(f"residual must have x's shape {tuple(x.shape)} and weight ({width},), got "
                         f"{tuple(residual.shape)} and {tuple(weight.shape)}")
    if width > 65536:
        raise ValueError(f"the Triton baseline keeps a row in registers: at most 65536 wide, got {width}")
    x, residual, weight = x.contiguous(), residual.contiguous(), weight.contiguous()
    out, new_residual = torch.empty_like(x), torch.empty_like(x)
    rows = x.numel() // width if width else 0
    if rows:
        block = triton.next_power_of_2(width)
        _rmsnorm_kernel[(rows,)](x, residual, weight, out, new_residual, width, eps, BLOCK=block,
                                 num_warps=8 if block >= 2048 else 4)
    return out, new_residual
