"""The Python route to autograd for a C++ op: ``torch.library.register_autograd`` on ``jitload::add_relu_py``.

``jitload::add_relu`` carries the seed's C++ ``torch::autograd::Function``; this gives the same forward
kernel a backward from Python, which is what ``torch.library`` recommends for new ops (torch.compile traces
it, and no C++ needs recompiling to change it). Call :func:`register` once the extension is loaded.
"""

import torch


def _setup_context(ctx, inputs, output) -> None:
    x, y = inputs[:2]  # (x, y, version)
    ctx.save_for_backward(x, y)


def _backward(ctx, grad: torch.Tensor):
    x, y = ctx.saved_tensors
    grad_in = torch.ops.jitload.add_relu_backward(grad, x, y)
    return grad_in, grad_in, None


def register() -> None:
    """Once per process: the C++ library never registers this key, so a hot rebuild keeps this kernel, and
    torch refuses a second Python registration of one key."""
    if not torch._C._dispatch_has_kernel_for_dispatch_key("jitload::add_relu_py", "Autograd"):
        torch.library.register_autograd("jitload::add_relu_py", _backward, setup_context=_setup_context)
