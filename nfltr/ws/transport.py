# -*- test-case-name: tests.ws.test_transport -*-
"""
A link over a WebSocket connection.

L{MessageTransport} is the transport a L{nfltr.link.twisted.LinkProtocol}
writes to when it runs over WebSocket: each write becomes binary messages
of at most L{MESSAGE_SIZE} bytes (a link writes once per reactor turn), and
each binary message received is fed to the link as bytes.  Flow control is
the TCP connection's under the WebSocket: pausing the transport pauses the
socket it reads from.  A text message is a protocol violation: the
connection is closed with 1003 (unsupported data).

L{LinkOverWebSocket} holds the glue both sides share: it starts the link
once the WebSocket is open, feeds it messages, and ends it when the
WebSocket closes (cleanly after a clean close, as a loss otherwise).
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error, interfaces
from twisted.python.failure import Failure
from zope.interface import implementer

from .options import MAX_MESSAGE

#: The largest message a link write becomes (well under the peer's limit).
MESSAGE_SIZE = MAX_MESSAGE // 4

#: RFC 6455 close codes nfltr uses.
NORMAL, UNSUPPORTED_DATA, POLICY_VIOLATION = 1000, 1003, 1008


@implementer(interfaces.ITransport, interfaces.IConsumer, interfaces.IPushProducer)
class MessageTransport:
    """
    Writes as binary WebSocket messages of C{websocket} (an autobahn
    protocol).
    """

    disconnecting = False

    def __init__(self, websocket: Any) -> None:
        self.websocket = websocket
        self.connected = True

    @property
    def _tcp(self) -> Any:
        return self.websocket.transport

    def write(self, data: bytes) -> None:
        """
        Binary messages of at most L{MESSAGE_SIZE} bytes (a link may write
        several MiB in one turn; the peer takes messages of at most
        L{MAX_MESSAGE}).
        """
        # Once the closing handshake has begun autobahn refuses to send (and
        # raises): a link may still answer what arrives meanwhile, dropped.
        websocket = self.websocket
        if not self.connected or websocket.state != websocket.STATE_OPEN:
            return
        view = memoryview(data)
        for start in range(0, len(view), MESSAGE_SIZE):
            websocket.sendMessage(bytes(view[start:start + MESSAGE_SIZE]), isBinary=True)

    def writeSequence(self, data: Any) -> None:
        """
        One binary message of the pieces joined.
        """
        self.write(b"".join(data))

    def loseConnection(self) -> None:
        """
        Close the WebSocket normally (after what was written).
        """
        if self.connected and not self.disconnecting:
            self.disconnecting = True
            self.websocket.sendClose(NORMAL)

    def abortConnection(self) -> None:
        """
        Drop the connection at once.
        """
        self.disconnecting = True
        self.websocket.dropConnection(abort=True)

    def getPeer(self) -> Any:
        """
        The peer's address (of the connection under the WebSocket).
        """
        return self._tcp.getPeer()

    def getHost(self) -> Any:
        """
        Our address.
        """
        return self._tcp.getHost()

    def setTcpNoDelay(self, enabled: bool) -> None:
        """
        Passed to the connection underneath when it has it.
        """
        setter = getattr(self._tcp, "setTcpNoDelay", None)
        if setter is not None:
            setter(enabled)

    # Producer and consumer: the TCP (or TLS) connection's.

    def pauseProducing(self) -> None:
        """
        Stop reading from the peer.
        """
        self._tcp.pauseProducing()

    def resumeProducing(self) -> None:
        """
        Read from the peer again.
        """
        self._tcp.resumeProducing()

    def stopProducing(self) -> None:
        """
        Drop the connection.
        """
        self.abortConnection()

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        """
        A producer writing to the link: paused when the connection's buffer
        is full.
        """
        self._tcp.registerProducer(producer, streaming)

    def unregisterProducer(self) -> None:
        """
        No producer any more.
        """
        self._tcp.unregisterProducer()


class LinkOverWebSocket:
    """
    A link protocol bound to one WebSocket connection.

    @ivar link: the link protocol, once the WebSocket is open.
    """

    def __init__(self, websocket: Any) -> None:
        self.websocket = websocket
        self.link: Any = None
        self.transport: MessageTransport | None = None

    def opened(self, link: Any) -> None:
        """
        The WebSocket is open: connect C{link} to it.
        """
        self.link = link
        self.transport = MessageTransport(self.websocket)
        link.makeConnection(self.transport)

    def message(self, payload: bytes, isBinary: bool) -> None:
        """
        A message arrived: a binary one is link bytes.
        """
        if not isBinary:
            self.websocket.sendClose(UNSUPPORTED_DATA, "binary messages only")
            return
        if self.link is not None:
            self.link.dataReceived(payload)

    def closed(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        """
        The WebSocket is closed: so is the link.
        """
        if self.transport is not None:
            self.transport.connected = False
        link, self.link = self.link, None
        if link is None:
            return
        if wasClean and code == NORMAL:
            link.connectionLost(Failure(error.ConnectionDone()))
        else:
            link.connectionLost(Failure(error.ConnectionLost(
                f"WebSocket closed: {code} {reason or ''}".strip()
            )))
