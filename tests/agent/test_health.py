"""
Tests for L{nfltr.agent._health}: the check's words and the checker, with
a L{Clock}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import ConfigError, HealthCheck, HealthChecker, parse_health_check
from nfltr.agent._health import DEFAULT_INTERVAL, HTTP, TCP, HealthReporter, _passed


class ParseTests(SynchronousTestCase):
    """
    C{--health-check}'s words.
    """

    def test_kinds(self) -> None:
        """
        C{tcp} and C{http:/PATH} take the named defaults.
        """
        self.assertEqual(parse_health_check("tcp"), HealthCheck(TCP))
        self.assertEqual(parse_health_check("http:/healthz"), HealthCheck(HTTP, "/healthz"))

    def test_settings(self) -> None:
        """
        Interval, timeout and the thresholds are configurable.
        """
        check = parse_health_check("http:/h,interval=1s,timeout=500ms,fall=3,rise=4")
        self.assertEqual(check, HealthCheck(HTTP, "/h", 1.0, 0.5, 3, 4))

    def test_bad(self) -> None:
        """
        Unknown kinds, paths without a slash, unknown settings and values
        out of bounds are refused.
        """
        for text in ("udp", "http:healthz", "http:", "tcp:x", "tcp,every=1s", "tcp,fall=0",
                     "tcp,interval=1s,timeout=2s", "tcp,interval=0", "tcp,rise=x"):
            self.assertRaises(ConfigError, parse_health_check, text)

    def test_httpAnswer(self) -> None:
        """
        An HTTP check passes on 2xx and 3xx, fails on anything else.
        """
        check = HealthCheck(HTTP, "/")
        self.assertTrue(_passed(check, b"HTTP/1.1 200 OK\r\n"))
        self.assertTrue(_passed(check, b"HTTP/1.0 302 Found\r\n"))
        self.assertFalse(_passed(check, b"HTTP/1.1 503 Unavailable\r\n"))
        self.assertFalse(_passed(check, b""))
        self.assertTrue(_passed(HealthCheck(TCP), b""))


class CheckerTests(SynchronousTestCase):
    """
    L{HealthChecker}: the service is withdrawn within one interval of
    failing, and back once it passes.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.passing = True
        self.probes: list[defer.Deferred[bool]] = []
        self.changes: list[bool] = []
        self.hang = False

    def probe(self) -> defer.Deferred[bool]:
        d: defer.Deferred[bool] = defer.Deferred()
        self.probes.append(d)
        if not self.hang:
            d.callback(self.passing)
        return d

    def checker(self, check: HealthCheck) -> HealthChecker:
        checker = HealthChecker(self.clock, check, self.probe, self.changes.append)
        checker.start()
        return checker

    def test_withdrawWithinOneInterval(self) -> None:
        """
        With the defaults, a service that starts failing is withdrawn at the
        next check, at most one interval later; it returns after two passes.
        """
        self.checker(HealthCheck(TCP))
        self.clock.advance(DEFAULT_INTERVAL / 2)
        self.passing = False
        self.clock.advance(DEFAULT_INTERVAL / 2)
        self.assertEqual(self.changes, [False])
        self.passing = True
        self.clock.advance(DEFAULT_INTERVAL)
        self.assertEqual(self.changes, [False])
        self.clock.advance(DEFAULT_INTERVAL)
        self.assertEqual(self.changes, [False, True])

    def test_thresholds(self) -> None:
        """
        C{fall} failures in a row withdraw it; a pass between resets the
        count.
        """
        self.checker(HealthCheck(TCP, interval=1, timeout=1, fall=2, rise=1))
        self.passing = False
        self.clock.advance(1)
        self.passing = True
        self.clock.advance(1)
        self.passing = False
        self.clock.advance(1)
        self.assertEqual(self.changes, [])
        self.clock.advance(1)
        self.assertEqual(self.changes, [False])
        self.passing = True
        self.clock.advance(1)
        self.assertEqual(self.changes, [False, True])

    def test_timeoutFails(self) -> None:
        """
        A probe with no answer by the timeout failed; the next check runs on
        time.
        """
        self.hang = True
        self.checker(HealthCheck(TCP, interval=2, timeout=1))
        self.clock.advance(0.9)
        self.assertEqual(self.changes, [])
        self.clock.advance(0.1)
        self.assertEqual(self.changes, [False])
        self.clock.advance(1)
        self.assertEqual(len(self.probes), 2)

    def test_stop(self) -> None:
        """
        Stopped, it checks no more and reports nothing.
        """
        self.hang = True
        checker = self.checker(HealthCheck(TCP, interval=2, timeout=1))
        checker.stop()
        self.clock.advance(10)
        self.assertEqual((len(self.probes), self.changes), (1, []))
        self.assertEqual(self.clock.getDelayedCalls(), [])


