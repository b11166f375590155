"""A build-directory lock that a killed process cannot leave behind.

torch <= 2.13 marks a build as in progress by the *existence* of a ``lock`` file (FileBaton), so a build
killed with SIGKILL leaves every later load waiting forever. ``fcntl.flock`` locks belong to the open file:
the kernel drops them when the holder dies, however it dies. The holder deletes the file when it is done, so
no lock file outlives a build that ended normally; one left by a killed build is unlocked and harmless.

``jitload clean`` removes a folder under its lock, so a build that waited for it finds the folder gone: it is
made again, empty, as every folder jitload builds in is made (:func:`jitload.builder.trust.private_dir`), and
the build starts afresh. A holder deletes the lock file only while that name is still the file it locked:
after a clean it may be the new folder's, which another build holds.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator

from .. import settings
from . import trust

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
        except FileNotFoundError:
            # The folder itself is gone (removed by a clean while this process waited): made again through the
            # checks of every folder under the cache, so nothing of another user's is entered.
            log.info("jitload: %s was removed while this process waited for its lock; it is made again, empty",
                     directory)
            trust.private_dir(directory)
            continue
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
        if _names(path, fd):
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        # While still holding the lock, so nobody locks the old file after this. Only a file of its own: only
        # a holder deletes its lock file, so the name changes files under a holder only where its folder was
        # removed (a clean), and the file there now is another build's.
        if _names(path, fd):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        os.close(fd)


def _names(path: str, fd: int) -> bool:
    """Whether ``path`` is the file open as ``fd``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)
