"""
Tests for L{nfltr.relay.succession}: a relay and its successor hand the admin address over.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, fail, succeed
from twisted.internet.error import CannotListenError
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.succession import (
    HANDOVER_WAIT,
    POLL_INTERVAL,
    RETRY_INTERVAL,
    SuccessorWatch,
    listen_after_predecessor,
    predecessor_pid,
    successor_pid,
)


def in_use() -> CannotListenError:
    return CannotListenError("127.0.0.1", 9090, OSError(errno.EADDRINUSE, "in use"))


class OtherProcess:
    """
    A live process that is not this one, for pids that must be alive.
    """

    def __init__(self, case: SynchronousTestCase) -> None:
        self.popen = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                      stdin=subprocess.PIPE)
        case.addCleanup(self.end)
        self.pid = self.popen.pid

    def end(self) -> None:
        self.popen.kill()
        self.popen.wait()


class PidTests(SynchronousTestCase):
    """
    Who holds the lock file, who C{relay.json} names.
    """

    def setUp(self) -> None:
        self.dir = Path(self.mktemp())
        self.dir.mkdir()
        self.lock = self.dir / "relay.lock"
        self.state = self.dir / "relay.json"

    def test_successor(self) -> None:
        """
        Another live process's pid in the lock file is a successor; our own pid, a dead
        process's, garbage or no file is none.
        """
        other = OtherProcess(self)
        own = os.getpid()
        self.assertIsNone(successor_pid(self.lock, own))
        for text in (f"{own}\n", "garbage", ""):
            self.lock.write_text(text)
            self.assertIsNone(successor_pid(self.lock, own))
        self.lock.write_text(f"{other.pid}\n")
        self.assertEqual(successor_pid(self.lock, own), other.pid)
        other.end()
        self.assertIsNone(successor_pid(self.lock, own))

    def test_predecessor(self) -> None:
        """
        Read before taking the lock: the live previous holder other than us, as for a
        successor.
        """
        other = OtherProcess(self)
        self.assertIsNone(predecessor_pid(self.lock, os.getpid()))
        self.lock.write_text(f"{other.pid}\n")
        self.assertEqual(predecessor_pid(self.lock, os.getpid()), other.pid)
        other.end()
        self.assertIsNone(predecessor_pid(self.lock, os.getpid()))


class WatchTests(SynchronousTestCase):
    """
    L{SuccessorWatch} closes the admin listener once, when a successor appears.
    """

    def test_closesOnceWhenSuccessorAppears(self) -> None:
        """
        Nothing happens while the lock file names this process; within one poll of a
        successor's pid appearing, C{close} is called, once, and the watch stops.
        """
        lock = Path(self.mktemp())
        lock.write_text(f"{os.getpid()}\n")
        clock, closed = Clock(), []
        watch = SuccessorWatch(clock, lock, lambda: closed.append(True))
        watch.start()
        clock.advance(POLL_INTERVAL * 4)
        self.assertEqual(closed, [])
        lock.write_text(f"{OtherProcess(self).pid}\n")
        clock.advance(POLL_INTERVAL)
        self.assertEqual(closed, [True])
        clock.advance(POLL_INTERVAL * 4)
        self.assertEqual(closed, [True])
        self.assertEqual(clock.getDelayedCalls(), [])
        watch.stop()


class ListenTests(SynchronousTestCase):
    """
    L{listen_after_predecessor} waits for a live predecessor's address, and only for that.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.tries = 0
        self.predecessor: int | None = None

    def listener(self, failures: int, error: Exception | None = None) -> Any:
        def listen() -> Deferred[str]:
            self.tries += 1
            if self.tries <= failures:
                return fail(error or in_use())
            return succeed("port")

        return listen

    def attempt(self, listen: Any) -> Deferred[Any]:
        return ensureDeferred(listen_after_predecessor(self.clock, listen, self.predecessor))

    def test_waitsForPredecessor(self) -> None:
        """
        While the address is in use and the predecessor lives, it tries again every
        L{RETRY_INTERVAL} until the address is free.
        """
        self.predecessor = OtherProcess(self).pid
        d = self.attempt(self.listener(3))
        self.assertNoResult(d)
        self.clock.pump([RETRY_INTERVAL] * 3)
        self.assertEqual(self.successResultOf(d), "port")
        self.assertEqual(self.tries, 4)

    def test_givesUp(self) -> None:
        """
        After L{HANDOVER_WAIT} seconds it fails with the address-in-use error, and at once
        once the predecessor is gone.
        """
        other = OtherProcess(self)
        self.predecessor = other.pid
        d = self.attempt(self.listener(10**6))
        self.clock.pump([RETRY_INTERVAL] * int(HANDOVER_WAIT / RETRY_INTERVAL + 2))
        self.failureResultOf(d, CannotListenError)
        d = self.attempt(self.listener(10**6))
        self.assertNoResult(d)
        other.end()
        self.clock.advance(RETRY_INTERVAL)
        self.failureResultOf(d, CannotListenError)

    def test_noPredecessorFailsAtOnce(self) -> None:
        """
        Without a live predecessor an address in use is a port clash: it fails at once, as
        does any other listening error with one.
        """
        self.failureResultOf(self.attempt(self.listener(1)), CannotListenError)
        self.predecessor = OtherProcess(self).pid
        refused = CannotListenError("127.0.0.1", 1, OSError(errno.EACCES, "denied"))
        self.tries = 0
        self.failureResultOf(self.attempt(self.listener(1, refused)), CannotListenError)
