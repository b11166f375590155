"""A build whose Python process is killed (even with SIGKILL) leaves no compiler running behind it."""

import signal
import subprocess
import sys
import time

from extensions import make_extension, processes_mentioning


def test_sigkill_of_the_builder_stops_its_compilers(tmp_path):
    src = tmp_path / "src"
    sources = make_extension(src)  # a torch binding: its compile takes long enough to be caught running
    code = ("import jitload\n"
            f"jitload.load('orphan', {sources!r}, build_directory={str(tmp_path / 'build')!r})\n")
    builder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    compilers = []
    while time.monotonic() < deadline and not compilers:
        compilers = [p for p in processes_mentioning(str(src)) if not p.startswith(f"{builder.pid}:")]
        time.sleep(0.1)
    assert compilers, "no compiler of the build was seen running"
    builder.send_signal(signal.SIGKILL)
    builder.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and processes_mentioning(str(src)):
        time.sleep(0.1)
    assert processes_mentioning(str(src)) == []
