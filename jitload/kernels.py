"""The kernel folders under ``kernels/``: find them, read their spec, build and check them with jitload.

A kernel folder holds ``spec.py`` (read into a :class:`jitload.harness.spec.KernelSpec`: what it must and may declare
is listed there) beside its sources. Headers shared by all kernels live in ``kernels/common``, on every include
path. The kernel list is what :func:`names` finds on disk, never a list written out elsewhere.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from . import settings
from .builder import toolchain
from .builder.extension import Extension, prepare
from .harness.checker import CheckReport, check, default_sizes
from .harness.spec import KernelSpec, from_module

CUDA_DEFINE = "-DJITLOAD_WITH_CUDA"
COMMON = "common"  # kernels/common: shared headers, not a kernel


@dataclass(frozen=True)
class Kernel:
    """One kernel folder and its spec."""

    name: str
    folder: str
    spec: KernelSpec

    @property
    def module(self) -> types.ModuleType | None:
        """The folder's spec.py as a module, for the kernel's own helpers."""
        return self.spec.module

    @property
    def reference(self) -> Callable[..., Any]:
        return self.spec.reference

    @property
    def common_dir(self) -> str:
        return os.path.join(os.path.dirname(self.folder), COMMON)

    def functions(self, ext: Extension) -> dict:
        """The spec's ``candidates(ext)``, or ``{name: ext.FUNCTION}``; the first is the kernel's main one."""
        if self.spec.candidates is not None:
            return dict(self.spec.candidates(ext))
        return {self.name: getattr(ext, self.spec.function)}

    def baselines(self, device: torch.device) -> dict:
        """The spec's ``baselines(device)``: other implementations to time and check beside ours (Triton)."""
        return dict(self.spec.baselines(device)) if self.spec.baselines is not None else {}

    def device_for(self, device: str | torch.device | None = None) -> torch.device:
        """Where the kernel runs: ``device`` (default: the GPU where one is visible), but the CPU for a kernel
        without CUDA sources, whose code would be handed GPU pointers it cannot read."""
        if not self.spec.cuda_sources:
            return torch.device("cpu")
        return torch.device(device) if device is not None else toolchain.default_device()

    def check(self, fn: Callable[..., Any], *, device: str | torch.device | None = None,
              dtypes: Sequence[torch.dtype] | None = None, grad: bool | None = None,
              sizes: Sequence[Any] | None = None, **kwargs: Any) -> CheckReport:
        """:func:`jitload.check` of ``fn`` against the reference, with the spec's inputs, sizes (its
        ``CHECK_SIZES``, else the defaults and its ``EXTRA_CHECK_SIZES``; ``sizes=[]`` with ``timed_sizes`` checks
        just those), dtypes, tolerances and gradient check (``grad=False`` skips it, for a baseline that has no
        backward)."""
        runs_on = self.device_for(device)
        sizes = sizes if sizes is not None else self.spec.check_sizes
        if sizes is None:
            sizes = [*default_sizes(runs_on), *self.spec.extra_check_sizes]
        return check(fn, self.spec.reference, self.spec.make_inputs, sizes=sizes,
                     dtypes=list(dtypes if dtypes is not None else self.spec.dtypes), device=runs_on,
                     grad=self.spec.grad if grad is None else grad and self.spec.grad,
                     tolerances=self.spec.tolerances, **kwargs)

    def sources(self, with_cuda: bool) -> list[str]:
        names = list(self.spec.sources) + (list(self.spec.cuda_sources) if with_cuda else [])
        return [os.path.join(self.folder, n) for n in names]

    def extension(self, *, with_cuda: bool | None = None, verbose: bool = False) -> Extension:
        """The kernel's extension handle, not yet built; CUDA sources are included when nvcc exists and is of
        torch's CUDA major (else the CPU twin alone is built, and a warning says why)."""
        if with_cuda is None:
            with_cuda = bool(self.spec.cuda_sources) and toolchain.find_cuda_home() is not None
            if with_cuda and (problem := toolchain.cuda_major_problem()):
                settings.logger().warning("%s: CUDA sources not built, the CPU twin alone: %s", self.spec.name,
                                          problem)
                with_cuda = False
        flags = ["-O3", CUDA_DEFINE] if with_cuda else ["-O3"]
        includes = [self.common_dir] if os.path.isdir(self.common_dir) else []
        return prepare(self.spec.name, self.sources(with_cuda), extra_cflags=flags, extra_cuda_cflags=flags,
                       extra_include_paths=includes, with_cuda=with_cuda, verbose=verbose)

    def build(self, *, with_cuda: bool | None = None, verbose: bool = False) -> Extension:
        """Build (or hot-rebuild) the kernel's extension."""
        return self.extension(with_cuda=with_cuda, verbose=verbose).reload()


