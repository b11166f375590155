"""add_relu: relu(x + y), the seed's ``slow_add`` fused into one kernel, in three teaching versions.

Ops (once the extension is loaded): ``torch.ops.jitload.add_relu(x, y, version=3)`` with the seed's C++
autograd Function, ``add_relu_backward(grad, x, y)``, and ``add_relu_py`` whose autograd is registered from
Python (autograd.py). Versions: 1 the seed's naive kernel, 2 grid-stride, 3 16-byte vectors.
"""

import functools

import torch

from jitload.kernels import sibling, triton_baseline

NAME = "add_relu"
SOURCES = ["add_relu.cpp", "add_relu_cpu.cpp"]
CUDA_SOURCES = ["add_relu_kernel.cu"]
FUNCTION = "add_relu"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
BENCH_SIZES = {"cpu": [2**16, 2**20, 2**22], "cuda": [2**12, 2**16, 2**20, 2**24, 2**26, 2**28]}
GRAD = True


def candidates(ext) -> dict:
    """The op (v3, checked with opcheck too), then v2 and v1 for the version table."""
    sibling(__file__, "autograd").register()
    op = torch.ops.jitload.add_relu
    return {"add_relu v3": op, "add_relu v2": functools.partial(op, version=2),
            "add_relu v1": functools.partial(op, version=1)}


def baselines(device: torch.device) -> dict:
    """Triton's version, where Triton and a GPU exist (timed, and checked like ours)."""
    return triton_baseline(__file__, "triton_add_relu", "add_relu", device)


def slow_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # The seed's version: three kernels (add, compare, multiply) and a float32 mask; it reads x, y, z twice
    # and the mask once and writes z, the mask and the result: far more than the 3 passes below.
    z = x + y
    mask = z > 0
    return z * mask.float()


def reference_add_relu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # What slow_add means, in x's dtype (the seed's .float() turns a half result into float32), through
    # torch.relu: NaN propagates, and -inf gives 0 where slow_add's z * mask gives NaN.
    # A fused kernel reads x and y and writes out: 3 * numel * itemsize bytes.
    return torch.relu(x + y)


def make_inputs(size: int, dtype: torch.dtype, device: str | torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.randn(size, dtype=dtype, device=device), torch.randn(size, dtype=dtype, device=device))


def bytes_moved(size: int, dtype: torch.dtype) -> int:
    return 3 * size * torch.tensor([], dtype=dtype).element_size()
