# -*- test-case-name: tests.http.test_h2,tests.http.test_h2limits -*-
"""
HTTP/2 to visitors on Twisted.  L{ALPNChooser} is the protocol under a
share's TLS: once the handshake is done it runs L{H2ProxyProtocol} if the
visitor and we agreed on C{h2} (ALPN), the HTTP/1.1 proxy otherwise.
L{H2ProxyProtocol} does the I/O of one visitor connection's
L{nfltr.http._h2.H2Exchange}: a service connection from the pool per
stream (the last one given back kept aside for the next stream, as long as
the visitor connection lives: most visitors send one stream after another),
each registered with a producer that tells the exchange when it is
full (request bytes are acknowledged to the visitor only after), and paused
through its valve while its stream's window is shut or the visitor's
transport is full.  A visitor's transport that is full is not read either,
so the answers h2 owes (PING and SETTINGS acknowledgements) stay bounded.
"""

from __future__ import annotations

from typing import Any

from h2.errors import ErrorCodes
from twisted.internet import defer, interfaces
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from ._drain import IDrainable
from ._h2 import H2Exchange
from ._limits import DEFAULT_H2_LIMITS
from .backend import BackendConnection
from .flow import PEER_FULL
from .pool import BackendPool

#: The ALPN protocol names a share's TLS offers, in our order of preference.
ALPN_PROTOCOLS = (b"h2", b"http/1.1")
# Why a service connection is paused: its stream's window is shut.
_WINDOW = "h2 window"


@implementer(interfaces.IPushProducer)
class _ServiceWrites:
    """
    Registered on one stream's service connection: tells the exchange when
    it is full.
    """

    def __init__(self, proxy: H2ProxyProtocol, stream: int) -> None:
        self.proxy, self.stream = proxy, stream

    def pauseProducing(self) -> None:
        """
        Full.
        """
        self.proxy.exchange.serviceFull(self.stream, True)

    def resumeProducing(self) -> None:
        """
        Written out.
        """
        self.proxy.exchange.serviceFull(self.stream, False)

    def stopProducing(self) -> None:
        """
        Nothing: the connection's C{connectionLost} follows.
        """


class _StreamUser:
    """
    The L{nfltr.http.backend.BackendUser} of one stream's service connection.
    """

    def __init__(self, proxy: H2ProxyProtocol, stream: int) -> None:
        self.proxy, self.stream = proxy, stream

    def backendData(self, data: bytes) -> None:
        """
        To the exchange.
        """
        self.proxy.moved()
        self.proxy.exchange.serviceData(self.stream, data)

    def backendEOF(self) -> None:
        """
        The response may end with the connection.
        """
        self.proxy.serviceGone(self.stream)

    def backendLost(self, reason: Failure) -> None:
        """
        Gone.
        """
        self.proxy.serviceGone(self.stream)


