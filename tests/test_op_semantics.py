"""Where the ops must behave as torch's own do beyond random values: NaN through add_relu, bias_gelu's backward on
a single row, and the forward-only ops' pybind handles under autograd."""

import pytest
import torch
import torch.nn.functional as F

from jitload import kernels


@pytest.fixture(scope="module")
def ext():
    return {name: kernels.get(name).build() for name in ("add_relu", "bias_gelu", "rmsnorm", "softmax")}


SPECIALS = torch.tensor([float("nan"), 1.5, -1.5, float("inf"), -float("inf"), 0.0, -0.0])


def _add_relu_cases(device):
    x = SPECIALS.to(device)
    return x, torch.zeros_like(x)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("version", [1, 2, 3])
def test_add_relu_propagates_nan_like_torch_relu(ext, device, version):
    x, y = _add_relu_cases(device)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        a, b = x.to(dtype), y.to(dtype)
        expected = torch.relu(a + b)
        torch.testing.assert_close(torch.ops.jitload.add_relu(a, b, version=version), expected, equal_nan=True)
        torch.testing.assert_close(ext["add_relu"].add_relu(a, b, version=version), expected, equal_nan=True)


@pytest.mark.cuda
def test_triton_add_relu_propagates_nan():
    pytest.importorskip("triton")
    from jitload.kernels import get

    triton_fns = get("add_relu").baselines(torch.device("cuda"))
    x, y = _add_relu_cases("cuda")
    for fn in triton_fns.values():
        torch.testing.assert_close(fn(x, y), torch.relu(x + y), equal_nan=True)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_bias_gelu_backward_on_one_row_gives_a_bias_gradient_of_the_bias_shape(ext, device):
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


def test_forward_only_pybind_handles_refuse_grad_like_their_ops(ext):
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="softmax is forward only"):
        ext["softmax"].softmax(x)
    with pytest.raises(RuntimeError, match="rmsnorm is forward only"):
        ext["rmsnorm"].rmsnorm(x, torch.randn(2, 8), torch.ones(8))
    with torch.no_grad():  # inference through the handle still works
        torch.testing.assert_close(ext["softmax"].softmax(x), torch.softmax(x, -1))
        out, _ = ext["rmsnorm"].rmsnorm(x, torch.zeros(2, 8), torch.ones(8))
        torch.testing.assert_close(out, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
    torch.testing.assert_close(ext["softmax"].softmax(x.detach()), torch.softmax(x.detach(), -1))
