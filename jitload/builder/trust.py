"""What jitload builds in and loads from must be this user's alone.

A shared ``TORCH_EXTENSIONS_DIR`` (``/tmp``, a group cluster's scratch) lets another user pre-create the
folders jitload would use: a symlinked build folder makes jitload write (and chmod) wherever it points, a
symlinked lock file makes it truncate the link's target, a folder others can write lets them replace the
``.so`` that the next load imports. So every folder jitload creates or enters under the cache base is
checked with ``lstat``: not a symbolic link, owned by this user, and writable by nobody else (a folder open to
others is refused as it is, never closed: it may be shared on purpose), and nothing in the folder it builds in
belongs to another user; folders are created 0700; and a library is checked the same way right before it is
imported. Anything else raises :class:`UnsafePathError`,
which names the path, its owner and mode, and the fix. Inside a folder that passes, nobody else can create or
replace an entry, so the files jitload writes there are safe as well.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat

from . import toolchain

BUILD_DIRECTORY = "build_directory"  # the setting behind a folder outside the cache: load()'s argument


def _elsewhere(setting: str) -> str:
    if setting == BUILD_DIRECTORY:
        return "pass a build_directory only you can write"
    return f"point {setting} at a folder only you can write"


class UnsafePathError(RuntimeError):
    """A path under the build cache that another user could control; jitload refuses to use it."""

    def __init__(self, path: str, problem: str, st: os.stat_result | None = None,
                 setting: str = "TORCH_EXTENSIONS_DIR", fix: str | None = None):
        self.path = path
        owner = ""
        if st is not None:
            try:
                name = pwd.getpwuid(st.st_uid).pw_name
            except KeyError:
                name = "?"
            owner = f" (owner {name}, uid {st.st_uid}; mode {stat.filemode(st.st_mode)})"
        fix = fix or f"remove it if it is yours to remove (rm -rf '{path}'), or {_elsewhere(setting)}"
        super().__init__(f"refusing {path}: {problem}{owner}. jitload builds in and loads from folders that only "
                         f"you can write. Fix: {fix}.")


def _private_group(gid: int) -> bool:
    """Whether group ``gid`` is this user's own (a umask of 002 with per-user groups makes folders g+w): it is
    the user's primary group and lists nobody else."""
    try:
        user = pwd.getpwuid(os.geteuid())
        members = grp.getgrgid(gid).gr_mem
    except KeyError:
        return False
    return gid == user.pw_gid and set(members) <= {user.pw_name}


def _check(path: str, st: os.stat_result, kind: str, setting: str = "TORCH_EXTENSIONS_DIR") -> None:
    """Raise UnsafePathError unless ``path`` is a folder (or file) of this user's that nobody else can write.
    Nothing is changed, refused or not: a folder open to others may be shared on purpose (a 1777 scratch, a
    2775 group folder), and closing it would lock its other users out."""
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(path, f"it is a symbolic link (to {os.readlink(path)})", st, setting)
    if kind == "dir" and not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(path, "it is not a folder", st, setting)
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(path, "it is not a regular file", st, setting)
    if st.st_uid != os.geteuid():
        raise UnsafePathError(path, "another user owns it", st, setting)
    group_open = st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid)
    if st.st_mode & stat.S_IWOTH or group_open:
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        who = "every user" if st.st_mode & stat.S_IWOTH else f"the members of group {group}"
        raise UnsafePathError(path, f"{who} can write it", st, setting,
                              fix=f"{_elsewhere(setting)}, or, if nobody else uses it, close it yourself (chmod go-w "
                                  f"'{path}'); jitload changes nothing it refuses")


def _check_entries(path: str, setting: str) -> None:
    for entry in os.scandir(path):
        st = entry.stat(follow_symlinks=False)
        if st.st_uid != os.geteuid():
            raise UnsafePathError(entry.path, "another user owns it", st, setting)


def private_dir(path: str, setting: str | None = None) -> str:
    """Create ``path`` (parents too, mode 0700), checking every folder from the cache base down.

    A folder outside the cache (a ``build_directory`` the caller chose) is the caller's: it is created 0700
    and must be this user's, but its parents are not checked. ``setting`` names what chose ``path``, for the
    fix a refusal states (default: TORCH_EXTENSIONS_DIR inside the cache, the build_directory outside it).
    """
    path = os.path.abspath(path)
    base = os.path.abspath(toolchain.cache_base())
    inside = path == base or path.startswith(base + os.sep)
    setting = setting or ("TORCH_EXTENSIONS_DIR" if inside else BUILD_DIRECTORY)
    if inside:
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
        _check(step, os.lstat(step), "dir", setting)
    _check_entries(path, setting)
    return path


def check_library(path: str) -> None:
    """Right before an import: ``path`` is a regular file of this user's that nobody else can write."""
    _check(path, os.lstat(path), "file")
