"""
Tests for L{nfltr.sni.twisted}: the SNI router protocol on a L{StringTransport} and a L{Clock},
with a chooser and backends of the tests' own.  (Real TLS through the relay's router is tested
in L{tests.relay.test_tls_port}.)
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error, interfaces
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from nfltr.sni import MAX_HELLO_SIZE, MAX_HELLO_WIRE_SIZE, ClientHello, Reason
from nfltr.sni.twisted import (
    HANDSHAKE_TIMEOUT,
    NOT_TLS_RESPONSE,
    REFUSALS,
    REFUSE,
    UNRECOGNIZED_NAME_ALERT,
    HandOver,
    ISpliceBackend,
    Later,
    Route,
    SNIRouter,
    SNIRouterFactory,
    Splice,
)

from .helpers import (
    TRAILING,
    client_hello,
    extension,
    handshake,
    hello_body,
    live_hello,
    records,
)

HTTP_GET = b"GET / HTTP/1.1\r\nHost: relay\r\n\r\n"
HELLO = client_hello(b"relay.localhost")


class Inner(Protocol):
    """
    Records what the protocol that takes a connection over is given.
    """

    def __init__(self) -> None:
        self.received = b""
        self.made = 0
        self.lost: Failure | None = None

    def connectionMade(self) -> None:
        self.made += 1

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lost = reason


@implementer(interfaces.IHalfCloseableProtocol)
class HalfCloseableInner(Inner):
    """
    An inner protocol that takes half-closes.
    """

    def __init__(self) -> None:
        super().__init__()
        self.readLost = 0
        self.writeLost = 0

    def readConnectionLost(self) -> None:
        self.readLost += 1

    def writeConnectionLost(self) -> None:
        self.writeLost += 1


class HalfCloseTransport(StringTransport):
    """
    A string transport that records a half-close.
    """

    writeClosed = False

    def loseWriteConnection(self) -> None:
        self.writeClosed = True


@implementer(ISpliceBackend)
class FakeBackend:
    """
    A share backend: connects each protocol to a new L{HalfCloseTransport} when told to, or
    at once with C{immediate}; can fail instead, or raise.
    """

    def __init__(self, immediate: bool = True) -> None:
        self.immediate = immediate
        self.pending: list[Any] = []
        self.transports: list[HalfCloseTransport] = []
        self.raises: Exception | None = None

    def connect(self, protocol: Any, visitor: Any = None) -> None:
        if self.raises is not None:
            raise self.raises
        self.pending.append(protocol)
        if self.immediate:
            self.connectPending()

    def connectPending(self) -> HalfCloseTransport:
        protocol = self.pending.pop(0)
        transport = HalfCloseTransport()
        self.transports.append(transport)
        protocol.makeConnection(transport)
        return transport

    def failPending(self, reason: Exception) -> None:
        self.pending.pop(0).connectionLost(Failure(reason))


class RouterCase(SynchronousTestCase):
    """
    A router factory whose chooser routes by a dictionary of server names (absent names are
    refused), and connections to it on string transports.
    """

    timeout_: float = HANDSHAKE_TIMEOUT

    def setUp(self) -> None:
        self.clock = Clock()
        self.built: list[Inner] = []
        self.innerClass: type[Inner] = Inner
        self.inner = Factory.forProtocol(self._build)
        self.backend = FakeBackend()
        self.routes: dict[str | None, Route] = {
            "relay.localhost": HandOver(self.inner),
            None: HandOver(self.inner),
            "web.localhost": Splice(self.backend),
        }
        self.hellos: list[ClientHello] = []
        self.factory = SNIRouterFactory(self._choose, self.clock, self.timeout_)

    def _build(self) -> Inner:
        inner = self.innerClass()
        self.built.append(inner)
        return inner

    def _choose(self, hello: ClientHello) -> Route:
        self.hellos.append(hello)
        return self.routes.get(hello.server_name, REFUSE)

    def connect(self, transport: StringTransport | None = None) -> tuple[SNIRouter, Any]:
        """
        A router connected to a new transport.
        """
        transport = transport or HalfCloseTransport()
        router = self.factory.buildProtocol(None)
        router.makeConnection(transport)
        return router, transport

    def feed(self, router: SNIRouter, data: bytes, split: bool = False) -> None:
        if split:
            for i in range(len(data)):
                router.dataReceived(data[i : i + 1])
        else:
            router.dataReceived(data)

    def refused(self) -> dict[str, int]:
        """
        The nonzero refusal counts.
        """
        return {k: v for k, v in self.factory.refused.items() if v}


class HandOverTests(RouterCase):
    """
    A hello routed to L{HandOver}: the factory's protocol takes over with every byte replayed.
    """

    def _checkHandOver(self, split: bool) -> None:
        router, transport = self.connect()
        stream = HELLO + TRAILING
        self.feed(router, stream, split)
        self.assertEqual(len(self.built), 1)
        inner = self.built[0]
        self.assertEqual(inner.made, 1)
        self.assertIs(inner.transport, transport)
        self.assertEqual(inner.received, stream)
        self.assertEqual(transport.value(), b"")
        self.assertFalse(transport.disconnecting)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.factory.routed, {"hand_over": 1, "splice": 0})
        self.assertEqual(self.refused(), {})
        self.assertEqual([h.server_name for h in self.hellos], ["relay.localhost"])

    def test_whole(self) -> None:
        """
        A hello and the bytes after it in one read reach one protocol of the factory, whole
        and unchanged, as its first read on the same transport; nothing is written and the
        timeout is cancelled.
        """
        self._checkHandOver(split=False)

    def test_byteByByte(self) -> None:
        """
        The same stream in one-byte reads is handed over the same way.
        """
        self._checkHandOver(split=True)

    def test_notBeforeLastByte(self) -> None:
        """
        Nothing is chosen, built or written until the hello's last byte has arrived.
        """
        router, transport = self.connect()
        self.feed(router, HELLO[:-1], split=True)
        self.assertEqual((self.hellos, self.built, transport.value()), ([], [], b""))
        router.dataReceived(HELLO[-1:])
        self.assertEqual(self.built[0].received, HELLO)

    def test_noServerName(self) -> None:
        """
        A real hello without a server name (Python C{ssl} dialling an address) reaches the
        chooser with C{server_name} L{None}.
        """
        router, _ = self.connect()
        hello = live_hello(None)
        router.dataReceived(hello)
        self.assertEqual([h.server_name for h in self.hellos], [None])
        self.assertEqual(self.built[0].received, hello)

    def test_laterEvents(self) -> None:
        """
        After the hand-over, later reads and the connection's loss go to the protocol that
        took over.
        """
        router, _ = self.connect()
        router.dataReceived(HELLO)
        router.dataReceived(b"more")
        reason = Failure(error.ConnectionLost())
        router.connectionLost(reason)
        self.assertEqual(self.built[0].received, HELLO + b"more")
        self.assertIs(self.built[0].lost, reason)

    def test_halfCloseForwarded(self) -> None:
        """
        A half-close reaches a protocol that takes half-closes.
        """
        self.innerClass = HalfCloseableInner
        router, transport = self.connect()
        router.dataReceived(HELLO)
        router.readConnectionLost()
        router.writeConnectionLost()
        inner = self.built[0]
        assert isinstance(inner, HalfCloseableInner)
        self.assertEqual((inner.readLost, inner.writeLost), (1, 1))
        self.assertFalse(transport.disconnecting)

    def test_eofClosesOthers(self) -> None:
        """
        For a protocol that does not take half-closes (TLS), the peer's EOF closes the
        connection, as the transport would have without the router.
        """
        router, transport = self.connect()
        router.dataReceived(HELLO)
        router.readConnectionLost()
        self.assertTrue(transport.disconnecting)
        self.assertIsNone(self.built[0].lost)

    def test_noProtocol(self) -> None:
        """
        A factory that builds no protocol gets the connection closed.
        """
        refusing = Factory()
        refusing.buildProtocol = lambda addr: None  # type: ignore[method-assign]
        self.routes["relay.localhost"] = HandOver(refusing)
        router, transport = self.connect()
        router.dataReceived(HELLO)
        self.assertTrue(transport.disconnecting)


class RefuseTests(RouterCase):
    """
    A name nobody answers to gets a fatal C{unrecognized_name} alert.
    """

    def test_alertBytes(self) -> None:
        """
        The alert is one well-formed TLS record: type alert (21), version 3.3, length 2, level
        fatal (2), description unrecognized_name (112).
        """
        self.assertEqual(UNRECOGNIZED_NAME_ALERT, b"\x15\x03\x03\x00\x02\x02\x70")

    def _checkRefused(self, split: bool) -> None:
        router, transport = self.connect()
        self.feed(router, client_hello(b"nobody.example") + TRAILING, split)
        self.assertEqual(transport.value(), UNRECOGNIZED_NAME_ALERT)
        self.assertTrue(transport.disconnecting)
        self.assertFalse(transport.disconnected)
        self.assertEqual(self.built, [])
        self.assertEqual(self.refused(), {"unrecognized_name": 1})
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_unknownName(self) -> None:
        """
        Exactly the alert is written, then the connection is closed (not aborted).
        """
        self._checkRefused(split=False)

    def test_unknownNameByteByByte(self) -> None:
        """
        The same hello in one-byte reads gets the same single alert.
        """
        self._checkRefused(split=True)

    def test_laterBytesIgnored(self) -> None:
        """
        Bytes after the refusal are neither answered nor passed on.
        """
        router, transport = self.connect()
        router.dataReceived(client_hello(b"nobody.example"))
        router.dataReceived(HELLO)
        self.assertEqual(transport.value(), UNRECOGNIZED_NAME_ALERT)
        self.assertEqual((self.built, len(self.hellos)), ([], 1))


class InvalidTests(RouterCase):
    """
    First bytes that are no usable ClientHello close the connection, counted by reason.
    """

    def test_counters(self) -> None:
        """
        The refusal counters hold every reason of the closed set from 0: the parser's reasons,
        C{timeout} and C{unrecognized_name}.
        """
        self.assertEqual(set(self.factory.refused), {r.value for r in Reason} | {
            "timeout", "unrecognized_name"})
        self.assertEqual(tuple(self.factory.refused), REFUSALS)
        self.assertEqual(set(self.factory.refused.values()), {0})

    def _checkHTTP(self, split: bool) -> None:
        router, transport = self.connect()
        self.feed(router, HTTP_GET, split)
        self.assertEqual(transport.value(), NOT_TLS_RESPONSE)
        self.assertTrue(transport.disconnecting)
        self.assertEqual(self.refused(), {"not_tls": 1})
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.hellos, [])

    def test_plainHTTP(self) -> None:
        """
        A plain HTTP request gets the 400 response once, and the connection is closed.
        """
        self._checkHTTP(split=False)

    def test_plainHTTPByteByByte(self) -> None:
        """
        The same request in one-byte reads gets the same single response.
        """
        self._checkHTTP(split=True)

    def test_response(self) -> None:
        """
        The response is a complete HTTP/1.1 400 whose body says the port speaks TLS, with a
        matching length.
        """
        head, _, body = NOT_TLS_RESPONSE.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 400 Bad Request\r\n"))
        self.assertIn(b"Content-Length: %d" % len(body), head)
        self.assertIn(b"Connection: close", head)
        self.assertIn(b"this port speaks TLS", body)

    def test_oversizeHello(self) -> None:
        """
        A hello that declares more than the parser's limit, in well-formed records, is refused
        from its handshake header: closed without a word, counted as C{hello_too_large},
        before the rest of it arrives.
        """
        padding = extension(21, bytes(MAX_HELLO_SIZE))
        stream = records(handshake(hello_body([padding])), sizes=[1000] * 40)
        router, transport = self.connect()
        router.dataReceived(stream[:1005])
        self.assertEqual(transport.value(), b"")
        self.assertTrue(transport.disconnecting)
        self.assertEqual(self.refused(), {"hello_too_large": 1})
        router.dataReceived(stream[1005:])
        self.assertEqual((self.hellos, self.built), ([], []))

    def test_oversizeRecord(self) -> None:
        """
        A record header declaring more than 2^14 bytes is refused from its 5 bytes.
        """
        router, transport = self.connect()
        router.dataReceived(b"\x16\x03\x01\x40\x01")
        self.assertTrue(transport.disconnecting)
        self.assertEqual(self.refused(), {"record_too_large": 1})

    def test_boundedWhileWaiting(self) -> None:
        """
        While a hello is incomplete the connection holds at most what the parser allows: the
        largest hello in the most records the parser accepts still routes, and one byte more
        of records is refused.
        """
        body = hello_body([extension(21, bytes(MAX_HELLO_SIZE - 4 - len(hello_body([])) - 4))])
        message = handshake(body)
        self.assertEqual(len(message), MAX_HELLO_SIZE)
        size = -(-len(message) // 32)
        stream = records(message, sizes=[size] * 31)
        self.assertLessEqual(len(stream), MAX_HELLO_WIRE_SIZE)
        router, transport = self.connect()
        router.dataReceived(stream[:-1])
        self.assertEqual((self.built, transport.disconnecting), ([], False))
        router.dataReceived(stream[-1:])
        self.assertEqual(self.built[0].received, stream)
        router, transport = self.connect()
        router.dataReceived(records(message, sizes=[size // 2] * 64))
        self.assertTrue(transport.disconnecting)
        self.assertEqual(self.refused(), {"too_fragmented": 1})

    def test_truncated(self) -> None:
        """
        A connection lost, or half-closed by the peer, before its hello was complete is
        counted as C{truncated}, and its timeout cancelled.
        """
        router, _ = self.connect()
        router.dataReceived(HELLO[:10])
        router.connectionLost(Failure(error.ConnectionDone()))
        self.assertEqual(self.refused(), {"truncated": 1})
        router, transport = self.connect()
        router.readConnectionLost()
        self.assertTrue(transport.disconnecting)
        router.connectionLost(Failure(error.ConnectionDone()))
        self.assertEqual(self.refused(), {"truncated": 2})
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_refusedThenLost(self) -> None:
        """
        A refused connection is counted once, not again when it is lost.
        """
        router, _ = self.connect()
        router.dataReceived(HTTP_GET)
        router.connectionLost(Failure(error.ConnectionDone()))
        self.assertEqual(self.refused(), {"not_tls": 1})


class TimeoutTests(RouterCase):
    """
    A connection has the factory's timeout to send its whole hello.
    """

    timeout_ = 7.5

    def test_exact(self) -> None:
        """
        A connection whose hello is incomplete is closed after exactly the timeout, and not a
        moment earlier; it is counted, and later bytes are ignored.
        """
        router, transport = self.connect()
        router.dataReceived(HELLO[:20])
        self.clock.advance(7.5 - 0.001)
        self.assertFalse(transport.disconnecting)
        self.clock.advance(0.001)
        self.assertTrue(transport.disconnecting)
        self.assertEqual(transport.value(), b"")
        self.assertEqual(self.refused(), {"timeout": 1})
        router.dataReceived(HELLO[20:])
        router.connectionLost(Failure(error.ConnectionLost()))
        self.assertEqual((self.hellos, self.built), ([], []))
        self.assertEqual(self.refused(), {"timeout": 1})

    def test_default(self) -> None:
        """
        The default timeout is 10 s.
        """
        self.assertEqual(HANDSHAKE_TIMEOUT, 10.0)
        factory = SNIRouterFactory(self._choose, self.clock)
        self.assertEqual(factory.timeout, 10.0)
        router = factory.buildProtocol(None)
        transport = StringTransport()
        router.makeConnection(transport)
        self.clock.advance(9.999)
        self.assertFalse(transport.disconnecting)
        self.clock.advance(0.001)
        self.assertTrue(transport.disconnecting)

    def test_cancelledOnceRouted(self) -> None:
        """
        Once the hello is routed, the timeout no longer applies to the connection.
        """
        router, transport = self.connect()
        router.dataReceived(HELLO)
        self.clock.advance(60)
        self.assertFalse(transport.disconnecting)
        self.assertEqual(self.refused(), {})

    def test_silentClientDelaysNoOther(self) -> None:
        """
        While one client sits silent after part of its hello, another connecting after it is
        routed as soon as its hello is in, without the clock moving; the silent one is then
        cut alone when its time is up.
        """
        silent, silentTransport = self.connect()
        silent.dataReceived(HELLO[:3])
        self.clock.advance(1)
        quick, quickTransport = self.connect()
        quick.dataReceived(HELLO)
        self.assertEqual(len(self.built), 1)
        self.assertIs(self.built[0].transport, quickTransport)
        self.clock.advance(6.5)
        self.assertTrue(silentTransport.disconnecting)
        self.assertFalse(quickTransport.disconnecting)
        self.assertIsNone(self.built[0].lost)


class SpliceTests(RouterCase):
    """
    A hello routed to L{Splice}: the backend gets the raw bytes, hello first, and data flows
    both ways with backpressure.
    """

    def _checkSplice(self, split: bool) -> None:
        router, visitor = self.connect()
        stream = client_hello(b"web.localhost") + TRAILING
        self.feed(router, stream, split)
        [backend] = self.backend.transports
        self.assertEqual(backend.value(), stream)
        router.dataReceived(b"after")
        self.assertEqual(backend.value(), stream + b"after")
        self.assertIsNotNone(backend.producer)
        self.assertIsNotNone(visitor.producer)
        self.assertTrue(visitor.streaming and backend.streaming)
        self.assertEqual(self.factory.routed, {"hand_over": 0, "splice": 1})
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_whole(self) -> None:
        """
        The backend receives exactly the bytes the client sent, hello and the bytes after it,
        in order; later bytes follow; each transport is the other's streaming producer.
        """
        self._checkSplice(split=False)

    def test_byteByByte(self) -> None:
        """
        The same stream in one-byte reads reaches the backend the same.
        """
        self._checkSplice(split=True)

    def test_dataFlowsBack(self) -> None:
        """
        What the backend sends reaches the visitor, and backpressure on either side pauses
        the other.
        """
        router, visitor = self.connect()
        router.dataReceived(client_hello(b"web.localhost"))
        [backend] = self.backend.transports
        router.inner.other.dataReceived(b"answer")
        self.assertEqual(visitor.value(), b"answer")
        backend.producer.pauseProducing()
        self.assertEqual(visitor.producerState, "paused")
        backend.producer.resumeProducing()
        visitor.producer.pauseProducing()
        self.assertEqual(backend.producerState, "paused")
        visitor.producer.resumeProducing()
        self.assertEqual(
            (visitor.producerState, backend.producerState), ("producing", "producing")
        )

    def test_backendLater(self) -> None:
        """
        Until the backend is connected the visitor is not read from; then the replay reaches
        the backend first and reading resumes.
        """
        self.backend.immediate = False
        router, visitor = self.connect()
        router.dataReceived(client_hello(b"web.localhost"))
        self.assertEqual(visitor.producerState, "paused")
        backend = self.backend.connectPending()
        self.assertEqual(backend.value(), client_hello(b"web.localhost"))
        self.assertEqual(visitor.producerState, "producing")

    def test_halfClose(self) -> None:
        """
        The visitor's EOF half-closes the backend's side; the visitor can still receive.
        """
        router, visitor = self.connect()
        router.dataReceived(client_hello(b"web.localhost"))
        router.readConnectionLost()
        [backend] = self.backend.transports
        self.assertTrue(backend.writeClosed)
        self.assertFalse(visitor.disconnecting)
        router.inner.other.dataReceived(b"late answer")
        self.assertEqual(visitor.value(), b"late answer")

    def test_backendUnreachable(self) -> None:
        """
        A backend that cannot be reached aborts the visitor's connection.
        """
        self.backend.immediate = False
        router, visitor = self.connect()
        router.dataReceived(client_hello(b"web.localhost"))
        self.backend.failPending(error.ConnectionRefusedError())
        self.assertTrue(visitor.disconnected)

    def test_visitorLeftFirst(self) -> None:
        """
        A visitor gone before the backend connected gets the backend's connection aborted as
        soon as it is made, with nothing written to it.
        """
        self.backend.immediate = False
        router, _ = self.connect()
        router.dataReceived(client_hello(b"web.localhost"))
        router.connectionLost(Failure(error.ConnectionLost()))
        backend = self.backend.connectPending()
        self.assertTrue(backend.disconnected)
        self.assertEqual(backend.value(), b"")

    def test_backendRaises(self) -> None:
        """
        A backend that raises (breaking its contract) costs that visitor only: its
        connection is aborted and the error logged.
        """
        self.backend.raises = RuntimeError("broken backend")
        router, visitor = self.connect()
        router.dataReceived(client_hello(b"web.localhost"))
        self.assertTrue(visitor.disconnected)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        other, otherTransport = self.connect()
        other.dataReceived(HELLO)
        self.assertEqual(self.built[0].transport, otherTransport)


class LaterTests(RouterCase):
    """
    A hello routed to L{Later}: the route it fires with is followed then; the connection is
    not read meanwhile.
    """

    def later(self) -> Deferred[Any]:
        decision: Deferred[Any] = Deferred()
        self.routes["relay.localhost"] = Later(decision)
        return decision

    def test_handOver(self) -> None:
        """
        Nothing is built, written or counted until the route fires, and the visitor is not
        read from; then the route's protocol takes over with every byte replayed, and reading
        resumes.
        """
        decision = self.later()
        router, transport = self.connect()
        router.dataReceived(HELLO + TRAILING)
        self.assertEqual((self.built, transport.value(), transport.producerState),
                         ([], b"", "paused"))
        self.assertEqual(self.factory.routed, {"hand_over": 0, "splice": 0})
        self.assertEqual(self.clock.getDelayedCalls(), [])
        decision.callback(HandOver(self.inner))
        self.assertEqual(self.built[0].received, HELLO + TRAILING)
        self.assertEqual(transport.producerState, "producing")
        self.assertEqual(self.factory.routed, {"hand_over": 1, "splice": 0})

    def test_spliceAndRefuse(self) -> None:
        """
        A later splice gets the replay to the backend; a later refusal the alert.
        """
        decision = self.later()
        router, _ = self.connect()
        router.dataReceived(HELLO)
        decision.callback(Splice(self.backend))
        [backend] = self.backend.transports
        self.assertEqual(backend.value(), HELLO)
        decision = self.later()
        router, transport = self.connect()
        router.dataReceived(HELLO)
        decision.callback(REFUSE)
        self.assertEqual(transport.value(), UNRECOGNIZED_NAME_ALERT)
        self.assertTrue(transport.disconnecting)

    def test_visitorLeft(self) -> None:
        """
        A visitor gone before the route fired is left alone: nothing is built.
        """
        decision = self.later()
        router, transport = self.connect()
        router.dataReceived(HELLO)
        router.connectionLost(Failure(error.ConnectionLost()))
        decision.callback(HandOver(self.inner))
        self.assertEqual((self.built, transport.value()), ([], b""))

    def test_failed(self) -> None:
        """
        A route that fails (breaking its contract) costs that visitor only: its connection
        is aborted and the error logged.
        """
        decision = self.later()
        router, transport = self.connect()
        router.dataReceived(HELLO)
        decision.errback(RuntimeError("broken chooser"))
        self.assertTrue(transport.disconnected)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
