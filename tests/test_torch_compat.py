"""jitload.builder.torch_compat: each private torch API in every form jitload meets, called on a CPU.

A stand-in with a form's signature records what jitload passes; the installed torch's real function is called too,
so CI on each tested torch release (torch_compat.TESTED) checks the form that release has.
"""

import inspect
import os
import re
import types

import pytest
import torch
import torch._dynamo.config

from jitload.builder import toolchain, torch_compat
from jitload.harness import guards

PRIVATE = re.compile(r"\b(?:torch|cpp_extension|ce)\._[A-Za-z]\w*|\btorch\.utils\._\w+")
LDFLAGS_ARGS = {"extra_ldflags": ["-lm"], "with_cuda": True, "with_sycl": False, "verbose": False,
                "is_standalone": False}


def _record(calls: list, returns=None):
    def record(**kwargs):
        calls.append(kwargs)
        return returns

    return record


LDFLAGS_FORMS = {  # each form of torch.utils.cpp_extension._prepare_ldflags, by the releases that have it
    "2.8-2.9": "extra_ldflags, with_cuda, verbose, is_standalone",
    "2.10-2.14": "extra_ldflags, with_cuda, with_sycl, verbose, is_standalone",
}


def _stand_in(name: str, form: str, calls: list, returns=None):
    """A function ``name(form)`` that records the arguments it was given by name."""
    namespace = {"calls": calls, "returns": returns}
    params = [p.strip().split("=")[0] for p in form.split(",")]
    exec(f"def {name}({form}):\n    calls.append(dict({', '.join(f'{p}={p}' for p in params)}))\n"
         "    return returns", namespace)
    return namespace[name]


@pytest.mark.parametrize("releases", LDFLAGS_FORMS)
def test_prepare_ldflags_in_each_known_form(monkeypatch, releases):
    calls = []
    monkeypatch.setattr(toolchain.cpp_extension(), "_prepare_ldflags",
                        _stand_in("_prepare_ldflags", LDFLAGS_FORMS[releases], calls, ["-ltorch"]))
    assert torch_compat.prepare_ldflags(["-lm"], True) == ["-ltorch"]
    expected = {k: v for k, v in LDFLAGS_ARGS.items() if k in LDFLAGS_FORMS[releases]}
    assert calls == [expected]


def test_the_installed_torch_has_a_known_form_of_each_private_helper():
    """Read from the installed torch itself: CI's lanes (torch 2.14 and 2.8) each check their release."""
    ce = toolchain.cpp_extension()
    params = ", ".join(inspect.signature(ce._prepare_ldflags).parameters)
    assert params in LDFLAGS_FORMS.values(), f"torch {torch.__version__}: _prepare_ldflags({params})"
    assert torch_compat.ninja_writer_problem() is None
    assert "device_type" in inspect.signature(ce.include_paths).parameters
    assert "device_type" in inspect.signature(ce.library_paths).parameters
    assert isinstance(torch._dynamo.config.recompile_limit, int)
    assert torch.__version__.split("+")[0].rsplit(".", 1)[0] in torch_compat.TESTED


def test_a_newer_torch_with_one_more_optional_argument_gets_its_default(monkeypatch):
    calls = []
    monkeypatch.setattr(toolchain.cpp_extension(), "_prepare_ldflags", _stand_in(
        "_prepare_ldflags", "extra_ldflags, with_cuda, with_sycl, verbose, is_standalone, torch_exclude='x'",
        calls, []))
    torch_compat.prepare_ldflags([], False)
    assert calls[0]["torch_exclude"] == "x"


@pytest.mark.parametrize("cuda", [False, True])
def test_the_public_link_flags_are_the_installed_torchs_own(cuda):
    """The fallback for an unknown form, against the real helper of the installed torch."""
    if cuda:
        toolchain.ensure_torch_cuda_home()
    own = toolchain.cpp_extension()._prepare_ldflags(**{
        k: v for k, v in {**LDFLAGS_ARGS, "extra_ldflags": ["-lm"], "with_cuda": cuda}.items()
        if k in inspect.signature(toolchain.cpp_extension()._prepare_ldflags).parameters})
    public = torch_compat.public_ldflags(["-lm"], cuda)
    assert public[0] == "-lm" and sorted(public) == sorted(own)


