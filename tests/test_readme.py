"""The README's code blocks run as written.

Every fenced block of README.md is labelled ``python``, ``sh`` or ``text``. The ``python`` blocks of one ``##``
section are one session, as a reader pastes them: they run in order, as one script, in a fresh process of this
Python, from a folder that holds a copy of ``kernels/`` (what the blocks read), with the user's build settings
(the host JIT as it is by default). A block preceded by ``<!-- readme-test: cuda -->`` needs a GPU: the section
runs without it everywhere, and with it, as a second case marked ``cuda``, where one is visible. ``sh`` blocks
run each command in the cheap form that SHELL_COMMANDS gives it (``make -n``: what make would run, proving the
target and the paths the README names), or are skipped with SHELL_COMMANDS' reason; a command the table does
not know fails the test, so that a new one is given a form. ``text`` blocks are output, never run.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO, "README.md")
# A fixed folder (build/ is git-ignored), not a fresh temporary one: the compile lines name its paths, so a
# second run's compiles are ccache hits instead of a cold build of the binding.
WORK = os.path.join(REPO, "build", "readme-test")
CUDA_MARK = "<!-- readme-test: cuda -->"
LANGUAGES = {"python", "sh", "text"}
PYTHON_TIMEOUT_S = 1200  # a cold build of the binding is most of it: under a minute on 2 quiet cores

# Each shell command of the README: (a cheap command that proves it right, what its output must contain), or
# a string: why it is not run here.
SHELL_COMMANDS: dict[str, tuple[str, str] | str] = {
    # make run builds, checks and times every kernel (minutes on 2 cores); its dry run shows the report path.
    "make run": ("make -n run", "jitload bench --all --compiled --report build/report"),
    # make test is the whole suite, this test included.
    "make test": ("make -n test", "-m pytest"),
    # JupyterLab would serve until stopped; its version proves make installed it where the README says.
    ".venv/bin/jupyter lab notebooks/": (".venv/bin/jupyter lab --version", ""),
}


@dataclass(frozen=True)
class Block:
    language: str
    section: str
    line: int  # of the opening fence, 1-based
    text: str
    cuda: bool


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of a README text, each with its ``##`` section and whether it is marked CUDA-only."""
    blocks: list[Block] = []
    lines = text.split("\n")
    section, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        fence = re.match(r"^(`{3,})\s*(\S*)", line)
        if not fence:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence.group(1)), None)
        if end is None:
            raise ValueError(f"README.md:{i + 1}: a code block that is never closed")
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        blocks.append(Block(fence.group(2), section, i + 1, "\n".join(lines[i + 1:end]) + "\n", before == CUDA_MARK))
        i = end + 1
    return blocks


def shell_commands(block: Block) -> list[str]:
    """The commands of a shell block: comments dropped, continued lines joined."""
    commands, pending = [], ""
    for raw in block.text.split("\n"):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            commands.append(re.sub(r"\s+", " ", line))
    return commands


def section_script(blocks: list[Block], section: str, with_cuda: bool) -> str:
    """The python blocks of ``section`` as one script, each block's lines numbered as in the README."""
    parts = []
    for b in blocks:
        if b.language == "python" and b.section == section and (with_cuda or not b.cuda):
            parts.append(f"# README.md:{b.line}\n{b.text}")
    return "\n".join(parts)


def run_script(script: str, cwd: str, timeout: float = PYTHON_TIMEOUT_S) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("JITLOAD_HOST_JIT", None)  # the suite turns the host JIT off; a reader's session has the default
    return subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _failure(what: str, done: subprocess.CompletedProcess) -> str:
    return f"{what} exited {done.returncode}\n--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-6000:]}"


BLOCKS = readme_blocks(open(README, encoding="utf-8").read())
PY_SECTIONS = list(dict.fromkeys(b.section for b in BLOCKS if b.language == "python"))
CUDA_SECTIONS = list(dict.fromkeys(b.section for b in BLOCKS if b.language == "python" and b.cuda))
SHELL = [(b, c) for b in BLOCKS if b.language == "sh" for c in shell_commands(b)]


