"""
Tests for L{nfltr.tls._e2ee}: real pyOpenSSL on both ends of a link session, the
link pair joined by iosim on a Clock.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error, interfaces
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactor, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from nfltr.agent._local import splice_local
from nfltr.http import HTTPProxyFactory
from nfltr.http.stream import StreamProxyProtocol
from nfltr.link import ErrorCode, FrameType
from nfltr.link._frames import FrameDecoder, decode_open
from nfltr.link.twisted import SessionResetError
from nfltr.netio import IOSettings, TunedReactor
from nfltr.tls import (
    E2EETLSFactory,
    E2EETLSProtocol,
    PinMismatch,
    client_creator,
    ensure_self_signed,
    server_context_factory,
)
from tests.http.test_stream import socketBackend
from tests.http.test_upgrade import SWITCH, UPGRADE
from tests.link.twisted_helpers import LinkPair, RecordingHandler, Streamer
from tests.test_splice import SocketLikeTransport

MiB = 1024 * 1024


@implementer(interfaces.IHalfCloseableProtocol)
class App(Protocol):
    """
    An application over TLS that records what happens to it and can answer
    once its peer half-closed.

    @ivar answer: written, followed by C{loseConnection}, when the read side
        ends.
    """

    def __init__(self, answer: bytes | None = None) -> None:
        self.answer = answer
        self.received = b""
        self.readEnded = False
        self.lost: Failure | None = None

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def readConnectionLost(self) -> None:
        self.readEnded = True
        if self.answer is not None:
            self.transport.write(self.answer)
            self.transport.loseConnection()

    def writeConnectionLost(self) -> None:
        pass

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.lost = reason


class PlainApp(App):
    """
    An application that does not provide C{IHalfCloseableProtocol}.
    """


# Take the interface away again: zope's implementer is inherited.
PlainApp.__implemented__ = interfaces.IProtocol  # type: ignore[attr-defined]
PlainApp.__provides__ = None  # type: ignore[attr-defined]


class TLSOverSession:
    """
    An agent-style TLS server accepting sessions on a link's listener and a
    client opening them on the dialer, over real OpenSSL.
    """

    def __init__(
        self, case: SynchronousTestCase, server: Any, pin: str | None = None,
        alpn: tuple[bytes, ...] = (),
    ) -> None:
        """
        @param alpn: the ALPN protocols the client offers; the server takes
            the first of them (a share's TLS, which prefers C{h2}).
        """
        identity = ensure_self_signed(case.mktemp(), "agent")
        self.fingerprint = identity.fingerprint
        self.server = server
        self.serverTLS: list[E2EETLSProtocol] = []

        def accept(session: Any) -> Any:
            tls = serverFactory.wrap(self.server)
            self.serverTLS.append(tls)
            return tls

        self.pair = LinkPair(listenerHandler=RecordingHandler(accept))
        serverCreator = server_context_factory(identity.cert, identity.key)
        clientCreator = client_creator("agent", pin=pin or identity.fingerprint, role="agent")
        if alpn:
            serverCreator.context.set_alpn_select_callback(lambda conn, offered: offered[0])
            clientCreator.context.set_alpn_protos(list(alpn))
        serverFactory = E2EETLSFactory(serverCreator, False, self.pair.clock)
        self.clientFactory = E2EETLSFactory(clientCreator, True, self.pair.clock)

    def open(self, app: Any, target: str = "tcp:1") -> Any:
        """
        Open a session carrying TLS for C{app}.
        """
        return self.pair.dialer.openSession(target, self.clientFactory.wrap(app))


class HalfCloseTests(SynchronousTestCase):
    """
    C{loseWriteConnection} over TLS: the peer reads to the end and can still
    answer.
    """

    def test_requestThenAnswer(self) -> None:
        """
        A client that writes, half-closes and waits gets the server's answer,
        which the server wrote after it saw the end of the request; both
        ends then close cleanly and the session is gone from both links.
        """
        server = App(answer=b"answer after EOF")
        tls = TLSOverSession(self, server)
        client = App()
        tls.open(client)
        client.transport.write(b"request")
        client.transport.loseWriteConnection()
        tls.pair.run()
        self.assertEqual(server.received, b"request")
        self.assertTrue(server.readEnded)
        self.assertEqual(client.received, b"answer after EOF")
        self.assertTrue(client.readEnded)
        self.assertIsNotNone(client.lost)
        self.assertIsNotNone(server.lost)
        assert client.lost is not None and server.lost is not None
        self.assertTrue(client.lost.check(error.ConnectionDone), client.lost)
        self.assertTrue(server.lost.check(error.ConnectionDone), server.lost)
        self.assertEqual(tls.pair.dialer.connection.session_count, 0)
        self.assertEqual(tls.pair.listener.connection.session_count, 0)

    def test_halfCloseBeforeHandshake(self) -> None:
        """
        A half-close asked for before the handshake finished waits for it;
        the data written before arrives first.
        """
        server = App(answer=b"ok")
        tls = TLSOverSession(self, server)
        client = App()

        class Early(App):
            def connectionMade(self) -> None:
                self.transport.write(b"early")
                self.transport.loseWriteConnection()

        early = Early()
        tls.open(early)
        tls.pair.run()
        self.assertEqual(server.received, b"early")
        self.assertTrue(server.readEnded)
        self.assertEqual(early.received, b"ok")
        del client

    def test_writesAfterHalfCloseDropped(self) -> None:
        """
        What the application writes after C{loseWriteConnection} never
        reaches the peer.
        """
        server = App(answer=b"")
        tls = TLSOverSession(self, server)
        client = App()
        tls.open(client)
        client.transport.write(b"before")
        client.transport.loseWriteConnection()
        client.transport.write(b"after")
        client.transport.writeSequence([b"after", b"too"])
        tls.pair.run()
        self.assertEqual(server.received, b"before")

    def test_bulkBothWays(self) -> None:
        """
        2 MiB each way through TLS over one session, each side streaming as
        a producer and half-closing when done: every byte arrives intact on
        both sides, followed by a clean end of input.
        """
        size = 2 * MiB
        server = Streamer(2, size, 1, size)
        tls = TLSOverSession(self, server)
        client = Streamer(1, size, 2, size)
        tls.open(client)
        tls.pair.run()
        self.assertTrue(client.verified())
        self.assertTrue(server.verified())
        assert client.lost is not None and server.lost is not None
        self.assertTrue(client.lost.check(error.ConnectionDone), client.lost)
        self.assertTrue(server.lost.check(error.ConnectionDone), server.lost)

    def test_notHalfCloseable(self) -> None:
        """
        An application without C{IHalfCloseableProtocol} sees the peer's
        half-close as the end of the connection, as with Twisted's TLS.
        """
        self.assertFalse(interfaces.IHalfCloseableProtocol.providedBy(PlainApp()))
        server = PlainApp()
        tls = TLSOverSession(self, server)
        client = App()
        tls.open(client)
        client.transport.write(b"request")
        client.transport.loseWriteConnection()
        tls.pair.run()
        self.assertEqual(server.received, b"request")
        self.assertFalse(server.readEnded)
        assert server.lost is not None
        self.assertTrue(server.lost.check(error.ConnectionDone), server.lost)

    def test_truncation(self) -> None:
        """
        A session that ends without the peer's C{close_notify} is reported
        as a lost connection, never as a clean end.
        """
        server = App()
        tls = TLSOverSession(self, server)
        client = App()
        tls.open(client)
        tls.pair.run()
        # Half-close the session below the server's TLS: no close_notify.
        tls.serverTLS[0].transport.loseWriteConnection()
        tls.pair.run()
        self.assertFalse(client.readEnded)
        assert client.lost is not None
        self.assertTrue(client.lost.check(error.ConnectionLost), client.lost)


class SplicedToSocketTests(SynchronousTestCase):
    """
    The connector's shape: TLS over a session spliced to a local socket
    (Twisted's own write path, L{SocketLikeTransport}).
    """

    def test_closeNotifyWithLastRecords(self) -> None:
        """
        The agent writes a download and half-closes at once: its records and
        its C{close_notify} reach the connector in one read of the session
        (one event for the run of DATA frames), the records fill the local
        socket, and still, once the socket drained, the visitor gets every
        byte and then the end of the stream.
        """
        size = 256 * 1024

        class Download(App):
            def connectionMade(self) -> None:
                self.transport.write(b"d" * size)
                self.transport.loseWriteConnection()

        tls = TLSOverSession(self, Download())
        local, remote = splice_local()
        sock = SocketLikeTransport(MemoryReactor())
        local.makeConnection(sock)
        tls.open(remote)
        tls.pair.run()
        self.assertTrue(sock.producerPaused)
        sock.drain()
        self.assertEqual(bytes(sock.sent), b"d" * size)
        self.assertTrue(sock.writeClosed)

    def test_upgradedUploadThenCloseNotify(self) -> None:
        """
        An e2ee share's shape (TLS over a session, the stream path inside,
        its service connection over a socket): after a switch, the visitor
        uploads and half-closes at once; its records fill the service's
        socket and its C{close_notify} comes in the same read, and still,
        once the socket drained, the service gets every byte and then the
        end of the stream.  Its answer and its own end then reach the
        visitor, and the session ends cleanly.
        """
        size = 256 * 1024
        backend, sockets = socketBackend()
        proxy = HTTPProxyFactory(backend, Clock()).proxyFor(None)
        assert isinstance(proxy, StreamProxyProtocol)
        tls = TLSOverSession(self, proxy)
        visitor = App()
        tls.open(visitor)
        tls.pair.run()
        visitor.transport.write(UPGRADE)
        tls.pair.run()
        [sock] = sockets
        sock.drain()  # the upgrade request went out
        assert proxy.backend is not None
        proxy.backend.dataReceived(SWITCH)
        tls.pair.run()
        self.assertTrue(visitor.received.startswith(SWITCH))
        del sock.sent[:]
        sock.room = 0
        visitor.transport.write(b"u" * size)
        visitor.transport.loseWriteConnection()
        tls.pair.run()
        self.assertTrue(sock.producerPaused)
        sock.drain()
        self.assertEqual(bytes(sock.sent), b"u" * size)
        self.assertTrue(sock.writeClosed)
        service = proxy.backend
        service.dataReceived(b"answer")
        service.readConnectionLost()
        tls.pair.run()
        self.assertTrue(visitor.received.endswith(b"answer"))
        self.assertTrue(visitor.readEnded)
        assert visitor.lost is not None
        self.assertTrue(visitor.lost.check(error.ConnectionDone), visitor.lost)
        self.assertEqual(tls.pair.listener.connection.session_count, 0)


class TLSOverSocket:
    """
    An agent-style TLS server over a L{SocketLikeTransport} (Twisted's own
    write path below the TLS) and its client over a L{StringTransport}, over
    real OpenSSL: what the socket took reaches the client when the test
    pumps.
    """

    def __init__(self, case: SynchronousTestCase, server: Any, client: Any) -> None:
        identity = ensure_self_signed(case.mktemp(), "agent")
        self.clock = Clock()
        self.reactor = MemoryReactor()
        self.socket = SocketLikeTransport(self.reactor)
        self.socket.room = 1 << 30
        self.serverTLS = E2EETLSFactory(
            server_context_factory(identity.cert, identity.key), False, self.clock
        ).wrap(server)
        self.serverTLS.makeConnection(self.socket)
        self.clientIO = StringTransport()
        self.clientTLS = E2EETLSFactory(
            client_creator("agent", pin=identity.fingerprint, role="agent"), True, self.clock
        ).wrap(client)
        self.clientTLS.makeConnection(self.clientIO)
        self._taken = 0

    def pump(self) -> None:
        """
        Move bytes both ways until nothing moves; the socket writes while
        it has room, as the reactor would.
        """
        while True:
            self.clock.advance(0)
            if self.socket.room and self.socket in self.reactor.getWriters():
                self.socket.doWrite()
            toServer = self.clientIO.value()
            self.clientIO.clear()
            if toServer:
                self.serverTLS.dataReceived(toServer)
            toClient = bytes(self.socket.sent[self._taken:])
            self._taken += len(toClient)
            if toClient:
                self.clientTLS.dataReceived(toClient)
            if not toServer and not toClient:
                return


class OverSocketTests(SynchronousTestCase):
    """
    The agent's TLS over Twisted's own write path (a TCP connection's):
    its half-close is not held back by a producer still registered on it.
    """

    def test_switchedServiceEOFBehindFullSocket(self) -> None:
        """
        The full proxy (C{stream=False}) after a switch: the service answers
        and ends its output at once while the socket under the visitor's TLS
        is full.  Once the socket drained, the visitor has every byte and
        the end of input, and the socket's write side is shut: the service's
        splice end (L{nfltr.http.flow.BackendSpliceEnd}) is no longer the
        producer there, whose resume Twisted's C{doWrite} would call instead
        of shutting it.
        """
        size = 256 * 1024
        backend, sockets = socketBackend()
        proxy = HTTPProxyFactory(backend, Clock(), stream=False).proxyFor(None)
        visitor = App()
        tls = TLSOverSocket(self, proxy, visitor)
        tls.pump()
        visitor.transport.write(UPGRADE)
        tls.pump()
        [sock] = sockets
        sock.drain()  # the upgrade request went out
        service = proxy.backend
        assert service is not None
        service.dataReceived(SWITCH)
        tls.pump()
        switched = visitor.received
        self.assertTrue(switched.startswith(b"HTTP/1.1 101 "), switched)
        tls.socket.room = 0
        service.dataReceived(b"d" * size)
        self.assertTrue(tls.socket.producerPaused)
        service.readConnectionLost()
        tls.socket.drain()
        tls.pump()
        self.assertEqual(visitor.received, switched + b"d" * size)
        self.assertTrue(visitor.readEnded)
        self.assertTrue(tls.socket.writeClosed)


class ReasonTests(SynchronousTestCase):
    """
    The application learns why the session below ended.
    """

    def test_resetCodeKept(self) -> None:
        """
        A session the peer refuses with a code reaches the TLS application
        as that L{SessionResetError}, not as TLS's "unexpected EOF".
        """
        tls = TLSOverSession(self, App())
        tls.pair.listenerHandler.protocolFor = None  # refuse every session
        client = App()
        tls.open(client)
        tls.pair.run()
        assert client.lost is not None
        self.assertTrue(client.lost.check(SessionResetError), client.lost)
        self.assertEqual(client.lost.value.code, ErrorCode.REFUSED)

    def test_resetAfterHandshake(self) -> None:
        """
        A reset after the handshake also reaches the application with its
        code.
        """
        server = App()
        tls = TLSOverSession(self, server)
        client = App()
        tls.open(client)
        tls.pair.run()
        tls.serverTLS[0].transport.abortWith(ErrorCode.CONNECT_FAILED, "service refused")
        tls.pair.run()
        assert client.lost is not None
        self.assertTrue(client.lost.check(SessionResetError), client.lost)
        self.assertEqual(client.lost.value.code, ErrorCode.CONNECT_FAILED)

    def test_pinMismatch(self) -> None:
        """
        A client pinned to another key gets L{PinMismatch}, naming both
        fingerprints, and the server application never sees a byte.
        """
        wrong = "sha256:" + "ab" * 32
        server = App()
        tls = TLSOverSession(self, server, pin=wrong)
        client = App()
        tls.open(client)
        client.transport.write(b"secret")
        tls.pair.run()
        assert client.lost is not None
        self.assertTrue(client.lost.check(PinMismatch), client.lost)
        message = str(client.lost.value)
        self.assertIn(f"does not match --pin {wrong}", message)
        self.assertIn(tls.fingerprint, message)
        self.assertEqual(server.received, b"")

    def test_cleanCloseIsDone(self) -> None:
        """
        A server that closes at once after writing (before the handshake
        is even done): the client reads every byte and then the end of
        input, and once it closes too both ends see a clean close.
        """

        class WriteAndClose(App):
            def connectionMade(self) -> None:
                self.transport.write(b"x" * 100_000)
                self.transport.loseConnection()

        server = WriteAndClose()
        tls = TLSOverSession(self, server)
        client = App(answer=b"")
        tls.open(client)
        tls.pair.run()
        self.assertEqual(len(client.received), 100_000)
        self.assertTrue(client.readEnded)
        assert client.lost is not None and server.lost is not None
        self.assertTrue(client.lost.check(error.ConnectionDone), client.lost)
        self.assertTrue(server.lost.check(error.ConnectionDone), server.lost)


class FirstBytesTests(SynchronousTestCase):
    """
    The ClientHello costs no round trip of its own.
    """

    def test_clientHelloRidesOpen(self) -> None:
        """
        The first frame a client's session sends is an OPEN whose first
        bytes are a TLS handshake record.
        """
        tls = TLSOverSession(self, App())
        tls.open(App(), target="tcp:agent:22")
        tls.pair.clock.advance(0)
        frames = FrameDecoder().feed(b"".join(tls.pair.dialerIO.stream))
        self.assertEqual(frames[0].type, FrameType.OPEN)
        target, first = decode_open(frames[0].payload)
        self.assertEqual(target, b"tcp:agent:22")
        self.assertEqual(first[:1], b"\x16")  # TLS handshake content type
        self.assertGreater(len(first), 100)


class FactoryTests(SynchronousTestCase):
    """
    L{E2EETLSFactory} takes its choices from its reactor's I/O settings.
    """

    def test_reactorSettings(self) -> None:
        """
        Without C{batch}, a L{TunedReactor}'s settings choose batching and
        direct calls; any other clock gives the defaults (both on).
        """
        identity = ensure_self_signed(self.mktemp(), "agent")
        creator = server_context_factory(identity.cert, identity.key)
        default = E2EETLSFactory(creator, False, Clock())
        self.assertEqual((default.batch, default.direct), (True, True))
        chosen = IOSettings(tls_batch=False, tls_direct=False)
        tuned = E2EETLSFactory(creator, False, TunedReactor(Clock(), chosen))
        self.assertEqual((tuned.batch, tuned.direct), (False, False))
        self.assertFalse(E2EETLSFactory(creator, False, Clock(), batch=False).batch)
