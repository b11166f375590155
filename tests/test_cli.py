"""The jitload command: doctor on this machine, build and clean."""

import os
import re
import subprocess

import pytest
import torch
from extensions import PYTHON

from jitload.builder import toolchain
from jitload.harness.benchmark import PEAK
from jitload.ui import doctor


def _jitload(*args, env=None):
    return subprocess.run([PYTHON, "-m", "jitload", *args], capture_output=True, text=True, env=env)


def test_doctor_reports_this_machine():
    out = _jitload("doctor")
    # An nvcc of another CUDA major than torch's is an error (CI's torch 2.8 lane has nvcc 13 only).
    mismatch = toolchain.cuda_major_problem()
    assert out.returncode == (1 if mismatch else 0), out.stdout + out.stderr
    assert ("ERROR: nvcc" in out.stdout) == bool(mismatch)
    text = out.stdout
    line = re.search(rf"^torch +{re.escape(torch.__version__)} \((.*)\)$", text, re.M)
    assert line, text  # the version, and why it fits: whether its CUDA major is nvcc's
    nvcc = toolchain.nvcc_version(toolchain.find_cuda_home())
    if torch.version.cuda and nvcc:
        same = nvcc.split(".")[0] == torch.version.cuda.split(".")[0]
        assert line.group(1) == (f"CUDA {torch.version.cuda}, {'the same major as' if same else 'NOT the major of'} "
                                 f"nvcc {nvcc}")
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


def test_a_probe_that_raises_is_a_fail_line_and_the_others_still_run(monkeypatch):
    def broken():
        raise OSError("planted: the cache folder cannot be read")

    monkeypatch.setattr(doctor.hostjit, "describe", broken)
    monkeypatch.setattr(doctor.toolchain, "effective_arch_list", lambda: 1 / 0)
    text, ok = doctor.report()
    assert not ok
    assert re.search(r"^FAIL: describing the host JIT raised OSError at test_cli\.py:\d+: planted: the cache folder "
                     r"cannot be read$", text, re.M), text
    assert "FAIL: choosing the CUDA arch list raised ZeroDivisionError" in text
    assert re.search(r"^host JIT +\(its probe failed: see below\)$", text, re.M)
    assert re.search(r"^cache +\S", text, re.M) and "compiler probe" in text  # the rest still ran
    assert "Traceback" not in text


