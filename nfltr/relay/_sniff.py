# -*- test-case-name: tests.relay.test_sniff -*-
"""
Tell a link connection from anything else by its first bytes.

Behind the relay's TLS, L{SniffingProtocol} reads at most C{len(MAGIC)}
bytes.  If they are the link magic, a protocol from the wrapped factory (a
L{nfltr.link.twisted.LinkProtocol}) takes over the connection and is fed
them; anything else gets a short HTTP/1.1 C{400} saying what this port
speaks, and the connection is closed.  A connection that does not show its
first bytes within the timeout (counted from the connection's start, so it
includes the TLS handshake) is aborted.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error, interfaces
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.link import MAGIC, classify_prefix

SNIFF_TIMEOUT = 10.0

NOT_A_LINK_BODY = b"this port speaks the nfltr link protocol\n"
NOT_A_LINK_RESPONSE = (
    b"HTTP/1.1 400 Bad Request\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: " + str(len(NOT_A_LINK_BODY)).encode("ascii") + b"\r\n"
    b"Connection: close\r\n"
    b"\r\n" + NOT_A_LINK_BODY
)


class SniffingProtocol(Protocol):
    """
    Reads a connection's first bytes, then hands the connection over or
    refuses it.

    @ivar inner: the protocol that took over, once the magic was seen;
        every later event goes to it.
    @ivar _buffer: the bytes read so far (at most C{len(MAGIC)}).
    @ivar _timer: the pending timeout, until the first bytes are told.
    @ivar _done: the connection was refused or timed out: ignore input.
    """

    # Set by makeConnection; stream transports with the whole ITCPTransport
    # surface (pause/resume, half-close, abort) in practice.
    transport: Any

    log = Logger()

    def __init__(self, factory: SniffingFactory, addr: Any) -> None:
        self.factory = factory
        self.addr = addr
        self.inner: Any = None
        self._buffer = b""
        self._timer: interfaces.IDelayedCall | None = None
        self._done = False

    def connectionMade(self) -> None:
        """
        Start the timeout.
        """
        self._timer = self.factory.clock.callLater(self.factory.timeout, self._timedOut)

    def dataReceived(self, data: bytes) -> None:
        """
        Buffer up to the magic's length, then decide.
        """
        if self.inner is not None:
            self.inner.dataReceived(data)
            return
        if self._done:
            return
        # Until a verdict, every read was buffered whole: together they are
        # shorter than the magic.
        before = self._buffer
        self._buffer = before + data[: len(MAGIC) - len(before)]
        verdict = classify_prefix(self._buffer)
        if verdict is None:
            return
        self._cancelTimer()
        self._buffer = b""
        if verdict:
            self._handOver(before + data)
        else:
            self._refuse()

    def _handOver(self, received: bytes) -> None:
        inner = self.factory.wrappedFactory.buildProtocol(self.addr)
        if inner is None:
            self._done = True
            self.transport.loseConnection()
            return
        self.inner = inner
        inner.makeConnection(self.transport)
        inner.dataReceived(received)

    def _refuse(self) -> None:
        self._done = True
        self.log.debug("not a link from {peer}: answered 400", peer=self._peer())
        self.transport.write(NOT_A_LINK_RESPONSE)
        self.transport.loseConnection()

    def _timedOut(self) -> None:
        self._timer = None
        self._done = True
        self.log.debug(
            "no link preamble from {peer} within {timeout}s: aborted",
            peer=self._peer(), timeout=self.factory.timeout,
        )
        self.transport.abortConnection()

    def _cancelTimer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _peer(self) -> str:
        return str(self.transport.getPeer()) if self.transport is not None else "?"

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        Pass the loss on to the protocol that took over, if any.
        """
        self._cancelTimer()
        if self.inner is not None:
            self.inner.connectionLost(reason)


class SniffingFactory(Factory):
    """
    Builds L{SniffingProtocol}s that hand link connections to
    C{wrappedFactory}.

    @ivar clock: schedules the timeout.
    @ivar timeout: seconds a connection has to show its first bytes.
    """

    noisy = False

    def __init__(
        self, wrappedFactory: Any, clock: interfaces.IReactorTime,
        timeout: float = SNIFF_TIMEOUT,
    ) -> None:
        self.wrappedFactory = wrappedFactory
        self.clock = clock
        self.timeout = timeout

    def buildProtocol(self, addr: Any) -> SniffingProtocol:
        """
        A sniffer for one connection.
        """
        return SniffingProtocol(self, addr)
