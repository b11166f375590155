"""The results pages under benchmarks/results/: one page a machine, one section a benchmark, written by the scripts.

A benchmark script run with ``--write-results`` hands its section (a table and the prose that reads it) to
:func:`write_section`, which replaces that benchmark's section of this machine's page (``h100.md`` on an H100,
``cpu-2core.md`` on a 2-core machine with no GPU) between its markers, or adds it at the end, with a stamp on
top: the command, the date, the commit and the machine (GPU or CPU cores, torch, CUDA, Python). The page keeps
the current numbers of each benchmark; what they were before is in git's history of the page.

Run as a script, it stamps a section from a markdown file a tool wrote (``jitload bench --report`` does not
know this module)::

    python benchmarks/results_page.py bench-add_relu "jitload bench add_relu --compiled" report/report.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")


def gpu_name() -> str | None:
    """The first visible GPU's name, or None."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def page_name(gpu: str | None = None, cores: int | None = None) -> str:
    """The page's file name for a machine: its GPU's model (``NVIDIA H100 80GB HBM3`` -> ``h100.md``), or the
    CPU cores of a machine with no GPU (``cpu-2core.md``)."""
    if gpu:
        name = gpu.replace("NVIDIA", "")
        model = re.search(r"\b([A-Z]+\d+[A-Za-z]*)\b", name)  # H100, A100, L40S; else the whole name
        slug = model.group(1) if model else name
        return re.sub(r"[^a-z0-9]+", "-", slug.lower()).strip("-") + ".md"
    return f"cpu-{cores or os.cpu_count()}core.md"


def _commit() -> str:
    done = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (done.stdout.strip() or "an unknown commit") + (" with uncommitted changes" if dirty else "")


def machine(gpu: str | None = None) -> str:
    """The machine in one line: GPU (or none), CPU cores, torch, CUDA and Python."""
    import torch

    return (f"{gpu or 'no GPU'}, {os.cpu_count()} CPU cores; torch {torch.__version__}, "
            f"CUDA {torch.version.cuda}, Python {platform.python_version()}")


def stamp(command: str, gpu: str | None = None, date: str | None = None, commit: str | None = None) -> str:
    """The lines at the top of a section: what ran, when, at which commit, on what."""
    date = date or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return (f"- command: `{command}`\n- date: {date}, commit {commit or _commit()}\n"
            f"- machine: {machine(gpu)}\n")


def _markers(key: str) -> tuple[str, str]:
    return f"<!-- results: {key} -->", f"<!-- end results: {key} -->"


def header(gpu: str | None) -> str:
    """A new page's opening lines."""
    what = gpu or f"a {os.cpu_count()}-core machine with no GPU"
    return (f"# Results on {what}\n\nEach section is written by the benchmark script it names (`--write-results`),\n"
            "with its command, date, commit and machine; earlier numbers are in the page's git history.\n")


def replace_section(page: str, key: str, section: str) -> str:
    """``page`` with ``key``'s section (between its markers) replaced by ``section``, or ``section`` added at
    the end when the page has none."""
    begin, end = _markers(key)
    block = f"{begin}\n{section.strip()}\n{end}"
    found = re.search(re.escape(begin) + r".*?" + re.escape(end), page, re.S)
    if found:
        return page[:found.start()] + block + page[found.end():]
    return page.rstrip("\n") + "\n\n" + block + "\n"


def write_section(key: str, title: str, body: str, *, command: str | None = None, path: str | None = None,
                  gpu: str | None = None) -> str:
    """Replace benchmark ``key``'s section of this machine's page with ``## title``, the stamp and ``body``;
    return the page's path. ``command`` defaults to this process's command line."""
    gpu = gpu if gpu is not None else gpu_name()
    path = path or os.path.join(RESULTS, page_name(gpu))
    command = command or "python " + shlex.join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])
    section = f"## {title}\n\n{stamp(command, gpu)}\n{body.strip()}\n"
    page = open(path).read() if os.path.exists(path) else header(gpu)
    with open(path, "w") as f:
        f.write(replace_section(page, key, section))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Stamp a markdown file into this machine's results page.")
    parser.add_argument("key", help="the section's key, e.g. bench-add_relu")
    parser.add_argument("command", help="the command that wrote the file")
    parser.add_argument("file", help="the markdown to put in the section (its first '# ' line becomes the title)")
    parser.add_argument("--title", help="the section's title (default: the file's first heading, else the key)")
    args = parser.parse_args(argv)
    with open(args.file) as f:
        text = f.read()
    heading = re.match(r"\s*#+ (.*)\n", text)
    title = args.title or (heading.group(1) if heading else args.key)
    body = text[heading.end():] if heading else text
    # the tool's own stamp lines (jitload bench's report has device, torch and command): the section's stamp says them
    body = re.sub(r"(?m)^- (device|torch|command|commit|date)\b.*\n", "", body)
    # the file's own headings sit one level below the section's
    body = re.sub(r"(?m)^(#+) ", lambda m: "#" + m.group(1) + " ", body)
    gpu = gpu_name()
    body = _copy_images(body, os.path.dirname(os.path.abspath(args.file)), page_name(gpu).removesuffix(".md"))
    print(write_section(args.key, title, body, command=args.command, gpu=gpu))
    return 0


def _copy_images(body: str, source: str, folder: str) -> str:
    """``body`` with each image beside the file copied into the page's own folder, its link pointed there."""
    def copy(match: re.Match) -> str:
        name = match.group(2)
        if "/" in name or not os.path.isfile(os.path.join(source, name)):
            return match.group()
        os.makedirs(os.path.join(RESULTS, folder), exist_ok=True)
        shutil.copyfile(os.path.join(source, name), os.path.join(RESULTS, folder, name))
        return f"![{match.group(1)}]({folder}/{name})"

    return re.sub(r"!\[([^\]]*)\]\(([^)\s]+\.png)\)", copy, body)


if __name__ == "__main__":
    sys.exit(main())
