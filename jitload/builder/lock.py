"""A build-directory lock that a killed process cannot leave behind.

torch <= 2.13 marks a build as in progress by the *existence* of a ``lock`` file (FileBaton), so a build
killed with SIGKILL leaves every later load waiting forever. ``fcntl.flock`` locks belong to the open file:
the kernel drops them when the holder dies, however it dies. The holder deletes the file when it is done, so
no lock file outlives a build that ended normally; one left by a killed build is unlocked and harmless.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator

from .. import settings

log = settings.logger()

LOCK_NAME = "jitload.lock"


@contextlib.contextmanager
def build_lock(directory: str, *, poll_s: float = 0.1, announce_after_s: float = 1.0) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` for the duration of the block.

    While another process holds it, say once (on stderr) which pid is building, then keep waiting: the
    wait ends when that build finishes or its process dies.
    """
    path = os.path.join(directory, LOCK_NAME)
    start = time.monotonic()
    announced = False
    while True:
        try:
            # O_NOFOLLOW: a symbolic link planted here must not make this process truncate what it points to.
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise RuntimeError(f"refusing {path}: it is a symbolic link (to {os.readlink(path)}); "
                                   "remove it, and see who can write to its folder") from None
            raise
        if os.fstat(fd).st_uid != os.geteuid():
            os.close(fd)
            raise RuntimeError(f"refusing {path}: another user owns it; remove it, and see who can write to "
                               "its folder")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not announced and time.monotonic() - start > announce_after_s:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                log.info("jitload: waiting for the build in %s (pid %s)", directory, holder)
                announced = True
            os.close(fd)
            # Polling (rather than a blocking flock) lets the wait be announced and interrupted by Ctrl-C.
            time.sleep(poll_s)
            continue
        # The previous holder deletes the file on release: a lock taken on a deleted file guards nothing.
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):  # `jitload clean` deletes the directory under the lock
            os.unlink(path)  # while still holding the lock, so nobody locks the old file after this
        os.close(fd)
