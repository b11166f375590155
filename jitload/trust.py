"""What jitload builds in and loads from must be this user's alone.

A shared ``TORCH_EXTENSIONS_DIR`` (``/tmp``, a group cluster's scratch) lets another user pre-create the
folders jitload would use: a symlinked build folder makes jitload write (and chmod) wherever it points, a
symlinked lock file makes it truncate the link's target, a folder others can write lets them replace the
``.so`` that the next load imports. So every folder jitload creates or enters under the cache base is
checked with ``lstat``: not a symbolic link and owned by this user (one that others could write is closed to
them first), and nothing in the folder it builds in belongs to another user; folders are created 0700; and a
library is checked the same way right before it is imported. Anything else raises :class:`UnsafePathError`,
which names the path, its owner and mode, and the fix. Inside a folder that passes, nobody else can create or
replace an entry, so the files jitload writes there are safe as well.
"""

from __future__ import annotations

import os
import pwd
import stat

from . import toolchain


class UnsafePathError(RuntimeError):
    """A path under the build cache that another user could control; jitload refuses to use it."""

    def __init__(self, path: str, problem: str, st: os.stat_result | None = None):
        self.path = path
        owner = ""
        if st is not None:
            try:
                name = pwd.getpwuid(st.st_uid).pw_name
            except KeyError:
                name = "?"
            owner = f" (owner {name}, uid {st.st_uid}; mode {stat.filemode(st.st_mode)})"
        fix = (f"remove it if it is yours to remove (rm -rf '{path}'), or point TORCH_EXTENSIONS_DIR at a folder "
               "only you can write")
        super().__init__(f"refusing {path}: {problem}{owner}. jitload builds in and loads from folders that only "
                         f"you can write. Fix: {fix}.")


def _check(path: str, st: os.stat_result, kind: str) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(path, f"it is a symbolic link (to {os.readlink(path)})", st)
    if kind == "dir" and not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(path, "it is not a folder", st)
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(path, "it is not a regular file", st)
    if st.st_uid != os.geteuid():
        raise UnsafePathError(path, "another user owns it", st)
    if st.st_mode & 0o022:
        # Ours, but others could write it (a umask of 002 does this): closed now. What others may have put
        # inside is caught as it is entered or loaded (its owner is not this user).
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)


def _check_entries(path: str) -> None:
    for entry in os.scandir(path):
        st = entry.stat(follow_symlinks=False)
        if st.st_uid != os.geteuid():
            raise UnsafePathError(entry.path, "another user owns it", st)


def private_dir(path: str) -> str:
    """Create ``path`` (parents too, mode 0700), checking every folder from the cache base down.

    A folder outside the cache (a ``build_directory`` the caller chose) is the caller's: it is created 0700
    and must be this user's, but its parents are not checked.
    """
    path = os.path.abspath(path)
    base = os.path.abspath(toolchain.cache_base())
    if path == base or path.startswith(base + os.sep):
        parts = os.path.relpath(path, base).split(os.sep) if path != base else []
        os.makedirs(os.path.dirname(base), exist_ok=True)
        steps = [base] + [os.path.join(base, *parts[:i + 1]) for i in range(len(parts)) if parts[i] != "."]
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        steps = [path]
    for step in steps:
        try:
            os.mkdir(step, 0o700)
        except FileExistsError:
            pass
        _check(step, os.lstat(step), "dir")
    _check_entries(path)
    return path


def check_library(path: str) -> None:
    """Right before an import: ``path`` is a regular file of this user's that nobody else can write."""
    _check(path, os.lstat(path), "file")