@pytest.mark.parametrize(("form", "words"), [
    ("extra_ldflags, with_cuda, is_standalone", "lacks verbose"),
    ("extra_ldflags, with_cuda, with_sycl, verbose, is_standalone, torch_exclude", "needs torch_exclude"),
])
def test_an_unknown_form_of_prepare_ldflags_links_with_the_public_flags(monkeypatch, form, words):
    monkeypatch.setattr(toolchain.cpp_extension(), "_prepare_ldflags", _stand_in("_prepare_ldflags", form, []))
    monkeypatch.setattr(torch_compat, "_warned", set())
    with pytest.warns(UserWarning, match=words) as caught:
        flags = torch_compat.prepare_ldflags(["-lm"], False)
    assert "2.8, 2.9, 2.10, 2.11, 2.14" in str(caught[0].message) and "library_paths" in str(caught[0].message)
    assert flags == torch_compat.public_ldflags(["-lm"], False) and "-ltorch" in flags


def test_installed_torch_prepare_ldflags_links_torch():
    flags = torch_compat.prepare_ldflags(["-lm"], False)
    assert "-lm" in flags and "-ltorch" in flags


def test_write_ninja_file_in_the_form_of_torch_2_8_to_2_14(monkeypatch):
    calls = []

    def _write_ninja_file_to_build_library(path, name, sources, extra_cflags, extra_cuda_cflags, extra_sycl_cflags,
                                           extra_ldflags, extra_include_paths, with_cuda, with_sycl, is_standalone):
        calls.append({k: v for k, v in locals().items() if k != "calls"})

    monkeypatch.setattr(toolchain.cpp_extension(), "_write_ninja_file_to_build_library",
                        _write_ninja_file_to_build_library)
    torch_compat.write_ninja_file_to_build_library("b.ninja", "ext", ["a.cpp"], ["-O2"], ["-O3"], ["-lm"], ["inc"],
                                                   True)
    assert calls == [{"path": "b.ninja", "name": "ext", "sources": ["a.cpp"], "extra_cflags": ["-O2"],
                      "extra_cuda_cflags": ["-O3"], "extra_sycl_cflags": [], "extra_ldflags": ["-lm"],
                      "extra_include_paths": ["inc"], "with_cuda": True, "with_sycl": False, "is_standalone": False}]


def test_an_unknown_ninja_writer_is_refused_by_name(monkeypatch):
    def _write_ninja_file_to_build_library(path, name, sources, extra_cflags, extra_cuda_cflags, extra_ldflags,
                                           extra_include_paths, with_cuda, is_standalone, with_hip):
        raise AssertionError("not called")

    monkeypatch.setattr(toolchain.cpp_extension(), "_write_ninja_file_to_build_library",
                        _write_ninja_file_to_build_library)
    assert "needs with_hip" in torch_compat.ninja_writer_problem()
    with pytest.raises(torch_compat.TorchCompatError, match="needs with_hip"):
        torch_compat.write_ninja_file_to_build_library("b.ninja", "ext", [], [], [], [], [], False)


def test_a_ninja_writer_without_sycl_is_called_without_it(monkeypatch):
    calls = []
    monkeypatch.setattr(toolchain.cpp_extension(), "_write_ninja_file_to_build_library", _stand_in(
        "_write_ninja_file_to_build_library",
        "path, name, sources, extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths, with_cuda, "
        "is_standalone", calls))
    assert torch_compat.ninja_writer_problem() is None
    torch_compat.write_ninja_file_to_build_library("b.ninja", "ext", [], [], [], [], [], False)
    assert "with_sycl" not in calls[0] and "extra_sycl_cflags" not in calls[0]


PROGRAM = r"""
#include <torch/extension.h>
int twice(int x) { return 2 * x; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice); }
"""


@pytest.mark.slow
def test_an_unknown_ninja_writer_builds_with_torchs_own_load(monkeypatch, tmp_path):
    """Not a failed build: jitload.load warns, and torch's own load() builds and imports the module."""
    import jitload

    real = toolchain.cpp_extension()._write_ninja_file_to_build_library

    def writer(**kwargs):  # torch's own load() calls it by name, without the parameter it claims to need
        return real(**kwargs)

    form = inspect.signature(real)
    writer.__signature__ = form.replace(parameters=[
        *form.parameters.values(), inspect.Parameter("with_rocm", inspect.Parameter.KEYWORD_ONLY)])
    monkeypatch.setattr(toolchain.cpp_extension(), "_write_ninja_file_to_build_library", writer)
    source = tmp_path / "twice.cpp"
    source.write_text(PROGRAM)
    with pytest.warns(UserWarning, match="needs with_rocm.*torch's own load"):
        module = jitload.load("compat_twice", [str(source)], build_directory=str(tmp_path / "build"))
    assert isinstance(module, types.ModuleType) and module.twice(21) == 42



