"""Every walkthrough runs top to bottom here (no GPU needed): any cell that raises fails the test."""

import glob
import os

import nbformat
import pytest
from nbclient import NotebookClient

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(REPO, "notebooks", "*.ipynb")))


@pytest.mark.slow  # a kernel process each, building and timing kernels on the CPU: up to minutes on 2 cores
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[os.path.basename(p) for p in NOTEBOOKS])
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    # nbclient raises CellExecutionError, with the cell and its traceback, on the first error.
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": REPO}}).execute()
    errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
