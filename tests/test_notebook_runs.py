"""The tools that keep committed notebook outputs honest: the run line a notebook prints, the README table made
from the recorded runs, and the staleness rule (a run is stale once the notebook's own code cells, a kernel folder
or an article file it builds changed; a change to jitload/ alone does not, as CI executes every notebook).

No notebook is executed here (tests/test_notebooks.py does that); these read the committed files and git.
"""

import glob
import os
import re
import runpy
import subprocess

import nbformat
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(REPO, "notebooks", "*.ipynb")))
RUNNER = runpy.run_path(os.path.join(REPO, "benchmarks", "run_notebooks.py"))
IDS = [os.path.basename(p) for p in NOTEBOOKS]
KERNELS = sorted(d for d in os.listdir(os.path.join(REPO, "kernels"))
                 if os.path.isfile(os.path.join(REPO, "kernels", d, "spec.py")))


def _git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True)


def _history_reason():
    """Why git history cannot answer here, or None."""
    try:
        out = _git("rev-parse", "--is-shallow-repository")
    except OSError:
        return "git is not installed"
    if out.returncode != 0:
        return "not a git checkout (no history to compare the recorded commits with)"
    if out.stdout.strip() == "true":
        return "shallow clone: the recorded commits may lie outside the fetched history"
    return None


def used_paths(nb) -> list[str]:
    """What a notebook's outputs depend on besides its own cells: kernels/<name>/ (with kernels/common/) for each
    kernel its code names, as a string ("add_relu"), a path (kernels/add_relu) or an op
    (torch.ops.jitload.add_relu); then the other sources it names by path (the article's files, a file of
    tests/swap_corpus)."""
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    used = [name for name in KERNELS if re.search(
        rf"""["']{name}["']|kernels/{name}\b|torch\.ops\.jitload\.{name}\b""", code)]
    named = sorted(set(re.findall(r"""["'](notebooks/article|tests/swap_corpus/[\w.]+)["'/]""", code)))
    return ([f"kernels/{name}" for name in used] + ["kernels/common"] if used else []) + named


def test_used_paths_reads_kernel_names():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        'kernels.get("add_relu")\nopen("kernels/softmax/softmax.cu")\ntorch.ops.jitload.rmsnorm(x)\n"additive"')])
    assert used_paths(nb) == ["kernels/add_relu", "kernels/rmsnorm", "kernels/softmax", "kernels/common"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        'os.path.abspath("notebooks/article")\nopen("tests/swap_corpus/dispatch_template.cu")')])
    assert used_paths(nb) == ["notebooks/article", "tests/swap_corpus/dispatch_template.cu"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_first_output_line_is_the_recorded_run(path):
    nb = nbformat.read(path, as_version=4)
    run = nb.metadata.get("jitload_run")
    assert run, f"{os.path.basename(path)} has no recorded run: python benchmarks/run_notebooks.py --write {path}"
    assert RUNNER["first_code_cell"](nb).source.strip() == RUNNER["RUN_CELL"]
    assert RUNNER["first_output_line"](nb) == RUNNER["run_line"](run)


def stale_reason(nb, name: str) -> str | None:
    """Why ``nb``'s outputs may be older than the code they ran, or None."""
    run = nb.metadata.get("jitload_run") or {}
    if not run.get("commit"):
        return f"{name} records no commit"
    if run.get("dirty"):
        return f"{name} ran with uncommitted changes to jitload or kernels"
    if run.get("code_digest") != RUNNER["code_digest"](nb):
        return f"{name}'s code cells are not those its outputs came from (its recorded code_digest)"
    if _git("cat-file", "-e", f"{run['commit']}^{{commit}}").returncode != 0:
        return f"{name} ran at {run['commit']}, which is not in this repository's history"
    paths = used_paths(nb)
    last = _git("log", "-1", "--format=%H", "--", *paths).stdout.strip() if paths else ""
    if last and _git("merge-base", "--is-ancestor", last, run["commit"]).returncode != 0:
        changed = _git("show", "--stat", "--format=", last, "--", *paths).stdout.strip()
        return f"{name} ran at {run['commit'][:10]}, before {last[:10]} changed\n{changed}"
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_are_not_older_than_the_code_they_ran(path):
    reason = _history_reason()
    if reason:
        pytest.skip(reason)
    stale = stale_reason(nbformat.read(path, as_version=4), os.path.basename(path))
    rerun = f"python benchmarks/run_notebooks.py --write {os.path.relpath(path, REPO)}"
    assert stale is None, f"{stale}\nre-run it: {rerun}"


def test_stale_reason_compares_with_the_last_change_of_the_files_used():
    reason = _history_reason()
    if reason:
        pytest.skip(reason)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('kernels.get("add")')])
    digest = RUNNER["code_digest"](nb)
    last = _git("log", "-1", "--format=%H", "--", "kernels/add", "kernels/common").stdout.strip()
    nb.metadata["jitload_run"] = {"commit": last, "code_digest": digest}
    assert stale_reason(nb, "nb") is None
    nb.metadata["jitload_run"] = {"commit": last, "code_digest": digest, "dirty": True}
    assert "uncommitted" in stale_reason(nb, "nb")
    parent = _git("rev-parse", f"{last}^").stdout.strip()
    if parent:  # the commit before the last change to those files is older than it
        nb.metadata["jitload_run"] = {"commit": parent, "code_digest": digest}
        assert f"before {last[:10]} changed" in stale_reason(nb, "nb")
    nb.metadata["jitload_run"] = {"commit": "0" * 40, "code_digest": digest}
    assert "not in this repository's history" in stale_reason(nb, "nb")


