"""Every kernel swap is settled by a full build in the background: verified, or replaced by that build.

CPU (a kernel edit is compiled alone there, and the bet is the same: the loaded host code is the full build's):
a light extension (a pybind11 binding and a torch-free .cu with a kernel, its launcher and a host function)
whose builds take seconds. The full build verifies a kernel edit and leaves the build on disk up to date for
the next process; a non-equivalent swap, forced by blinding the decision, is caught and the full build's
host code runs; a newer edit stops the build of the older one; a kernel the device unit alone cannot compile
goes to the full build, which decides; a comment edit compiles nothing.
GPU: the same on the seed article's file, with the new kernel checked after each step.
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import jitload
from jitload.builder import background, manifest, ppview, swap, toolchain

NVCC = os.path.join(toolchain.find_cuda_home() or "/usr/local/cuda", "bin", "nvcc")
pytestmark = pytest.mark.skipif(not os.path.exists(NVCC), reason="nvcc not found (no CUDA toolkit)")

BINDING = textwrap.dedent("""\
    #include <pybind11/pybind11.h>
    int host_value();
    void launch_scale(float* x, int n);
    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
        m.def("host_value", &host_value);
        m.def("launch", [](long ptr, int n) { launch_scale(reinterpret_cast<float*>(ptr), n); });
    }
    """)
KERNEL = textwrap.dedent("""\
    // a torch-free kernel file: its full build costs a second
    #include <cuda_runtime.h>

    __global__ void scale_kernel(float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] = 2.0f * x[i];
    }

    void launch_scale(float* x, int n) { scale_kernel<<<(n + 255) / 256, 256>>>(x, n); }

    int host_value() { return 7; }
    """)


def _edit(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, f"{old!r} not in {path}"
    with open(path, "w") as f:
        f.write(text.replace(old, new))


@pytest.fixture
def light(tmp_path, monkeypatch):
    monkeypatch.setattr(swap, "gpu_available", lambda: False)  # the same path on a GPU machine
    (tmp_path / "binding.cpp").write_text(BINDING)
    (tmp_path / "scale.cu").write_text(KERNEL)
    sources = [str(tmp_path / "binding.cpp"), str(tmp_path / "scale.cu")]
    ext = jitload.load("swap_verify", sources, build_directory=str(tmp_path / "build"))
    yield ext, str(tmp_path / "scale.cu")
    bet = ext._bet
    if bet is not None:
        bet.job.cancel()


def _fresh_process_status(ext) -> str:
    code = (f"import jitload; e = jitload.load('swap_verify', {list(ext.spec.sources)!r}, "
            f"build_directory={ext.build_directory!r}); print(e.info.status, e.host_value())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")[-2]


def test_a_kernel_edit_is_verified_and_the_next_process_loads_it(light):
    ext, path = light
    module = ext.module
    _edit(path, "2.0f * x[i]", "3.0f * x[i]")
    ext.reload()
    assert ext.info.status == "compiled" and ext.info.verification == "pending", ext.info
    assert "the full build that verifies it is running" in str(ext.info)
    ext.wait(timeout=300)
    assert ext.info.verification.startswith("verified by the full build"), ext.info
    assert ext.module is module  # verified: nothing moves
    built = manifest.read(ext.build_directory)
    assert built.up_to_date(ext.spec.key())  # the build on disk is the source's
    assert _fresh_process_status(ext) == "loaded 7"  # and a new process compiles nothing
    assert ext.reload().info.status == "unchanged"


def test_a_swap_that_is_not_equivalent_is_caught_and_the_full_build_loaded(light, monkeypatch):
    ext, path = light
    module = ext.module
    assert ext.host_value() == 7
    # Blind the decision: it sees the old host code whatever the file holds, as a mistaken reader would.
    recorded = ext._state.hosts[path]
    decides, _, exact = recorded.partition(":")
    monkeypatch.setattr(ppview, "host_view", lambda *args, **kwargs: ppview.View(decides, exact))
    _edit(path, "return 7;", "return 8;")
    ext.reload()
    assert ext.info.status == "compiled", ext.info
    assert ext.host_value() == 7  # the bet: host code as loaded
    ext.wait(timeout=300)
    assert ext.info.status == "built" and "NOT equivalent" in ext.info.reason, ext.info
    assert "host code" in ext.info.reason and "the full build now runs" in str(ext.info)
    assert ext.module is not module and ext.host_value() == 8  # the full build's host code runs now


def test_a_newer_edit_stops_the_older_full_build(light):
    ext, path = light
    _edit(path, "2.0f * x[i]", "3.0f * x[i]")
    ext.reload()
    first = ext._bet.job
    _edit(path, "3.0f * x[i]", "4.0f * x[i]")
    ext.reload()
    assert ext._bet.job is not first and first.finished.wait(30)
    with pytest.raises(ProcessLookupError):  # the older build's process (its session leader) is gone
        os.kill(first.pid, 0)
    ext.wait(timeout=300)
    assert ext.info.verification.startswith("verified"), ext.info
    state = manifest.read(ext.build_directory)
    assert state.up_to_date(ext.spec.key())  # built from the newest text


def test_what_the_unit_alone_cannot_compile_goes_to_the_full_build(light):
    ext, path = light
    # A host constexpr helper called from a kernel: torch's flags (--expt-relaxed-constexpr) let the full
    # file compile it, while the device unit leaves host functions out. Only the full compiler may decide.
    _edit(path, "__global__ void scale_kernel",
          "constexpr float twice() { return 2.0f; }\n__global__ void scale_kernel")
    ext.reload()
    assert ext.info.status == "built", ext.info  # host code changed (a new host function): in full
    _edit(path, "2.0f * x[i]", "twice() * x[i]")
    ext.reload()
    assert ext.info.status == "built", ext.info
    assert "the kernel code alone did not compile" in ext.info.reason and "the whole file decides" in ext.info.reason
    # A real error is still an error, from the full file's compiler, and the module stays.
    module = ext.module
    _edit(path, "twice() * x[i]", "twice() * x[i] + undefined_name")
    with pytest.raises(jitload.BuildError, match="undefined_name"):
        ext.reload()
    assert ext.module is module and ext.info.status == "failed"


def test_a_comment_edit_compiles_nothing(light, monkeypatch):
    ext, path = light

    def refuse(*args, **kwargs):
        raise AssertionError("a compile or a background build was started for a comment edit")

    monkeypatch.setattr(swap, "compile_units", refuse)
    monkeypatch.setattr(background, "Job", refuse)
    _edit(path, "// a torch-free kernel file", "// a torch-free kernel file, edited in a comment")
    _edit(path, "int host_value() { return 7; }", "int host_value() { return 7; }  // and here")
    ext.reload()
    assert ext.info.status == "unchanged" and "nothing to compile" in ext.info.reason, ext.info
    assert manifest.read(ext.build_directory).up_to_date(ext.spec.key())


def test_a_kernel_added_through_a_macro_is_found_in_the_image(light):
    ext, path = light
    # Kernels spelled through a macro: read from the compiled image's symbol table, not from the text.
    _edit(path, "void launch_scale", "#define KERNEL(name) __global__ void name(float* x) { x[0] = 1.0f; }\n"
                                     "KERNEL(fill_kernel);\nvoid launch_scale")
    _edit(path, "{ scale_kernel<<<", "{ fill_kernel<<<1, 1>>>(x); scale_kernel<<<")
    ext.reload()
    assert ext.info.status == "built"  # a new kernel is host code (its stub)
    assert "_Z11fill_kernelPf" in swap.Shim(ext.module.__file__).kernels()
    _edit(path, "x[0] = 1.0f;", "x[0] = 2.0f;")
    ext.reload()
    assert ext.info.status == "compiled" and ext.info.kernels == 2, ext.info
    ext.wait(timeout=300)
    assert ext.info.verification.startswith("verified"), ext.info


def test_seconds_to_verify_are_reported(light):
    ext, path = light
    _edit(path, "2.0f * x[i]", "2.5f * x[i]")
    start = time.perf_counter()
    ext.reload()
    jitload.wait()
    print(f"light layout: kernel edit compiled alone and verified in {time.perf_counter() - start:.1f} s: "
          f"{ext.info}")
    assert "verified" in ext.info.verification


@pytest.mark.parametrize(("old", "new", "status"), [
    ("2.0f * x[i]", "(float)'a' * x[i]", "compiled"),  # the setup step; then the literal changes below
    ("return 7;", 'return "http://a"[7];', "built"),
])
def test_literals_are_code_not_comments(light, old, new, status):
    ext, path = light
    _edit(path, old, new)
    ext.reload()
    assert ext.info.status == status, ext.info
    ext.wait(timeout=300)
    # A change inside a literal, a // in a string included: code, whatever a comment-stripper would say.
    changed = ("'a'", "'b'") if status == "compiled" else ("http://a", "http://b")
    _edit(path, *changed)
    ext.reload()
    assert ext.info.status == status, ext.info
    ext.wait(timeout=300)
    assert manifest.read(ext.build_directory).up_to_date(ext.spec.key())
    if status == "built":
        assert ext.host_value() == ord("b")


def test_a_splice_after_a_space_is_a_splice(light):
    ext, path = light
    # gcc and nvcc join a line ending in a backslash and spaces to the next one: the multiply below is then
    # inside the comment. Not a comment edit.
    _edit(path, "    if (i < n)", "    // double it\n    if (i < n)")
    ext.reload()
    ext.wait(timeout=300)
    _edit(path, "// double it", "// double it \\ ")
    ext.reload()
    assert ext.info.status == "compiled", ext.info


def test_a_save_during_the_full_build_then_undone_is_built_again(light):
    ext, path = light
    _edit(path, "2.0f * x[i]", "3.0f * x[i]")
    ext.reload()
    _edit(path, "3.0f * x[i]", "4.0f * x[i]")  # saved while the full build behind the swap may run
    ext.wait(timeout=300)
    _edit(path, "4.0f * x[i]", "3.0f * x[i]")  # back to the swapped text: the library on disk is not it
    ext.reload()
    assert ext.info.status in ("compiled", "built") and "nothing to compile" not in ext.info.reason, ext.info
    ext.wait(timeout=300)
    assert manifest.read(ext.build_directory).up_to_date(ext.spec.key())


def test_a_comment_edit_after_a_verified_swap_keeps_the_build_on_disk_current(light):
    ext, path = light
    _edit(path, "2.0f * x[i]", "3.0f * x[i]")
    ext.reload()
    ext.wait(timeout=300)
    _edit(path, "// a torch-free kernel file", "// a torch-free kernel file (edited)")
    ext.reload()
    assert ext.info.status == "unchanged", ext.info
    assert manifest.read(ext.build_directory).up_to_date(ext.spec.key())


def test_a_failed_full_build_behind_a_swap_is_reported_until_fixed(light):
    ext, path = light
    # Host-side code inside a kernel body: the device code compiles, the host pass does not.
    _edit(path, "    if (i < n)", "#ifndef __CUDA_ARCH__\n    static_assert(sizeof(int) == 3, \"host pass\");\n"
                                      "#endif\n    if (i < n)")
    ext.reload()
    assert ext.info.status == "compiled", ext.info
    with pytest.raises(jitload.BuildError, match="host pass"):
        ext.wait(timeout=300)
    assert "NOT verified" in str(ext.info)
    with pytest.raises(jitload.BuildError, match="host pass"):
        ext.reload()  # nothing changed since, and still not buildable
    with pytest.raises(jitload.BuildError, match="host pass"):
        ext.reload(full=True)
    _edit(path, "sizeof(int) == 3", "sizeof(int) == 4")
    ext.reload()
    ext.wait(timeout=300)
    assert manifest.read(ext.build_directory).up_to_date(ext.spec.key())


def test_the_full_build_outlives_a_killed_process(light):
    ext, path = light
    # A notebook kernel killed right after the swap: its background build goes on and writes the build.
    code = (f"import os, signal, jitload\nfrom jitload.builder import swap\nswap.gpu_available = lambda: False\n"
            f"e = jitload.load('swap_verify', {list(ext.spec.sources)!r}, build_directory={ext.build_directory!r})\n"
            f"text = open({path!r}).read()\nopen({path!r}, 'w').write(text.replace('2.0f * x[i]', '5.0f * x[i]'))\n"
            f"e.reload()\nprint(e.info.status, e._bet.job.pid, flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    status, pid = done.stdout.split()
    assert status == "compiled", done.stdout + done.stderr
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    assert manifest.read(ext.build_directory).up_to_date(ext.spec.key())
    assert _fresh_process_status(ext) == "loaded 7"


@pytest.mark.cuda
@pytest.mark.slow
def test_seed_swap_is_verified_and_a_restart_loads_the_new_kernel(tmp_path):
    corpus = os.path.join(os.path.dirname(__file__), "swap_corpus")
    path = str(tmp_path / "seed_add.cu")
    with open(os.path.join(corpus, "seed_add.cu")) as f:
        (tmp_path / "seed_add.cu").write_text(f.read())
    ext = jitload.load("seed_verify", [path], build_directory=str(tmp_path / "build"))
    a, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    _edit(path, "C[idx] = A[idx] + B[idx];", "C[idx] = __half2float(__float2half(A[idx])) - B[idx];")
    start = time.perf_counter()
    ext.reload()
    seconds = time.perf_counter() - start
    print(f"seed __half kernel edit: {ext.info} ({seconds:.2f} s)")
    assert ext.info.status == "swapped", ext.info  # cuda_fp16.h is in the device unit, as torch gives it
    expect = a.half().float() - b
    torch.testing.assert_close(ext.add(a, b), expect)
    ext.wait(timeout=600)
    print(f"seed swap settled: {ext.info}")
    assert ext.info.verification.startswith("verified"), ext.info
    torch.testing.assert_close(ext.add(a, b), expect)
    code = (f"import time, torch, jitload; t = time.perf_counter(); "
            f"e = jitload.load('seed_verify', [{path!r}], build_directory={ext.build_directory!r}); "
            f"s = time.perf_counter() - t; a = torch.randn(1000, device='cuda'); b = torch.randn(1000, device='cuda'); "
            f"torch.testing.assert_close(e.add(a, b), a.half().float() - b); print(e.info.status, f'{{s:.3f}}')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    status, load_seconds = done.stdout.split()[-2:]
    print(f"next process after the swap: {status} in {float(load_seconds) * 1e3:.0f} ms")
    assert status == "loaded"
