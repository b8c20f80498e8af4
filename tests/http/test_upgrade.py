"""
Tests for upgrades through L{nfltr.http.proxy}: a C{101} from the backend
turns the two connections into a raw splice, both ways.
"""

from __future__ import annotations

from twisted.internet import error
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.streams import SpliceEnd

from .helpers import Harness, parseResponses, request

UPGRADE = request(headers=b"Connection: Upgrade\r\nUpgrade: websocket\r\n")
SWITCH = (
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: abc\r\n\r\n"
)


class UpgradeServer(Protocol):
    """
    A backend that accepts an upgrade with C{101} and a greeting in the
    same write, then echoes raw bytes with a prefix.

    @ivar head: the request head it got.
    @ivar raw: the raw bytes after the head.
    """

    def __init__(self, answer: bytes = SWITCH + b"hello from backend") -> None:
        self.answer = answer
        self.buffer = b""
        self.head: bytes | None = None
        self.raw = b""
        self.lost: Failure | None = None

    def dataReceived(self, data: bytes) -> None:
        if self.head is not None:
            self.raw += data
            self.transport.write(b"echo:" + data)
            return
        self.buffer += data
        if b"\r\n\r\n" in self.buffer:
            self.head, _, rest = self.buffer.partition(b"\r\n\r\n")
            self.transport.write(self.answer)
            if rest:
                self.dataReceived(rest)

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        self.lost = reason


class UpgradeTests(SynchronousTestCase):
    """
    Upgrades: the C{101} goes through, then raw bytes both ways.
    """

    def upgraded(self) -> tuple[Harness, object, object, UpgradeServer]:
        """
        A visitor upgraded through the proxy; it sent bytes right after its
        request, in the same write.
        """
        h = Harness(serve=UpgradeServer, pool=True)
        visitor, proxy = h.visit(UPGRADE + b"early bytes")
        return h, visitor, proxy, h.backend.servers[0]

    def test_switch(self) -> None:
        """
        The upgrade request reaches the backend with its C{Upgrade} and
        C{Connection: upgrade}; the C{101} reaches the visitor with them,
        followed by what the backend sent in the same write; what the
        visitor sent after its request reaches the backend.
        """
        _, visitor, _, server = self.upgraded()
        assert server.head is not None
        head = server.head.lower()
        self.assertIn(b"\r\nupgrade: websocket", head)
        self.assertIn(b"\r\nconnection: upgrade", head)
        self.assertIn(b"\r\nx-forwarded-for: 203.0.113.5", head)
        self.assertEqual(server.raw, b"early bytes")
        received = bytes(visitor.received)  # type: ignore[attr-defined]
        head, _, rest = received.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n"))
        self.assertIn(b"\r\nUpgrade: websocket", head)
        self.assertIn(b"\r\nConnection: upgrade", head)
        self.assertIn(b"\r\nSec-WebSocket-Accept: abc", head)
        self.assertEqual(rest, b"hello from backendecho:early bytes")

    def test_rawBothWays(self) -> None:
        """
        After the switch, bytes pass unchanged both ways (what looks like
        HTTP too), and the pool never gets the connection.
        """
        h, visitor, proxy, server = self.upgraded()
        before = len(visitor.received)  # type: ignore[attr-defined]
        h.send(visitor, b"GET / HTTP/1.1\r\n\r\n")  # type: ignore[arg-type]
        self.assertEqual(server.raw, b"early bytesGET / HTTP/1.1\r\n\r\n")
        self.assertEqual(
            bytes(visitor.received)[before:], b"echo:GET / HTTP/1.1\r\n\r\n"  # type: ignore[attr-defined]
        )
        self.assertIsInstance(proxy.raw, SpliceEnd)  # type: ignore[attr-defined]
        assert h.pool is not None
        self.assertEqual(h.pool.idle, [])

    def test_noIdleTimeout(self) -> None:
        """
        An upgraded connection is not cut by the idle timeout.
        """
        h, visitor, _, _ = self.upgraded()
        h.network.advance(600)
        self.assertIsNone(visitor.lost)  # type: ignore[attr-defined]

    def test_spliceFlowControl(self) -> None:
        """
        After the switch each transport is the other's producer.
        """
        _, _, proxy, server = self.upgraded()
        visitorTransport = proxy.transport  # type: ignore[attr-defined]
        backendTransport = server.transport.peer
        backendTransport.producer.pauseProducing()
        self.assertEqual(visitorTransport.producerState, "paused")
        backendTransport.producer.resumeProducing()
        visitorTransport.producer.pauseProducing()
        self.assertEqual(backendTransport.producerState, "paused")

    def test_closes(self) -> None:
        """
        A visitor's close closes the backend connection, and the other way.
        """
        h, visitor, _, server = self.upgraded()
        visitor.transport.loseConnection()  # type: ignore[attr-defined]
        h.network.run()
        self.assertIsNotNone(server.lost)
        h, visitor, _, server = self.upgraded()
        server.transport.loseConnection()
        h.network.run()
        self.assertTrue(visitor.cleanlyClosed)  # type: ignore[attr-defined]

    def test_backendHalfClose(self) -> None:
        """
        A backend's half-close reaches the visitor as an end of input, after
        the bytes before it.
        """
        h, visitor, _, server = self.upgraded()
        server.transport.write(b"last")
        server.transport.loseWriteConnection()
        h.network.run()
        self.assertTrue(bytes(visitor.received).endswith(b"last"))  # type: ignore[attr-defined]
        self.assertTrue(visitor.eof)  # type: ignore[attr-defined]

    def test_refused(self) -> None:
        """
        A backend that answers an upgrade request with a plain response:
        it goes to the visitor as one, and the connection carries on.
        """
        answer = b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 4\r\n\r\nnope"
        h = Harness(serve=lambda: UpgradeServer(answer))
        visitor, proxy = h.visit(UPGRADE)
        [(response, body, _)] = parseResponses(bytes(visitor.received), closed=False)
        self.assertEqual((response.status_code, body), (426, b"nope"))
        self.assertIsNone(visitor.lost)
        self.assertIsNone(proxy.raw)

    def test_upgradeWithoutConnectionHeader(self) -> None:
        """
        An C{Upgrade} header without C{Connection: upgrade} is no upgrade:
        it is not forwarded.
        """
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        h = Harness(serve=lambda: UpgradeServer(answer))
        visitor, _ = h.visit(request(headers=b"Upgrade: websocket\r\n"))
        server = h.backend.servers[0]
        self.assertNotIn(b"upgrade", server.head.lower())
        self.assertEqual(parseResponses(bytes(visitor.received), closed=False)[0][1], b"ok")