def sibling(spec_file: str, module: str) -> types.ModuleType:
    """Import ``module``.py from the folder of ``spec_file`` (a kernel's own Python helpers), once.

    Kernel folders are not packages and several hold a module of the same name, so each is imported
    under a name unique to its folder instead of through sys.path.
    """
    folder = os.path.dirname(os.path.abspath(spec_file))
    unique = f"jitload_kernel_{os.path.basename(folder)}_{module}"
    if unique not in sys.modules:
        spec = importlib.util.spec_from_file_location(unique, os.path.join(folder, f"{module}.py"))
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot read {folder}/{module}.py")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[unique] = loaded  # before exec: triton's @jit reads its function's module by name
        spec.loader.exec_module(loaded)
    return sys.modules[unique]


def triton_baseline(spec_file: str, module: str, function: str, device: torch.device) -> dict:
    """A spec's ``baselines(device)`` for a Triton version in its folder: ``{"triton": module.function}`` on a
    CUDA device where Triton is installed, else ``{}`` (the module imports triton, so it is not even read)."""
    if device.type != "cuda" or importlib.util.find_spec("triton") is None:
        return {}
    return {"triton": getattr(sibling(spec_file, module), function)}


def row_shape(size: int | tuple[int, int], width: int, odd_width: int = 1003) -> tuple[int, int]:
    """A (rows, width) shape of about ``size`` elements for kernels that work on rows.

    Multiples of ``width`` are exact; other sizes get rows of ``odd_width`` elements (not a multiple of any
    vector length, so the scalar paths are checked), or one row of ``size`` when that is shorter. Size 0 is
    zero rows of ``width``. A (rows, width) pair, as a spec's ``EXTRA_CHECK_SIZES`` names the widths its kernel
    takes another path at, is returned as it is.
    """
    if isinstance(size, tuple):
        rows, cols = size
        return rows, cols
    if size == 0 or size % width == 0:
        return size // width, width
    if size <= odd_width:
        return 1, size
    return size // odd_width, odd_width


def default_kernels_dir() -> str:
    """$JITLOAD_KERNELS, else ./kernels, else the kernels/ folder beside the jitload package (a checkout)."""
    env = settings.get("JITLOAD_KERNELS")
    if env:
        return os.path.abspath(env)
    here = os.path.abspath("kernels")
    if os.path.isdir(here):
        return here
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels")


def _load(folder: str) -> Kernel:
    name = os.path.basename(folder)
    spec = importlib.util.spec_from_file_location(f"jitload_kernel_spec_{name}", os.path.join(folder, "spec.py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot read {folder}/spec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Kernel(name, folder, from_module(module, name))


def _root(root: str | None) -> str:
    root = root or default_kernels_dir()
    if not os.path.isdir(root):
        raise FileNotFoundError(f"no kernels folder at {root} (set JITLOAD_KERNELS or run from the repository)")
    return root


def names(root: str | None = None) -> list[str]:
    """The kernels under ``root`` (default: :func:`default_kernels_dir`): every folder with a spec.py, sorted.
    Reads no spec, so tests can parametrise over it at collection time."""
    root = _root(root)
    return sorted(e.name for e in os.scandir(root) if e.is_dir() and os.path.isfile(os.path.join(e.path, "spec.py")))


def discover(root: str | None = None) -> dict[str, Kernel]:
    """Every kernel under ``root``, by name, its spec read."""
    root = _root(root)
    return {name: _load(os.path.join(root, name)) for name in names(root)}


def get(name_or_path: str) -> Kernel:
    """A kernel by folder name, or by a path to its folder."""
    if os.path.isdir(name_or_path) and os.path.isfile(os.path.join(name_or_path, "spec.py")):
        return _load(os.path.abspath(name_or_path))
    known = names()
    if name_or_path not in known:
        raise KeyError(f"no kernel named {name_or_path!r}; known: {', '.join(known) or 'none'}")
    return _load(os.path.join(_root(None), name_or_path))
