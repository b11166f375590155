"""kernels/bias_gelu: exact and tanh forms against the reference (gradients included), bad input, batched,
empty tensors, the shape of its float32 forward in the sm_90 object, and, marked cuda, every launch path, the
rounding of the 16-bit fast gelu and the fused bias gradient on the GPU."""

import functools
import math

import pytest
import torch
import torch.nn.functional as F
from kernel_cases import HAVE_NVCC, NO_CUDA_BUILDS, check_all, cuda_source_compiled_for_sm90, no_spills

from jitload.harness import objdump
from jitload.harness.checker import check


@pytest.fixture(scope="module")
def bias_gelu(build_kernel):
    return build_kernel("bias_gelu")


def test_cpu_twin_matches_reference(bias_gelu):
    check_all(*bias_gelu, "cpu")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_variants(bias_gelu, approximate, device="cpu"):
    kernel, _ = bias_gelu
    report = check(functools.partial(torch.ops.jitload.bias_gelu, approximate=approximate),
                   functools.partial(kernel.reference, approximate=approximate), kernel.spec.make_inputs,
                   dtypes=kernel.spec.dtypes, device=device, grad=True, trials=1)
    assert report.ok, report


def test_batched_inputs_use_the_last_dimension(bias_gelu):
    x = torch.randn(2, 3, 5)
    b = torch.randn(5)
    torch.testing.assert_close(torch.ops.jitload.bias_gelu(x, b), F.gelu(x + b))


