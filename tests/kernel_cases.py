"""What every kernel of kernels/ is tested for, written once for the per-kernel test files (test_<kernel>.py):
its functions against its reference with jitload.check, its CUDA source compiled for sm_90 in CI, and its
sm_90 objects free of spills."""

import os

import torch

from jitload.builder import toolchain
from jitload.harness import objdump

# Why CUDA sources cannot be compiled here, or None. Besides no toolkit at all: an nvcc of another CUDA major than
# torch's, which jitload refuses (CI's torch 2.8 lane: that torch is CUDA 12's, the machine's nvcc is 13.0).
NO_CUDA_BUILDS = "no CUDA toolkit" if toolchain.find_cuda_home() is None else toolchain.cuda_major_problem()
HAVE_NVCC = NO_CUDA_BUILDS is None


def check_all(kernel, ext, device: str) -> None:
    """Every function of the kernel (its candidates) against its reference, opcheck and gradients included."""
    for label, fn in kernel.functions(ext).items():
        report = kernel.check(fn, device=device, trials=1)
        assert report.ok, f"{label}: {report}"
        assert report.summary().startswith("PASS")


def cuda_source_compiled_for_sm90(kernel, ext) -> None:
    ninja = open(os.path.join(ext.build_directory, "build.ninja")).read()
    (cu,) = kernel.spec.cuda_sources
    obj = os.path.splitext(cu)[0] + ".cuda.o"
    assert obj in ninja
    expected = os.environ.get("TORCH_CUDA_ARCH_LIST") or (None if torch.cuda.is_available() else "9.0")
    if expected == "9.0":
        assert "-gencode=arch=compute_90,code=sm_90" in ninja
    assert os.path.getsize(os.path.join(ext.build_directory, obj)) > 0


def widths_case(device, dtype):
    # every launch path of the row kernels (softmax and rmsnorm): a warp a row (up to 128 vectors), a block a row
    # with 2 bfloat16 vectors a thread (up to 2048: 16384 wide), with 4 (65536), and the scalar path (odd widths)
    for width in (1, 7, 31, 32, 33, 1000, 1024, 4097, 4104, 16384, 65536):
        yield width, torch.randn(3, width, device=device, dtype=dtype) * 4


def no_spills(ext) -> None:
    """Read off the sm_90 objects, so CI sees a spill (a stack frame) before any GPU does."""
    table = objdump.resources(ext)
    assert len(table) > 0
    touches = (table["stack"] > 0) | (table["local"] > 0)
    assert not touches.any(), table.loc[touches, ["kernel", "registers", "stack", "local"]]
