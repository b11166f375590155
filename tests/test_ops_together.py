"""The ops of kernels/ together, as a model uses them: a small MLP block in an nn.Module, trained and run
under torch.compile(fullgraph=True) against the same block in eager torch."""

import pytest
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    """A small MLP block built from the ops, as the seed puts its op in an nn.Module."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.up = torch.nn.Linear(width, 4 * width, bias=False)
        self.bias = torch.nn.Parameter(torch.randn(4 * width) * 0.1)
        self.down = torch.nn.Linear(4 * width, width)
        self.norm_weight = torch.nn.Parameter(1 + 0.1 * torch.randn(width))

    def hidden(self, x: torch.Tensor) -> torch.Tensor:  # differentiable: bias_gelu and add_relu have backward
        h = torch.ops.jitload.bias_gelu(self.up(x), self.bias, "tanh")
        return torch.ops.jitload.add_relu(self.down(h), x)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:  # inference: all four ops
        out, _ = torch.ops.jitload.rmsnorm(self.hidden(x), residual, self.norm_weight)
        return torch.ops.jitload.softmax(out)


def _eager_hidden(block: Block, x: torch.Tensor) -> torch.Tensor:
    return (block.down(F.gelu(block.up(x) + block.bias, approximate="tanh")) + x).relu()


def _eager_block(block: Block, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    r = _eager_hidden(block, x) + residual
    return torch.softmax(r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + 1e-6) * block.norm_weight, -1)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_module_compiles_fullgraph(all_kernels, device):
    torch.manual_seed(0)
    block = Block().to(device)
    x, residual = torch.randn(16, 64, device=device), torch.randn(16, 64, device=device)
    torch._dynamo.reset()
    # fullgraph: a graph break is an error. Training: gradients through bias_gelu and add_relu.
    hidden = torch.compile(block.hidden, fullgraph=True)
    weight = torch.randn(16, 64, device=device)
    (hidden(x) * weight).sum().backward()
    ours = [p.grad.clone() for p in (block.up.weight, block.bias, block.down.weight)]
    block.zero_grad()
    (_eager_hidden(block, x) * weight).sum().backward()
    for got, expected in zip(ours, (block.up.weight.grad, block.bias.grad, block.down.weight.grad), strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    with torch.no_grad():  # inference: rmsnorm and softmax are forward only
        torch.testing.assert_close(torch.compile(block, fullgraph=True)(x, residual), _eager_block(block, x, residual))
