# -*- test-case-name: tests.relay.test_sniff -*-
"""
Tell a link connection from anything else by its first bytes.

Behind the relay's TLS, L{SniffingProtocol} reads at most C{len(MAGIC)}
bytes.  If they are the link magic, a protocol from the wrapped factory (a
L{nfltr.link.twisted.LinkProtocol}) takes over the connection and is fed
them; anything else goes to the HTTP factory (the WebSocket endpoint,
L{nfltr.ws.server}) if there is one, and otherwise gets a short HTTP/1.1
C{400} saying what this port speaks, and the connection is closed.  A
connection that does not show its first bytes within the timeout (counted
from the connection's start, so it includes the TLS handshake) is aborted.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import interfaces
from twisted.internet.protocol import Factory
from twisted.logger import Logger

from nfltr.link import MAGIC, classify_prefix
from nfltr.streams import PrefixReader
from nfltr.wire.constants import canned_response

SNIFF_TIMEOUT = 10.0

NOT_A_LINK_BODY = b"this port speaks the nfltr link protocol\n"
NOT_A_LINK_RESPONSE = canned_response(b"400 Bad Request", NOT_A_LINK_BODY)


class SniffingProtocol(PrefixReader):
    """
    Reads a connection's first bytes, then hands the connection over or
    refuses it.

    @ivar _buffer: the bytes read so far (at most C{len(MAGIC)}).
    @ivar _done: the connection was refused or timed out: ignore input.
    """

    log = Logger()

    def __init__(self, factory: SniffingFactory, addr: Any) -> None:
        super().__init__(factory, addr)
        self._buffer = b""
        self._done = False

    def prefixReceived(self, data: bytes) -> None:
        """
        Buffer up to the magic's length, then decide.
        """
        if self._done:
            return
        # Until a verdict, every read was buffered whole: together they are
        # shorter than the magic.
        before = self._buffer
        self._buffer = before + data[: len(MAGIC) - len(before)]
        verdict = classify_prefix(self._buffer)
        if verdict is None:
            return
        self.cancelTimer()
        self._buffer = b""
        if not verdict:
            http = self.factory.httpFactory
            if http is None:
                self._refuse()
            elif not self.handOver(http, before + data):
                self._done = True
        elif not self.handOver(self.factory.wrappedFactory, before + data):
            self._done = True

    def _refuse(self) -> None:
        self._done = True
        self.log.debug("not a link from {peer}: answered 400", peer=self.peer())
        self.transport.write(NOT_A_LINK_RESPONSE)
        self.transport.loseConnection()

    def timedOut(self) -> None:
        """
        No first bytes in time: abort.
        """
        self._done = True
        self.log.debug(
            "no link preamble from {peer} within {timeout}s: aborted",
            peer=self.peer(), timeout=self.factory.timeout,
        )
        self.transport.abortConnection()


class SniffingFactory(Factory):
    """
    Builds L{SniffingProtocol}s that hand link connections to
    C{wrappedFactory}, and anything else to C{httpFactory} (the WebSocket
    endpoint) if there is one, else a 400.

    @ivar clock: schedules the timeout.
    @ivar timeout: seconds a connection has to show its first bytes.
    """

    noisy = False

    def __init__(
        self, wrappedFactory: Any, clock: interfaces.IReactorTime,
        timeout: float = SNIFF_TIMEOUT, httpFactory: Any = None,
    ) -> None:
        self.wrappedFactory = wrappedFactory
        self.clock = clock
        self.timeout = timeout
        self.httpFactory = httpFactory

    def buildProtocol(self, addr: Any) -> SniffingProtocol:
        """
        A sniffer for one connection.
        """
        return SniffingProtocol(self, addr)
