"""The kernels outside jitload's JIT: ``pip install ./kernels`` builds them ahead of time, and a model using
the ops saved with torch.export and TorchScript loads and runs in a fresh process. Also: an op's kernels
replaced by a hot rebuild in a live process, and a changed schema refused with a message, not a crash."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from jitload.builder import toolchain

# pip builds all five kernels ahead of time (setuptools, not jitload's cache): minutes on 2 cores.
pytestmark = pytest.mark.slow

ROOT = os.path.join(os.path.dirname(__file__), "..")
KERNELS = os.path.join(ROOT, "kernels")

MODEL = textwrap.dedent("""
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = torch.nn.Parameter(torch.linspace(-1, 1, 32))
            self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 32))

        def forward(self, x, y):
            h = torch.ops.jitload.add_relu(torch.ops.jitload.add(x, y), y)
            h = torch.ops.jitload.bias_gelu(h, self.bias, "tanh")
            out, residual = torch.ops.jitload.rmsnorm(h, x, self.weight, 1e-6)
            return torch.ops.jitload.softmax(out) + residual
""")

SAVE = MODEL + textwrap.dedent("""
    import sys
    import jitload_kernels
    folder, device = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = Model().to(device).eval()
    x, y = torch.randn(4, 32, device=device), torch.randn(4, 32, device=device)
    with torch.no_grad():
        torch.save({"x": x, "y": y, "out": model(x, y)}, f"{folder}/io.pt")
        torch.export.save(torch.export.export(model, (x, y)), f"{folder}/model.pt2")
        torch.jit.script(model).save(f"{folder}/model.ts")
    print("saved")
""")

LOAD = textwrap.dedent("""
    import sys
    import torch
    import jitload_kernels  # registers torch.ops.jitload.*; no jitload, no compiler
    folder = sys.argv[1]
    io = torch.load(f"{folder}/io.pt")
    with torch.no_grad():
        exported = torch.export.load(f"{folder}/model.pt2").module()(io["x"], io["y"])
        scripted = torch.jit.load(f"{folder}/model.ts")(io["x"], io["y"])
    torch.testing.assert_close(exported, io["out"])
    torch.testing.assert_close(scripted, io["out"])
    assert "jitload" not in sys.modules
    print("loaded and matched on", exported.device)
""")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """./kernels pip-installed into a private folder (from a copy, so no build/ lands in the checkout)."""
    base = tmp_path_factory.mktemp("install")
    source = base / "kernels"
    shutil.copytree(KERNELS, source, ignore=shutil.ignore_patterns("build", "__pycache__", "*.egg-info"))
    env = dict(os.environ)
    cuda = toolchain.find_cuda_home()
    if cuda:
        env["CUDA_HOME"] = cuda
        env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0" if not torch.cuda.is_available() else "")
        if not env["TORCH_CUDA_ARCH_LIST"]:
            del env["TORCH_CUDA_ARCH_LIST"]  # the visible GPU's architecture
    target = base / "site"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--quiet",
                          "--target", str(target), str(source)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return target, cuda is not None


def _python(code: str, *args: str, path: str, cwd) -> subprocess.CompletedProcess:
    script = cwd / f"script_{abs(hash(code))}.py"  # a file, not -c: TorchScript reads the model's source
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, str(script), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=900)


def test_installed_ops_have_every_kernel(installed, tmp_path):
    target, with_cuda = installed
    libs = sorted(p.name.split(".")[0] for p in (target / "jitload_kernels").glob("_*.so"))
    assert libs == ["_add", "_add_relu", "_bias_gelu", "_rmsnorm", "_softmax"]
    code = ("import torch, jitload_kernels\n"
            "x = torch.randn(5, requires_grad=True); y = torch.randn(5)\n"
            "torch.ops.jitload.add_relu_py(x, y).sum().backward()\n"
            "assert torch.equal(x.grad, ((x + y) > 0).float())\n"
            "print(torch._C._dispatch_has_kernel_for_dispatch_key('jitload::add_relu', 'CUDA'))\n")
    run = _python(code, path=str(target), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(with_cuda)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_export_and_torchscript_load_in_a_fresh_process(installed, tmp_path, device):
    target, _ = installed
    saved = _python(SAVE, str(tmp_path), device, path=str(target), cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr[-3000:]
    loaded = _python(LOAD, str(tmp_path), path=str(target), cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert f"loaded and matched on {device}" in loaded.stdout


HOT = textwrap.dedent("""
    import os, sys, torch
    from jitload import kernels
    root = sys.argv[1]
    kernel = kernels.get(os.path.join(root, "add"))
    ext = kernel.build()
    a, b = torch.ones(4), torch.ones(4)
    assert torch.ops.jitload.add(a, b).tolist() == [2.0] * 4
    cpu = os.path.join(root, "add", "add_cpu.cpp")
    text = open(cpu).read()
    open(cpu, "w").write(text.replace("static_cast<jk::acc_t<T>>(y[i]));", "static_cast<jk::acc_t<T>>(y[i]) + 1);"))
    ext.reload()
    print("after edit", torch.ops.jitload.add(a, b).tolist(), ext.add(a, b).tolist(), flush=True)
    binding = os.path.join(root, "add", "add.cpp")
    text = open(binding).read()
    old, new = '"add(Tensor a, Tensor b) -> Tensor"', '"add(Tensor a, Tensor b, int k=0) -> Tensor"'
    open(binding, "w").write(text.replace(old, new))
    ext.reload()
    print("after schema change", torch.ops.jitload.add(a, b).tolist(), flush=True)
""")


def test_hot_rebuild_replaces_an_ops_kernels(tmp_path):
    # In a subprocess: the edited kernel must not stay registered in the test session's process.
    for folder in ("add", "common"):
        shutil.copytree(os.path.join(KERNELS, folder), tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    # A build cache of its own: the copy's add must not take over the run's shared build of kernels/add (and its
    # lock) while other tests and notebooks use it.
    env = {**os.environ, "PYTHONPATH": os.path.abspath(ROOT), "JITLOAD_KERNELS": str(tmp_path),
           "TORCH_EXTENSIONS_DIR": str(tmp_path / "torch_extensions")}
    run = subprocess.run([sys.executable, "-c", HOT, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "after edit [3.0, 3.0, 3.0, 3.0] [3.0, 3.0, 3.0, 3.0]" in run.stdout
    # the schema cannot change in a live process: the old kernels stay, and stderr says why
    assert "after schema change [3.0, 3.0, 3.0, 3.0]" in run.stdout
    assert "restart Python to use the new one" in run.stderr
