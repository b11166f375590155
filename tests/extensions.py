"""Small extensions the tests build, in the fast-rebuild layout: a binding plus torch-free kernel files."""

import fcntl
import os
import sys
import textwrap

PYTHON = sys.executable


def lock_held_elsewhere(directory) -> bool:
    """Whether another open file holds the build lock of ``directory`` (False where it has no lock file)."""
    from jitload.builder.lock import LOCK_NAME

    try:
        fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def write(path, text: str) -> str:
    """Write dedented ``text`` to ``path`` so that its mtime moves forward (ninja compares mtimes)."""
    path = os.fspath(path)
    old = os.stat(path).st_mtime_ns if os.path.exists(path) else 0
    with open(path, "w") as f:
        f.write(textwrap.dedent(text).lstrip())
    if os.stat(path).st_mtime_ns <= old:  # coarse filesystem clocks: an edit must never look older
        os.utime(path, ns=(old + 1_000_000, old + 1_000_000))
    return path

TORCH_BINDING = """
    #include <torch/extension.h>
    #include "kernel.h"
    torch::Tensor shift(const torch::Tensor& x) { return x + kernel_value(); }
    int value() { return kernel_value(); }
    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
        m.def("shift", &shift);
        m.def("value", &value);
    }
"""

# pybind11 alone compiles in ~3 s instead of ~20 s with torch/extension.h: for tests that need fresh builds.
PYBIND_BINDING = """
    #include <pybind11/pybind11.h>
    #include "kernel.h"
    int flag() {
    #ifdef EXTRA
        return EXTRA;
    #else
        return 0;
    #endif
    }
    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
        m.def("value", &kernel_value);
        m.def("flag", &flag);
    }
"""

HEADER = """
    #pragma once
    #define OFFSET {offset}
    int kernel_value();
"""

KERNEL = """
    #include "kernel.h"
    int kernel_value() {{ return {base} + OFFSET; }}
"""


def make_extension(folder, binding: str = TORCH_BINDING, base: int = 10, offset: int = 1) -> list[str]:
    """Write binding.cpp, kernel.h and kernel.cpp into ``folder``; return the sources in load() order."""
    folder.mkdir(parents=True, exist_ok=True)
    write(folder / "kernel.h", HEADER.format(offset=offset))
    return [write(folder / "binding.cpp", binding), write(folder / "kernel.cpp", KERNEL.format(base=base))]


def processes_mentioning(text: str) -> list[str]:
    """Live processes (zombies left out) whose command line contains ``text``, this one excepted: what a build
    or a watcher may have left running."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state != "Z" and int(pid) != os.getpid():
            found.append(f"{pid}: {cmdline[:160]}")
    return found
