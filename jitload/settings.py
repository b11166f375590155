"""Every environment variable jitload reads, each read when it is needed, and the "jitload" logger.

A setting is read at each call, never cached at import: a notebook that sets ``TORCH_CUDA_ARCH_LIST`` before
its next build, or a test that patches the environment, is seen. :data:`VARIABLES` is the table
docs/settings.md shows (tests/test_settings.py checks that the two agree, and that no other module of jitload
reads the environment). Copying the whole environment for a child process is not reading a setting, and
stays where the child is started.

jitload's progress and diagnostic lines (a build's steps, a wait for another process's build, a check stuck
past its limit) go to the ``logging`` logger "jitload", whose own handler writes them to stderr as plain lines,
as they always read. They do not propagate to the root logger, so an application's logging setup does not
show them twice; one that wants them replaces that handler (``logging.getLogger("jitload").handlers``). What a
command or a notebook cell is asked to show (its status line, a report) is printed, not logged.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass

LOGGER = "jitload"
OFF = frozenset({"0", "off", "no", "false"})


@dataclass(frozen=True)
class Variable:
    """One environment variable: what it is when unset, and what it changes."""

    name: str
    default: str
    meaning: str


VARIABLES = (
    Variable("CUDA_HOME", "the real location of the nvcc on PATH, else /usr/local/cuda, else the newest "
             "/usr/local/cuda-*", "the CUDA toolkit builds use, where it holds CUDA's headers; part of the build key"),
    Variable("CUDA_PATH", "unset", "read as CUDA_HOME where that is unset"),
    Variable("TORCH_CUDA_ARCH_LIST", "the visible GPUs' architectures, else 9.0",
             "the architectures nvcc compiles for (as torch reads it); part of the build key"),
    Variable("CXX", "c++", "the host compiler of builds (as torch reads it); part of the build key"),
    Variable("CC", "unset", "part of the build key: a build with another C compiler is another build"),
    Variable("MAX_JOBS", "ninja's default (cores + 2)", "how many compiles ninja runs at once"),
    Variable("TORCH_EXTENSIONS_DIR", "$XDG_CACHE_HOME/torch_extensions",
             "where the build cache lives (jitload's builds under its jitload/ folder)"),
    Variable("XDG_CACHE_HOME", "~/.cache", "the cache base where TORCH_EXTENSIONS_DIR is unset"),
    Variable("JITLOAD_CCACHE", "on where ccache is found",
             "0/off/no/false: build without ccache; any other value: a missing ccache is an error"),
    Variable("JITLOAD_CCACHE_DIR", "ccache/ beside the build cache",
             "ccache's cache for jitload's builds (made 0700; refused if another user could write it)"),
    Variable("JITLOAD_HOST_JIT", "on where cppyy is installed",
             "0/off/no/false: host edits take the full build; warm: start the interpreter at the first load "
             "(`jitload watch` sets it)"),
    Variable("JITLOAD_KERNELS", "./kernels, else the kernels/ folder of a checkout",
             "the folder of kernel folders that `jitload.kernels` and the command line read"),
    Variable("JITLOAD_LOG", "INFO", "the level of the \"jitload\" logger (DEBUG, INFO, WARNING, ERROR): WARNING "
             "hides the build's progress lines"),
)
_NAMES = frozenset(v.name for v in VARIABLES)


def get(name: str) -> str | None:
    """The variable ``name`` as the environment has it now, None where unset (or empty).

    Only the variables of :data:`VARIABLES` may be read: a new one is added there and to docs/settings.md."""
    if name not in _NAMES:
        raise KeyError(f"{name} is not one of jitload's settings (jitload/settings.py's VARIABLES)")
    return os.environ.get(name) or None


def switch(name: str) -> str:
    """A switch's value, trimmed and lower-cased ('' where unset): compare it with :data:`OFF`."""
    return (get(name) or "").strip().lower()


def max_jobs() -> int | None:
    """``MAX_JOBS`` where it is a whole number, else None (ninja's default)."""
    jobs = get("MAX_JOBS")
    return int(jobs) if jobs and jobs.isdigit() else None


class _Stderr(logging.StreamHandler):
    """Plain lines on ``sys.stderr`` as it is at each message (a notebook or a test may have replaced it). In a
    Jupyter kernel, progress (below WARNING) goes to ``sys.stdout``: Jupyter paints stderr red, as if it failed."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))
        self._progress_to_stdout = False

    def emit(self, record: logging.LogRecord) -> None:
        # Handler.handle holds the handler's lock around emit: the choice and the write are one step.
        self._progress_to_stdout = (record.levelno < logging.WARNING
                                    and type(sys.stdout).__module__.startswith("ipykernel"))
        super().emit(record)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stdout if self._progress_to_stdout else sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def logger() -> logging.Logger:
    """The "jitload" logger: the first call gives it jitload's stderr handler and the level ``JITLOAD_LOG``
    names (INFO where unset or unknown)."""
    log = logging.getLogger(LOGGER)
    if not getattr(log, "_jitload_configured", False):
        log._jitload_configured = True  # type: ignore[attr-defined]
        log.addHandler(_Stderr())
        log.propagate = False
        level = logging.getLevelName((get("JITLOAD_LOG") or "INFO").strip().upper())
        log.setLevel(level if isinstance(level, int) else logging.INFO)
    return log
