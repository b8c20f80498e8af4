# -*- test-case-name: tests.http.test_stream -*-
"""
The stream path on Twisted: L{StreamProxyProtocol} runs one visitor
connection's L{StreamExchange} and does its I/O, with a service connection
from a L{BackendPool} held across the visitor's requests.

Flow control as in the proxy (L{nfltr.http.proxy}): the visitor's
transport and the service connection's are each other's streaming
producers, and a L{Valve} on the visitor's keeps the exchange's own reason
to stop reading apart from a full service connection.

Timeouts (L{HTTPLimits}): a visitor connection between requests is closed
after C{idle_timeout} without a byte; a request in flight gets C{504} (or
its connection cut, if its response began) after C{exchange_timeout}
without a byte moving either way.  One timer checks when a byte last
moved; it is not rescheduled per read.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, error, interfaces
from twisted.internet.protocol import Protocol, connectionDone
from twisted.python.failure import Failure
from zope.interface import implementer

from ._drain import IDrainable
from ._stream import StreamExchange
from .backend import BackendConnection
from .flow import PEER_FULL, PausesBackend, Valve, ValveProducer
from .pool import BackendPool

# Reasons the visitor's transport is paused (see Valve).
_EXCHANGE = "exchange"


@implementer(interfaces.IHalfCloseableProtocol, IDrainable)
class StreamProxyProtocol(Protocol):
    """
    One visitor connection on the stream path.  Made by
    L{nfltr.http.HTTPProxyFactory.proxyFor}, whose settings it uses.

    @ivar backend: the service connection in use, if any.
    @ivar feedsService: the visitor's side is the producer registered on
        the service connection's transport (from L{_gotService} until
        L{_leaveService}).
    """

    transport: Any

    def __init__(self, factory: Any, source: BackendPool, visitor: str | None,
                 ownsSource: bool) -> None:
        self.source, self.clock, self.limits = source, factory.clock, factory.limits
        self.exchange = StreamExchange(
            self, visitor=visitor, host=factory.host, forwarded=factory.forwarded,
            scheme=factory.scheme, limits=factory.limits, gate=factory.gate,
            hosts=factory.hosts, tap=factory.tap,
        )
        self.backend: BackendConnection | None = None
        self.feedsService = False
        self._ownsSource = ownsSource
        self._valve: Valve | None = None
        self._pauser = PausesBackend(self)
        self._acquiring: defer.Deferred[BackendConnection] | None = None
        self._producing = False
        self._closing = False
        self._moved = 0.0
        self._timer: interfaces.IDelayedCall | None = None

    # The visitor connection.

    def connectionMade(self) -> None:
        """
        Take part in flow control; wait for a request.
        """
        self._valve = Valve(self.transport)
        self.transport.registerProducer(self._pauser, True)
        self._producing = True
        self.moved()
        self._arm()

    def dataReceived(self, data: bytes) -> None:
        """
        To the exchange.
        """
        self.exchange.visitorData(data)
        if not self.exchange.idle:
            # A head trickled in does not put the idle timeout off.
            self._moved = self.clock.seconds()

    def readConnectionLost(self) -> None:
        """
        The visitor's end of input.
        """
        self.exchange.visitorEOF()

    def writeConnectionLost(self) -> None:
        """
        Our write side is shut: nothing to do.
        """

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """
        Gone: give back or drop the service connection.
        """
        self._closing = True
        self._cancelTimer()
        reusable = self.exchange.idle
        self.exchange.visitorLost()
        acquiring, self._acquiring = self._acquiring, None
        if acquiring is not None:
            acquiring.cancel()
        backend = self._detach()
        if backend is not None:
            if reusable:
                self.source.release(backend, True)
            else:
                backend.abort()
        if self._ownsSource:
            self.source.close()

    def drain(self) -> None:
        """
        Close at the next response boundary (L{StreamExchange.drain}).
        """
        self.exchange.drain()

    def moved(self) -> None:
        """
        A byte moved: the timeouts count from now.
        """
        self._moved = self.clock.seconds()

    # StreamIO.

    def toService(self, data: bytes) -> None:
        """
        Write to the service connection.
        """
        assert self.backend is not None
        self.backend.transport.write(data)

    def toVisitor(self, data: bytes) -> None:
        """
        Write to the visitor.
        """
        self._moved = self.clock.seconds()
        self.transport.write(data)

    def needService(self, fresh: bool) -> None:
        """
        Take a connection from the pool (a new one if C{fresh}).
        """
        self._acquiring = self.source.acquire(fresh)
        self._acquiring.addCallbacks(self._gotService, self._noService)

    def _gotService(self, conn: BackendConnection) -> None:
        self._acquiring = None
        if self._closing:
            self.source.release(conn, True)
            return
        assert self._valve is not None  # made when the visitor connected, before any request
        conn.user = self
        self.backend = conn
        conn.transport.registerProducer(ValveProducer(self._valve, PEER_FULL), True)
        self.feedsService = True
        if self._pauser.paused and conn.valve is not None:  # the visitor is full already
            conn.valve.pause(PEER_FULL)
        self.moved()
        self.exchange.serviceReady(conn.reused)

    def _noService(self, reason: Failure) -> None:
        self._acquiring = None
        if not reason.check(defer.CancelledError):
            self.exchange.serviceFailed()

    def releaseService(self, reusable: bool) -> None:
        """
        Give the service connection back to the pool (or close it).
        """
        backend = self._detach()
        if backend is not None:
            self.source.release(backend, reusable)

    def abortService(self) -> None:
        """
        Abort the service connection, or the attempt at one.
        """
        acquiring, self._acquiring = self._acquiring, None
        if acquiring is not None:
            acquiring.cancel()
        backend = self._detach()
        if backend is not None:
            backend.abort()

    def closeVisitor(self, abort: bool) -> None:
        """
        Close the visitor connection (a TLS transport waits for its producer
        to go first); abort it if what was written is not out within the
        idle timeout.
        """
        self._closing = True
        self._unregister()
        if abort:
            self.transport.abortConnection()
            return
        # Read on while closing: a TLS transport closes once it read the visitor's
        # close_notify (or its end of stream); a paused one would wait for the timer below.
        if self._valve is not None:
            self._valve.resume(_EXCHANGE)
        self.transport.loseConnection()
        timeout = self.limits.idle_timeout
        if timeout is not None:
            self._cancelTimer()
            self._timer = self.clock.callLater(timeout, self.transport.abortConnection)

    def halfCloseService(self) -> None:
        """
        After a switch: stop being the producer on the service connection's
        transport (nothing more comes from the visitor; see
        L{_leaveService}), then shut its write side.
        """
        backend = self.backend
        if backend is not None:
            self._leaveService(backend)
            backend.transport.loseWriteConnection()

    def halfCloseVisitor(self) -> None:
        """
        After a switch: shut the visitor's write side where it can be, else
        close it.
        """
        self._unregister()
        loseWrite = getattr(self.transport, "loseWriteConnection", None)
        if loseWrite is not None and interfaces.IHalfCloseableDescriptor.providedBy(self.transport):
            loseWrite()
        else:
            self.transport.loseConnection()

    def readVisitor(self, reading: bool) -> None:
        """
        Read the visitor, or stop, for the exchange's reasons (not once closing: see
        L{closeVisitor}).
        """
        if self._valve is None or self._closing:
            return
        if reading:
            self._valve.resume(_EXCHANGE)
        else:
            self._valve.pause(_EXCHANGE)

    # BackendUser.

    def backendData(self, data: bytes) -> None:
        """
        Bytes from the service.
        """
        self._moved = self.clock.seconds()
        self.exchange.serviceData(data)

    def backendEOF(self) -> None:
        """
        The service's end of input: after a switch, half-close the visitor;
        otherwise the connection is done.
        """
        if self.exchange.raw:
            self.exchange.serviceEOF()
            return
        backend = self._detach()
        self.exchange.serviceEOF()
        if backend is not None:
            backend.close()

    def backendLost(self, reason: Failure) -> None:
        """
        The service connection is gone.
        """
        raw = self.exchange.raw
        self._detach()
        if raw:
            self.closeVisitor(abort=not reason.check(error.ConnectionDone))
        else:
            self.exchange.serviceEOF()

    # Helpers.

    def _detach(self) -> BackendConnection | None:
        backend, self.backend = self.backend, None
        if backend is not None:
            backend.user = None
            self._leaveService(backend)
            if backend.valve is not None:
                backend.valve.resume(PEER_FULL)
        return backend

    def _leaveService(self, backend: BackendConnection) -> None:
        """
        Unregister the visitor's side as the producer on C{backend}'s
        transport, once.  Needed before that transport is half-closed:
        Twisted's TCP transport, when its buffer empties, resumes a paused
        producer I{instead of} shutting its write side, and never looks
        again (as for L{nfltr.streams.SpliceEnd.leaveOther}); the visitor's
        end of input can come while the service's socket is full and has
        paused the visitor (a TLS C{close_notify} read with the last
        records).
        """
        if self.feedsService:
            self.feedsService = False
            if backend.connected and not backend.closed:
                backend.transport.unregisterProducer()

    def _unregister(self) -> None:
        if self._producing:
            self._producing = False
            self.transport.unregisterProducer()

    def _arm(self) -> None:
        limits = self.limits
        if self.exchange.raw or self._closing:
            return
        wait = limits.idle_timeout if self.exchange.idle else limits.exchange_timeout
        if wait is None:
            # No timeout in this state: look again after the other one.
            other = limits.exchange_timeout if self.exchange.idle else limits.idle_timeout
            if other is not None:
                self._timer = self.clock.callLater(other, self._arm)
            return
        left = self._moved + wait - self.clock.seconds()
        if left > 0:
            self._timer = self.clock.callLater(left, self._arm)
            return
        self._timer = None
        self.exchange.timedOut()

    def _cancelTimer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

