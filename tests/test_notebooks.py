"""Every walkthrough runs top to bottom here (no GPU needed): any cell that raises fails the test."""

import glob
import os

import nbformat
import pytest
from nbclient import NotebookClient

from jitload.builder import toolchain

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(REPO, "notebooks", "*.ipynb")))
# The walkthroughs that compile CUDA sources whether or not a GPU is there (README's Requirements names them).
NEEDS_NVCC = {"00_article_add", "07_inspect", "08_hot_reload_and_ssh", "09_appendix_internals"}


@pytest.mark.slow  # a kernel process each, building and timing kernels on the CPU: up to minutes on 2 cores
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_runs(path):
    name = os.path.splitext(os.path.basename(path))[0]
    if name in NEEDS_NVCC and toolchain.find_cuda_home() is None:
        pytest.skip(f"{name} compiles CUDA sources, and no CUDA toolkit (nvcc) was found")
    nb = nbformat.read(path, as_version=4)
    # nbclient raises CellExecutionError, with the cell and its traceback, on the first error.
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": REPO}}).execute()
    errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors


def test_the_readme_names_the_notebooks_that_need_nvcc():
    with open(os.path.join(REPO, "README.md")) as f:
        readme = " ".join(f.read().split())
    listed = ", ".join(f"`{name}`" for name in sorted(NEEDS_NVCC))
    assert f"compile CUDA sources ({listed})" in readme
    assert all(os.path.exists(os.path.join(REPO, "notebooks", f"{name}.ipynb")) for name in NEEDS_NVCC)
