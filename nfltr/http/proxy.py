# -*- test-case-name: tests.http.test_proxy -*-
"""
The HTTP proxy on Twisted: L{HTTPProxyProtocol} runs one visitor
connection's L{Exchange} and does its I/O; L{HTTPProxyFactory} makes one per
visitor connection.

Flow control: the visitor's transport and the backend connection's
transport in use are each other's streaming producers, as in
L{nfltr.streams.splice}: a backend that reads slowly pauses the visitor, a visitor
that reads slowly pauses the backend.  The exchange pauses the visitor
too, while it looks for a backend connection or a pipelining visitor is too
far ahead; a L{Valve} on each transport keeps the reasons apart.

After an upgrade (a C{101} from the backend) the two connections are
spliced with L{nfltr.streams.splice} (L{nfltr.http.flow}), what each side sent past
the switch written first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from twisted.internet import defer, error, interfaces
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.streams import SpliceEnd

from ._drain import IDrainable
from ._exchange import Exchange, Gate, Phase
from ._limits import DEFAULT_H2_LIMITS, DEFAULT_LIMITS, H2Limits, HTTPLimits
from ._tap import IExchangeTap
from .backend import BackendConnection, IBackend
from .flow import PEER_FULL, BackendSpliceEnd, PausesBackend, TapSpliceEnd, Valve, ValveProducer
from .h2c import H2CProxyProtocol, HTTP1Refused, ServicePool
from .h2proxy import ALPNChooser, H2ProxyProtocol
from .pool import BackendPool
from .stream import StreamProxyProtocol

# Reasons a transport is paused (see Valve).
_EXCHANGE = "exchange"


@implementer(interfaces.IHalfCloseableProtocol, IDrainable)
class HTTPProxyProtocol(Protocol):
    """
    One visitor connection: its L{Exchange}, and the I/O the exchange asks
    for (the L{nfltr.http._exchange.ExchangeIO} methods).  Made by
    L{HTTPProxyFactory.proxyFor}, whose settings it uses.

    @ivar exchange: the visitor connection's requests and responses.
    @ivar source: where backend connections come from and go back to.
    @ivar backend: the backend connection in use, if any.
    @ivar raw: after a switch of protocols, the splice end of the visitor.
    """

    transport: Any
    log = Logger()

    def __init__(
        self,
        factory: HTTPProxyFactory,
        source: BackendPool,
        visitor: str | None = None,
        ownsSource: bool = False,
    ) -> None:
        self.factory = factory
        self.source, self.clock, self.limits = source, factory.clock, factory.limits
        self.exchange = Exchange(
            self, visitor=visitor, host=factory.host, forwarded=factory.forwarded,
            scheme=factory.scheme, limits=factory.limits, gate=factory.gate,
            hosts=factory.hosts, tap=factory.tap,
        )
        self.backend: BackendConnection | None = None
        self._pauser = PausesBackend(self)
        self.raw: SpliceEnd | None = None
        self._ownsSource = ownsSource
        self._valve: Valve | None = None
        self._pending: defer.Deferred[BackendConnection] | None = None
        self._timer: interfaces.IDelayedCall | None = None
        self._producing = False
        # The exchange timeout: when a byte last moved, and the one timer
        # that checks it (not rescheduled per read).
        self._moved = 0.0
        self._stallTimer: interfaces.IDelayedCall | None = None

    # The visitor connection.

    def connectionMade(self) -> None:
        """
        Take part in flow control; wait for a request.
        """
        self._valve = Valve(self.transport)
        self.transport.registerProducer(self._pauser, True)
        self._producing = True
        self.exchange.start()

    def dataReceived(self, data: bytes) -> None:
        """
        To the exchange, or the splice after a switch.
        """
        if self.raw is not None:
            self.raw.dataReceived(data)
        else:
            self._moved = self.clock.seconds()
            self.exchange.visitorData(data)

    def readConnectionLost(self) -> None:
        """
        The visitor's end of input.
        """
        if self.raw is not None:
            self.raw.readConnectionLost()
        else:
            self.exchange.visitorEOF()

    def writeConnectionLost(self) -> None:
        """
        Our write side is shut: nothing to do.
        """

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        Gone: drop the backend connection in use (it is not given back: its
        exchange did not end) or end the splice.
        """
        self._setTimer(None)
        self._stopStallTimer()
        if self.raw is not None:
            self.raw.connectionLost(reason)
            return
        self.exchange.visitorLost()
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.cancel()
        backend = self._detach()
        if backend is not None:
            backend.abort()
        if self._ownsSource:
            self.source.close()

    def drain(self) -> None:
        """
        Close at the next response boundary (L{Exchange.drain}).
        """
        self.exchange.drain()

    # ExchangeIO.

    def writeVisitor(self, data: bytes) -> None:
        """
        Write to the visitor.
        """
        self.transport.write(data)

    def closeVisitor(self) -> None:
        """
        Close after what was written (no backend connection is in use by
        then); abort if that is not out within the idle timeout.
        """
        # A TLS transport waits for its producer to go before it closes.
        self._unregister()
        self.transport.loseConnection()
        self._setTimer(self.transport.abortConnection)

    def _unregister(self) -> None:
        if self._producing:
            self._producing = False
            self.transport.unregisterProducer()

    def abortVisitor(self) -> None:
        """
        Abort the visitor connection.
        """
        self._setTimer(None)
        self.transport.abortConnection()

    def readVisitor(self, reading: bool) -> None:
        """
        Resume or pause reading from the visitor for the exchange.
        """
        if self._valve is not None:
            if reading:
                self._valve.resume(_EXCHANGE)
            else:
                self._valve.pause(_EXCHANGE)

    def connectBackend(self, fresh: bool) -> None:
        """
        Get a backend connection from the source.
        """
        self._pending = pending = self.source.acquire(fresh)
        pending.addCallbacks(self._backendReady, self._backendRefused)
        pending.addErrback(lambda f: self.log.failure("HTTP proxy: unexpected error", f))

    def writeBackend(self, data: bytes) -> None:
        """
        Write to the backend connection in use.
        """
        if self.backend is not None:
            self.backend.transport.write(data)

    def releaseBackend(self, reusable: bool) -> None:
        """
        Give the backend connection in use back to the source.
        """
        backend = self._detach()
        if backend is not None:
            self.source.release(backend, reusable)

    def abortBackend(self) -> None:
        """
        Abort the backend connection in use.
        """
        backend = self._detach()
        if backend is not None:
            backend.abort()

    def idleTimer(self, running: bool) -> None:
        """
        Start or stop the idle timer.
        """
        self._setTimer(self.exchange.idleTimeout if running else None)
        if not running:
            self.moved()
            self._startStallTimer()

    def moved(self) -> None:
        """
        A byte moved: the exchange timeout counts from now.
        """
        self._moved = self.clock.seconds()

    def _startStallTimer(self) -> None:
        timeout = self.limits.exchange_timeout
        if timeout is not None and self._stallTimer is None:
            self._stallTimer = self.clock.callLater(timeout, self._checkStall)

    def _stopStallTimer(self) -> None:
        if self._stallTimer is not None and self._stallTimer.active():
            self._stallTimer.cancel()
        self._stallTimer = None

    def _checkStall(self) -> None:
        """
        The exchange timer: fires at most once a timeout, and only then
        looks at when a byte last moved.
        """
        self._stallTimer = None
        timeout = self.limits.exchange_timeout
        if timeout is None or self.raw is not None or self.exchange.phase not in (
            Phase.CONNECTING, Phase.FORWARDING
        ):
            return
        left = self._moved + timeout - self.clock.seconds()
        if left > 0:
            self._stallTimer = self.clock.callLater(left, self._checkStall)
        else:
            self.exchange.stalled()

    def switchProtocols(
        self, toBackend: bytes, toVisitor: bytes, visitorEnded: bool, backendEnded: bool
    ) -> None:
        """
        Splice the visitor to the backend connection in use.
        """
        backend = self._detach()
        assert backend is not None
        self._setTimer(None)
        self._unregister()
        capture = self.exchange.switchedCapture
        if capture is None:
            visitorEnd, backendEnd = TapSpliceEnd(), BackendSpliceEnd()
        else:
            visitorEnd = TapSpliceEnd(lambda data: capture.switchedData(True, data))
            backendEnd = BackendSpliceEnd(lambda data: capture.switchedData(False, data))
            for fromVisitor, early in ((False, toVisitor), (True, toBackend)):
                if early:
                    capture.switchedData(fromVisitor, early)
        visitorEnd.other, backendEnd.other = backendEnd, visitorEnd
        self.raw, backend.raw = visitorEnd, backendEnd
        if toVisitor:
            self.transport.write(toVisitor)
        if toBackend:
            backend.transport.write(toBackend)
        visitorEnd.makeConnection(self.transport)
        backendEnd.makeConnection(backend.transport)
        if visitorEnded:
            visitorEnd.readConnectionLost()
        if backendEnded:
            backendEnd.readConnectionLost()

    def problem(self, what: str) -> None:
        """
        Log at debug level.
        """
        self.log.debug("HTTP proxy: {what}", what=what)

    # The backend connection.

    def _backendReady(self, backend: BackendConnection) -> None:
        self._pending = None
        if self.exchange.phase is not Phase.CONNECTING:
            backend.abort()
            return
        self._attach(backend)
        if not self.exchange.backendConnected(backend.client, backend.reused):
            self.abortBackend()

    def _backendRefused(self, failure: Failure) -> None:
        self._pending = None
        if self.exchange.phase is Phase.CONNECTING:
            self.log.debug("HTTP proxy: no backend connection: {why}", why=failure.value)
            self.exchange.backendFailed()

    def _attach(self, backend: BackendConnection) -> None:
        assert self._valve is not None
        self.backend = backend
        backend.user = self
        backend.transport.registerProducer(ValveProducer(self._valve, PEER_FULL), True)
        if self._pauser.paused and backend.valve is not None:
            backend.valve.pause(PEER_FULL)

    def _detach(self) -> BackendConnection | None:
        backend, self.backend = self.backend, None
        if backend is None:
            return None
        backend.user = None
        if self._valve is not None:
            self._valve.resume(PEER_FULL)
        if not backend.closed:
            backend.transport.unregisterProducer()
            if backend.valve is not None:
                backend.valve.resume(PEER_FULL)
        return backend

    def backendData(self, data: bytes) -> None:
        """
        Bytes from the backend connection in use.
        """
        self._moved = self.clock.seconds()
        self.exchange.backendData(data)

    def backendEOF(self) -> None:
        """
        The backend connection's end of input.
        """
        self.exchange.backendEOF()

    def backendLost(self, reason: Failure) -> None:
        """
        The backend connection in use is gone.
        """
        self._detach()
        self.exchange.backendLost(clean=reason.check(error.ConnectionDone) is not None)

    def _setTimer(self, call: Any) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        timeout = self.limits.idle_timeout
        if call is not None and timeout is not None:
            self._timer = self.clock.callLater(timeout, call)


