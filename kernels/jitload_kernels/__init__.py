"""jitload's kernels built ahead of time (``pip install --no-build-isolation ./kernels``).

Importing this package loads each kernel's library, which registers ``torch.ops.jitload.add``, ``add_relu``,
``add_relu_backward``, ``add_relu_py``, ``bias_gelu``, ``bias_gelu_backward``, ``rmsnorm`` and ``softmax``
(CPU, CUDA where built, Meta, and autograd), so saved ``torch.export`` programs and TorchScript modules that
use them load in a fresh process after ``import jitload_kernels``.
"""

from . import _add, _add_relu, _bias_gelu, _rmsnorm, _softmax  # noqa: F401 (loading registers the ops)
from .add_relu import autograd as _add_relu_autograd

_add_relu_autograd.register()
