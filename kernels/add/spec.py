"""add: out = a + b, the seed article's first kernel, for float32, float16 and bfloat16.

The fast-rebuild layout: add.cpp (torch headers, compiled once) binds add_kernel.cu and add_cpu.cpp, which
include only add.h and kernels/common's torch-free headers. ``jitload check|bench add`` read the names below;
the op is ``torch.ops.jitload.add`` once the extension is loaded.
"""

import torch

NAME = "add"
SOURCES = ["add.cpp", "add_cpu.cpp"]
CUDA_SOURCES = ["add_kernel.cu"]
FUNCTION = "add"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
BENCH_SIZES = {"cpu": [2**16, 2**20, 2**22], "cuda": [2**16, 2**20, 2**24, 2**26, 2**28]}
GRAD = True


def candidates(ext) -> dict:
    """What ``jitload check``/``bench`` run: the registered op (opcheck'ed by the checker)."""
    return {"add": torch.ops.jitload.add}


def reference_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # Reads a and b and writes out: 3 * numel * itemsize bytes, the least any add can move.
    return a + b


def make_inputs(size: int, dtype: torch.dtype, device: str | torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.randn(size, dtype=dtype, device=device), torch.randn(size, dtype=dtype, device=device))


def bytes_moved(size: int, dtype: torch.dtype) -> int:
    return 3 * size * torch.tensor([], dtype=dtype).element_size()
