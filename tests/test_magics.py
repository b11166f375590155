"""The IPython magics: %%cpp and %%cuda cells build, rebuild on edit, show errors and keep the old handle;
%%kernel saves a cell into a kernel folder (with a .bak) and rebuilds that kernel."""

import os
import shutil

import nbformat
import pytest
import torch
from extensions import write
from IPython.core.interactiveshell import InteractiveShell
from services import REPO

from jitload.builder import toolchain
from jitload.builder.extension import PREVIOUS_KEPT, Extension
from jitload.ui import magics


@pytest.fixture(scope="module")
def shell():
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jitload")
    return ip


@pytest.fixture
def shown(monkeypatch):
    seen = []
    monkeypatch.setattr(magics, "display", seen.append)
    return seen


def test_declarations_from_definitions():
    src = """
    template <typename T> __global__ void k(T* x) {}
    torch::Tensor scale(const torch::Tensor& x,
                        double factor) {
        return x;
    }
    at::Tensor  add_one(at::Tensor x) { return x; }
    """
    assert magics.declarations(src, ["scale", "add_one"]) == (
        "torch::Tensor scale(const torch::Tensor& x, double factor);\nat::Tensor add_one(at::Tensor x);")
    with pytest.raises(ValueError, match="--cpp"):
        magics.declarations(src, ["missing"])


def test_cpp_cell_builds_rebuilds_and_keeps_the_old_handle_on_error(shell, shown, capsys):
    cell = "torch::Tensor times(const torch::Tensor& x) { return x * %s; }\n"
    shell.run_cell_magic("cpp", "mag_cpp --functions times", cell % "2")
    ext = shell.user_ns["mag_cpp"]
    assert isinstance(ext, Extension) and ext.times(torch.ones(2)).tolist() == [2.0, 2.0]
    assert "mag_cpp: full rebuild" in capsys.readouterr().out
    shell.run_cell_magic("cpp", "mag_cpp --functions times", cell % "3")
    assert shell.user_ns["mag_cpp"] is ext and ext.times(torch.ones(1)).item() == 3.0
    shell.run_cell_magic("cpp", "mag_cpp --functions times", cell % "oops")
    (html,) = shown
    assert "oops" in html.data and "mag_cpp: build failed after" in html.data and PREVIOUS_KEPT in html.data
    assert ext.times(torch.ones(1)).item() == 3.0
    shell.run_cell_magic("cpp", "mag_cpp --functions times", cell % "3")  # fixed: rebuilt, same code as before
    assert ext.times(torch.ones(1)).item() == 3.0 and "mag_cpp: full rebuild" in capsys.readouterr().out
    shell.run_cell_magic("cpp", "mag_cpp --functions times", cell % "3")  # re-run as it is: nothing to do
    assert "mag_cpp: unchanged" in capsys.readouterr().out


def test_bad_magic_line_is_a_clear_error(shell):
    with pytest.raises(ValueError, match="--functions"):
        shell.run_cell_magic("cpp", "no_functions_given", "int f() { return 1; }")


def _notebook_cell(notebook: str, first_line: str) -> str:
    """The source of the walkthrough's code cell that starts with ``first_line``."""
    nb = nbformat.read(os.path.join(REPO, "notebooks", notebook), as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith(first_line)]
    assert len(cells) == 1, f"{notebook} has no single cell starting with {first_line!r}"
    return cells[0]


@pytest.mark.skipif(toolchain.find_cuda_home() is None, reason="no CUDA toolkit")
def test_cuda_cell_compiles_and_runs_its_host_path(shell, capsys):
    # The %%cuda cell of the hot-reload walkthrough (torch headers in the .cu, as the seed writes it): its minute of
    # nvcc on 2 cores is paid once per run, by whichever of this test and the notebook's run builds it first;
    # the other loads that build from the run's shared cache.
    # Run as the notebook's kernel runs it (IPython splits the magic line from the body).
    shell.run_cell(_notebook_cell("08_hot_reload_and_ssh.ipynb", "%%cuda square_lab")).raise_error()
    ext = shell.user_ns["square_lab"]
    assert isinstance(ext, Extension) and ext.info.status in ("built", "loaded"), ext.info
    assert f"square_lab: {ext.info}" in capsys.readouterr().out
    assert ext.square(torch.arange(3.0)).tolist() == [0.0, 1.0, 4.0]
    if torch.cuda.is_available():
        assert ext.square(torch.arange(3.0, device="cuda")).tolist() == [0.0, 1.0, 4.0]


def test_kernel_cell_writes_file_with_backup_and_rebuilds(shell, tmp_path, monkeypatch, capsys):
    root = tmp_path / "kernels"
    for folder in ("add", "common"):  # common: the headers every kernel includes
        shutil.copytree(os.path.join(REPO, "kernels", folder), root / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("JITLOAD_KERNELS", str(root))
    # A build cache of its own: the copy's add would otherwise take over the run's shared build of kernels/add
    # (and its lock) while other tests and notebooks use it.
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "torch_extensions"))
    path = root / "add" / "add_cpu.cpp"
    original = path.read_text()
    new = original.replace("static_cast<jk::acc_t<T>>(x[i]) + static_cast<jk::acc_t<T>>(y[i])",
                            "static_cast<jk::acc_t<T>>(y[i]) + static_cast<jk::acc_t<T>>(x[i])")  # same result
    assert new != original
    shell.run_cell_magic("kernel", "add/add_cpu.cpp", new)
    out = capsys.readouterr().out
    assert "wrote" in out and "add_cpu.cpp.bak" in out and "add: full rebuild" in out
    assert path.read_text() == new and (root / "add" / "add_cpu.cpp.bak").read_text() == original
    a, b = torch.randn(5), torch.randn(5)
    torch.testing.assert_close(shell.user_ns["add"].add(a, b), a + b)
    with pytest.raises(ValueError, match="not in a kernel folder"):
        shell.run_cell_magic("kernel", str(write(tmp_path / "loose.cpp", "int x;")), "int x;")
