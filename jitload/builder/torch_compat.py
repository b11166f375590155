"""Every private torch API jitload calls, in one place, each with the torch versions it is tested with.

torch promises nothing about names that start with an underscore: a release may rename one, add a required
argument or drop it. jitload needs a few of them all the same (torch's own ninja file and link flags, the
dispatcher's key sets, dynamo's graph limit), so each is reached through one function here and nowhere else.
A function names the versions whose signature it was read from and tested against (:data:`TESTED`); where
torch offers more than one form, it picks the one the installed torch has, and tests/test_torch_compat.py
calls every form against a stand-in with that form's signature, and the installed torch's real one.

A newer torch that adds an optional argument to a private helper still works (jitload passes arguments by
name). One that renames, removes or adds a required argument degrades instead of failing every build: link flags
come from torch's public ``library_paths()``, and a ninja writer of an unknown form sends ``jitload.load`` to
torch's own ``load()`` (:func:`ninja_writer_problem`), with a warning that names the form and the versions jitload
knows (:class:`TorchCompatError` where a caller asks for the private form itself).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode  # the base of checker's guard mode (guards.py)

from .. import settings
from . import toolchain

__all__ = ["TESTED", "TorchCompatError", "TorchDispatchMode", "dispatch_keys_below_python",
           "include_paths", "is_op", "load_dynamo", "ninja_writer_problem", "parse_schema", "prepare_ldflags",
           "public_ldflags", "room_for_compiled_graphs", "write_ninja_file_to_build_library"]

# The torch releases every function below is read from and tested with: docker/Dockerfile's (2.8), make's (2.14)
# and the releases between them that PyPI serves; make test runs the tests on 2.14 and on 2.8.
TESTED = ("2.8", "2.9", "2.10", "2.11", "2.14")


class TorchCompatError(RuntimeError):
    """The installed torch offers a private API in a form jitload was not written for."""


# Arguments of SYCL, a backend jitload never builds for. A release whose helper lacks the parameter (torch 2.8's
# ``_prepare_ldflags``) has no SYCL path there, so leaving the argument out asks it for the same thing.
_ABSENT_MEANS_OFF: dict[str, Any] = {"with_sycl": False, "extra_sycl_cflags": []}


def _fit(fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``kwargs`` fitted to ``fn``'s signature as the installed torch has it, and None; or why they cannot be.

    An argument of :data:`_ABSENT_MEANS_OFF` at its off value is left out where ``fn`` lacks it; extra
    parameters with defaults (a newer torch) are left to their defaults; anything else missing, or a required
    parameter jitload does not pass, is a form jitload does not know.
    """
    params = {n: p for n, p in inspect.signature(fn).parameters.items() if p.kind is not p.POSITIONAL_ONLY}
    fitted = {k: v for k, v in kwargs.items()
              if k in params or not (k in _ABSENT_MEANS_OFF and _ABSENT_MEANS_OFF[k] == v)}
    missing = [k for k in fitted if k not in params]
    required = [n for n, p in inspect.signature(fn).parameters.items() if p.default is p.empty and n not in fitted
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]  # a positional-only one cannot be named
    if not missing and not required:
        return fitted, None
    return fitted, (
        f"torch {torch.__version__}'s {fn.__module__}.{fn.__name__}{inspect.signature(fn)} is not a form "
        f"jitload knows (those of torch {', '.join(TESTED)}): "
        + "; ".join(filter(None, [missing and f"it lacks {', '.join(missing)}",
                                  required and f"it needs {', '.join(required)}"])))


