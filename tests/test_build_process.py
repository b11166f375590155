"""A build whose Python process is killed (even with SIGKILL) leaves no compiler running behind it."""

import os
import signal
import subprocess
import sys
import time

from extensions import make_extension


def _live_processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z" and int(pid) != os.getpid():
            found.append(f"{pid}: {cmdline[:160]}")
    return found


def test_sigkill_of_the_builder_stops_its_compilers(tmp_path):
    src = tmp_path / "src"
    sources = make_extension(src)  # a torch binding: its compile takes long enough to be caught running
    code = ("import jitload\n"
            f"jitload.load('orphan', {sources!r}, build_directory={str(tmp_path / 'build')!r})\n")
    builder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    compilers = []
    while time.monotonic() < deadline and not compilers:
        compilers = [p for p in _live_processes_mentioning(str(src)) if not p.startswith(f"{builder.pid}:")]
        time.sleep(0.1)
    assert compilers, "no compiler of the build was seen running"
    builder.send_signal(signal.SIGKILL)
    builder.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _live_processes_mentioning(str(src)):
        time.sleep(0.1)
    assert _live_processes_mentioning(str(src)) == []
