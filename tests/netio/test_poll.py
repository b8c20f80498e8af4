"""
Tests for L{nfltr.netio._poll}.
"""

from __future__ import annotations

import os
import select
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

    def test_readResultDisconnects(self) -> None:
        """
        A C{doRead} that returns a reason (the peer closed, say) gets its
        selectable disconnected with it, as in Twisted.
        """
        lost: list[Any] = []

        class Closing(Reader):
            def doRead(self) -> Any:
                super().doRead()
                return ValueError("gone")

            def connectionLost(self, reason: Any) -> None:
                lost.append(reason)

        reader = Closing(self, self.reactor)
        self.reactor.addReader(reader)
        os.write(reader.w, b"x")
        self.reactor.doIteration(0)
        self.assertNotIn(reader, self.reactor.getReaders())
        self.assertEqual(len(lost), 1)
        self.assertIsInstance(lost[0].value, ValueError)

    def test_otherEventsTwistedsWay(self) -> None:
        """
        An event other than "readable" alone (a hang-up here) goes through
        Twisted's handler.
        """
        seen: list[int] = []
        self.patch(self.reactor, "_doReadOrWrite", lambda s, fd, event: seen.append(event))
        reader = Reader(self, self.reactor)
        self.reactor.addReader(reader)
        os.close(reader.w)
        reader.w = os.open(os.devnull, os.O_RDONLY)  # closed by the cleanup instead
        self.reactor.doIteration(0)
        self.assertEqual(len(seen), 1)
        self.assertTrue(seen[0] & select.EPOLLHUP)

    def test_callAfterEvents(self) -> None:
        """
        A function given to C{callAfterEvents} while events are handled runs
        once all of that poll's events were, before the next poll; outside
        event handling it is refused.  One that fails is logged and the
        others still run.
        """
        order: list[str] = []
        readers = [Reader(self, self.reactor), Reader(self, self.reactor)]

        def failing() -> None:
            order.append("failing")
            raise RuntimeError("broken")

        def doRead(reader: Reader, name: str) -> None:
            Reader.doRead(reader)
            order.append(name)
            self.assertTrue(self.reactor.callAfterEvents(failing))
            self.assertTrue(self.reactor.callAfterEvents(lambda: order.append("after " + name)))

        for reader, name in zip(readers, "ab", strict=True):
            reader.doRead = lambda r=reader, n=name: doRead(r, n)  # type: ignore[method-assign]
            self.reactor.addReader(reader)
            os.write(reader.w, b"x")
        self.assertFalse(self.reactor.callAfterEvents(lambda: order.append("never")))
        self.reactor.doIteration(0)
        self.assertEqual(sorted(order[:2]), ["a", "b"])
        self.assertEqual(
            [o for o in order[2:] if o != "failing"], ["after " + order[0], "after " + order[1]]
        )
        self.assertEqual(order.count("failing"), 2)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 2)
        self.assertFalse(self.reactor.callAfterEvents(lambda: order.append("never")))

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
