"""Execute walkthroughs and keep their outputs: how the committed H200 run of notebooks/ is made.

    python benchmarks/run_notebooks.py notebooks/0[0-4]*.ipynb --write --log OUT/notebooks.log

Each notebook runs top to bottom in a fresh kernel with the repository as its working directory (as in
tests/test_notebooks.py); any error stops it and the command fails. With ``--write`` the executed notebook
replaces the file. Outputs are scrubbed so the diff shows only what changed: the checkout's path, temporary
folders, the home directory and the extensions cache become short placeholders, and no timing metadata is
recorded. The run's machine, GPU and torch version go into the notebook's metadata under ``jitload_run``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import tempfile
import time

import nbformat
import torch
from nbclient import NotebookClient

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _replacements() -> list[tuple[re.Pattern, str]]:
    pairs = []
    cache = os.environ.get("TORCH_EXTENSIONS_DIR")
    if cache:
        pairs.append((os.path.abspath(cache), "<torch_extensions>"))
    pairs += [(REPO, "<repo>"), (os.path.realpath(REPO), "<repo>")]
    tmp = tempfile.gettempdir()
    rules = [(re.compile(re.escape(path) + r"(?=/|\b)"), label) for path, label in pairs]
    rules.append((re.compile(re.escape(tmp) + r"/[A-Za-z0-9_.-]+"), "<tmp>"))
    home = os.path.expanduser("~")
    if home not in ("/", ""):
        rules.append((re.compile(re.escape(home) + r"(?=/)"), "~"))
    return rules


def scrub(text: str, rules: list[tuple[re.Pattern, str]]) -> str:
    for pattern, label in rules:
        text = pattern.sub(label, text)
    return text


def _scrub_output(output: dict, rules) -> None:
    if "text" in output:
        output["text"] = scrub(output["text"], rules)
    if "traceback" in output:
        output["traceback"] = [scrub(line, rules) for line in output["traceback"]]
    for mime, value in output.get("data", {}).items():
        if mime.startswith("text/") or mime == "application/json":
            if isinstance(value, str):
                output["data"][mime] = scrub(value, rules)
            elif isinstance(value, list):
                output["data"][mime] = [scrub(v, rules) for v in value]


def run_info() -> dict:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {"date": time.strftime("%Y-%m-%d", time.gmtime()), "gpu": gpu, "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version()}


def execute(path: str, *, write: bool, timeout: int) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": REPO}}).execute()
    seconds = time.perf_counter() - start
    rules = _replacements()
    for cell in nb.cells:
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                _scrub_output(output, rules)
    nb.metadata["jitload_run"] = run_info()
    if write:
        nbformat.write(nb, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+")
    parser.add_argument("--write", action="store_true", help="replace each notebook with its executed copy")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    parser.add_argument("--log", help="append one line per notebook here")
    args = parser.parse_args(argv)
    info = run_info()
    status = 0
    for path in args.notebooks:
        try:
            seconds = execute(path, write=args.write, timeout=args.timeout)
            line = f"{os.path.basename(path)}: ran in {seconds:.0f} s"
        except Exception as err:  # a cell's error: report it and go on with the next notebook
            status = 1
            line = f"{os.path.basename(path)}: FAILED: {type(err).__name__}: {str(err)[-2000:]}"
        line = f"{line} ({info['gpu']}, torch {info['torch']})"
        print(line, flush=True)
        if args.log:
            with open(args.log, "a") as f:
                f.write(line + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
