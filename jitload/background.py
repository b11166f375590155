"""The full build that proves a kernel swap, run in a process of its own.

A kernel swap (or, with no GPU, a kernel edit compiled alone) is a bet that the host code already loaded is
what a full build of the edited sources would produce. The bet is settled by making that full build at once,
in the background:

- It runs in a new process session at a lower priority (``nice``), with the build-directory lock, so a
  second process that loads the extension meanwhile waits for it instead of building again, and it outlives
  the process that started it: a notebook restarted mid-build finds the build finished (or still locked),
  never the old code on disk. Its compilers are stopped with it by ninja's watchdog (:mod:`jitload.build`).
- It writes the manifest like any full build, so the next process loads the library without compiling.
- The process that swapped compares the result with what it runs (:mod:`jitload.imagecmp`): that is the
  handle's job (:meth:`jitload.extension.Extension.wait`). A newer edit stops this build and starts another.

    python -m jitload.background SPEC_JSON     (prints the result as one line of JSON)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

NICENESS = 10


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

    def __init__(self, spec_json: str, done: Callable[[Outcome], None]) -> None:
        self._done = done
        self._cancelled = threading.Event()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # A new session: the build outlives this process, and a cancel can stop its whole group.
        self._proc = subprocess.Popen([sys.executable, "-m", "jitload.background", spec_json],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, errors="replace", start_new_session=True, env=env)
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
            out, err = self._proc.communicate()
            if self._cancelled.is_set():
                outcome = Outcome(cancelled=True)
            else:
                lines = [ln for ln in out.splitlines() if ln.startswith("{")]
                data = json.loads(lines[-1]) if lines else {
                    "error": f"the background build exited with status {self._proc.returncode}: "
                             f"{err.strip()[-2000:]}"}
                outcome = Outcome(**data)
            self._done(outcome)
        finally:
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
    # SIGTERM (a cancel) must unwind through run_ninja, which stops ninja's session on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from . import fullbuild
    from .errors import BuildError

    spec = fullbuild.BuildSpec.from_json(sys.argv[1])
    try:
        result = fullbuild.run(spec)
    except BuildError as err:
        print(json.dumps({"error": str(err), "log": err.log or ""}), flush=True)
        return 1
    print(json.dumps({"tag": result.state.tag, "library": result.library, "commands": result.commands}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