def _call_by_name(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)`` as :func:`_fit` fits them; :class:`TorchCompatError` where they do not fit."""
    fitted, problem = _fit(fn, kwargs)
    if problem:
        raise TorchCompatError(problem)
    return fn(**fitted)


def _ldflags_args(extra_ldflags: list[str], with_cuda: bool) -> dict[str, Any]:
    return {"extra_ldflags": list(extra_ldflags), "with_cuda": with_cuda, "with_sycl": False, "verbose": False,
            "is_standalone": False}


def _ninja_args(path: str, name: str, sources: list[str], extra_cflags: list[str], extra_cuda_cflags: list[str],
                extra_ldflags: list[str], extra_include_paths: list[str], with_cuda: bool) -> dict[str, Any]:
    return {"path": path, "name": name, "sources": list(sources), "extra_cflags": list(extra_cflags),
            "extra_cuda_cflags": list(extra_cuda_cflags), "extra_sycl_cflags": [],
            "extra_ldflags": list(extra_ldflags), "extra_include_paths": list(extra_include_paths),
            "with_cuda": with_cuda, "with_sycl": False, "is_standalone": False}


def prepare_ldflags(extra_ldflags: list[str], with_cuda: bool) -> list[str]:
    """torch's link flags for an extension (its libraries, CUDA's with ``with_cuda``), after ``extra_ldflags``.

    ``torch.utils.cpp_extension._prepare_ldflags(extra_ldflags, with_cuda, verbose, is_standalone)`` in torch
    2.8 and 2.9, with ``with_sycl`` after ``with_cuda`` from 2.10 (2.10, 2.11, 2.14). A form jitload does not
    know gets the same flags from torch's public ``library_paths`` instead (:func:`public_ldflags`).
    """
    ce = toolchain.cpp_extension()
    fitted, problem = _fit(ce._prepare_ldflags, _ldflags_args(extra_ldflags, with_cuda))
    if problem:
        _warn_once(f"{problem}: linking with the flags of torch's public library_paths() instead")
        return public_ldflags(extra_ldflags, with_cuda)
    return ce._prepare_ldflags(**fitted)


def public_ldflags(extra_ldflags: list[str], with_cuda: bool) -> list[str]:
    """What ``_prepare_ldflags`` gives a Python extension on Linux, from public parts: ``extra_ldflags``, then
    ``-L`` for each of ``library_paths()`` (torch's, and CUDA's with ``with_cuda``) and torch's libraries."""
    ce = toolchain.cpp_extension()
    if "device_type" in inspect.signature(ce.library_paths).parameters:
        paths = ce.library_paths(device_type="cuda" if with_cuda else "cpu")
    else:  # torch before 2.6 took a flag
        paths = ce.library_paths(cuda=with_cuda)
    libraries = ["c10", *(["c10_cuda"] if with_cuda else []), "torch_cpu", *(["torch_cuda"] if with_cuda else []),
                 "torch", "torch_python", *(["cudart"] if with_cuda else [])]
    return [*extra_ldflags, *(f"-L{p}" for p in paths), *(f"-l{lib}" for lib in libraries)]


def ninja_writer_problem() -> str | None:
    """Why jitload cannot have the installed torch write its ninja files (a form of
    ``_write_ninja_file_to_build_library`` it does not know), or None. jitload.load then builds with torch's own
    ``load()``, whose ninja file is the same."""
    ce = toolchain.cpp_extension()
    writer = getattr(ce, "_write_ninja_file_to_build_library", None)
    if writer is None:
        return f"torch {torch.__version__} has no cpp_extension._write_ninja_file_to_build_library"
    return _fit(writer, _ninja_args("build.ninja", "ext", [], [], [], [], [], False))[1]


def write_ninja_file_to_build_library(path: str, name: str, sources: list[str], extra_cflags: list[str],
                                      extra_cuda_cflags: list[str], extra_ldflags: list[str],
                                      extra_include_paths: list[str], with_cuda: bool,
                                      default_arch: str | None = None) -> None:
    """Let torch write the ninja file that builds extension ``name`` from ``sources``: its compile flags,
    include paths and compilers, as ``torch.utils.cpp_extension.load`` would build it.

    ``torch.utils.cpp_extension._write_ninja_file_to_build_library(path, name, sources, extra_cflags,
    extra_cuda_cflags, extra_sycl_cflags, extra_ldflags, extra_include_paths, with_cuda, with_sycl,
    is_standalone)`` in torch 2.8 to 2.14. Another form raises :class:`TorchCompatError`
    (:func:`ninja_writer_problem` tells before a build).

    ``default_arch``: see :func:`default_arch_list`.
    """
    ce = toolchain.cpp_extension()
    args = _ninja_args(path, name, sources, extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths,
                       with_cuda)
    with default_arch_list(default_arch if with_cuda else None):
        _call_by_name(ce._write_ninja_file_to_build_library, args)


