"""
Tests for L{nfltr.agent._local} (connections to local services, the TCP end
of a splice) and L{nfltr.agent._log_limit}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, error, reactor
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.logger import LogLevel
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase

from nfltr.agent import Quiet, ServiceConnector, splice_local
from nfltr.agent._local import CANCELLED, CONNECTED, FAILED, ServiceAttempt

from .helpers import LogCapture, Network, Recorder


class MemoryAttempts:
    """
    Ends the connection attempts a L{MemoryReactorClock} recorded.
    """

    reactor: MemoryReactorClock

    def failAttempt(self, index: int, why: Exception) -> None:
        factory = self.reactor.tcpClients[index][2]
        factory.clientConnectionFailed(self.reactor.connectors[index], Failure(why))

    def succeed(self, index: int) -> Any:
        factory = self.reactor.tcpClients[index][2]
        protocol = factory.buildProtocol(None)
        protocol.makeConnection(StringTransport())
        return protocol


class ConnectorLogicTests(MemoryAttempts, SynchronousTestCase):
    """
    L{ServiceConnector} on a memory reactor: which loopback address it
    tries, and when.
    """

    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.connector = ServiceConnector(self.reactor)

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


class _Attempt(ServiceAttempt):
    """
    An attempt that records its failures.

    @ivar whenFailed: fires once it failed.
    """

    def __init__(self, port: int, client: Any) -> None:
        super().__init__(port, client)
        self.failures: list[Failure] = []
        self.whenFailed: defer.Deferred[None] = defer.Deferred()

    def failed(self, reason: Failure) -> None:
        self.failures.append(reason)
        self.whenFailed.callback(None)


class AttemptLogicTests(MemoryAttempts, SynchronousTestCase):
    """
    L{ServiceConnector.dial} on a memory reactor: the addresses it tries,
    the timeout, cancelling, and what the attempt hears.
    """

    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.connector = ServiceConnector(self.reactor, timeout=10)
        self.addCleanup(self.connector.stop)

    def dial(self, port: int = 3000, client: Any = None) -> _Attempt:
        attempt = _Attempt(port, client or Protocol())
        self.connector.dial(attempt)
        return attempt


    def test_connected(self) -> None:
        """
        The first address tried is 127.0.0.1, with no per-connection timer
        of the reactor's; once accepted, the client protocol is connected,
        the attempt lets go of it, and no failure is reported, even after
        the timeout.
        """
        app = Protocol()
        attempt = self.dial(3000, app)
        host, port, factory, timeout, _ = self.reactor.tcpClients[0]
        self.assertEqual((host, port, factory, timeout), ("127.0.0.1", 3000, attempt, None))
        self.assertIs(self.succeed(0), app)
        self.assertEqual(attempt.outcome, CONNECTED)
        self.assertIsNone(attempt.client)
        self.reactor.advance(60)
        self.assertEqual(attempt.failures, [])
        self.assertFalse(self.reactor.connectors[0].stoppedConnecting)

    def test_oneTimerForMany(self) -> None:
        """
        A hundred attempts in progress arm one reactor timer between them.
        """
        for n in range(100):
            self.dial(3000 + n)
        self.assertEqual(len(self.reactor.getDelayedCalls()), 1)

    def test_noDeferred(self) -> None:
        """
        A successful attempt makes no Deferred and no Failure.
        """
        made: list[str] = []
        deferredInit, failureInit = defer.Deferred.__init__, Failure.__init__

        def countDeferred(self: Any, *a: Any, **kw: Any) -> None:
            made.append("Deferred")
            deferredInit(self, *a, **kw)

        def countFailure(self: Any, *a: Any, **kw: Any) -> None:
            made.append("Failure")
            failureInit(self, *a, **kw)

        self.patch(defer.Deferred, "__init__", countDeferred)
        self.patch(Failure, "__init__", countFailure)
        self.connector.dial(ServiceAttempt(3000, Protocol()))
        self.succeed(0)
        self.assertEqual(made, [])

    def test_ipv6WhenRefused(self) -> None:
        """
        Refused on 127.0.0.1, the attempt goes on to ::1, and once that
        worked the port is tried on ::1 first; any other port still on
        127.0.0.1 first.
        """
        app = Protocol()
        attempt = self.dial(3000, app)
        self.failAttempt(0, error.ConnectionRefusedError())
        self.assertIsNone(attempt.outcome)
        self.assertEqual(self.reactor.tcpClients[1][:2], ("::1", 3000))
        self.assertIs(self.succeed(1), app)
        self.assertEqual(self.connector.preferIPv6, {3000})
        self.dial(3000)
        self.assertEqual(self.reactor.tcpClients[2][:2], ("::1", 3000))
        self.dial(3001)
        self.assertEqual(self.reactor.tcpClients[3][:2], ("127.0.0.1", 3001))

    def test_backToIPv4(self) -> None:
        """
        A port remembered on ::1 that is refused there and accepted on
        127.0.0.1 is remembered on 127.0.0.1 again.
        """
        self.connector.preferIPv6.add(3000)
        self.dial(3000)
        self.failAttempt(0, error.ConnectionRefusedError())
        self.assertEqual(self.reactor.tcpClients[1][:2], ("127.0.0.1", 3000))
        self.succeed(1)
        self.assertEqual(self.connector.preferIPv6, set())

    def test_refusedTwice(self) -> None:
        """
        Refused on both addresses: the first refusal is reported, once,
        whatever the second address said.
        """
        attempt = self.dial()
        self.failAttempt(0, error.ConnectionRefusedError("v4"))
        self.failAttempt(1, error.ConnectError("v6 unavailable"))
        self.assertEqual(attempt.outcome, FAILED)
        [failure] = attempt.failures
        self.assertTrue(failure.check(error.ConnectionRefusedError))
        self.assertIn("v4", str(failure.value))
        self.assertEqual(self.connector.preferIPv6, set())
        self.reactor.advance(60)
        self.assertEqual(len(attempt.failures), 1)

    def test_otherErrorsNotRetried(self) -> None:
        """
        Another error on 127.0.0.1 is reported as it is, without trying ::1.
        """
        attempt = self.dial()
        self.failAttempt(0, error.ConnectError("no route"))
        [failure] = attempt.failures
        self.assertTrue(failure.check(error.ConnectError))
        self.assertEqual(len(self.reactor.tcpClients), 1)

    def test_timeout(self) -> None:
        """
        No answer within the timeout: the attempt is stopped and fails with
        C{TimeoutError}, without trying ::1.
        """
        attempt = self.dial()
        self.reactor.advance(9.9)
        self.assertEqual(attempt.failures, [])
        self.reactor.advance(0.1)
        [failure] = attempt.failures
        self.assertTrue(failure.check(error.TimeoutError))
        self.assertTrue(self.reactor.connectors[0].stoppedConnecting)
        self.assertEqual(len(self.reactor.tcpClients), 1)
        self.assertIsNone(attempt.client)

    def test_timeoutPerAddress(self) -> None:
        """
        After a refusal on 127.0.0.1, ::1 gets the whole timeout.
        """
        attempt = self.dial()
        self.reactor.advance(8)
        self.failAttempt(0, error.ConnectionRefusedError())
        self.reactor.advance(8)
        self.assertEqual(attempt.failures, [])
        self.reactor.advance(2)
        [failure] = attempt.failures
        self.assertTrue(failure.check(error.TimeoutError))
        self.assertTrue(self.reactor.connectors[1].stoppedConnecting)

    def test_cancel(self) -> None:
        """
        Cancelling stops the address being tried, on either address, and
        reports nothing, not even once the timeout passed.
        """
        first = self.dial(3000)
        first.cancel()
        self.assertEqual(first.outcome, CANCELLED)
        self.assertTrue(self.reactor.connectors[0].stoppedConnecting)
        second = self.dial(3001)
        self.failAttempt(1, error.ConnectionRefusedError())
        second.cancel(Failure(error.ConnectionDone()))
        self.assertTrue(self.reactor.connectors[2].stoppedConnecting)
        self.failAttempt(2, error.UserError())
        self.reactor.advance(60)
        self.assertEqual(first.failures + second.failures, [])

    def test_cancelAfterOutcome(self) -> None:
        """
        Cancelling an attempt that connected or failed changes nothing.
        """
        connected = self.dial(3000)
        self.succeed(0)
        connected.cancel()
        self.assertEqual(connected.outcome, CONNECTED)
        self.assertFalse(self.reactor.connectors[0].stoppedConnecting)
        failed = self.dial(3001)
        self.failAttempt(1, error.ConnectError())
        failed.cancel()
        self.assertEqual(failed.outcome, FAILED)


class ConnectorReactorTests(TestCase):
    """
    L{ServiceConnector} on the real reactor, on 127.0.0.1.
    """

    @defer.inlineCallbacks
    def test_connects(self) -> Any:
        """
        A service listening on 127.0.0.1 is reached; the bytes the
        protocol writes arrive (the service answers them); nothing is
        logged at info level for it (a connection per session).
        """
        port = yield listenAnswering(self)
        client = Hello()
        connector = ServiceConnector(reactor)
        logs = LogCapture(self)
        yield connector.connect(port.getHost().port, client)
        received = yield client.done
        self.assertEqual(received, b"re: hello")
        self.assertEqual(logs.lines(LogLevel.info), [])

    @defer.inlineCallbacks
    def test_refused(self) -> Any:
        """
        Nothing listening on the port, on either loopback address: the
        attempt fails with C{ConnectionRefusedError}.
        """
        number = yield closedPort()
        connector = ServiceConnector(reactor)
        attempt = connector.connect(number, Protocol())
        yield self.assertFailure(attempt, error.ConnectionRefusedError)


class Answering(Protocol):
    """
    A service that answers C{re: } and what it got, then closes.
    """

    def dataReceived(self, data: bytes) -> None:
        self.transport.write(b"re: " + data)
        self.transport.loseConnection()


class Hello(Protocol):
    """
    A client that says hello and fires C{done} with what it got once the
    connection is gone.
    """

    def __init__(self) -> None:
        self.received = b""
        self.done: defer.Deferred[bytes] = defer.Deferred()

    def connectionMade(self) -> None:
        self.transport.write(b"hello")

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Any = None) -> None:
        self.done.callback(self.received)


def listenAnswering(case: TestCase) -> defer.Deferred[Any]:
    """
    An L{Answering} service on a free port of 127.0.0.1: its listening
    port, stopped when C{case} ends.
    """
    d = TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
        Factory.forProtocol(Answering)
    )

    def listening(port: Any) -> Any:
        case.addCleanup(port.stopListening)
        return port

    return d.addCallback(listening)


@defer.inlineCallbacks
def closedPort() -> Any:
    """
    A port of 127.0.0.1 that was listening a moment ago and is not now.
    """
    port = yield TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(Factory())
    number = port.getHost().port
    yield port.stopListening()
    return number


class AttemptReactorTests(TestCase):
    """
    L{ServiceConnector.dial} on the real reactor, on 127.0.0.1.
    """

    def setUp(self) -> None:
        self.connector = ServiceConnector(reactor)
        self.addCleanup(self.connector.stop)

    @defer.inlineCallbacks
    def test_connects(self) -> Any:
        """
        A service listening on 127.0.0.1 is reached; the bytes the client
        protocol writes arrive, and the service's answer comes back;
        nothing is logged at info level for it.
        """
        port = yield listenAnswering(self)
        client = Hello()
        logs = LogCapture(self)
        attempt = _Attempt(port.getHost().port, client)
        self.connector.dial(attempt)
        received = yield client.done
        self.assertEqual(received, b"re: hello")
        self.assertEqual((attempt.outcome, attempt.failures), (CONNECTED, []))
        self.assertEqual(logs.lines(LogLevel.info), [])

    @defer.inlineCallbacks
    def test_refused(self) -> Any:
        """
        Nothing listening on the port, on either loopback address: the
        attempt fails with C{ConnectionRefusedError}.
        """
        number = yield closedPort()
        attempt = _Attempt(number, Protocol())
        self.connector.dial(attempt)
        yield attempt.whenFailed
        [failure] = attempt.failures
        self.assertTrue(failure.check(error.ConnectionRefusedError), failure)
        self.assertEqual(attempt.outcome, FAILED)


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

    def test_letsGo(self) -> None:
        """
        Once its connection is gone, the TCP end lets go of the other end
        (the two would otherwise be a reference cycle), after ending it.
        """
        network = Network()
        local, remote = splice_local()
        lost: list[Failure] = []
        local.onLost = lambda reason: lost.append(reason) if local else None
        service, peer = Recorder(), Recorder()
        servicePump = network.join(service, local)
        network.join(peer, remote)
        network.run()
        servicePump.serverIO.loseConnection()
        network.run()
        self.assertIsNone(local.other)
        self.assertIsNone(local.onLost)  # a closure over local, as tcp-connect's
        self.assertEqual(len(lost), 1)
        self.assertIsNotNone(peer.lost)

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