@implementer(interfaces.IPushProducer, interfaces.IHalfCloseableProtocol, IDrainable)
class H2ProxyProtocol(Protocol):
    """
    One HTTP/2 visitor connection; see the module.  Made by
    L{nfltr.http.HTTPProxyFactory}, whose settings it uses.
    """

    transport: Any
    log = Logger()

    #: What runs the connection's HTTP/2 (L{H2Exchange} or a subclass).
    exchangeType: type[H2Exchange] = H2Exchange

    def __init__(self, factory: Any, source: BackendPool | None, visitor: str | None,
                 ownsSource: bool) -> None:
        """
        @param source: the pool of HTTP/1.1 service connections (L{None}
            for a subclass that has its own).
        """
        self.source, self.clock, self.limits = source, factory.clock, factory.limits
        self.exchange = self.exchangeType(
            self, self.clock.seconds, visitor=visitor, host=factory.host,
            forwarded=factory.forwarded, scheme=factory.scheme, limits=factory.limits,
            h2limits=getattr(factory, "h2limits", DEFAULT_H2_LIMITS), gate=factory.gate,
            hosts=factory.hosts, tap=factory.tap,
        )
        self._ownsSource = ownsSource
        self._services: dict[int, BackendConnection] = {}
        # The last service connection given back, for the next stream.
        self._spare: BackendConnection | None = None
        self._acquiring: dict[int, defer.Deferred[BackendConnection]] = {}
        self._visitorFull = False
        self._closing = False
        self._moved = 0.0
        self._timer: interfaces.IDelayedCall | None = None

    # The visitor connection.

    def connectionMade(self) -> None:
        """
        Send our preface; take part in flow control.
        """
        self.transport.registerProducer(self, True)
        self.exchange.start()
        self.moved()
        self._arm()

    def dataReceived(self, data: bytes) -> None:
        """
        To the exchange.
        """
        self.moved()
        self.exchange.visitorData(data)

    def readConnectionLost(self) -> None:
        """
        The visitor's end of input (its C{close_notify}, under an e2ee
        share's TLS): HTTP/2 has no half-close, so C{GOAWAY} and close, as
        the idle timeout does (L{closeVisitor}).  Not the transport's
        C{loseConnection} alone: TLS waits for its producer (this protocol)
        to unregister before it closes, which would leave the connection,
        and the link session under it, open until the idle timeout.
        """
        self.exchange.goAway(ErrorCodes.NO_ERROR, "the visitor's end of input")

    def writeConnectionLost(self) -> None:
        """
        Nothing: we only ever close whole.
        """

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """
        Gone: abort every stream's service connection.
        """
        self._closing = True
        self._cancelTimer()
        self.exchange.visitorLost()
        for acquiring in list(self._acquiring.values()):
            acquiring.cancel()
        spare, self._spare = self._spare, None
        if spare is not None and self.source is not None:
            self.source.release(spare, True)
        if self._ownsSource and self.source is not None:
            self.source.close()

    def drain(self) -> None:
        """
        C{GOAWAY}, then close once the open streams are done (L{H2Exchange.drain}).
        """
        self.exchange.drain()

    def moved(self) -> None:
        """
        A byte moved: the idle timeout counts from now.
        """
        self._moved = self.clock.seconds()

    # The visitor's transport, full or not.

    def pauseProducing(self) -> None:
        """
        The visitor reads too slowly: stop reading every service connection,
        and the visitor.
        """
        self._visitorFull = True
        self.transport.pauseProducing()
        for conn in self._services.values():
            if conn.valve is not None:
                conn.valve.pause(PEER_FULL)

    def resumeProducing(self) -> None:
        """
        The visitor caught up.
        """
        self._visitorFull = False
        self.moved()
        for conn in list(self._services.values()):
            if conn.valve is not None:
                conn.valve.resume(PEER_FULL)
        if not self._closing:
            self.transport.resumeProducing()

    def stopProducing(self) -> None:
        """
        Nothing: C{connectionLost} follows.
        """

    # H2IO.

    def toVisitor(self, data: bytes) -> None:
        """
        Write to the visitor.
        """
        self.transport.write(data)

    def closeVisitor(self) -> None:
        """
        Close after the C{GOAWAY}; abort if it is not out within the idle
        timeout.
        """
        if self._closing:
            return
        self._closing = True
        self._cancelTimer()
        self.transport.unregisterProducer()
        self.transport.loseConnection()
        timeout = self.limits.idle_timeout
        if timeout is not None:
            self._timer = self.clock.callLater(timeout, self.transport.abortConnection)

    def openService(self, stream: int) -> None:
        """
        The spare connection for C{stream}, or one from the pool.
        """
        assert self.source is not None
        spare, self._spare = self._spare, None
        if spare is not None and spare.usable:
            self._gotService(spare, stream)
            return
        acquiring = self._acquiring[stream] = self.source.acquire(False)
        acquiring.addCallbacks(self._gotService, self._noService,
                               callbackArgs=(stream,), errbackArgs=(stream,))

    def _gotService(self, conn: BackendConnection, stream: int) -> None:
        self._acquiring.pop(stream, None)
        assert self.source is not None
        if self._closing or stream not in self.exchange.streams:
            self.source.release(conn, True)
            return
        conn.user = _StreamUser(self, stream)
        self._services[stream] = conn
        conn.transport.registerProducer(_ServiceWrites(self, stream), True)
        if self._visitorFull and conn.valve is not None:
            conn.valve.pause(PEER_FULL)
        self.exchange.serviceReady(stream)

    def _noService(self, reason: Failure, stream: int) -> None:
        self._acquiring.pop(stream, None)
        if not reason.check(defer.CancelledError):
            self.log.debug("HTTP/2: no service connection: {why}", why=reason.getErrorMessage())
            self.exchange.serviceFailed(stream)

    def toService(self, stream: int, data: bytes) -> None:
        """
        Write to C{stream}'s service connection.
        """
        conn = self._services.get(stream)
        if conn is not None:
            conn.transport.write(data)

    def releaseService(self, stream: int, reusable: bool) -> None:
        """
        Back to the pool, or aborted; an attempt still under way is cancelled.
        """
        acquiring = self._acquiring.pop(stream, None)
        if acquiring is not None:
            acquiring.cancel()
        conn = self._services.pop(stream, None)
        if conn is None:
            return
        conn.user = None
        if conn.connected and not conn.closed:
            conn.transport.unregisterProducer()
        if conn.valve is not None:
            conn.valve.resume(PEER_FULL)
            conn.valve.resume(_WINDOW)
        if not reusable or self.source is None:
            conn.abort()
        elif self._spare is None and not self._closing and conn.usable:
            self._spare = conn
        else:
            self.source.release(conn, True)

    def pauseService(self, stream: int, paused: bool) -> None:
        """
        Hold or read C{stream}'s service connection for its window.
        """
        conn = self._services.get(stream)
        if conn is not None and conn.valve is not None:
            if paused:
                conn.valve.pause(_WINDOW)
            else:
                conn.valve.resume(_WINDOW)

    def problem(self, what: str) -> None:
        """
        Log at debug level.
        """
        self.log.debug("HTTP/2: {what}", what=what)

    def serviceGone(self, stream: int) -> None:
        """
        C{stream}'s service connection ended.
        """
        conn = self._services.pop(stream, None)
        if conn is not None:
            conn.user = None
        self.exchange.serviceLost(stream)
        if conn is not None and conn.connected and not conn.closed:
            # Its end of input: done with it (the pool takes no half-closed one).
            conn.transport.unregisterProducer()
            conn.close()

    # The timeouts: no byte in or out for idle_timeout with no stream open,
    # or for exchange_timeout with one: GOAWAY.

    def _arm(self) -> None:
        if self._closing:
            return
        idle = self.exchange.idle
        wait = self.limits.idle_timeout if idle else self.limits.exchange_timeout
        check = min((t for t in (self.limits.idle_timeout, self.limits.exchange_timeout)
                     if t is not None), default=None)
        if check is None:
            return
        if wait is None or self._moved + wait > self.clock.seconds():
            self._timer = self.clock.callLater(check / 4, self._arm)
            return
        self._timer = None
        self.exchange.goAway(ErrorCodes.NO_ERROR, "idle" if idle else "no byte moved")

    def _cancelTimer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None


