"""add: out = a + b in float32, the seed article's first kernel.

The fast-rebuild layout: add.cpp (torch headers, compiled once) binds add_kernel.cu and add_cpu.cpp, which
include only add.h. jitload's kernel runner (``jitload check|bench add``) reads the names below.
"""

import torch

NAME = "add"
SOURCES = ["add.cpp", "add_cpu.cpp"]
CUDA_SOURCES = ["add_kernel.cu"]
FUNCTION = "add"
DTYPES = [torch.float32]
BENCH_SIZES = {"cpu": [2**16, 2**20, 2**22], "cuda": [2**20, 2**24, 2**28]}


def reference_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # Reads a and b and writes out: 12 bytes per float32 element, the least any add can move.
    return a + b


def make_inputs(size: int, dtype: torch.dtype, device: str | torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.randn(size, dtype=dtype, device=device), torch.randn(size, dtype=dtype, device=device))


def bytes_moved(size: int, dtype: torch.dtype) -> int:
    return 3 * size * torch.tensor([], dtype=dtype).element_size()
