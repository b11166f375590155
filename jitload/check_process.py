"""``jitload check``'s isolation: each kernel is checked by a fresh ``jitload check --no-isolate`` process, so a
candidate that crashes (a segfault, glibc's abort, an illegal address that kills the CUDA context) fails that
kernel with the case it died in, and the other kernels are still checked. A fresh interpreter rather than a fork
(:mod:`jitload.isolate`): a fork cannot use CUDA, and this way ``--sanitize`` can put the child under NVIDIA's
compute-sanitizer (memcheck), which catches out-of-bounds device accesses the guard bytes cannot see (reads, and
writes that land inside another live tensor).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

from . import toolchain
from .isolate import exit_reason

SANITIZER_EXIT = 86  # compute-sanitizer's exit code when it found errors (its --error-exitcode)


def compute_sanitizer() -> str | None:
    """compute-sanitizer from PATH or the CUDA toolkit, or None."""
    found = shutil.which("compute-sanitizer")
    home = toolchain.find_cuda_home()
    if found is None and home:
        candidate = os.path.join(home, "bin", "compute-sanitizer")
        found = candidate if os.access(candidate, os.X_OK) else None
    return found


class ProgressFile:
    """Where the child writes the case it is about to run (one JSON line, replaced each time)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, function: str, row: dict) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"function": function, **{k: v for k, v in row.items() if k != "ok"}}, f)
        os.replace(tmp, self.path)

    def read(self) -> dict | None:
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None


def check_in_child(kernel: str, folder: str, extra_args: list[str], *, sanitize: bool) -> int:
    """Run ``jitload check FOLDER --no-isolate`` in a fresh process; its output passes through. Returns its exit
    code, after saying which case a crash happened in, or that compute-sanitizer found errors."""
    command = [sys.executable, "-m", "jitload", "check", folder, "--no-isolate", *extra_args]
    env = dict(os.environ)
    if sanitize:
        if not torch.cuda.is_available():
            print("jitload: --sanitize checks CUDA memory accesses and needs a GPU; none is visible",
                  file=sys.stderr)
            return 2
        tool = compute_sanitizer()
        if tool is None:
            print("jitload: --sanitize needs NVIDIA's compute-sanitizer (in the CUDA toolkit's bin/, or on PATH); "
                  "none was found", file=sys.stderr)
            return 2
        # Without the caching allocator every tensor is its own cudaMalloc, so memcheck knows its bounds.
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        command = [tool, "--tool", "memcheck", "--error-exitcode", str(SANITIZER_EXIT), "--print-limit", "20",
                   *command, "--no-guards"]
    with tempfile.TemporaryDirectory(prefix="jitload-check-") as folder:
        progress = ProgressFile(os.path.join(folder, "progress.json"))
        code = subprocess.call([*command, "--progress", progress.path], env=env)
        # 0 passed, 1 failed, 2 a usage error; anything else (a signal, or compute-sanitizer passing one on as
        # an exit code) is a crash
        if code not in (0, 1, 2, SANITIZER_EXIT):
            case = progress.read()
            where = ("before its first case" if case is None else
                     f"in {case['function']}, size={case['size']}, dtype={case['dtype']}, layout={case['layout']}, "
                     f"seed={case['seed']}")
            print(f"{kernel}: check FAIL: the checking process died ({exit_reason(code)}) {where}; the cases after "
                  "it did not run (`jitload check --no-isolate` runs them in this process)", flush=True)
            return 1
        if sanitize and code == SANITIZER_EXIT:
            print(f"{kernel}: check FAIL: compute-sanitizer reported memory errors (above)", flush=True)
            return 1
        return code
