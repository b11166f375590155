"""CUDA_HOME detection, build keys and cache folders."""

import os
import re
import stat

import pytest
import torch

import jitload
from jitload.builder import toolchain
from jitload.builder.extension import BuildSpec


def _fake_toolkit(root):
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda_runtime.h").write_text("")
    (root / "bin").mkdir()
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.48'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return nvcc


@pytest.fixture
def fresh_cuda_home():
    toolchain.find_cuda_home.cache_clear()
    yield
    toolchain.find_cuda_home.cache_clear()


def test_exec_wrapper_on_path_is_followed(tmp_path, monkeypatch, fresh_cuda_home):
    real = _fake_toolkit(tmp_path / "cuda-99.0")
    wrappers = tmp_path / "local" / "bin"
    wrappers.mkdir(parents=True)
    wrapper = wrappers / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", f"{wrappers}:{os.environ['PATH']}")
    assert toolchain.find_cuda_home() == str(tmp_path / "cuda-99.0")
    assert toolchain.nvcc_version(str(tmp_path / "cuda-99.0")) == "13.0"


def test_cuda_home_env_wins_only_if_it_has_headers(tmp_path, monkeypatch, fresh_cuda_home):
    _fake_toolkit(tmp_path / "good")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "good"))
    assert toolchain.find_cuda_home() == str(tmp_path / "good")
    toolchain.find_cuda_home.cache_clear()
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nothing-here"))
    assert toolchain.find_cuda_home() != str(tmp_path / "nothing-here")


@pytest.mark.parametrize("var", ["CXX", "CC", "TORCH_CUDA_ARCH_LIST", "CUDA_HOME"])
def test_build_key_changes_with_toolchain_environment(var, monkeypatch):
    spec = BuildSpec("k", ("/x/a.cpp",), build_directory="/tmp/k")
    before = spec.key()
    monkeypatch.setenv(var, "something-else")
    assert spec.key() != before


def test_build_key_changes_with_flags_and_sources():
    base = BuildSpec("k", ("/x/a.cpp",), build_directory="/tmp/k")
    assert BuildSpec("k", ("/x/a.cpp",), extra_cflags=("-O3",), build_directory="/tmp/k").key() != base.key()
    assert BuildSpec("k", ("/x/a.cpp", "/x/b.cu"), build_directory="/tmp/k").key() != base.key()
    assert BuildSpec("k", ("/x/a.cpp",), build_directory="/tmp/k").key() == base.key()


def test_version_tag_names_python_torch_and_cuda():
    import sys

    import torch

    tag = toolchain.version_tag()
    assert tag.startswith(f"py{sys.version_info.major}{sys.version_info.minor}")
    assert f"torch{torch.__version__.split('+')[0]}" in tag


def test_default_arch_only_without_any_other_source(monkeypatch):
    import torch

    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    if not torch.cuda.is_available():
        assert toolchain.default_arch_flags([]) == ["-gencode=arch=compute_90,code=sm_90"]
    assert toolchain.default_arch_flags(["-arch=sm_80"]) == []
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    assert toolchain.default_arch_flags([]) == []


@pytest.mark.skipif(toolchain.find_cuda_home() is None or torch.version.cuda is None,
                    reason="needs an nvcc and a CUDA build of torch to compare")
def test_an_nvcc_of_another_cuda_major_than_torchs_is_refused_before_a_build(monkeypatch, tmp_path):
    """torch 2.8 only warns when nvcc's CUDA major is not its own, then builds a mixed extension; jitload stops."""
    nvcc = toolchain.nvcc_version(toolchain.find_cuda_home())
    other = "12.8" if nvcc.split(".")[0] != "12" else "13.0"
    monkeypatch.setattr(torch.version, "cuda", other)
    problem = toolchain.cuda_major_problem()
    assert problem and f"nvcc {nvcc}" in problem and f"built with CUDA {other}" in problem
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    with pytest.raises(RuntimeError, match=f"cannot build mixed: nvcc {re.escape(nvcc)}"):
        jitload.load("mixed", [str(source)], build_directory=str(tmp_path / "build"))
    assert not (tmp_path / "build").exists()
    monkeypatch.setattr(torch.version, "cuda", nvcc)
    assert toolchain.cuda_major_problem() is None