def test_a_change_to_jitload_alone_leaves_the_outputs_current():
    reason = _history_reason()
    if reason:
        pytest.skip(reason)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('kernels.get("add")')])
    kernel = _git("log", "-1", "--format=%H", "--", "kernels/add", "kernels/common").stdout.strip()
    after = _git("log", "--format=%H", f"{kernel}..HEAD", "--", "jitload").stdout.split()
    if len(after) < 2:
        pytest.skip("jitload/ has not changed twice since kernels/add last changed")
    nb.metadata["jitload_run"] = {"commit": after[-1], "code_digest": RUNNER["code_digest"](nb)}
    assert stale_reason(nb, "nb") is None  # jitload/ changed after that commit (at least at HEAD): still current


def test_an_edit_of_a_code_cell_makes_the_outputs_stale_and_a_markdown_edit_does_not():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("text"),
                                         nbformat.v4.new_code_cell("x = 1")])
    head = _git("rev-parse", "HEAD").stdout.strip()
    nb.metadata["jitload_run"] = {"commit": head, "code_digest": RUNNER["code_digest"](nb)}
    nb.cells[0].source = "other text"
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="1")]
    assert RUNNER["code_digest"](nb) == nb.metadata["jitload_run"]["code_digest"]
    nb.cells[1].source = "x = 2"
    assert "code cells are not those its outputs came from" in stale_reason(nb, "nb")


def test_readme_table_is_generated_from_the_metadata():
    with open(RUNNER["README"]) as f:
        text = f.read()
    expected = RUNNER["with_table"](text, RUNNER["readme_table"]())
    assert text == expected, "notebooks/README.md's run table is stale: python benchmarks/run_notebooks.py --readme"


def test_run_line_names_an_uncommitted_tree_and_no_gpu():
    # Placeholder values, to test the formatting alone.
    info = {"date": "2000-01-31", "gpu": "none", "torch": "1.2.3", "cuda": "4.5", "python": "6.7.8",
            "commit": "0123456789abcdef", "dirty": True}
    line = RUNNER["run_line"](info)
    assert line == ("run 2000-01-31 on no GPU (CPU twins) · torch 1.2.3 · CUDA 4.5 · Python 6.7.8 · "
                    "commit 0123456789 + uncommitted changes")
