"""
Tests for L{nfltr.netio._poll}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.logger import LogLevel, globalLogPublisher
from twisted.python import log
from twisted.trial.unittest import SynchronousTestCase

from nfltr.netio import EPollReactor, install_reactor


class Reader:
    """
    A readable selectable on a pipe that records its reads.
    """

    def __init__(self, case: SynchronousTestCase, reactor: Any, fail: bool = False) -> None:
        self.r, self.w = os.pipe()
        case.addCleanup(os.close, self.r)
        case.addCleanup(os.close, self.w)
        case.addCleanup(reactor.removeReader, self)
        self.fail = fail
        self.read: list[bytes] = []

    def fileno(self) -> int:
        return self.r

    def logPrefix(self) -> str:
        return "Reader"

    def doRead(self) -> None:
        self.read.append(os.read(self.r, 100))
        if self.fail:
            raise RuntimeError("broken reader")

    def connectionLost(self, reason: Any) -> None:
        pass


class EPollReactorTests(SynchronousTestCase):
    """
    Events are handled directly, without the legacy log context.
    """

    def setUp(self) -> None:
        self.reactor = EPollReactor()
        self.addCleanup(self.reactor._poller.close)

    def test_noLogContext(self) -> None:
        """
        A readable selectable is read, and C{callWithLogger} is not used.
        """
        calls: list[object] = []
        self.patch(log, "callWithLogger", lambda *a, **k: calls.append(a))
        reader = Reader(self, self.reactor)
        self.reactor.addReader(reader)
        os.write(reader.w, b"ready")
        self.reactor.doIteration(0)
        self.assertEqual(reader.read, [b"ready"])
        self.assertEqual(calls, [])

    def test_failureLoggedOthersHandled(self) -> None:
        """
        A handler that raises loses its connection (as in Twisted), the
        error is logged, and the other events of the same poll are handled.
        """
        events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        broken, fine = Reader(self, self.reactor, fail=True), Reader(self, self.reactor)
        for reader in (broken, fine):
            self.reactor.addReader(reader)
            os.write(reader.w, b"x")
        self.reactor.doIteration(0)
        self.assertEqual((broken.read, fine.read), ([b"x"], [b"x"]))
        self.assertNotIn(broken, self.reactor.getReaders())
        errors = [e for e in events if e.get("log_level") == LogLevel.critical
                  or e.get("isError")]
        self.assertTrue(errors)
        self.flushLoggedErrors(RuntimeError)

    def test_timeout(self) -> None:
        """
        With nothing ready, a poll returns after its timeout.
        """
        self.reactor.doIteration(0.001)


class InstallTests(SynchronousTestCase):
    """
    L{install_reactor} installs only where it can and may.
    """

    def test_installs(self) -> None:
        """
        With no reactor installed, nfltr's is.
        """
        installed: list[object] = []
        self.assertTrue(install_reactor({}, {}, installed.append))
        self.assertEqual([type(r) for r in installed], [EPollReactor])
        installed[0]._poller.close()  # type: ignore[attr-defined]

    def test_alreadyInstalled(self) -> None:
        """
        With a reactor installed nothing happens.
        """
        installed: list[object] = []
        self.assertFalse(install_reactor({}, {"twisted.internet.reactor": object()},
                                         installed.append))
        self.assertEqual(installed, [])

    def test_switchedOff(self) -> None:
        """
        C{NFLTR_FAST_POLL=0} keeps Twisted's reactor.
        """
        installed: list[object] = []
        self.assertFalse(install_reactor({"NFLTR_FAST_POLL": "0"}, {}, installed.append))
        self.assertEqual(installed, [])