class FakeLink:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def sendControl(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


class FakeDialler:
    def __init__(self, features: list[str]) -> None:
        self.link: FakeLink | None = FakeLink()
        self.welcome = {"features": features}


class ReporterTests(SynchronousTestCase):
    """
    L{HealthReporter}: the relay hears each change, and again on a new
    link; an older relay hears nothing.
    """

    def test_tells(self) -> None:
        """
        A change is sent; a reconnect while withdrawn sends it again.
        """
        dialler = FakeDialler(["update", "health"])
        reporter = HealthReporter(dialler, "relay:8443")
        reporter.relayUp()
        reporter.changed(False)
        reporter.relayUp()
        reporter.changed(True)
        assert dialler.link is not None
        self.assertEqual([m["healthy"] for m in dialler.link.sent], [False, False, True])
        self.assertEqual({m["type"] for m in dialler.link.sent}, {"health"})

    def test_olderRelay(self) -> None:
        """
        A relay without the feature gets no message.
        """
        dialler = FakeDialler(["update"])
        HealthReporter(dialler, "relay:8443").changed(False)
        assert dialler.link is not None
        self.assertEqual(dialler.link.sent, [])


class GroupOptionTests(SynchronousTestCase):
    """
    C{--group} and C{--health-check} on an agent's options.
    """

    def test_options(self) -> None:
        """
        Both are checked and kept; a bad group is refused naming the option.
        """
        from nfltr.agent import http_agent_options

        values = {"relay": "localhost:8443", "key": "k", "relay-pin": "sha256:" + "0" * 64,
                  "group": "blue",
                  "health-check": "tcp"}
        options = http_agent_options(3000, values, {})
        self.assertEqual((options.group, options.health), ("blue", HealthCheck(TCP)))
        with self.assertRaises(ConfigError) as caught:
            http_agent_options(3000, {**values, "group": "Blue!"}, {})
        self.assertIn("--group", str(caught.exception))


class ProbeTests(SynchronousTestCase):
    """
    L{probe_service} against a memory reactor.
    """

    def connect(self, check: HealthCheck) -> tuple[Any, defer.Deferred[bool], Any]:
        from twisted.internet.testing import MemoryReactorClock, StringTransport

        from nfltr.agent._health import probe_service

        reactor = MemoryReactorClock()
        d = probe_service(reactor, 3000, check)()
        host, port, factory, _, _ = reactor.tcpClients[0]
        self.assertEqual((host, port), ("127.0.0.1", 3000))
        protocol = factory.buildProtocol(None)
        transport = StringTransport()
        protocol.makeConnection(transport)
        return protocol, d, transport

    def test_http(self) -> None:
        """
        An HTTP check sends its GET and passes on a 2xx status line.
        """
        from twisted.python.failure import Failure

        protocol, d, transport = self.connect(HealthCheck(HTTP, "/healthz"))
        self.assertTrue(transport.value().startswith(b"GET /healthz HTTP/1.1\r\n"))
        protocol.dataReceived(b"HTTP/1.1 204 No Content\r\n")
        protocol.connectionLost(Failure(Exception("closed")))
        self.assertIs(self.successResultOf(d), True)

    def test_tcp(self) -> None:
        """
        A TCP check passes once connected, sending nothing.
        """
        _, d, transport = self.connect(HealthCheck(TCP))
        self.assertEqual(transport.value(), b"")
        self.assertIs(self.successResultOf(d), True)

    def test_cancelled(self) -> None:
        """
        A probe given up (its timeout) closes its connection.
        """
        _, d, transport = self.connect(HealthCheck(HTTP, "/"))
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertTrue(transport.disconnecting)