@pytest.fixture
def work():
    """A folder with a copy of kernels/, held by one test run at a time (the blocks write into it)."""
    os.makedirs(os.path.dirname(WORK), exist_ok=True)
    with open(WORK + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(WORK, ignore_errors=True)
        shutil.copytree(os.path.join(REPO, "kernels"), os.path.join(WORK, "kernels"),
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "*.so", "*.o"))
        yield WORK


def test_every_block_is_labelled():
    assert BLOCKS, "no code block found in README.md"
    unlabelled = [f"README.md:{b.line}: '{b.language}'" for b in BLOCKS if b.language not in LANGUAGES]
    assert not unlabelled, f"label each block python, sh or text (what this test runs, or output): {unlabelled}"
    marks = open(README, encoding="utf-8").read().count(CUDA_MARK)
    assert marks == sum(b.cuda and b.language == "python" for b in BLOCKS), \
        f"a {CUDA_MARK} line must stand right before a python block"


@pytest.mark.slow  # a cold build of the binding (torch's headers), then two small rebuilds, checks and timings
@pytest.mark.parametrize("section", PY_SECTIONS)
def test_python_blocks_run(section, work):
    done = run_script(section_script(BLOCKS, section, with_cuda=False), work)
    assert done.returncode == 0, _failure(f"the python blocks of '{section}'", done)


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("section", CUDA_SECTIONS)
def test_python_blocks_run_with_a_gpu(section, work):
    done = run_script(section_script(BLOCKS, section, with_cuda=True), work)
    assert done.returncode == 0, _failure(f"the python blocks of '{section}', CUDA blocks included", done)


@pytest.mark.parametrize("block,command", SHELL, ids=[c for _, c in SHELL])
def test_shell_commands(block, command):
    assert command in SHELL_COMMANDS, (f"README.md:{block.line}: `{command}` is not in SHELL_COMMANDS: give it "
                                       "a cheap form that proves it right, or the reason it is not run")
    form = SHELL_COMMANDS[command]
    if isinstance(form, str):
        pytest.skip(form)
    cheap, expected = form
    done = subprocess.run(cheap, shell=True, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, _failure(f"`{cheap}` (for README.md:{block.line}'s `{command}`)", done)
    assert expected in done.stdout, f"`{cheap}` did not print {expected!r}:\n{done.stdout[-3000:]}"


def test_the_report_path_is_the_makefiles():
    # The README's success line names the report make run writes (jitload bench writes report.md in --report).
    make_run = SHELL_COMMANDS["make run"]
    assert isinstance(make_run, tuple) and "--report build/report" in make_run[1]
    assert "`build/report/report.md`" in open(README, encoding="utf-8").read()


def _relative_links(path: str) -> list[str]:
    text = open(path, encoding="utf-8").read()
    return [t for t in re.findall(r"\]\(([^)#\s]+)[^)]*\)", text) if "://" not in t]


def test_relative_links_lead_to_files():
    # The README's links, and those of the docs/ pages it links to: a newcomer follows them.
    pages = [README] + [os.path.join(REPO, t) for t in _relative_links(README) if t.startswith("docs/")]
    missing = [f"{os.path.relpath(page, REPO)}: {t}" for page in dict.fromkeys(pages) for t in _relative_links(page)
               if not os.path.exists(os.path.join(os.path.dirname(page), t))]
    assert not missing, f"links to files that do not exist: {missing}"


def test_a_broken_block_fails(tmp_path):
    # The harness must be able to fail: a block that raises, or a shell command it does not know.
    broken = readme_blocks("## S\n\n```python\nimport jitload\nassert jitload.load is None\n```\n")
    done = run_script(section_script(broken, "S", with_cuda=False), str(tmp_path), timeout=300)
    assert done.returncode != 0 and "AssertionError" in done.stderr
    unknown = readme_blocks("## S\n\n```sh\nmake everything  # a comment\n```\n")
    assert shell_commands(unknown[0]) == ["make everything"] and "make everything" not in SHELL_COMMANDS
    marked = readme_blocks(f"## S\n\n{CUDA_MARK}\n```python\nx = 1\n```\n```python\ny = 2\n```\n")
    assert [b.cuda for b in marked] == [True, False]
    assert "x = 1" not in section_script(marked, "S", with_cuda=False)