def test_a_compiler_probe_served_without_a_library_file_is_a_failed_probe(monkeypatch, tmp_path):
    """Once the interpreter's PCH exists, a first load may be served by the C++ interpreter, whose module has no
    file: the probe, which needs a library to run in a new process, is always a full build, and says so if not."""
    seen = {}

    class Interpreted:
        module = type(os)("interpreted")  # a module without __file__

    def load(*args, **kwargs):
        seen["host_jit"] = os.environ.get("JITLOAD_HOST_JIT")
        return Interpreted()

    monkeypatch.setattr(doctor, "load", load)
    outcome = doctor._probe_once("/usr/bin/g++", str(tmp_path))
    assert seen["host_jit"] == "0"
    assert not outcome.ok and "without a library file" in outcome.detail


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
    assert "check CheckReport PASS" in out.stdout and "GB/s" in out.stdout
    # the sizes it times are checked first, and a CPU table has no copy to compare with (the GPU's has)
    assert "checking the 2 timed size(s) too, before timing them: 1024, 4096" in out.stdout
    assert (PEAK in out.stdout) == torch.cuda.is_available()
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "## add" in report and "![add](add.png)" in report
    assert (f"| {PEAK} |" in report) == torch.cuda.is_available()
    assert "| vs eager |" in report  # the speedup column names what it divides by
    for png in (tmp_path / "rep" / "add.png", tmp_path / "add.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unsupported_dtype_is_a_clear_error():
    out = _jitload("check", "add", "--dtype", "float64")  # the op takes float64 (for gradcheck); the spec omits it
    assert out.returncode == 2
    assert "does not support torch.float64" in out.stderr


CRASHY_SPEC = '''
import torch
NAME = "crashy_add"
SOURCES = ["crashy.cpp"]
FUNCTION = "add"
DTYPES = [torch.float32]
BENCH_SIZES = {"cpu": [8]}
CHECK_SIZES = [2, 7, 8]


def candidates(ext):
    import os, sys, threading, time  # noqa: E401

    def thread_left(a, b):
        threading.Thread(target=time.sleep, args=(3600,)).start()
        return a + b

    pick = os.environ.get("CRASHY_CANDIDATE", "add")
    python = {"os_exit_0": lambda a, b: os._exit(0), "sys_exit_0": lambda a, b: sys.exit(0),
              "thread_left": thread_left}
    return {"add": python[pick] if pick in python else getattr(ext, pick)}


def reference_crashy(a, b):
    return a + b


def make_inputs(size, dtype, device):
    return (torch.randn(size, dtype=dtype, device=device), torch.randn(size, dtype=dtype, device=device))


def bytes_moved(size, dtype):
    return 3 * size * 4
'''
CRASHY_CPP = r'''
#include <torch/extension.h>
#include <csignal>
#include <cstdlib>
torch::Tensor add(const torch::Tensor& a, const torch::Tensor& b) {
    if (a.numel() % 2) std::raise(SIGSEGV);  // a kernel bug that kills the process at odd sizes
    return a + b;
}
torch::Tensor exit_on_odd(const torch::Tensor& a, const torch::Tensor& b) {
    if (a.numel() % 2) std::exit(1);  // a CUDA_CHECK macro's habit
    return a + b;
}
torch::Tensor hang_on_odd(const torch::Tensor& a, const torch::Tensor& b) {
    volatile bool forever = a.numel() % 2;
    while (forever) {}  // a loop that never ends, in compiled code
    return a + b;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("add", &add); m.def("exit_on_odd", &exit_on_odd); m.def("hang_on_odd", &hang_on_odd);
}
'''


@pytest.fixture(scope="module")
def crashy(tmp_path_factory):
    """The crashy kernel folder and an environment whose cache it is built in once for all the tests."""
    root = tmp_path_factory.mktemp("crashy")
    folder = root / "crashy"
    folder.mkdir()
    (folder / "spec.py").write_text(CRASHY_SPEC)
    (folder / "crashy.cpp").write_text(CRASHY_CPP)
    return folder, dict(os.environ, TORCH_EXTENSIONS_DIR=str(root / "cache"))


def test_check_isolates_a_crashing_kernel(crashy):
    folder, env = crashy
    out = _jitload("check", str(folder), env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert ("crashy: check FAIL: the checking process died (SIGSEGV) in add, forward size=7, dtype=float32, "
            "layout=contiguous") in out.stdout
    assert _jitload("check", str(folder), "--no-isolate", env=env).returncode == -11  # what isolation prevents


@pytest.mark.parametrize("candidate, says", [
    ("exit_on_odd", "exited (exit code 1) in add, forward size=7"),
    ("os_exit_0", "exited (exit code 0) in add, forward size=2"),
    ("hang_on_odd", "was killed in add, forward size=7, dtype=float32, layout=contiguous"),
])
def test_check_fails_a_kernel_that_exits_or_hangs_naming_the_case(crashy, candidate, says):
    folder, env = crashy
    out = _jitload("check", str(folder), "--timeout", "1", env={**env, "CRASHY_CANDIDATE": candidate})
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"crashy: check FAIL: the checking process {says}" in out.stdout, out.stdout


def test_sys_exit_and_a_leftover_thread_do_not_pass_as_green(crashy):
    folder, env = crashy
    out = _jitload("check", str(folder), env={**env, "CRASHY_CANDIDATE": "sys_exit_0"})
    assert out.returncode == 1 and "[exited]" in out.stdout, out.stdout
    out = _jitload("check", str(folder), env={**env, "CRASHY_CANDIDATE": "thread_left"})
    assert out.returncode == 0 and "add: check CheckReport PASS" in out.stdout, out.stdout + out.stderr
    assert "killed after its check: it finished its check but did not exit" in out.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU --sanitize runs: see the test after this one")
def test_sanitize_says_what_it_needs():
    out = _jitload("check", "add", "--sanitize")
    assert out.returncode == 2
    assert "needs a GPU" in out.stderr


PAST_END_CU = r'''
#include <torch/extension.h>
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i <= n) out[i] = i < n ? a[i] + b[i] : 0.0f;  // <= : one element too many
}
torch::Tensor add(const torch::Tensor& a, const torch::Tensor& b) {
    auto out = torch::empty_like(a);
    const int64_t n = a.numel();
    add_kernel<<<(n + 256) / 256, 256>>>(a.contiguous().data_ptr<float>(), b.contiguous().data_ptr<float>(),
                                         out.data_ptr<float>(), n);
    return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add); }
'''


@pytest.mark.cuda
def test_sanitize_finds_a_write_past_the_end(tmp_path):
    from jitload.harness.check_process import compute_sanitizer

    if compute_sanitizer() is None:
        pytest.skip("no compute-sanitizer in this CUDA toolkit")
    folder = tmp_path / "past_end"
    folder.mkdir()
    spec = CRASHY_SPEC.replace('"crashy_add"', '"past_end_add"').replace('["crashy.cpp"]', '[]')
    spec = spec.replace("reference_crashy", "reference_past_end") + 'CUDA_SOURCES = ["past_end.cu"]\n'
    (folder / "spec.py").write_text(spec.replace("[2, 7, 8]", "[1000]"))
    (folder / "past_end.cu").write_text(PAST_END_CU)
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(tmp_path / "cache"))
    out = _jitload("check", str(folder), "--sanitize", env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "compute-sanitizer reported memory errors" in out.stdout
    assert "Invalid __global__ write" in out.stdout + out.stderr
