"""File events for the terminal watcher and the notebook panel: what a file looked like, and waiting for a save.

File events come from ``watchfiles`` (inotify underneath, with debouncing) on the folders of the watched files,
since editors save by writing a new file and renaming it over the old one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable


def folders(files: Iterable[str]) -> list[str]:
    return sorted({os.path.dirname(f) for f in files if os.path.isdir(os.path.dirname(f))})


def snapshot(files: Iterable[str]) -> dict[str, tuple[int, int] | None]:
    """mtime and size of each file (None if missing)."""
    out: dict[str, tuple[int, int] | None] = {}
    for path in files:
        try:
            st = os.stat(path)
            out[path] = (st.st_mtime_ns, st.st_size)
        except OSError:
            out[path] = None
    return out


def with_new_files(before: dict[str, tuple[int, int] | None], files: Iterable[str],
                   started_ns: int) -> dict[str, tuple[int, int] | None]:
    """``before`` (a :func:`snapshot` taken when a build started at ``started_ns``) with the files that build
    found first, such as a header just included: one saved while it ran counts as changed at once."""
    out = dict(before)
    for path, now in snapshot(f for f in files if f not in before).items():
        out[path] = None if now is not None and now[0] >= started_ns else now
    return out


def wait_for_change(files: Iterable[str], stop_event: threading.Event | None = None,
                    since: dict[str, tuple[int, int] | None] | None = None) -> bool:
    """Block until one of ``files`` changes (True) or ``stop_event`` is set (False).

    ``since`` is a :func:`snapshot` taken before the last build: a file saved after it, while nothing was
    watching yet (during the build, or before the watcher is up), counts as a change too.
    """
    import watchfiles

    wanted = set(files)
    # The folders, not the files: editors save by writing a new file and renaming it over the old one.
    # yield_on_timeout: wake every half second to compare against `since` once the watcher is running.
    for changes in watchfiles.watch(*folders(wanted), stop_event=stop_event, yield_on_timeout=True,
                                    rust_timeout=500, watch_filter=lambda _change, path: path in wanted):
        if changes:
            return True
        if since is not None and any(snapshot([f])[f] != s for f, s in since.items()):
            return True
    return False
