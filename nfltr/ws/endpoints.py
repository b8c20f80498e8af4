# -*- test-case-name: tests.ws.test_endpoints -*-
"""
How agents and connectors reach the relay when the network is in the way:

  - L{ConnectProxyEndpoint}: through an HTTP proxy (C{--proxy
    http://HOST:PORT}, or C{HTTPS_PROXY}), with C{CONNECT RELAY:PORT}; the
    relay's TLS then runs inside the tunnel, end to end;
  - L{AutoEndpoint} (C{--transport auto}, the default): the raw link first;
    when an attempt fails before its link is established, the next attempt
    uses the WebSocket transport, and so on back and forth, staying with
    whichever works.  A refused connection does not switch: nobody listens
    (the relay is down), which says nothing about middleboxes, and both
    transports reach the same port; nor does a cancelled attempt.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, error
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from zope.interface import implementer

#: The longest proxy answer head read before giving up.
MAX_PROXY_HEAD = 16 * 1024


class _ConnectProtocol(Protocol):
    """
    Sends C{CONNECT}, reads the proxy's answer, then hands the connection to
    the real protocol (fed whatever followed the answer).
    """

    transport: Any

    def __init__(self, target: str, wrapped: Any, ready: defer.Deferred[Any]) -> None:
        self.target = target
        self.wrapped = wrapped
        self.ready = ready
        self.buffer = b""
        self.inner: Any = None

    def connectionMade(self) -> None:
        self.transport.write(
            f"CONNECT {self.target} HTTP/1.1\r\nHost: {self.target}\r\n\r\n".encode("ascii")
        )

    def dataReceived(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.dataReceived(data)
            return
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > MAX_PROXY_HEAD:
                self._fail("the proxy's answer is too long")
            return
        status = self.buffer.split(b"\r\n", 1)[0].split(b" ")
        rest, self.buffer = self.buffer[end + 4:], b""
        if len(status) < 2 or status[1] != b"200":  # noqa: PLR2004
            line = b" ".join(status).decode("latin-1")
            self._fail(f"the proxy refused CONNECT {self.target}: {line}")
            return
        self.inner = self.wrapped.buildProtocol(self.transport.getPeer())
        self.transport.protocol = self.inner
        self.inner.makeConnection(self.transport)
        self.ready.callback(self.inner)
        if rest:
            self.inner.dataReceived(rest)

    def _fail(self, why: str) -> None:
        if not self.ready.called:
            self.ready.errback(error.ConnectError(why))
        self.transport.loseConnection()

    def connectionLost(self, reason: Any = None) -> None:
        if self.inner is not None:
            self.inner.connectionLost(reason)
        elif not self.ready.called:
            self.ready.errback(error.ConnectError("the proxy closed the connection"))


@implementer(IStreamClientEndpoint)
class ConnectProxyEndpoint:
    """
    Connections to C{host:port} through an HTTP proxy's C{CONNECT}.
    """

    def __init__(self, proxy: IStreamClientEndpoint, host: str, port: int) -> None:
        self.proxy = proxy
        self.target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def connect(self, factory: Any) -> defer.Deferred[Any]:
        """
        Connect to the proxy, ask for the target, then run C{factory}'s
        protocol over the tunnel.
        """
        ready: defer.Deferred[Any] = defer.Deferred()
        target, wrapped = self.target, factory

        class _Factory(Factory):
            noisy = False

            def buildProtocol(self, addr: Any) -> _ConnectProtocol:
                return _ConnectProtocol(target, wrapped, ready)

        def failed(failure: Any) -> None:
            if not ready.called:
                ready.errback(failure)

        self.proxy.connect(_Factory()).addErrback(failed)
        return ready


@implementer(IStreamClientEndpoint)
class AutoEndpoint:
    """
    The raw link, or the WebSocket transport when the raw link does not get
    through (see the module).

    @ivar current: the index in C{endpoints} of the one to try next.
    """

    log = Logger()

    def __init__(self, link: Any, websocket: Any) -> None:
        self.endpoints = [link, websocket]
        self.names = ["link", "websocket"]
        self.current = 0

    def connect(self, factory: Any) -> defer.Deferred[Any]:
        """
        Connect with the current transport; switch for the next attempt if
        this one does not establish a link.
        """
        index = self.current
        d = defer.maybeDeferred(self.endpoints[index].connect, factory)

        def connected(protocol: Any) -> Any:
            established = getattr(protocol, "whenEstablished", None)
            if established is not None:
                established().addErrback(lambda _: self._switch(index))
            return protocol

        def failed(failure: Any) -> Any:
            if not failure.check(
                error.ConnectionRefusedError, defer.CancelledError, error.ConnectingCancelledError
            ):
                self._switch(index)
            return failure

        return d.addCallbacks(connected, failed)

    def _switch(self, index: int) -> None:
        if self.current == index:
            self.current = 1 - index
            self.log.info(
                "the {failed} transport did not get through: trying {next} next",
                failed=self.names[index], next=self.names[self.current],
            )
