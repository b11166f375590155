"""Content fingerprints of source files: what decides "changed", so that re-saving identical bytes is no change.

A record maps each path to ``[mtime_ns, size, digest, ctime_ns]``. Checking it costs one ``stat`` per file while
the files are untouched; a file whose stat changed is hashed, and counts as changed only when its bytes did. A
record taken *before* a build and stored after it makes a save during the build look like a change next time.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

Record = dict[str, list]


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def digest(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return digest_of(f.read())
    except OSError:
        return None


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ctime_ns


def take(paths: Iterable[str]) -> Record:
    """Stat and hash ``paths``; a missing file is left out."""
    record: Record = {}
    for path in paths:
        st, dg = _stat(path), digest(path)
        if st is not None and dg is not None:
            record[path] = [st[0], st[1], dg, st[2]]
    return record


def unknown() -> list:
    """An entry for a file whose recorded content is not known: :func:`changed` reports it."""
    return [0, -1, "", 0]


def written_since(entry: list, ns: int) -> bool:
    """Whether the file of ``entry`` was written at or after ``ns`` (time.time_ns()). The ctime counts too: a
    copy that keeps the mtime (``cp -p``, ``rsync -a``, ``tar``) still moves it, and nobody can set it back."""
    return entry[0] >= ns or (len(entry) > 3 and entry[3] >= ns)


def changed(record: Record) -> list[str]:
    """The recorded paths whose bytes differ now (or that are gone). Refreshes the stat of files whose bytes
    are the same, so the next check is a ``stat`` again."""
    out = []
    for path, entry in record.items():
        st = _stat(path)
        # mtime, size and ctime all the same: the bytes are. mtime and size alone are not enough: a copy that
        # keeps the mtime, of a file of the same size, would pass for the file it replaced.
        if st is not None and len(entry) == 4 and (st[0], st[1], st[2]) == (entry[0], entry[1], entry[3]):
            continue
        dg = digest(path) if st is not None else None
        if dg is None or len(entry) < 3 or dg != entry[2]:
            out.append(path)
        else:
            entry[:] = [st[0], st[1], dg, st[2]]
    return out
