"""kernels/rmsnorm (with the residual add): against its reference, every launch path from 1 to 65536 wide,
bad input, empty tensors, forward only, its sm_90 object, and, marked cuda, the same on the GPU."""

import pytest
import torch
from kernel_cases import HAVE_NVCC, NO_CUDA_BUILDS, check_all, cuda_source_compiled_for_sm90, no_spills, widths_case


@pytest.fixture(scope="module")
def rmsnorm(build_kernel):
    return build_kernel("rmsnorm")


def test_cpu_twin_matches_reference(rmsnorm):
    check_all(*rmsnorm, "cpu")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_from_1_to_65536_wide(rmsnorm, device, dtype):
    for width, x in widths_case(device, dtype):
        res, w = torch.randn_like(x), torch.randn(width, device=device, dtype=dtype)
        out, new_res = torch.ops.jitload.rmsnorm(x, res, w, 1e-6)
        expected, expected_res = rmsnorm[0].reference(x, res, w, 1e-6)
        torch.testing.assert_close(new_res, expected_res, msg=f"rmsnorm residual width {width}")
        torch.testing.assert_close(out, expected, msg=f"rmsnorm width {width}")


BAD_INPUTS = [
    ((torch.ones(2, 3), torch.ones(2, 4), torch.ones(3)), "shape mismatch"),
    ((torch.ones(2, 3), torch.ones(2, 3), torch.ones(4)), "weight must be 1-D with 3"),
    ((torch.ones(()), torch.ones(()), torch.ones(1)), "at least one dimension"),
    ((torch.ones(2, 3), torch.ones(2, 3), torch.ones(3), -1.0), "eps must be non-negative"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS, ids=[b[1] for b in BAD_INPUTS])
def test_bad_input_is_a_clear_error(rmsnorm, args, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.jitload.rmsnorm(*args)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_empty_tensors(rmsnorm, device):
    e = torch.empty(0, 4, device=device)
    out, res = torch.ops.jitload.rmsnorm(e, e, torch.ones(4, device=device))
    assert out.shape == res.shape == (0, 4)


def test_forward_only_refuses_backprop(rmsnorm):
    # through the op and through the extension's own pybind handle alike
    _, ext = rmsnorm
    x = torch.randn(2, 8, requires_grad=True)
    for op in (torch.ops.jitload.rmsnorm, ext.rmsnorm):
        with pytest.raises(RuntimeError, match="rmsnorm is forward only"):
            op(x, torch.randn(2, 8), torch.ones(8))
    with torch.no_grad():  # inference through the handle still works
        out, _ = ext.rmsnorm(x, torch.zeros(2, 8), torch.ones(8))
        torch.testing.assert_close(out, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_cuda_source_compiled_for_sm90(rmsnorm):
    cuda_source_compiled_for_sm90(*rmsnorm)


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_no_spills(rmsnorm):
    no_spills(rmsnorm[1])


# ---- on the GPU ---------------------------------------------------------------------------------------------

@pytest.mark.cuda
def test_cuda_kernel_matches_reference(rmsnorm):
    check_all(*rmsnorm, "cuda")


@pytest.mark.cuda
def test_cuda_device_mismatch_is_a_clear_error(rmsnorm):
    with pytest.raises(RuntimeError, match="weight is on cpu"):
        torch.ops.jitload.rmsnorm(torch.ones(2, 3, device="cuda"), torch.ones(2, 3, device="cuda"), torch.ones(3))
