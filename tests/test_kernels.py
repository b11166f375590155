"""kernels/add: the CPU twin against its reference in CI, the CUDA source compiled for sm_90, and the
CUDA kernel itself where a GPU exists."""

import os

import pytest
import torch

from jitload import kernels, toolchain
from jitload.checker import check


@pytest.fixture(scope="module")
def add_kernel():
    return kernels.get("add")


@pytest.fixture(scope="module")
def add_ext(add_kernel):
    return add_kernel.build()


def test_cpu_twin_matches_reference(add_kernel, add_ext):
    spec = add_kernel.spec
    report = check(add_ext.add, add_kernel.reference, spec.make_inputs, dtypes=spec.DTYPES, device="cpu")
    assert report.ok, report


@pytest.mark.skipif(toolchain.find_cuda_home() is None, reason="no CUDA toolkit")
def test_cuda_source_compiled_for_sm90(add_ext):
    ninja = open(os.path.join(add_ext.build_directory, "build.ninja")).read()
    assert "add_kernel.cuda.o" in ninja
    expected = os.environ.get("TORCH_CUDA_ARCH_LIST") or (None if torch.cuda.is_available() else "9.0")
    if expected == "9.0":
        assert "-gencode=arch=compute_90,code=sm_90" in ninja
    assert os.path.getsize(os.path.join(add_ext.build_directory, "add_kernel.cuda.o")) > 0


@pytest.mark.parametrize(
    "a, b, message",
    [
        (torch.ones(3), torch.ones(4), "shape mismatch"),
        (torch.ones(3), torch.ones(3, dtype=torch.float64), "expected two float32"),
    ],
)
def test_bad_input_is_a_clear_error(add_ext, a, b, message):
    with pytest.raises(RuntimeError, match=message):
        add_ext.add(a, b)


def test_non_contiguous_input(add_ext):
    a = torch.randn(8, 6).t()
    b = torch.randn(8, 6).t()
    torch.testing.assert_close(add_ext.add(a, b), a + b)


@pytest.mark.cuda
def test_cuda_kernel_matches_reference(add_kernel, add_ext):
    spec = add_kernel.spec
    report = check(add_ext.add, add_kernel.reference, spec.make_inputs, dtypes=spec.DTYPES, device="cuda")
    assert report.ok, report


@pytest.mark.cuda
def test_cuda_kernel_on_side_stream(add_ext):
    a, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = add_ext.add(a, b)
    stream.synchronize()
    torch.testing.assert_close(out, a + b)


@pytest.mark.cuda
def test_device_mismatch_is_a_clear_error(add_ext):
    with pytest.raises(RuntimeError, match="is on"):
        add_ext.add(torch.ones(3, device="cuda"), torch.ones(3))
