"""jitload.builder.torch_compat: each private torch API in every form jitload meets, called on a CPU.

A stand-in with a form's signature records what jitload passes; the installed torch's real function is called too,
so CI on each tested torch release (torch_compat.TESTED) checks the form that release has.
"""

import os
import re

import pytest
import torch

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


def _prepare_ldflags_of_2_8_to_2_14(calls):
    def _prepare_ldflags(extra_ldflags, with_cuda, with_sycl, verbose, is_standalone):
        return _record(calls, ["-ltorch"])(extra_ldflags=extra_ldflags, with_cuda=with_cuda, with_sycl=with_sycl,
                                           verbose=verbose, is_standalone=is_standalone)

    return _prepare_ldflags


def test_prepare_ldflags_in_the_form_of_torch_2_8_to_2_14(monkeypatch):
    calls = []
    monkeypatch.setattr(toolchain.cpp_extension(), "_prepare_ldflags", _prepare_ldflags_of_2_8_to_2_14(calls))
    assert torch_compat.prepare_ldflags(["-lm"], True) == ["-ltorch"]
    assert calls == [LDFLAGS_ARGS]


def test_a_newer_torch_with_one_more_optional_argument_gets_its_default(monkeypatch):
    calls = []

    def _prepare_ldflags(extra_ldflags, with_cuda, with_sycl, verbose, is_standalone, torch_exclude=False):
        calls.append(torch_exclude)
        return []

    monkeypatch.setattr(toolchain.cpp_extension(), "_prepare_ldflags", _prepare_ldflags)
    torch_compat.prepare_ldflags([], False)
    assert calls == [False]


@pytest.mark.parametrize(("form", "words"), [
    ("extra_ldflags, with_cuda, verbose, is_standalone", "lacks with_sycl"),  # before torch 2.7
    ("extra_ldflags, with_cuda, with_sycl, verbose, is_standalone, torch_exclude", "needs torch_exclude"),
])
def test_a_form_jitload_does_not_know_is_named_with_the_tested_versions(monkeypatch, form, words):
    namespace = {}
    exec(f"def _prepare_ldflags({form}):\n    return []", namespace)
    monkeypatch.setattr(toolchain.cpp_extension(), "_prepare_ldflags", namespace["_prepare_ldflags"])
    with pytest.raises(torch_compat.TorchCompatError, match=words) as err:
        torch_compat.prepare_ldflags([], False)
    assert "2.8, 2.11, 2.14" in str(err.value)


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


def test_write_ninja_file_before_torch_2_7_is_refused_by_name(monkeypatch):
    def _write_ninja_file_to_build_library(path, name, sources, extra_cflags, extra_cuda_cflags, extra_ldflags,
                                           extra_include_paths, with_cuda, is_standalone):
        raise AssertionError("not called")

    monkeypatch.setattr(toolchain.cpp_extension(), "_write_ninja_file_to_build_library",
                        _write_ninja_file_to_build_library)
    with pytest.raises(torch_compat.TorchCompatError, match="lacks extra_sycl_cflags, with_sycl"):
        torch_compat.write_ninja_file_to_build_library("b.ninja", "ext", [], [], [], [], [], False)


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
