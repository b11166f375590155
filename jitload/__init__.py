"""jitload: write, rebuild, check and time fused PyTorch CUDA kernels interactively.

A thin layer over ``torch.utils.cpp_extension``: ``load``/``load_inline`` take torch's arguments and return a
handle that always holds the newest build, rebuilt in about a second after a kernel edit.
"""

from .errors import BuildError
from .extension import BuildInfo, Extension, handles, load, load_inline

__all__ = ["BuildError", "BuildInfo", "Extension", "handles", "load", "load_inline"]
__version__ = "0.1.0"
