"""The full build that proves a kernel swap, run in a process of its own.

A kernel swap (or, with no GPU, a kernel edit compiled alone) is a bet that the host code already loaded is
what a full build of the edited sources would produce. The bet is settled by making that full build at once,
in the background:

- It runs in a new process session at a lower priority (``nice``), with the build-directory lock, so a
  second process that loads the extension meanwhile waits for it instead of building again, and it outlives
  the process that started it: a notebook restarted mid-build finds the build finished (or still locked),
  never the old code on disk. Its compilers are stopped with it by ninja's watchdog (:mod:`jitload.builder.build`).
- It writes the manifest like any full build, so the next process loads the library without compiling.
- The process that swapped compares the result with what it runs (:mod:`jitload.builder.imagecmp`): that is the
  handle's job (:meth:`jitload.builder.extension.Extension.wait`). A newer edit stops this build and starts another.

    python -m jitload.builder.background SPEC_JSON RESULT_PATH     (writes the outcome to RESULT_PATH as JSON)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass

NICENESS = 10
RESULT_DIR = "swap"
LOG_FILE = os.path.join(RESULT_DIR, "background.log")  # its progress lines; ninja's output goes to build.log


@dataclass(frozen=True)
class Outcome:
    """What the background build reported: its library and tag, or its error."""

    tag: str = ""
    library: str = ""
    commands: int = 0
    error: str = ""
    log: str = ""
    cancelled: bool = False


class Job:
    """One background full build; ``done`` is called with its :class:`Outcome` from a thread of its own."""

    def __init__(self, spec_json: str, build_directory: str, done: Callable[[Outcome], None]) -> None:
        self._done = done
        self._cancelled = threading.Event()
        folder = os.path.join(build_directory, RESULT_DIR)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, self._result = tempfile.mkstemp(prefix="background-", suffix=".json", dir=folder)
        os.close(fd)
        # Its output goes to a file, not to pipes of this process: a pipe would break if this process died,
        # and the build must go on to write its manifest. A new session: the build outlives this process, and
        # a cancel can stop its whole group.
        with open(os.path.join(build_directory, LOG_FILE), "ab") as log:
            self._proc = subprocess.Popen([sys.executable, "-m", "jitload.builder.background", spec_json, self._result],
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.finished = threading.Event()
        self._thread = threading.Thread(target=self._wait, name="jitload-verify", daemon=True)

    def start(self) -> None:
        """Start waiting for the build (``done`` is called once it ends)."""
        self._thread.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _wait(self) -> None:
        try:
            returncode = self._proc.wait()
            if self._cancelled.is_set():
                outcome = Outcome(cancelled=True)
            else:
                try:
                    with open(self._result) as f:
                        outcome = Outcome(**json.load(f))
                except (OSError, ValueError, TypeError):
                    outcome = Outcome(error=f"the background build ended with status {returncode} and no result "
                                            f"(its output is in {LOG_FILE})")
            self._done(outcome)
        finally:
            try:
                os.unlink(self._result)
            except OSError:
                pass
            self.finished.set()

    def cancel(self) -> None:
        """Stop the build (its compilers too) and wait for its process to end, and with it its lock."""
        self._cancelled.set()
        try:
            os.killpg(self._proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self._proc.wait()

    def wait(self, timeout: float | None = None) -> bool:
        return self.finished.wait(timeout)


def _main() -> int:
    os.nice(NICENESS)
    # SIGTERM (a cancel) must unwind through run_ninja, which stops ninja's session on the way out; SIGHUP
    # (the terminal of the process that started it closing) must not stop it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    from . import fullbuild
    from .errors import BuildError

    spec = fullbuild.BuildSpec.from_json(sys.argv[1])
    try:
        result = fullbuild.run(spec)
        data = {"tag": result.state.tag, "library": result.library, "commands": result.commands}
    except BuildError as err:
        data = {"error": str(err), "log": err.log or ""}
    # Written whole, then renamed: the waiting process reads a complete result or none.
    tmp = f"{sys.argv[2]}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, sys.argv[2])
    return 1 if "error" in data else 0


if __name__ == "__main__":
    sys.exit(_main())
