"""kernels/softmax (over the last dimension): against its reference, every launch path from 1 to 65536 wide,
batched and non-contiguous input, bad input, empty tensors, forward only, its sm_90 object, and, marked cuda,
the same on the GPU."""

import pytest
import torch
from kernel_cases import HAVE_NVCC, NO_CUDA_BUILDS, check_all, cuda_source_compiled_for_sm90, no_spills, widths_case


@pytest.fixture(scope="module")
def softmax(build_kernel):
    return build_kernel("softmax")


def test_cpu_twin_matches_reference(softmax):
    check_all(*softmax, "cpu")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_from_1_to_65536_wide(softmax, device, dtype):
    for width, x in widths_case(device, dtype):
        torch.testing.assert_close(torch.ops.jitload.softmax(x), torch.softmax(x, -1), msg=f"softmax width {width}")


# (width, masked): a row masked with -inf from its start, every logit after it below exp's underflow (about
# -87). 1024 threads hold 32768 elements of a row in registers (16384 in float64, 4096 on the scalar path of
# odd widths) and read the rest online: a thread that holds only -inf must not take 0 for its running max, or
# the row sums to 0. Masking 30000 mixes such threads with ones that hold logits.
MASKED_ROWS = [(65536, 32768), (65536, 30000), (8193, 4096)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64],
                         ids=["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("width, masked", MASKED_ROWS, ids=[f"{w}-masked-{m}" for w, m in MASKED_ROWS])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_a_long_row_masked_from_its_start(softmax, device, width, masked, dtype):
    x = torch.randn(3, width, device=device).sub_(100).to(dtype)
    x[:, :masked] = float("-inf")
    x[1, -1] = float("nan")  # read online: the row is NaN, as torch's
    x[2, -2] = float("inf")  # likewise
    torch.testing.assert_close(torch.ops.jitload.softmax(x), torch.softmax(x, -1), equal_nan=True)


def test_batched_inputs_use_the_last_dimension(softmax):
    x = torch.randn(2, 3, 5)
    torch.testing.assert_close(torch.ops.jitload.softmax(x), torch.softmax(x, -1))


def test_non_contiguous_inputs(softmax):
    x = torch.randn(6, 8)[:, ::2]
    torch.testing.assert_close(torch.ops.jitload.softmax(x), torch.softmax(x, -1))


BAD_INPUTS = [
    ((torch.ones(()),), "at least one dimension"),
    ((torch.ones(3, dtype=torch.int64),), "expected a float32"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS, ids=[b[1] for b in BAD_INPUTS])
def test_bad_input_is_a_clear_error(softmax, args, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.jitload.softmax(*args)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_empty_tensors(softmax, device):
    e = torch.empty(0, 4, device=device)
    assert torch.ops.jitload.softmax(e).shape == (0, 4)


def test_forward_only_refuses_backprop(softmax):
    # through the op and through the extension's own pybind handle alike
    _, ext = softmax
    x = torch.randn(2, 8, requires_grad=True)
    for op in (torch.ops.jitload.softmax, ext.softmax):
        with pytest.raises(RuntimeError, match="softmax is forward only"):
            op(x)
        with torch.no_grad():
            torch.testing.assert_close(op(x), torch.softmax(x, -1))


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_cuda_source_compiled_for_sm90(softmax):
    cuda_source_compiled_for_sm90(*softmax)


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_no_spills(softmax):
    no_spills(softmax[1])


# ---- on the GPU ---------------------------------------------------------------------------------------------

@pytest.mark.cuda
def test_cuda_kernel_matches_reference(softmax):
    check_all(*softmax, "cuda")
