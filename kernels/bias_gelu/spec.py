"""bias_gelu: gelu(x + bias) over the last dimension, exact (erf) or tanh, forward and backward.

Ops: ``torch.ops.jitload.bias_gelu(x, bias, approximate="none")`` (C++ autograd) and
``bias_gelu_backward(grad, x, bias, approximate)`` -> (grad_x, grad_bias).
"""

import torch
import torch.nn.functional as F

from jitload.kernels import row_shape, triton_baseline

NAME = "bias_gelu"
SOURCES = ["bias_gelu.cpp", "bias_gelu_cpu.cpp"]
CUDA_SOURCES = ["bias_gelu_kernel.cu"]
FUNCTION = "bias_gelu"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
BENCH_SIZES = {"cpu": [2**16, 2**20, 2**22], "cuda": [2**16, 2**20, 2**24, 2**26, 2**28]}
WIDTH = 4096  # a transformer MLP's hidden size
GRAD = True


def candidates(ext) -> dict:
    return {"bias_gelu": torch.ops.jitload.bias_gelu}


def baselines(device: torch.device) -> dict:
    """Triton's version, where Triton and a GPU exist (timed, and checked like ours)."""
    return triton_baseline(__file__, "triton_bias_gelu", "bias_gelu", device)


def reference_bias_gelu(x: torch.Tensor, bias: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    # Two kernels: the add reads x and writes x + bias, gelu reads that and writes out: 4 passes over x's
    # size where the fused kernel makes 2 (bias, one row, is noise).
    s = x + bias
    # gelu(+inf) = +inf, as torch's scalar and float64 paths give; its vectorised float32/bfloat16 CPU path
    # returns NaN there (for 64 elements, not for 1), so the reference states the limit instead.
    return torch.where(torch.isposinf(s), s, F.gelu(s, approximate=approximate))


def make_inputs(size: int, dtype: torch.dtype, device: str | torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    rows, width = row_shape(size, WIDTH)
    return (torch.randn(rows, width, dtype=dtype, device=device), torch.randn(width, dtype=dtype, device=device))


def bytes_moved(size: int, dtype: torch.dtype) -> int:
    rows, width = row_shape(size, WIDTH)
    return (2 * rows * width + width) * torch.tensor([], dtype=dtype).element_size()
