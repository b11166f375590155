"""Which torch `make` installs (jitload/builder/torch_select.py): the one the Python has, else the build whose
CUDA major matches nvcc's. The choice is read from fake `nvcc --version` outputs, and the script is run as the Makefile
runs it: a file, by a Python without torch, against a fake nvcc."""

import os
import stat
import subprocess
import sys

import pytest

from jitload.builder import torch_select

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jitload", "builder",
                      "torch_select.py")
NVCC = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release {v}, V{v}.93\n"


@pytest.mark.parametrize("release, spec, index", [
    ("12.8", "torch==2.8.0", None),  # PyPI's torch 2.8.0 is the CUDA 12.8 build
    ("13.0", "torch==2.14.1", None),
    (None, "torch==2.14.1", None),
])
def test_a_python_without_torch_gets_the_build_of_nvccs_cuda_major(release, spec, index):
    choice = torch_select.choose(torch_select.nvcc_release(NVCC.format(v=release) if release else None), None)
    assert choice.pip_args.split()[0] == spec and choice.venv_flags == ""
    assert (f"--extra-index-url {index}" in choice.pip_args) == (index is not None)
    assert (f"nvcc {release} is CUDA {release.split('.')[0]}" if release else "no nvcc") in choice.why


def test_a_python_with_torch_keeps_it_whatever_nvcc_says():
    for output in (NVCC.format(v="12.8"), NVCC.format(v="13.0"), None):
        choice = torch_select.choose(torch_select.nvcc_release(output), "2.8.0")
        assert choice.pip_args == "" and choice.venv_flags == "--system-site-packages"
        assert "2.8.0 is already installed" in choice.why


def test_an_nvcc_of_an_unknown_major_says_so():
    choice = torch_select.choose(torch_select.nvcc_release(NVCC.format(v="11.8")), None)
    assert "no torch build is known here for nvcc 11.8" in choice.why and "TORCH_SPEC" in choice.why


@pytest.mark.parametrize("release", ["12.8", "13.0"])
def test_the_script_as_the_makefile_runs_it(tmp_path, release):
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\nprintf '{NVCC.format(v=release)}'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, CUDA_HOME=str(home))
    # -S: no site-packages, so this Python has no torch, as a fresh machine's python3
    run = lambda flag: subprocess.run([sys.executable, "-S", SCRIPT, flag], capture_output=True,  # noqa: E731
                                      text=True, env=env, check=True).stdout.strip()
    expected = torch_select.choose(release, None)
    assert run("--pip-args") == expected.pip_args and run("--venv-flags") == ""
    assert f"nvcc {release}" in run("--why")
