"""
Tests for L{nfltr.agent._local} (connections to local services, the TCP end
of a splice) and L{nfltr.agent._quiet}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, error, reactor
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.logger import LogLevel
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase

from nfltr.agent import Quiet, ServiceConnector, splice_local

from .helpers import LogCapture, Network, Recorder


class ConnectorLogicTests(SynchronousTestCase):
    """
    L{ServiceConnector} on a memory reactor: which loopback address it
    tries, and when.
    """

    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.connector = ServiceConnector(self.reactor)

    def failAttempt(self, index: int, why: Exception) -> None:
        factory = self.reactor.tcpClients[index][2]
        factory.clientConnectionFailed(self.reactor.connectors[index], Failure(why))

    def succeed(self, index: int) -> Any:
        factory = self.reactor.tcpClients[index][2]
        protocol = factory.buildProtocol(None)
        from twisted.internet.testing import StringTransport

        protocol.makeConnection(StringTransport())
        return protocol

    def test_ipv4First(self) -> None:
        """
        The first attempt goes to 127.0.0.1 on the port, with the
        connector's timeout.
        """
        self.connector.connect(3000, Protocol())
        host, port, _, timeout, _ = self.reactor.tcpClients[0]
        self.assertEqual((host, port, timeout), ("127.0.0.1", 3000, self.connector.timeout))

    def test_ipv6WhenRefused(self) -> None:
        """
        Refused on 127.0.0.1, the connector tries ::1, and once that worked
        it tries ::1 first for that port.
        """
        app = Protocol()
        d = self.connector.connect(3000, app)
        self.failAttempt(0, error.ConnectionRefusedError())
        self.assertEqual(self.reactor.tcpClients[1][:2], ("::1", 3000))
        self.succeed(1)
        self.assertIs(self.successResultOf(d), app)
        self.assertEqual(self.connector.preferIPv6, {3000})
        self.connector.connect(3000, Protocol())
        self.assertEqual(self.reactor.tcpClients[2][:2], ("::1", 3000))
        self.connector.connect(3001, Protocol())
        self.assertEqual(self.reactor.tcpClients[3][:2], ("127.0.0.1", 3001))

    def test_refusedTwice(self) -> None:
        """
        Refused on both addresses: the first refusal is reported, whatever
        the second attempt said.
        """
        d = self.connector.connect(3000, Protocol())
        self.failAttempt(0, error.ConnectionRefusedError("v4"))
        self.failAttempt(1, error.ConnectError("v6 unavailable"))
        failure = self.failureResultOf(d, error.ConnectionRefusedError)
        self.assertIn("v4", str(failure.value))
        self.assertEqual(self.connector.preferIPv6, set())

    def test_otherErrorsNotRetried(self) -> None:
        """
        A timeout on 127.0.0.1 is reported as it is, without trying ::1.
        """
        d = self.connector.connect(3000, Protocol())
        self.failAttempt(0, error.TimeoutError())
        self.failureResultOf(d, error.TimeoutError)
        self.assertEqual(len(self.reactor.tcpClients), 1)

    def test_cancel(self) -> None:
        """
        Cancelling the result stops the attempt in progress, on either
        address.
        """
        d = self.connector.connect(3000, Protocol())
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertTrue(self.reactor.connectors[0].stoppedConnecting)
        d = self.connector.connect(3001, Protocol())
        self.failAttempt(1, error.ConnectionRefusedError())
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        self.assertTrue(self.reactor.connectors[2].stoppedConnecting)


class ConnectorReactorTests(TestCase):
    """
    L{ServiceConnector} on the real reactor, on 127.0.0.1.
    """

    @defer.inlineCallbacks
    def test_connects(self) -> Any:
        """
        A service listening on 127.0.0.1 is reached; the bytes the
        protocol writes arrive; nothing is logged at info level for it (a
        connection per session).
        """
        received: list[bytes] = []

        class Service(Protocol):
            def dataReceived(self, data: bytes) -> None:
                received.append(data)
                self.transport.loseConnection()

        port = yield TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
            Factory.forProtocol(Service)
        )
        self.addCleanup(port.stopListening)
        done: defer.Deferred[None] = defer.Deferred()

        class Client(Protocol):
            def connectionMade(self) -> None:
                self.transport.write(b"hello")

            def connectionLost(self, reason: Any = None) -> None:
                done.callback(None)

        connector = ServiceConnector(reactor)
        logs = LogCapture(self)
        yield connector.connect(port.getHost().port, Client())
        yield done
        self.assertEqual(b"".join(received), b"hello")
        self.assertEqual(logs.lines(LogLevel.info), [])

    @defer.inlineCallbacks
    def test_refused(self) -> Any:
        """
        Nothing listening on the port, on either loopback address: the
        attempt fails with C{ConnectionRefusedError}.
        """
        port = yield TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(Factory())
        number = port.getHost().port
        yield port.stopListening()
        connector = ServiceConnector(reactor)
        attempt = connector.connect(number, Protocol())
        yield self.assertFailure(attempt, error.ConnectionRefusedError)


class TcpEndTests(SynchronousTestCase):
    """
    L{splice_local}'s TCP end.
    """

    def test_noDelay(self) -> None:
        """
        The TCP end turns Nagle's algorithm off on its connection.
        """
        network = Network()
        local, remote = splice_local()
        pump = network.join(Recorder(), local)
        self.assertTrue(pump.clientIO.noDelay)
        del remote

    def test_otherGoneFirst(self) -> None:
        """
        A TCP end connected after its other end closed aborts its
        connection at once, and reports the loss.
        """
        network = Network()
        local, remote = splice_local()
        lost: list[Failure] = []
        local.onLost = lost.append
        remote.closed = True
        service = Recorder()
        network.join(service, local)
        network.run()
        self.assertEqual(len(lost), 1)
        self.assertIsNotNone(service.lost)

    def test_bytesBothWays(self) -> None:
        """
        Joined, the TCP end forwards what it receives to the other end's
        transport and back.
        """
        network = Network()
        local, remote = splice_local()
        service, peer = Recorder(b"from service"), Recorder(b"from peer")
        network.join(service, local)
        network.join(peer, remote)
        network.run()
        self.assertEqual(service.received, b"from peer")
        self.assertEqual(peer.received, b"from service")


class QuietTests(SynchronousTestCase):
    """
    L{Quiet}: one line per message per interval.
    """

    def test_burst(self) -> None:
        """
        The first occurrence is logged; repeats within the interval are
        counted; the first after it says how many were not logged.
        """
        clock = Clock()
        quiet = Quiet(clock, interval=10)
        self.assertEqual(quiet.admit("down"), "down")
        self.assertIsNone(quiet.admit("down"))
        clock.advance(9.9)
        self.assertIsNone(quiet.admit("down"))
        self.assertEqual(quiet.admit("other"), "other")
        clock.advance(0.1)
        self.assertEqual(quiet.admit("down"), "down (and 2 more times)")
        clock.advance(10)
        self.assertEqual(quiet.admit("down"), "down")

    def test_bounded(self) -> None:
        """
        Many different messages do not pile up: old ones are forgotten.
        """
        clock = Clock()
        quiet = Quiet(clock, interval=1)
        for n in range(1000):
            quiet.admit(f"m{n}")
            clock.advance(0.1)
        self.assertLessEqual(len(quiet), 111)