@contextlib.contextmanager
def default_arch_list(default_arch: str | None) -> Iterator[None]:
    """While inside, TORCH_CUDA_ARCH_LIST is ``default_arch`` ("9.0"; None: unchanged), the arch jitload builds
    for where neither that variable nor a GPU names one (its nvcc flags are then in ``extra_cuda_cflags``).

    torch 2.9 on reads arch flags from ``extra_cuda_cflags``; torch 2.8's ninja writer and ``load()`` read only
    TORCH_CUDA_ARCH_LIST and the visible GPUs, and with neither fail on an empty list. The variable is set for
    torch's call alone; torch 2.8 then adds the same ``-gencode`` once more, which nvcc takes as one.
    """
    if not default_arch:
        yield
        return
    # One key, set and put back under a lock: builds in other threads (a widget's, the watcher's) read the
    # environment meanwhile, and two of these may overlap.
    with _ARCH_LOCK:
        before = settings.get("TORCH_CUDA_ARCH_LIST")  # unset or empty: the same to torch
        os.environ["TORCH_CUDA_ARCH_LIST"] = default_arch
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
            else:
                os.environ["TORCH_CUDA_ARCH_LIST"] = before


_ARCH_LOCK = threading.Lock()


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, stacklevel=3)


def dispatch_keys_below_python(values: Iterable[Any]) -> Any | None:
    """The dispatch keys of the tensors among ``values`` that come after the Python key (a key set to
    ``OpOverload.redispatch`` with), or None when there is no tensor.

    ``torch._C._dispatch_keys``, ``torch._C._dispatch_keyset_full_after`` and ``torch._C.DispatchKey.Python``
    in torch 2.8 to 2.14.
    """
    keys = None
    for value in values:
        if isinstance(value, torch.Tensor):
            own = torch._C._dispatch_keys(value)
            keys = own if keys is None else keys | own
    if keys is None:
        return None
    return keys & torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)


def is_op(fn: Any) -> bool:
    """Whether ``fn`` is a registered op (``torch.ops.ns.op`` or one of its overloads), not a Python function.

    ``torch._ops.OpOverload`` and ``torch._ops.OpOverloadPacket`` in torch 2.8 to 2.14.
    """
    return isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))


@contextlib.contextmanager
def room_for_compiled_graphs(graphs: int) -> Iterator[None]:
    """Let dynamo keep at least ``graphs`` compiled graphs of one function while inside (it falls back to
    running the function uncompiled past its limit, 8 by default).

    ``torch._dynamo.config.recompile_limit`` in torch 2.8 to 2.14.
    """
    import torch._dynamo.config as dynamo_config  # imported on first use: seconds

    with dynamo_config.patch(recompile_limit=max(dynamo_config.recompile_limit, graphs)):
        yield


def load_dynamo() -> None:
    """Import dynamo now, where the caller can afford the seconds, rather than at the first
    ``torch.compiler.disable`` (which imports it).

    ``torch._dynamo`` in torch 2.8 to 2.14.
    """
    import torch._dynamo  # noqa: F401


def parse_schema(text: str) -> Any:
    """The ``FunctionSchema`` of an op schema written as in ``m.def("ns::name(Tensor x) -> Tensor")``; a
    ``RuntimeError`` where torch cannot parse it.

    ``torch._C.parse_schema`` in torch 2.8 to 2.14.
    """
    return torch._C.parse_schema(text)


def include_paths(cuda: bool) -> list[str]:
    """torch's include folders (CUDA's with ``cuda``), as its compile lines give them.

    ``torch.utils.cpp_extension.include_paths(device_type)`` in torch 2.8 to 2.14 (2.10 adds optional
    parameters); torch before 2.6
    took a flag, ``include_paths(cuda)``, which is called where ``device_type`` is not a parameter.
    """
    ce = toolchain.cpp_extension()
    if "device_type" in inspect.signature(ce.include_paths).parameters:
        return list(ce.include_paths(device_type="cuda" if cuda else "cpu"))
    return list(ce.include_paths(cuda=cuda))
