"""kernels/add_relu: its three versions against the reference (gradients included), bad input, empty and
non-contiguous tensors, its sm_90 object, and, marked cuda, misaligned inputs, a device mismatch and more than
2^31 elements on the GPU."""

import pytest
import torch
from kernel_cases import HAVE_NVCC, NO_CUDA_BUILDS, check_all, cuda_source_compiled_for_sm90, no_spills


@pytest.fixture(scope="module")
def add_relu(build_kernel):
    return build_kernel("add_relu")


def test_cpu_twin_matches_reference(add_relu):
    check_all(*add_relu, "cpu")


BAD_INPUTS = [
    ("add_relu", (torch.ones(2, 3), torch.ones(3, 2)), "shape mismatch"),
    ("add_relu", (torch.ones(3), torch.ones(3), 4), "version must be 1"),
    ("add_relu_backward", (torch.ones(3), torch.ones(3), torch.ones(4)), "shape mismatch"),
]


@pytest.mark.parametrize("op, args, message", BAD_INPUTS, ids=[f"{b[0]}-{b[2]}" for b in BAD_INPUTS])
def test_bad_input_is_a_clear_error(add_relu, op, args, message):
    with pytest.raises(RuntimeError, match=message):
        getattr(torch.ops.jitload, op)(*args)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_empty_tensors(add_relu, device):
    e = torch.empty(0, 4, device=device)
    assert torch.ops.jitload.add_relu(e, e).shape == (0, 4)


def test_non_contiguous_inputs(add_relu):
    a, b = torch.randn(8, 6).t(), torch.randn(8, 6).t()
    torch.testing.assert_close(torch.ops.jitload.add_relu(a, b), (a + b).relu())


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_cuda_source_compiled_for_sm90(add_relu):
    cuda_source_compiled_for_sm90(*add_relu)


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_no_spills(add_relu):
    no_spills(add_relu[1])


# ---- on the GPU ---------------------------------------------------------------------------------------------

@pytest.mark.cuda
def test_cuda_kernel_matches_reference(add_relu):
    check_all(*add_relu, "cuda")


@pytest.mark.cuda
def test_cuda_misaligned_inputs_take_the_scalar_path(add_relu):
    base = torch.randn(2**20 + 8, device="cuda")
    a, b = base[1:2**20 + 1], base[3:2**20 + 3]  # 4 and 12 bytes past a 16-byte boundary
    for version in (1, 2, 3):
        torch.testing.assert_close(torch.ops.jitload.add_relu(a, b, version), (a + b).relu())


@pytest.mark.cuda
def test_cuda_device_mismatch_is_a_clear_error(add_relu):
    with pytest.raises(RuntimeError, match="x is on cuda:0 but y is on cpu"):
        torch.ops.jitload.add_relu(torch.ones(3, device="cuda"), torch.ones(3))


@pytest.mark.cuda
def test_cuda_more_than_2_31_elements(add_relu):
    n = 2**31 + 5  # past int32 indexing; bfloat16 keeps it at 4 GiB per tensor
    if torch.cuda.get_device_properties(0).total_memory < 4 * 2 * n * 2:
        pytest.skip("needs about 20 GiB of GPU memory")
    a = torch.ones(n, dtype=torch.bfloat16, device="cuda")
    b = torch.full((n,), -3.0, dtype=torch.bfloat16, device="cuda")
    b[-7:] = 2.0
    out = torch.ops.jitload.add_relu(a, b)
    assert out[:-7].max().item() == 0.0 and out[-7:].eq(3.0).all().item()


SPECIALS = torch.tensor([float("nan"), 1.5, -1.5, float("inf"), -float("inf"), 0.0, -0.0])


def _add_relu_cases(device):
    x = SPECIALS.to(device)
    return x, torch.zeros_like(x)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("version", [1, 2, 3])
def test_nan_propagates_like_torch_relu(add_relu, device, version):
    x, y = _add_relu_cases(device)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        a, b = x.to(dtype), y.to(dtype)
        expected = torch.relu(a + b)
        torch.testing.assert_close(torch.ops.jitload.add_relu(a, b, version=version), expected, equal_nan=True)
        torch.testing.assert_close(add_relu[1].add_relu(a, b, version=version), expected, equal_nan=True)


@pytest.mark.cuda
def test_cuda_triton_twin_propagates_nan(add_relu):
    pytest.importorskip("triton")
    x, y = _add_relu_cases("cuda")
    for fn in add_relu[0].baselines(torch.device("cuda")).values():
        torch.testing.assert_close(fn(x, y), torch.relu(x + y), equal_nan=True)
