"""``KernelSpec``: what a kernel folder's ``spec.py`` declares, read in this one place.

A kernel author writes ``kernels/<name>/spec.py`` as a plain module (upper-case constants and functions, so
that ``kernels/setup.py`` can read its source lists without importing jitload). :func:`from_module` turns it
into a :class:`KernelSpec` and names what is missing; everything else in jitload (the CLI, the watcher, the
tests) reads the dataclass's fields, never the module.

Required in spec.py: ``NAME`` (the extension), ``SOURCES``, ``FUNCTION`` (the binding to check when there is no
``candidates``), ``reference_<folder>``, ``make_inputs(size, dtype, device)``, ``DTYPES``, ``BENCH_SIZES`` (per
device type). Optional: ``CUDA_SOURCES`` (compiled when a CUDA toolkit is present), ``bytes_moved(size,
dtype)``, ``CHECK_SIZES`` (instead of the checker's defaults), ``EXTRA_CHECK_SIZES`` (beside them: sizes, or
shapes ``make_inputs`` reads, where the kernel changes path), ``TOLERANCES`` ({dtype: (rtol, atol)}), ``GRAD``
(check gradients too),
``candidates(ext)`` (the functions to check and time, by name; the first is the kernel's main one) and
``baselines(device)`` (other implementations to time beside ours, such as Triton's).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

REQUIRED = ("NAME", "SOURCES", "FUNCTION", "make_inputs", "DTYPES", "BENCH_SIZES")

@dataclass(frozen=True)
class KernelSpec:
    """One kernel's declaration: sources, reference, inputs, sizes, bytes moved, what to check and time."""

    name: str
    sources: tuple[str, ...]
    function: str
    reference: Callable[..., Any]
    make_inputs: Callable[[int, torch.dtype, torch.device], tuple]
    dtypes: tuple[torch.dtype, ...]
    bench_sizes: Mapping[str, Sequence[int]]
    cuda_sources: tuple[str, ...] = ()
    bytes_moved: Callable[[int, torch.dtype], int] | None = None
    check_sizes: Sequence[int] | None = None
    extra_check_sizes: tuple[int | tuple[int, ...], ...] = ()
    tolerances: Mapping[torch.dtype, tuple[float, float]] | None = None
    grad: bool = False
    candidates: Callable[[Any], Mapping[str, Callable[..., Any]]] | None = None
    baselines: Callable[[torch.device], Mapping[str, Callable[..., Any]]] | None = None
    # the spec module itself, for a kernel's own helpers (e.g. add_relu's slow_add, a WIDTH)
    module: types.ModuleType | None = field(default=None, repr=False, compare=False)


def from_module(module: types.ModuleType, folder_name: str) -> KernelSpec:
    """The KernelSpec a kernel folder's spec module declares; ``folder_name`` names its reference."""
    where = getattr(module, "__file__", None) or folder_name
    reference = f"reference_{folder_name}"
    missing = [n for n in (*REQUIRED, reference) if not hasattr(module, n)]
    if missing:
        raise AttributeError(f"{where} does not define {', '.join(missing)} (see jitload/harness/spec.py)")

    def get(name: str, default: Any = None) -> Any:
        return getattr(module, name, default)

    return KernelSpec(
        name=module.NAME, sources=tuple(module.SOURCES), function=module.FUNCTION,
        reference=getattr(module, reference), make_inputs=module.make_inputs, dtypes=tuple(module.DTYPES),
        bench_sizes={k: list(v) for k, v in module.BENCH_SIZES.items()},
        cuda_sources=tuple(get("CUDA_SOURCES", ())), bytes_moved=get("bytes_moved"),
        check_sizes=get("CHECK_SIZES"), extra_check_sizes=tuple(get("EXTRA_CHECK_SIZES", ())),
        tolerances=get("TOLERANCES"), grad=bool(get("GRAD", False)),
        candidates=get("candidates"), baselines=get("baselines"), module=module)
