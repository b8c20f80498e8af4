# -*- test-case-name: tests.store.test_owner -*-
"""
One process at a time: a relay owns its data directory, an agent its name in
its state directory, for as long as it runs.

The owner holds an exclusive C{flock} on a lock file and writes its pid into
it.  The kernel drops the lock when the process ends, however it ends, so a
crashed owner never leaves a stale lock behind; the pid is only there to name
the holder in the refusal.  Two relays on one data directory would share the
SQLite file and the relay's C{relay.json} (the second one's stop deleted the
first one's); two agents of one name would replace each other at the relay
forever.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ._model import StoreError

LOCK_MODE = 0o600
#: The most of a lock file read to name its holder.
MAX_PID_TEXT = 32


class DirectoryInUse(StoreError):
    """
    Another process holds the lock; the message names it and its pid.
    """


class OwnerLock:
    """
    An exclusive lock on a file, held until L{release} or the process ends.

    @ivar path: the lock file.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        """
        Let another process take the lock (idempotent).  The file stays: removing it would
        let a third process lock a new file while a second holds the old one.
        """
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    @property
    def held(self) -> bool:
        """
        Whether this lock is still held.
        """
        return self._fd is not None


def claim(path: Path, what: str, hint: str) -> OwnerLock:
    """
    Take the lock file C{path} (made mode 0600 if missing) for this process.

    @param what: what the lock guards, for the refusal (e.g. C{"the data directory /srv/r"}).
    @param hint: what to do instead, for the refusal (e.g. C{"use another --data-dir"}).
    @raise DirectoryInUse: another process holds it.
    @raise OSError: the file cannot be opened.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, LOCK_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise DirectoryInUse(
            f"{what} is in use by another process{holder}; stop it or {hint}"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return OwnerLock(path, fd)


def _holder(fd: int) -> str:
    text = os.pread(fd, MAX_PID_TEXT, 0).decode("ascii", "replace").strip()
    return f" (pid {text})" if text.isdigit() else ""
