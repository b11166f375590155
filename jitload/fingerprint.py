"""Content fingerprints of source files: what decides "changed", so that re-saving identical bytes is no change.

A record maps each path to ``[mtime_ns, size, digest]``. Checking it costs one ``stat`` per file while the
files are untouched; a file whose stat changed is hashed, and counts as changed only when its bytes did. A
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


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def take(paths: Iterable[str]) -> Record:
    """Stat and hash ``paths``; a missing file is left out."""
    record: Record = {}
    for path in paths:
        st, dg = _stat(path), digest(path)
        if st is not None and dg is not None:
            record[path] = [st[0], st[1], dg]
    return record


def unknown() -> list:
    """An entry for a file whose recorded content is not known: :func:`changed` reports it."""
    return [0, -1, ""]


def changed(record: Record) -> list[str]:
    """The recorded paths whose bytes differ now (or that are gone). Refreshes the stat of files whose bytes
    are the same, so the next check is a ``stat`` again."""
    out = []
    for path, entry in record.items():
        st = _stat(path)
        if st is not None and len(entry) == 3 and (st[0], st[1]) == (entry[0], entry[1]):
            continue
        dg = digest(path) if st is not None else None
        if dg is None or len(entry) != 3 or dg != entry[2]:
            out.append(path)
        else:
            entry[0], entry[1] = st
    return out
