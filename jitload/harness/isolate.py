"""Run work in a forked child and stream its progress back, so work that kills its process (a segfault, glibc's
abort on a smashed heap) is reported by the parent, whose process, and a notebook's kernel, live on.

``check(..., isolate=True)`` uses it. A fork, not a fresh interpreter: the work is often a function of an
extension built and loaded in this process, which cannot be pickled to another. Hence the one limit: CUDA cannot
be used in a child forked after the parent initialised it, so CUDA work needs a parent that has not touched the
GPU yet (``jitload check`` runs each kernel's check in a fresh process for that reason).
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import torch

T = TypeVar("T")


POLL_S = 0.1  # how often the parent looks at a child that sends nothing (is it alive, is it overdue)


class ChildDied(RuntimeError):
    """The child ended without a result; ``how`` says by which signal or exit code ("died (SIGSEGV)",
    "exited (exit code 0)")."""

    def __init__(self, how: str) -> None:
        super().__init__(f"the child process {how}")
        self.how = how


class ChildOverdue(RuntimeError):
    """``overdue()`` said the child took too long; it was killed with its process group."""

    def __init__(self, how: str) -> None:
        super().__init__(f"the child process {how}")
        self.how = how


def exit_reason(exitcode: int | None) -> str:
    """How a process ended, from its exit code (negative: the signal that killed it): "SIGSEGV", "exit code 3"."""
    if exitcode is not None and exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


def _child(conn, work: Callable[[Callable[[Any], None]], Any]) -> None:
    # A process group of its own: the parent kills it and every process the work started in one call.
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    # The parent reports a crash with the case it happened in; a Python stack dump from the dying child
    # (pytest and IPython turn faulthandler on) would only bury that.
    faulthandler.disable()
    # The parent's OpenMP pool does not survive a fork: a parallel region in the child waits forever on its
    # threads (torch's DataLoader workers do the same for the same reason).
    torch.set_num_threads(1)
    try:
        conn.send(("done", work(lambda event: conn.send(("event", event)))))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()
        # Exit now: a normal exit joins every non-daemon thread the work left running, which may never end.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the process group ``pgid`` (a child that made its own group, and whatever it
    started); nothing if the group is gone."""
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def _kill_child(child) -> None:
    """The child and its group; the child's own pid too, for the instant before it made its group."""
    kill_group(child.pid)
    if child.exitcode is None:  # not reaped yet, so its pid is still its own
        with contextlib.suppress(OSError):
            child.kill()


def run_forked(work: Callable[[Callable[[Any], None]], T], on_event: Callable[[Any], None], *,
               uses_cuda: bool = False, overdue: Callable[[], str | None] | None = None) -> T:
    """``work(emit)`` in a forked child; each ``emit(event)`` reaches ``on_event`` here, in order, and the
    child's return value (picklable) is returned. Raises :class:`ChildDied` if the child ends first,
    :class:`ChildOverdue` when ``overdue()`` (asked every few tenths of a second) returns a reason, and
    RuntimeError with the child's traceback if ``work`` raises. The child's process group (it and whatever it
    started) is killed when this returns."""
    if uses_cuda and torch.cuda.is_initialized():
        raise RuntimeError("isolate=True forks, and a forked process cannot use CUDA once its parent has: run it "
                           "before any CUDA work in this process, or use `jitload check` (a fresh process per "
                           "kernel)")
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, work), daemon=True)
    child.start()
    with contextlib.suppress(OSError):
        os.setpgid(child.pid, child.pid)  # also here: whichever of the two runs first makes the group
    send.close()  # the child holds the only writer, unless it forked: so liveness is checked too
    try:
        while True:
            if not receive.poll(POLL_S):
                if overdue is not None and (late := overdue()):
                    raise ChildOverdue(late)
                if not child.is_alive() and not receive.poll(0):
                    break
                continue
            try:
                kind, payload = receive.recv()
            except EOFError:
                break
            if kind == "event":
                on_event(payload)
                continue
            child.join()
            if kind == "error":
                raise RuntimeError(f"isolate=True: the work raised in the child process:\n{payload}")
            return payload
    finally:
        receive.close()
        _kill_child(child)  # on_event raised, Ctrl-C, overdue, or processes the work left behind
        child.join()
    code = child.exitcode
    raise ChildDied(f"died ({exit_reason(code)})" if code is None or code < 0 else f"exited ({exit_reason(code)})")
