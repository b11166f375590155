"""``jitload check``'s isolation: each kernel is checked by a fresh ``jitload check --no-isolate`` process, so a
candidate that crashes (a segfault, glibc's abort, an illegal address that kills the CUDA context), hangs past
its case's time limit or exits (``exit(1)`` in a CUDA_CHECK macro, ``os._exit(0)``) fails that kernel with the
case it was in, and the other kernels are still checked. The child writes each case as it starts, and a last
line when its check is complete: a child that ends without that line failed, whatever its exit code.

A fresh interpreter rather than a fork (:mod:`jitload.harness.isolate`): a fork cannot use CUDA, and this way
``--sanitize`` can put the child under NVIDIA's compute-sanitizer (memcheck), which catches out-of-bounds device
accesses the guard bytes cannot see (reads, and writes that land inside another live tensor).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch

from ..builder import toolchain
from .isolate import exit_reason, kill_group

SANITIZER_EXIT = 86  # compute-sanitizer's exit code when it found errors (its --error-exitcode)
POLL_S = 0.2
# The child stops a case that loops in Python itself, at its limit; the parent kills one stuck in compiled or
# GPU code this much later. A child that has written its last line gets as long to exit (threads it left).
GRACE_S = 5.0


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
        self._put({"function": function, **{k: v for k, v in row.items() if k != "ok"}})

    def finish(self, status: int) -> None:
        """The check is complete, with this exit status."""
        self._put({"finished": True, "status": status})

    def _put(self, state: dict) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f, default=str)
        os.replace(tmp, self.path)

    def read(self) -> dict | None:
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None


def _where(case: dict | None) -> str:
    if case is None or case.get("finished"):
        return "before its first case"
    return (f"in {case['function']}, {case.get('test', 'forward')} size={case['size']}, dtype={case['dtype']}, "
            f"layout={case['layout']}, seed={case['seed']}")


def _watch(proc: subprocess.Popen, progress: ProgressFile) -> tuple[int | None, str]:
    """Wait for the child; kill it (and its group) if a case runs past its limit or it does not exit after its
    last line. Returns (exit code or None if killed, why it was killed)."""
    running, since = None, time.monotonic()
    while True:
        try:
            return proc.wait(timeout=POLL_S), ""
        except subprocess.TimeoutExpired:
            pass
        state = progress.read()
        key = json.dumps(state, sort_keys=True)
        if key != running:
            running, since = key, time.monotonic()
            continue
        waited = time.monotonic() - since
        if state is not None and state.get("finished") and waited > GRACE_S:
            return None, f"it finished its check but did not exit within {GRACE_S:.0f} s (a thread left running?)"
        if state is not None and "timeout_s" in state and waited > state["timeout_s"] + GRACE_S:
            return None, f"ran past the case's limit ({state['timeout_s']:.1f} s; --timeout sets it)"


def check_in_child(kernel: str, folder: str, extra_args: list[str], *, sanitize: bool) -> int:
    """Run ``jitload check FOLDER --no-isolate`` in a fresh process (a session of its own); its output passes
    through. Returns its exit status, after saying which case a crash, hang or early exit happened in, or that
    compute-sanitizer found errors; the child's process group is killed when it ends."""
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
        proc = subprocess.Popen([*command, "--progress", progress.path], env=env, start_new_session=True)
        try:
            code, killed = _watch(proc, progress)
        finally:
            kill_group(proc.pid)  # a session of its own: it, and whatever it started and left behind
            proc.wait()
        return _verdict(kernel, code, killed, progress.read(), sanitize)


def _verdict(kernel: str, code: int | None, killed: str, state: dict | None, sanitize: bool) -> int:
    finished = state is not None and state.get("finished")
    if killed and finished:
        print(f"{kernel}: the checking process was killed after its check: {killed}", flush=True)
        return int(state["status"])
    if killed:
        print(f"{kernel}: check FAIL: the checking process was killed {_where(state)}: it {killed}; the cases "
              "after it did not run", flush=True)
        return 1
    if sanitize and code == SANITIZER_EXIT:
        print(f"{kernel}: check FAIL: compute-sanitizer reported memory errors (above)", flush=True)
        return 1
    if finished:
        return int(state["status"])
    if code == 2 and state is None:
        return 2  # a usage or build error, said by the child before any case
    how = f"died ({exit_reason(code)})" if code is not None and code < 0 else f"exited ({exit_reason(code)})"
    print(f"{kernel}: check FAIL: the checking process {how} {_where(state)}, before its check finished; the "
          "cases after it did not run (`jitload check --no-isolate` runs them in this process)", flush=True)
    return 1
