"""
Tests for L{nfltr.ws.transport}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import DIALER
from nfltr.link.twisted import LinkHandler, LinkProtocol
from nfltr.ws.options import MAX_MESSAGE
from nfltr.ws.transport import MESSAGE_SIZE, LinkOverWebSocket, MessageTransport


class FakeWebSocket:
    STATE_OPEN, STATE_CLOSING = 3, 2

    def __init__(self) -> None:
        self.messages: list[tuple[bytes, bool]] = []
        self.closes: list[tuple[int, str | None]] = []
        self.state = self.STATE_OPEN

    def sendMessage(self, payload: bytes, isBinary: bool = False) -> None:
        self.messages.append((payload, isBinary))

    def sendClose(self, code: int | None = None, reason: str | None = None) -> None:
        self.closes.append((code or 0, reason))


class FakeLink:
    def __init__(self) -> None:
        self.received = b""
        self.lost: Any = None
        self.transport: Any = None

    def makeConnection(self, transport: Any) -> None:
        self.transport = transport

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Any) -> None:
        self.lost = reason


class MessageTransportTests(SynchronousTestCase):
    """
    Link writes become binary messages the peer accepts.
    """

    def test_largeWriteSplit(self) -> None:
        """
        A 3 MiB write (a link may flush that much in one turn) becomes
        binary messages of at most MESSAGE_SIZE, well under the peer's
        MAX_MESSAGE, in order.
        """
        websocket = FakeWebSocket()
        data = bytes(range(256)) * (3 * 4096)
        MessageTransport(websocket).write(data)
        self.assertTrue(all(binary for _, binary in websocket.messages))
        self.assertTrue(all(len(m) <= MESSAGE_SIZE < MAX_MESSAGE for m, _ in websocket.messages))
        self.assertEqual(b"".join(m for m, _ in websocket.messages), data)

    def test_writeWhileClosing(self) -> None:
        """
        Once the closing handshake began, writes are dropped (autobahn would
        raise on them): a link answering a late frame does not fail.
        """
        websocket = FakeWebSocket()
        transport = MessageTransport(websocket)
        websocket.state = websocket.STATE_CLOSING
        transport.write(b"late pong")
        self.assertEqual(websocket.messages, [])

    def test_glue(self) -> None:
        """
        Binary messages reach the link; a text message closes with 1003; a
        clean 1000 close ends the link cleanly, anything else as a loss.
        """
        websocket = FakeWebSocket()
        glue = LinkOverWebSocket(websocket)
        link = FakeLink()
        glue.opened(link)
        glue.message(b"abc", True)
        glue.message(b"text", False)
        self.assertEqual(link.received, b"abc")
        self.assertEqual(websocket.closes, [(1003, "binary messages only")])
        glue.closed(True, 1000, None)
        self.assertTrue(link.lost.check(error.ConnectionDone))
        other = FakeLink()
        glue2 = LinkOverWebSocket(websocket)
        glue2.opened(other)
        glue2.closed(False, 1006, "dropped")
        self.assertTrue(other.lost.check(error.ConnectionLost))
        self.assertFalse(other.lost.check(error.ConnectionDone))


class BackpressureTests(SynchronousTestCase):
    """
    A real link over WebSocket is the producer of the connection under the
    WebSocket, as over a raw connection.
    """

    def test_linkIsTheConnectionsProducer(self) -> None:
        """
        The link registers on the connection below; when that connection is
        full the link holds its DATA; closing the link unregisters it.
        """
        websocket = FakeWebSocket()
        websocket.transport = StringTransport()  # type: ignore[attr-defined]
        link = LinkProtocol(DIALER, LinkHandler(), Clock())
        LinkOverWebSocket(websocket).opened(link)
        below = websocket.transport  # type: ignore[attr-defined]
        self.assertIs(below.producer, link)
        below.producer.pauseProducing()
        self.assertTrue(link.writePaused)
        below.producer.resumeProducing()
        self.assertFalse(link.writePaused)
        link.transport.loseConnection()
        self.assertIsNone(below.producer)
        self.assertEqual(websocket.closes, [(1000, None)])