@implementer(interfaces.IHandshakeListener, interfaces.IHalfCloseableProtocol, IDrainable)
class ALPNChooser(Protocol):
    """
    Under a share's TLS: runs the protocol ALPN chose once the handshake is
    done (L{H2ProxyProtocol} for C{h2}, the HTTP/1.1 proxy otherwise) and
    passes it everything after.

    @ivar chosen: the protocol chosen, once it is.
    """

    transport: Any

    def __init__(self, http1: Protocol, http2: Any, clock: interfaces.IReactorTime,
                 timeout: float | None) -> None:
        """
        @param http1: the HTTP/1.1 proxy.
        @param http2: makes the HTTP/2 one, if the visitor takes C{h2}.
        @param timeout: seconds the handshake may take (the idle timeout).
        """
        self._http1, self._http2 = http1, http2
        self._clock, self._timeout = clock, timeout
        self._timer: interfaces.IDelayedCall | None = None
        self.chosen: Any = None
        self._draining = False

    def drain(self) -> None:
        """
        Drain the protocol chosen, now or once it is.
        """
        self._draining = True
        if self.chosen is not None:
            self.chosen.drain()

    def connectionMade(self) -> None:
        """
        Wait for the handshake, not longer than the timeout.
        """
        if self._timeout is not None:
            self._timer = self._clock.callLater(self._timeout, self.transport.abortConnection)

    def handshakeCompleted(self) -> None:
        """
        Choose.
        """
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if self.chosen is None:
            agreed = getattr(self.transport, "negotiatedProtocol", None)
            self.chosen = self._http2() if agreed == b"h2" else self._http1
            self.chosen.makeConnection(self.transport)
            if self._draining:
                self.chosen.drain()

    def dataReceived(self, data: bytes) -> None:
        """
        To the protocol chosen (HTTP/1.1 if no handshake said otherwise).
        """
        self.handshakeCompleted()
        self.chosen.dataReceived(data)

    def readConnectionLost(self) -> None:
        """
        To the protocol chosen, if it half-closes; else close.
        """
        if interfaces.IHalfCloseableProtocol.providedBy(self.chosen):
            self.chosen.readConnectionLost()
        else:
            self.transport.loseConnection()

    def writeConnectionLost(self) -> None:
        """
        To the protocol chosen, if it half-closes.
        """
        if interfaces.IHalfCloseableProtocol.providedBy(self.chosen):
            self.chosen.writeConnectionLost()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """
        To the protocol chosen; if none was, to the HTTP/1.1 proxy (it
        gives back what it holds).
        """
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        if self.chosen is None:
            self.chosen = self._http1
            self._http1.makeConnection(self.transport)
        self.chosen.connectionLost(reason)
