"""Kills what is left of a build when the process that started it dies.

ninja runs in a session of its own and puts each compiler in a process group of its own, so neither a signal
to ninja's group nor PR_SET_PDEATHSIG (which reaches ninja alone) stops the compilers of a builder that was
killed with SIGKILL. This script, started beside ninja, waits on a pipe that only the builder holds: ``done``
means the build ended normally; end-of-file without it means the builder died, and every process of the
build's session is killed. It imports nothing beyond the standard library, so it starts in milliseconds.

    python -S build_watchdog.py SESSION_ID
"""

from __future__ import annotations

import os
import signal
import sys


def session_members(sid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # state, ppid, pgrp, session, ...
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            members.append(int(entry))
    return members


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid``, again until none is left (nvcc starts its stages one by one)."""
    for _ in range(50):
        members = session_members(sid)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    if sys.stdin.buffer.read() != b"done\n":
        kill_session(int(sys.argv[1]))
