# -*- test-case-name: tests.relay.test_succession -*-
"""
A relay replaced on the same data directory and addresses while it drains (a
rolling restart on one host): who holds the admin listener when.

A stopping relay keeps its admin listener through its drain, so C{/readyz}
says 503 to a load balancer for as long as sessions finish; but a successor
started meanwhile needs that address.  The two hand it over through the data
directory, with no signal and no lock held across processes:

  - the successor takes the data directory's lock, which the old relay let
    go when it began to stop, and writes its pid into the lock file
    (L{nfltr.store.claim_owner});
  - the old relay, while it drains, reads the lock file every
    L{POLL_INTERVAL} seconds (L{SuccessorWatch}) and closes its admin
    listener as soon as another live process's pid is there;
  - the successor, finding the admin address in use while the process
    whose pid it found in the lock file before taking it still lives, tries
    again every L{RETRY_INTERVAL} seconds for at most L{HANDOVER_WAIT}
    (L{listen_after_predecessor}).  (Not C{relay.json}: a stopping relay
    removes it at once.)
"""

from __future__ import annotations

import errno
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from twisted.internet.error import CannotListenError
from twisted.internet.task import LoopingCall, deferLater

#: Seconds between two reads of the lock file by a draining relay.
POLL_INTERVAL = 0.25
#: Seconds between two tries of a successor to bind the admin address.
RETRY_INTERVAL = 0.1
#: Seconds a successor waits for its predecessor's admin listener at most.
HANDOVER_WAIT = 5.0
#: The most of a lock file read here.
MAX_READ = 64 * 1024


def alive(pid: int) -> bool:
    """
    Whether process C{pid} exists.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _pid_in(lock: Path) -> int | None:
    try:
        text = lock.read_bytes()[:MAX_READ].decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def successor_pid(lock: Path, own: int) -> int | None:
    """
    The pid of a live process other than C{own} that took the lock file C{lock}, if any.
    """
    pid = _pid_in(lock)
    return pid if pid is not None and pid != own and alive(pid) else None


def predecessor_pid(lock: Path, own: int) -> int | None:
    """
    Read before this process takes the lock file C{lock}: the pid of the live process other
    than C{own} that held it last (a relay that let it go when it began to stop), if any.
    """
    return successor_pid(lock, own)


class SuccessorWatch:
    """
    While a relay drains, close its admin listener once a successor holds the data
    directory (see the module docstring).
    """

    def __init__(self, reactor: Any, lock: Path, close: Callable[[], object],
                 own: int | None = None) -> None:
        self._lock = lock
        self._close: Callable[[], object] | None = close
        self._own = os.getpid() if own is None else own
        self._loop = LoopingCall(self._check)
        self._loop.clock = reactor

    def start(self) -> None:
        """
        Watch from now on (checks at once, then every L{POLL_INTERVAL}).
        """
        self._loop.start(POLL_INTERVAL, now=True)

    def stop(self) -> None:
        """
        Stop watching (idempotent).
        """
        if self._loop.running:
            self._loop.stop()

    def _check(self) -> None:
        if self._close is not None and successor_pid(self._lock, self._own) is not None:
            close, self._close = self._close, None
            self.stop()
            close()


async def listen_after_predecessor(
    reactor: Any, listen: Callable[[], Awaitable[Any]], predecessor: int | None,
) -> Any:
    """
    C{listen()}, tried again while the address is in use and process C{predecessor} (see
    L{predecessor_pid}) lives, for at most L{HANDOVER_WAIT} seconds; any other failure at once.
    """
    deadline = reactor.seconds() + HANDOVER_WAIT
    while True:
        try:
            return await listen()
        except CannotListenError as e:
            in_use = isinstance(e.socketError, OSError) and e.socketError.errno == errno.EADDRINUSE
            waiting = predecessor is not None and alive(predecessor)
            if not in_use or not waiting or reactor.seconds() >= deadline:
                raise
        await deferLater(reactor, RETRY_INTERVAL, lambda: None)
