"""Every private torch API jitload calls, in one place, each with the torch versions it is tested with.

torch promises nothing about names that start with an underscore: a release may rename one, add a required
argument or drop it. jitload needs a few of them all the same (torch's own ninja file and link flags, the
dispatcher's key sets, dynamo's graph limit), so each is reached through one function here and nowhere else.
A function names the versions whose signature it was read from and tested against (:data:`TESTED`); where
torch offers more than one form, it picks the one the installed torch has, and tests/test_torch_compat.py
calls every form against a stand-in with that form's signature, and the installed torch's real one.

A newer torch that adds an optional argument to a private helper still works (jitload passes arguments by
name); one that renames, removes or adds a required argument is stopped with :class:`TorchCompatError`, which
names the versions jitload knows, instead of a ``TypeError`` from inside a build.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode  # the base of checker's guard mode (guards.py)

from . import toolchain

__all__ = ["TESTED", "TorchCompatError", "TorchDispatchMode", "dispatch_keys_below_python", "include_paths",
           "is_op", "load_dynamo", "parse_schema", "prepare_ldflags", "room_for_compiled_graphs",
           "write_ninja_file_to_build_library"]

# The torch releases every function below is read from and tested with: docker/Dockerfile's (2.8) and two later ones.
TESTED = ("2.8", "2.11", "2.14")


class TorchCompatError(RuntimeError):
    """The installed torch offers a private API in a form jitload was not written for."""


def _call_by_name(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)``, where ``fn`` takes every argument by these names and needs no other.

    The arguments are those of the signature in every :data:`TESTED` release; extra parameters with defaults
    (a newer torch) are left to their defaults.
    """
    params = inspect.signature(fn).parameters
    missing = [k for k in kwargs if k not in params]
    required = [n for n, p in params.items() if p.default is p.empty and n not in kwargs
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if missing or required:
        raise TorchCompatError(
            f"torch {torch.__version__}'s {fn.__module__}.{fn.__name__}{inspect.signature(fn)} is not the form "
            f"jitload calls (that of torch {', '.join(TESTED)}): "
            + "; ".join(filter(None, [missing and f"it lacks {', '.join(missing)}",
                                      required and f"it needs {', '.join(required)}"])))
    return fn(**kwargs)


def prepare_ldflags(extra_ldflags: list[str], with_cuda: bool) -> list[str]:
    """torch's link flags for an extension (its libraries, CUDA's with ``with_cuda``), after ``extra_ldflags``.

    ``torch.utils.cpp_extension._prepare_ldflags(extra_ldflags, with_cuda, with_sycl, verbose, is_standalone)``
    in torch 2.8, 2.11 and 2.14.
    """
    ce = toolchain.cpp_extension()
    return _call_by_name(ce._prepare_ldflags, {"extra_ldflags": list(extra_ldflags), "with_cuda": with_cuda,
                                               "with_sycl": False, "verbose": False, "is_standalone": False})


def write_ninja_file_to_build_library(path: str, name: str, sources: list[str], extra_cflags: list[str],
                                      extra_cuda_cflags: list[str], extra_ldflags: list[str],
                                      extra_include_paths: list[str], with_cuda: bool) -> None:
    """Let torch write the ninja file that builds extension ``name`` from ``sources``: its compile flags,
    include paths and compilers, as ``torch.utils.cpp_extension.load`` would build it.

    ``torch.utils.cpp_extension._write_ninja_file_to_build_library(path, name, sources, extra_cflags,
    extra_cuda_cflags, extra_sycl_cflags, extra_ldflags, extra_include_paths, with_cuda, with_sycl,
    is_standalone)`` in torch 2.8, 2.11 and 2.14.
    """
    ce = toolchain.cpp_extension()
    _call_by_name(ce._write_ninja_file_to_build_library, {
        "path": path, "name": name, "sources": list(sources), "extra_cflags": list(extra_cflags),
        "extra_cuda_cflags": list(extra_cuda_cflags), "extra_sycl_cflags": [], "extra_ldflags": list(extra_ldflags),
        "extra_include_paths": list(extra_include_paths), "with_cuda": with_cuda, "with_sycl": False,
        "is_standalone": False})


def dispatch_keys_below_python(values: Iterable[Any]) -> Any | None:
    """The dispatch keys of the tensors among ``values`` that come after the Python key (a key set to
    ``OpOverload.redispatch`` with), or None when there is no tensor.

    ``torch._C._dispatch_keys``, ``torch._C._dispatch_keyset_full_after`` and ``torch._C.DispatchKey.Python``
    in torch 2.8, 2.11 and 2.14.
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

    ``torch._ops.OpOverload`` and ``torch._ops.OpOverloadPacket`` in torch 2.8, 2.11 and 2.14.
    """
    return isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))


@contextlib.contextmanager
def room_for_compiled_graphs(graphs: int) -> Iterator[None]:
    """Let dynamo keep at least ``graphs`` compiled graphs of one function while inside (it falls back to
    running the function uncompiled past its limit, 8 by default).

    ``torch._dynamo.config.recompile_limit`` in torch 2.8, 2.11 and 2.14.
    """
    import torch._dynamo.config as dynamo_config  # imported on first use: seconds

    with dynamo_config.patch(recompile_limit=max(dynamo_config.recompile_limit, graphs)):
        yield


def load_dynamo() -> None:
    """Import dynamo now, where the caller can afford the seconds, rather than at the first
    ``torch.compiler.disable`` (which imports it).

    ``torch._dynamo`` in torch 2.8, 2.11 and 2.14.
    """
    import torch._dynamo  # noqa: F401


def parse_schema(text: str) -> Any:
    """The ``FunctionSchema`` of an op schema written as in ``m.def("ns::name(Tensor x) -> Tensor")``; a
    ``RuntimeError`` where torch cannot parse it.

    ``torch._C.parse_schema`` in torch 2.8, 2.11 and 2.14.
    """
    return torch._C.parse_schema(text)


def include_paths(cuda: bool) -> list[str]:
    """torch's include folders (CUDA's with ``cuda``), as its compile lines give them.

    ``torch.utils.cpp_extension.include_paths(device_type)`` in torch 2.8, 2.11 and 2.14; torch before 2.6
    took a flag, ``include_paths(cuda)``, which is called where ``device_type`` is not a parameter.
    """
    ce = toolchain.cpp_extension()
    if "device_type" in inspect.signature(ce.include_paths).parameters:
        return list(ce.include_paths(device_type="cuda" if cuda else "cpu"))
    return list(ce.include_paths(cuda=cuda))
