"""A time limit on one case of a check, inside the checking process.

When a case runs past its limit, :class:`CaseTimedOut` is raised in the thread running it, which stops a
candidate looping in Python. A candidate stuck in compiled code (a C++ loop, or a GPU kernel that never ends,
waited on by a synchronize) cannot be interrupted from inside its process: a second message says so, and that
the isolated checks (``check(isolate=True)``, ``jitload check``) kill such a process and name the case. The
standard library has no per-call timeout for the calling thread (``signal.alarm`` needs the main thread and
would clash with a notebook's own handlers), hence this small class over ``PyThreadState_SetAsyncExc``.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator

from .. import settings

log = settings.logger()

# Past the limit, how long the case may go on before it is reported as stuck outside Python.
STUCK_AFTER_S = 5.0


class CaseTimedOut(BaseException):
    """The case ran past its time limit. A BaseException, as KeyboardInterrupt is: a candidate's own
    ``except Exception`` (a retry loop, a fallback) must not swallow it."""


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


@contextlib.contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Raise :class:`CaseTimedOut` in this thread if the block runs longer than ``seconds``."""
    if seconds == float("inf"):
        yield
        return
    thread_id = threading.get_ident()
    lock = threading.Lock()
    state = {"armed": True, "fired": False}

    def stuck() -> None:
        with lock:
            if state["armed"]:
                log.warning("jitload.check: %s is still running %.0f s past its %.1f s limit: stuck in compiled "
                            "or GPU code, which cannot be interrupted from this process, or in code that caught "
                            "the interruption; restart it (a notebook: restart the kernel). check(isolate=True) "
                            "and `jitload check` kill such a candidate and report the case.",
                            what, STUCK_AFTER_S, seconds)

    def fire() -> None:
        with lock:
            if not state["armed"]:
                return
            state["fired"] = True
            _raise_in(thread_id, CaseTimedOut)
        later = threading.Timer(STUCK_AFTER_S, stuck)
        later.daemon = True
        later.start()

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            state["armed"] = False
            if state["fired"]:
                _raise_in(thread_id, None)  # an exception set but not yet raised must not leak into later code