def test_installed_torch_writes_a_ninja_file_that_names_the_extension(tmp_path):
    path = str(tmp_path / "build.ninja")
    source = str(tmp_path / "a.cpp")
    torch_compat.write_ninja_file_to_build_library(path, "ext", [source], ["-O2"], [], [], [str(tmp_path)], False)
    with open(path) as f:
        text = f.read()
    assert "-DTORCH_EXTENSION_NAME=ext" in text and "-O2" in text and os.path.basename(source) in text


def test_dispatch_keys_below_python_of_cpu_tensors():
    keys = torch_compat.dispatch_keys_below_python([torch.ones(2), 3, "x", torch.zeros(1)])
    assert keys.has(torch._C.DispatchKey.CPU) and not keys.has(torch._C.DispatchKey.Python)
    assert torch_compat.dispatch_keys_below_python([1, None]) is None


def test_guards_use_the_dispatch_mode_torch_compat_names():
    assert issubclass(guards.GuardedAllocations, torch_compat.TorchDispatchMode)


def test_is_op_tells_registered_ops_from_python_functions():
    assert torch_compat.is_op(torch.ops.aten.add) and torch_compat.is_op(torch.ops.aten.add.Tensor)
    assert not torch_compat.is_op(torch.add) and not torch_compat.is_op(lambda x: x)


def test_parse_schema_reads_an_op_schema():
    schema = torch_compat.parse_schema("ns::scale(Tensor x, float s) -> Tensor")
    assert schema.name == "ns::scale" and [a.name for a in schema.arguments] == ["x", "s"]


def test_include_paths_in_either_form(monkeypatch):
    assert any(p.endswith("include") for p in torch_compat.include_paths(False))
    calls = []

    def old_form(cuda=False):  # torch before 2.6
        calls.append(cuda)
        return ["/old"]

    monkeypatch.setattr(toolchain.cpp_extension(), "include_paths", old_form)
    assert torch_compat.include_paths(True) == ["/old"] and calls == [True]


def test_room_for_compiled_graphs_raises_dynamos_limit_while_inside_only():
    import torch._dynamo.config as dynamo_config

    before = dynamo_config.recompile_limit
    with torch_compat.room_for_compiled_graphs(before + 5):
        assert dynamo_config.recompile_limit == before + 5
    with torch_compat.room_for_compiled_graphs(1):  # never lowers it
        assert dynamo_config.recompile_limit == before
    assert dynamo_config.recompile_limit == before


def test_no_private_torch_call_outside_torch_compat():
    root = os.path.dirname(os.path.dirname(torch_compat.__file__))  # the jitload package, its floors included
    found = []
    for folder, _dirs, files in os.walk(root):
        for name in sorted(files):
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path == torch_compat.__file__:
                continue
            with open(path) as f:
                text = f.read()
            found += [f"{os.path.relpath(path, root)}: {m.group()}" for m in PRIVATE.finditer(text)]
    assert not found


def test_the_default_arch_is_set_for_the_call_alone_and_nothing_else_moves(monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setenv("JITLOAD_PROBE_VAR", "kept")
    with torch_compat.default_arch_list("9.0"):
        assert os.environ["TORCH_CUDA_ARCH_LIST"] == "9.0"
        os.environ["JITLOAD_PROBE_VAR"] = "set inside"  # another thread's write is not undone
    assert "TORCH_CUDA_ARCH_LIST" not in os.environ and os.environ["JITLOAD_PROBE_VAR"] == "set inside"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    with torch_compat.default_arch_list(None):
        assert os.environ["TORCH_CUDA_ARCH_LIST"] == "8.0"
    with torch_compat.default_arch_list("9.0"):
        pass
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == "8.0"


def test_a_positional_only_parameter_is_an_unknown_form(monkeypatch):
    namespace = {}
    exec("def _prepare_ldflags(extra_ldflags, with_cuda, /, verbose, is_standalone):\n    return []", namespace)
    monkeypatch.setattr(toolchain.cpp_extension(), "_prepare_ldflags", namespace["_prepare_ldflags"])
    monkeypatch.setattr(torch_compat, "_warned", set())
    with pytest.warns(UserWarning, match="lacks extra_ldflags, with_cuda"):
        assert "-ltorch" in torch_compat.prepare_ldflags([], False)