class HTTPProxyFactory(Factory):
    """
    Makes the proxy for each visitor connection.

    @ivar backend: the backend, or a L{BackendPool} shared by all visitor
        connections.  A bare backend gets a pool per visitor connection that
        keeps at most one idle connection, closed with the visitor's: one
        backend connection serves a visitor connection's requests in turn.
    """

    noisy = False

    def __init__(  # noqa: PLR0913 -- settings, keyword-only, each with a default
        self,
        backend: IBackend | BackendPool,
        clock: interfaces.IReactorTime,
        *,
        host: bytes | None = None,
        forwarded: bool = True,
        scheme: bytes = b"https",
        limits: HTTPLimits = DEFAULT_LIMITS,
        gate: Gate | None = None,
        hosts: Iterable[str] | None = None,
        stream: bool = True,
        backendFor: Callable[[str | None], IBackend] | None = None,
        h2: bool = False,
        h2limits: H2Limits = DEFAULT_H2_LIMITS,
        h2c: bool = False,
    ) -> None:
        """
        @param gate: checks each request before it is forwarded (see
            L{nfltr.http.Exchange}); a share's policy, say.
        @param stream: visitor connections take the stream path
            (L{nfltr.http.stream}: heads read and checked, every other byte
            copied as it came); off, the full proxy (L{HTTPProxyProtocol}:
            every message parsed and written again by h11).
        @param hosts: the host names requests may name (see
            L{nfltr.http.Exchange}); L{None}: any.  Settable later, for
            the visitor connections that follow.
        @param backendFor: given a visitor's address, the backend of that
            visitor connection alone (see L{proxyFor}), in place of
            C{backend}.
        @param h2: the proxy runs under TLS that offers C{h2} (ALPN): each
            visitor connection takes HTTP/2 (L{nfltr.http.h2proxy}) if its
            handshake chose it, HTTP/1.1 otherwise.
        @param h2limits: the limits of HTTP/2 connections.
        @param h2c: with C{h2}, the service speaks h2c (HTTP/2 with prior
            knowledge, L{nfltr.http.h2c}): each visitor stream is a stream
            on a pool of h2c connections; HTTP/1.1 visitors get C{502}.
        """
        self.h2 = h2
        #: With C{h2c}, the h2c connections shared by visitor connections.
        self.services: ServicePool | None = None
        if h2c:
            shared = backend.backend if isinstance(backend, BackendPool) else backend
            self.services = ServicePool(shared, clock, h2limits)
        self.h2limits = h2limits
        self.backendFor = backendFor
        self.backend = backend
        self.gate = gate
        self.hosts = hosts
        #: Told of each request and response (L{nfltr.http._tap}); settable
        #: later, for the visitor connections that follow.
        self.tap: IExchangeTap | None = None
        self.clock = clock
        self.host = host
        self.forwarded = forwarded
        self.scheme = scheme
        self.limits = limits
        self.stream = stream

    def proxyFor(
        self, visitor: str | None, backend: IBackend | None = None,
    ) -> HTTPProxyProtocol | StreamProxyProtocol | ALPNChooser:
        """
        A new proxy for one visitor connection.

        @param visitor: the visitor's address as text (C{"203.0.113.5:4711"},
            C{"[2001:db8::1]:443"}), or C{None} if unknown.
        @param backend: this visitor connection's own backend, in place of
            the factory's (a pool of its own, as for a bare backend): its
            connections serve no other visitor (the agent's PROXY protocol
            header names this one).
        """
        if backend is None and self.backendFor is not None:
            backend = self.backendFor(visitor)
        if backend is not None:
            source = BackendPool(backend, self.clock, replace(self.limits, pool_max_idle=1))
            owns = True
        elif isinstance(self.backend, BackendPool):
            source, owns = self.backend, False
        else:
            source = BackendPool(self.backend, self.clock, replace(self.limits, pool_max_idle=1))
            owns = True
        if self.services is not None:
            return self._h2cFor(visitor, backend)
        http1: HTTPProxyProtocol | StreamProxyProtocol
        if self.stream:
            http1 = StreamProxyProtocol(self, source, visitor, owns)
        else:
            http1 = HTTPProxyProtocol(self, source, visitor, owns)
        if not self.h2:
            return http1
        return ALPNChooser(http1, lambda: H2ProxyProtocol(self, source, visitor, owns),
                           self.clock, self.limits.idle_timeout)

    def _h2cFor(self, visitor: str | None, backend: IBackend | None) -> ALPNChooser:
        """
        A visitor connection of an h2c share: HTTP/2 on the shared pool of
        h2c connections (a pool of its own for its own backend), C{502}
        for HTTP/1.1.
        """
        services, owns = self.services, False
        if backend is not None:
            services, owns = ServicePool(backend, self.clock, self.h2limits), True
        assert services is not None
        return ALPNChooser(HTTP1Refused(),
                           lambda: H2CProxyProtocol(self, services, visitor, owns),
                           self.clock, self.limits.idle_timeout)

    def close(self) -> None:
        """
        Close the shared h2c connections, if any.
        """
        if self.services is not None:
            self.services.close()

    def retire(self) -> None:
        """
        The share is withdrawn: its shared h2c connections, if any, are
        closed once their streams are done, and no more are made
        (L{nfltr.http.h2c.ServicePool.retire}).
        """
        if self.services is not None:
            self.services.retire()

    def buildProtocol(self, addr: Any) -> HTTPProxyProtocol | StreamProxyProtocol | ALPNChooser:
        """
        A proxy for a connection from C{addr}.
        """
        return self.proxyFor(addressText(addr))


def addressText(addr: Any) -> str | None:
    """
    An IP address and port as text (IPv6 bracketed), or C{None} for any
    other kind of address.
    """
    if isinstance(addr, IPv6Address):
        return f"[{addr.host}]:{addr.port}"
    if isinstance(addr, IPv4Address):
        return f"{addr.host}:{addr.port}"
    return None
