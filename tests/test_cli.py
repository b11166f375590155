"""The jitload command: doctor on this machine, build and clean."""

import os
import re
import subprocess

import torch
from extensions import PYTHON

from jitload import toolchain
from jitload.benchmark import PEAK


def _jitload(*args, env=None):
    return subprocess.run([PYTHON, "-m", "jitload", *args], capture_output=True, text=True, env=env)


def test_doctor_reports_this_machine():
    out = _jitload("doctor")
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert re.search(rf"^torch +{re.escape(torch.__version__)}$", text, re.M)
    for label in ("torch CUDA", "nvcc", "CUDA_HOME", "C++ compiler", "ninja", "GPUs", "arch list", "cache"):
        assert label in text
    # The compiler probe ran: this machine's compiler builds extensions that raise errors cleanly.
    assert re.search(r"^compiler probe +its extensions raise errors cleanly$", text, re.M)
    cuda_home = toolchain.find_cuda_home()
    if cuda_home:
        assert cuda_home in text
    if not torch.cuda.is_available():
        assert "none visible" in text and "no GPU visible" in text
    assert "No CUDA runtime is found" not in out.stderr  # torch's misleading guess is not repeated


def test_unknown_kernel_is_a_clear_error():
    out = _jitload("check", "no_such_kernel")
    assert out.returncode == 2
    assert "no kernel named 'no_such_kernel'" in out.stderr


def test_clean_removes_one_build(tmp_path):
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(tmp_path))
    root = tmp_path / "jitload" / toolchain.version_tag()
    (root / "old_ext").mkdir(parents=True)
    out = _jitload("clean", "old_ext", env=env)
    assert out.returncode == 0 and not (root / "old_ext").exists()
    assert "nothing to clean" in _jitload("clean", "old_ext", env=env).stdout


def test_bench_writes_report_and_plots(tmp_path):
    out = _jitload("bench", "add", "--sizes", "1024", "4096", "--report", str(tmp_path / "rep"), "--plot",
                   str(tmp_path / "add.png"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "check CheckReport PASS" in out.stdout and PEAK in out.stdout
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "## add" in report and f"| {PEAK} |" in report and "![add](add.png)" in report
    assert "| vs eager |" in report  # the speedup column names what it divides by
    for png in (tmp_path / "rep" / "add.png", tmp_path / "add.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unsupported_dtype_is_a_clear_error():
    out = _jitload("check", "add", "--dtype", "float64")  # the op takes float64 (for gradcheck); the spec omits it
    assert out.returncode == 2
    assert "does not support torch.float64" in out.stderr
