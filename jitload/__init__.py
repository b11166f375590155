"""jitload: write, rebuild, check and time fused PyTorch CUDA kernels interactively.

A thin layer over ``torch.utils.cpp_extension``: ``load``/``load_inline`` take torch's arguments and return a
handle that always holds the newest build, rebuilt in about a second after a kernel edit; ``check`` compares
a kernel with its reference in ways a wrong kernel cannot slip through; ``bench`` times it against eager
PyTorch, ``torch.compile`` and the copy bandwidth measured in the same run.
"""

import os

from .builder.errors import BuildError
from .builder.extension import BuildInfo, Extension, handles, load, load_inline, prepare, wait
from .harness.benchmark import BenchResult, bench
from .harness.checker import CheckReport, Failure, check

__all__ = ["BenchResult", "BuildError", "BuildInfo", "CheckReport", "Extension", "Failure", "bench", "check",
           "handles", "load", "load_inline", "prepare", "wait", "watch"]
__version__ = "0.1.0"


def watch(ext: Extension, *, start: bool = True):
    """A notebook panel that rebuilds ``ext`` when its files change (see :mod:`jitload.ui.widgets`)."""
    from .ui.widgets import watch as _watch

    return _watch(ext, start=start)


def load_ipython_extension(ipython) -> None:
    """``%load_ext jitload``: the %%cuda, %%cpp and %%kernel cell magics."""
    from .ui.magics import JitloadMagics

    # A notebook's host edits come after its first load: the interpreter starts in the background after it.
    os.environ.setdefault("JITLOAD_HOST_JIT", "warm")

    ipython.register_magics(JitloadMagics)