BAD_INPUTS = [
    ((torch.ones(2, 3), torch.ones(4)), "bias has 4 elements"),
    ((torch.ones(2, 3), torch.ones(1, 3)), "bias must be 1-D"),
    ((torch.ones(()), torch.ones(1)), "at least one dimension"),
    ((torch.ones(2, 3), torch.ones(3), "fast"), "approximate must be"),
    ((torch.ones(2, 3), torch.ones(3, dtype=torch.bfloat16)), "no implicit type promotion"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS, ids=[b[1] for b in BAD_INPUTS])
def test_bad_input_is_a_clear_error(bias_gelu, args, message):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.jitload.bias_gelu(*args)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_empty_tensors(bias_gelu, device):
    e = torch.empty(0, 4, device=device)
    assert torch.ops.jitload.bias_gelu(e, torch.ones(4, device=device)).shape == (0, 4)


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_cuda_source_compiled_for_sm90(bias_gelu):
    cuda_source_compiled_for_sm90(*bias_gelu)


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_no_spills(bias_gelu):
    no_spills(bias_gelu[1])


@pytest.mark.skipif(not HAVE_NVCC, reason=str(NO_CUDA_BUILDS))
def test_float32_forward_keeps_its_measured_shape(bias_gelu):
    # bias_gelu's float32 forward reached torch.compile's speed on an H200 only with 32 registers (100%
    # occupancy at 128 threads), a plain ld.global for x and an evict_last load for the bias. ptxas
    # chooses the registers (no __launch_bounds__, see the kernel), so a change that costs occupancy or the
    # loads shows here, without a GPU.
    table = objdump.resources(bias_gelu[1])
    shape = "bias_gelu_rows_kernel<float, 4, 2, 1, 128, true"  # C, K, threads, Triton's loads
    forward = table[table["kernel"].str.contains(shape, regex=False)]
    assert len(forward) == 4, table["kernel"].tolist()  # exact and tanh, with and without bounds checks
    assert (forward["registers"] <= 32).all(), forward[["kernel", "registers"]]
    sass = objdump.sass(bias_gelu[1], shape)
    assert "LDG.E.EL.128" in sass and "LDG.E.128 " in sass and "LDG.E.128.CONSTANT" not in sass
    # Without the bounds checks, for shapes that need none, the exact forward is 278 instructions against 335
    # (nvcc 13.0): what the unchecked form is for (see the kernel's comment).
    exact = shape + ", false, "  # TANH false, then GUARD
    sizes = {guard: len([line for line in objdump.sass(bias_gelu[1], f"{exact}{guard}").splitlines()
                         if not line.startswith("//") and " NOP" not in line])
             for guard in ("true", "false")}
    assert sizes["false"] < 0.9 * sizes["true"], sizes


# ---- on the GPU ---------------------------------------------------------------------------------------------

@pytest.mark.cuda
def test_cuda_kernel_matches_reference(bias_gelu):
    check_all(*bias_gelu, "cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_cuda_variants(bias_gelu, approximate):
    test_variants(bias_gelu, approximate, device="cuda")


@pytest.mark.cuda
@pytest.mark.parametrize(("dtype", "width"), [(torch.bfloat16, 4096), (torch.bfloat16, 3 * 4096),
                                              (torch.bfloat16, 1003), (torch.bfloat16, 2**28 + 2**20),
                                              (torch.float32, 4096), (torch.float32, 4096 + 4)])
def test_cuda_bias_gelu_each_launch_path(bias_gelu, dtype, width):
    # Width 4096 takes the rows kernel without bounds checks (every row and column in range; in bfloat16 a
    # thread keeps one bias vector for 2 rows), 3 x 4096 in bfloat16 the checked one for its odd row count
    # (5461: the last block's second row is past the end); the odd width the flat kernel, one element at a
    # time; a row of 2^28 + 2^20 bfloat16 the rows kernel with 65792 blocks a row (each block finds its row and
    # stretch by dividing its index). float32 at 4096: 2 vectors x 128 threads a block, 4 blocks a row,
    # unchecked; at 4100 checked, 5 blocks a row, the last holding one vector. A wrong column shows as a wrong
    # value somewhere here. (The flat kernel's 16-byte form now runs only past 2^31 - 1 blocks.)
    n = max(2**26, width)
    x = torch.randn(n // width, width, dtype=dtype, device="cuda")
    bias = torch.randn(width, dtype=dtype, device="cuda")
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {}  # float32: assert_close's own
    for approximate in ("none", "tanh"):
        expected = F.gelu(x + bias, approximate=approximate)
        torch.testing.assert_close(torch.ops.jitload.bias_gelu(x, bias, approximate), expected, **tol)


def _gelu_exact(x: torch.Tensor, approximate: str) -> tuple[torch.Tensor, torch.Tensor]:
    """gelu and its derivative in float64, written without 1 + erf or 1 + tanh, which cancel for x < 0."""
    x = x.double()
    if approximate == "tanh":
        z = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        s = torch.sigmoid(2 * z)  # (1 + tanh z) / 2
        return x * s, s + 2 * x * s * (1 - s) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
    phi = 0.5 * torch.special.erfc(-x / math.sqrt(2))
    return x * phi, phi + x * torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_cuda_fast_gelu_rounds_like_the_exact_value(bias_gelu, dtype, approximate):
    # The 16-bit dtypes use gelu_fast.cuh (float math, ~2e-5 relative error): on every finite 16-bit value in
    # [-16, 16], each result is the exact value rounded, or one unit in the last place from it, and almost all
    # are exactly it. The check's tolerances (1e-3, 1e-2) would hide a far worse formula. Torch's own gelu is
    # not the yardstick here: its float 1 + erf(x / sqrt 2) cancels for x < -4 (3 ulps off at -4.56 in
    # bfloat16, 3x off at -5.14 in float16, measured on an H200), where gelu_fast.cuh stays within one.
    every = torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    x = every[torch.isfinite(every) & (every.abs() <= 16)].cuda()
    x = torch.cat([x, x[: (-len(x)) % 8]])[None]  # whole 16-byte vectors: the vectorised kernel
    got = torch.ops.jitload.bias_gelu(x, torch.zeros(x.shape[-1], dtype=dtype, device="cuda"), approximate)
    exact, exact_grad = _gelu_exact(x, approximate)
    want = exact.to(dtype)
    ulps = (got.view(torch.int16).int() - want.view(torch.int16).int()).abs()
    # ex2/rcp.approx.ftz flush what falls below float's smallest normal: a factor Phi < 1.2e-38, so results
    # up to |x| * 1.2e-38 (bfloat16 only, x < -10) come out as zero.
    tiny = 16 * torch.finfo(torch.float32).tiny
    flushed = exact.abs() < tiny
    off = (got != want) & (ulps > 1) & ~flushed
    assert not off.any(), list(zip(x[off][:5].tolist(), got[off][:5].tolist(), want[off][:5].tolist(), strict=True))
    assert (got[flushed].abs() <= tiny).all()
    assert (got == want).float().mean().item() > 0.99
    nan = torch.full((1, 8), float("nan"), dtype=dtype, device="cuda")
    assert torch.ops.jitload.bias_gelu(nan, torch.zeros(8, dtype=dtype, device="cuda"), approximate).isnan().all()
    grad_x, _ = torch.ops.jitload.bias_gelu_backward(torch.ones_like(x), x, torch.zeros_like(x[0]), approximate)
    # The derivative Phi(x) + x phi(x) cancels near x = -0.75, where Phi's 2e-5 relative error (Phi ~ 0.23)
    # becomes an absolute ~5e-6: an absolute bound of 1e-5 there, one unit in the last place elsewhere.
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(grad_x.double(), exact_grad.to(dtype).double(), rtol=eps, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64],
                         ids=["float32", "bfloat16", "float16", "float64"])
def test_cuda_bias_gelu_backward_fuses_the_bias_gradient(bias_gelu, dtype):
    # The CUDA backward sums grad_x into the bias gradient in its own kernel: blocks of 64 column vectors x 4
    # row lanes, one wave of them striding down the rows 8 at a time (kernels/bias_gelu). Widths of one
    # vector, one past a block, 4096, and an odd width (no whole vectors: grad_x's kernel, then torch's sum);
    # from 1 row to 5000 (at 4096 wide on an H200, 49 bfloat16 blocks a stretch, each 12-13 strides).
    # The bias gradient must be the sum of grad_x as stored, within what accumulating `rows` values in
    # float32 (float64) can lose, and the same bits on every call.
    vec = 16 // torch.tensor([], dtype=dtype).element_size()
    acc_eps = torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps
    shapes = [(rows, width) for rows in (1, 63, 64, 65, 200) for width in (vec, 65 * vec, 4096, 1003)]
    for rows, width in [*shapes, (5000, 4096)]:
        grad, x = (torch.randn(rows, width, dtype=dtype, device="cuda") for _ in range(2))
        bias = torch.randn(width, dtype=dtype, device="cuda")
        grad_x, grad_bias = torch.ops.jitload.bias_gelu_backward(grad, x, bias)
        want = torch.ops.aten.gelu_backward(grad.double(), (x + bias).double())
        tol = {"rtol": 1e-2, "atol": 1e-2} if vec == 8 else {}
        torch.testing.assert_close(grad_x, want.to(dtype), **tol, msg=f"grad_x {rows} x {width}")
        exact = grad_x.double().sum(0)
        bound = torch.finfo(dtype).eps * exact.abs() + rows * acc_eps * grad_x.double().abs().sum(0)
        assert ((grad_bias.double() - exact).abs() <= bound).all(), f"grad_bias {rows} x {width}"
        assert torch.equal(torch.ops.jitload.bias_gelu_backward(grad, x, bias)[1], grad_bias)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_backward_on_one_row_gives_a_bias_gradient_of_the_bias_shape(bias_gelu, device):
    x = torch.randn(37, dtype=torch.float64, device=device, requires_grad=True)
    bias = torch.randn(37, dtype=torch.float64, device=device, requires_grad=True)
    out = torch.ops.jitload.bias_gelu(x, bias)
    weight = torch.randn_like(out)
    grad_x, grad_bias = torch.autograd.grad(out, (x, bias), weight)
    assert grad_bias.shape == bias.shape
    ref_x, ref_bias = torch.autograd.grad(F.gelu(x + bias), (x, bias), weight)
    torch.testing.assert_close(grad_x, ref_x)
    torch.testing.assert_close(grad_bias, ref_bias)
    assert torch.autograd.gradcheck(torch.ops.jitload.bias_gelu, (x.detach()[:5].requires_grad_(),
                                                                   bias.detach()[:5].requires_grad_()))
