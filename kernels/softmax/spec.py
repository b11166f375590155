"""softmax over the last dimension, one pass over the data (online max and sum), forward.

Op: ``torch.ops.jitload.softmax(x)``; rows from 1 to 65536 (and more) elements wide.
"""

import torch

from jitload.kernels import row_shape, triton_baseline

NAME = "softmax"
SOURCES = ["softmax.cpp", "softmax_cpu.cpp"]
CUDA_SOURCES = ["softmax_kernel.cu"]
FUNCTION = "softmax"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
BENCH_SIZES = {"cpu": [2**16, 2**20, 2**22], "cuda": [2**16, 2**20, 2**24, 2**26, 2**28]}
WIDTH = 4096  # e.g. attention scores over a 4096-token context
# (rows, width) where softmax_kernel.cu changes path: a warp a row up to 128 scalar or 1024 vector elements,
# a block holding its row in registers up to 4096 scalar or 32768 vector elements, re-reading past that.
EXTRA_CHECK_SIZES = [(64, 32), (16, 128), (16, 129), (8, 1024), (8, 1025), (4, 4096), (4, 4097), (2, 32768),
                     (2, 32776)]


def candidates(ext) -> dict:
    return {"softmax": torch.ops.jitload.softmax}


def baselines(device: torch.device) -> dict:
    """Triton's fused-softmax tutorial kernel, where Triton and a GPU exist."""
    return triton_baseline(__file__, "triton_softmax", "softmax", device)


def reference_softmax(x: torch.Tensor) -> torch.Tensor:
    # torch's softmax kernel is fused already: it reads x (twice, the second from cache) and writes out:
    # 2 passes over x's size.
    return torch.softmax(x, dim=-1)


def make_inputs(size: int, dtype: torch.dtype, device: str | torch.device) -> tuple[torch.Tensor]:
    rows, width = row_shape(size, WIDTH)
    return (3 * torch.randn(rows, width, dtype=dtype, device=device),)


def bytes_moved(size: int, dtype: torch.dtype) -> int:
    rows, width = row_shape(size, WIDTH)
    return 2 * rows * width * torch.tensor([], dtype=dtype).element_size()
