# -*- test-case-name: tests.http.test_h2c -*-
"""
h2c to the service on Twisted (C{--service-protocol h2c}, for gRPC and
other services that speak HTTP/2 in cleartext with prior knowledge).

  - L{ServicePool}: at most L{H2Limits.service_connections} h2c
    connections to the service (L{ServiceH2Protocol}, each the I/O of a
    sans-I/O L{nfltr.http._h2service.ServiceH2}), each carrying at most
    L{H2Limits.service_streams} streams; a stream goes on the connection
    with the most room, a new one is dialled only when none has room, and
    a stream that finds every connection full is answered C{502}.
    Connections stay open until the service closes them (or says
    C{GOAWAY}), the pool is closed, or they carried no stream for
    L{H2Limits.service_idle_timeout} seconds (then we say C{GOAWAY} and
    close them).  A pool drained (L{ServicePool.drain}: a member of the
    share's group left) or retired (L{ServicePool.retire}: the share was
    withdrawn) puts no new stream on the connections it has, and each is
    closed so once its streams are done; retired, it makes no more.
  - L{H2CProxyProtocol}: one HTTP/2 visitor connection
    (L{nfltr.http._h2c.H2CExchange}), its streams on the pool's
    connections.
  - L{HTTP1Refused}: an HTTP/1.1 visitor of such a share (one whose client
    did not take C{h2} in ALPN) gets C{502} saying the share speaks HTTP/2
    only: an HTTP/1.1 request is not translated into an h2 stream.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, interfaces
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure

from ._h2c import H2CExchange
from ._h2service import ServiceH2
from ._limits import DEFAULT_H2_LIMITS, H2Limits
from .backend import IBackend
from .h2proxy import H2ProxyProtocol

#: What an HTTP/1.1 visitor of an h2c share gets.
HTTP1_REFUSAL_BODY = (
    b"502 Bad Gateway: this share's service speaks HTTP/2 only (h2c); "
    b"connect with HTTP/2 (ALPN h2)\n"
)


class PoolFull(Exception):
    """
    Every service connection is full and no more may be made.
    """


class ServiceH2Protocol(Protocol):
    """
    One h2c connection to the service: the I/O of its L{ServiceH2}.

    @ivar waiting: streams that wait for it to connect.
    @ivar retiring: it takes no new stream, and is closed once its streams
        are done.
    """

    transport: Any

    def __init__(self, pool: ServicePool) -> None:
        self.pool = pool
        self.h2 = ServiceH2(self, pool.limits)
        self.waiting: list[defer.Deferred[ServiceH2]] = []
        self.connected = False
        self.retiring = False
        self._idleTimer: interfaces.IDelayedCall | None = None

    @property
    def room(self) -> int:
        """
        Streams it may still take (less those waiting for it).
        """
        return self.h2.room - len(self.waiting)

    def connectionMade(self) -> None:
        """
        The preface; then the streams that waited.
        """
        self.connected = True
        self.h2.start()
        waiting, self.waiting = self.waiting, []
        for waiter in waiting:
            waiter.callback(self.h2)
        if not self.h2.streams:
            self.idle()

    def dataReceived(self, data: bytes) -> None:
        """
        To the h2 connection.
        """
        self.h2.receive(data)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """
        Its streams are reset.
        """
        self._stopIdleTimer()
        self.h2.lost()
        self.pool.lost(self)

    def idle(self) -> None:
        """
        No stream on it: closed if none comes within the idle timeout (at
        once if it is retiring).
        """
        if self.retiring and self.connected:
            self._close()
            return
        timeout = self.pool.limits.service_idle_timeout
        if timeout is None or self.h2.draining or not self.connected:
            return
        if self._idleTimer is not None and self._idleTimer.active():
            self._idleTimer.reset(timeout)
        else:
            self._idleTimer = self.pool.clock.callLater(timeout, self._expire)

    def _expire(self) -> None:
        self._idleTimer = None
        if self.h2.streams or self.waiting or self.h2.draining:
            return  # busy again: idle() arms the timer once it is not
        self.pool.log.debug("h2c: closing a service connection idle for {seconds} s",
                            seconds=self.pool.limits.service_idle_timeout)
        self._close()

    def retire(self) -> None:
        """
        Take no new stream; closed once the streams on it are done (at once
        if it has none; once it connected if it is still dialling).
        """
        self.retiring = True
        self.pool.lost(self)
        if self.connected and not self.h2.streams:
            self._close()

    def _close(self) -> None:
        """
        Say C{GOAWAY} and close (its streams are done: a service on the
        C{h2} library cannot finish a stream after a C{GOAWAY}).
        """
        self._stopIdleTimer()
        self.pool.lost(self)
        self.h2.close()
        self.transport.loseConnection()

    def _stopIdleTimer(self) -> None:
        if self._idleTimer is not None and self._idleTimer.active():
            self._idleTimer.cancel()
        self._idleTimer = None

    def toService(self, data: bytes) -> None:
        """
        Write.
        """
        self.transport.write(data)

    def closeService(self) -> None:
        """
        Close.
        """
        self._stopIdleTimer()
        self.pool.lost(self)
        self.transport.loseConnection()


class ServicePool:
    """
    The h2c connections to one service; see the module.
    """

    log = Logger()

    def __init__(self, backend: IBackend, clock: interfaces.IReactorTime,
                 limits: H2Limits = DEFAULT_H2_LIMITS) -> None:
        self.backend, self.clock, self.limits = backend, clock, limits
        self.connections: list[ServiceH2Protocol] = []
        self._dialling: dict[ServiceH2Protocol, defer.Deferred[Any]] = {}
        self.closed = False

    def acquire(self) -> defer.Deferred[ServiceH2]:
        """
        A connection with room for one more stream (open it at once).

        @return: fires with it; fails with L{PoolFull} or the reason no
            connection could be made.  Cancelling it gives up the place.
        """
        if self.closed:
            return defer.fail(PoolFull("the share is closing"))
        roomy = [c for c in self.connections if c.room > 0]
        if roomy:
            best = max(roomy, key=lambda c: c.room)
            if best.connected:
                return defer.succeed(best.h2)
            return self._wait(best)
        if len(self.connections) >= self.limits.service_connections:
            return defer.fail(PoolFull("every h2c connection to the service is full"))
        conn = ServiceH2Protocol(self)
        self.connections.append(conn)
        waiter = self._wait(conn)
        dialling = self._dialling[conn] = self.backend.connect(conn)
        dialling.addBoth(self._dialled, conn)
        return waiter

    def _wait(self, conn: ServiceH2Protocol) -> defer.Deferred[ServiceH2]:
        def cancel(waiter: defer.Deferred[ServiceH2]) -> None:
            if waiter in conn.waiting:
                conn.waiting.remove(waiter)

        waiter: defer.Deferred[ServiceH2] = defer.Deferred(cancel)
        conn.waiting.append(waiter)
        return waiter

    def _dialled(self, result: Any, conn: ServiceH2Protocol) -> None:
        self._dialling.pop(conn, None)
        if isinstance(result, Failure):
            self.lost(conn)
            waiting, conn.waiting = conn.waiting, []
            for waiter in waiting:
                waiter.errback(result)

    def lost(self, conn: ServiceH2Protocol) -> None:
        """
        C{conn} takes no more streams.
        """
        if conn in self.connections:
            self.connections.remove(conn)

    def drain(self) -> None:
        """
        The connections made so far take no new stream, and each is closed
        once its streams are done; the next stream gets a new connection.
        """
        connections, self.connections = self.connections, []
        for conn in connections:
            conn.retire()

    def retire(self) -> None:
        """
        The share is withdrawn: no more connections are made, and those
        made are closed once their streams are done (L{drain}).
        """
        self.closed = True
        self.drain()

    def close(self) -> None:
        """
        Close every connection; no more are made.
        """
        self.closed = True
        for dialling in list(self._dialling.values()):
            dialling.cancel()
        for conn in list(self.connections):
            if conn.connected:
                conn.closeService()
        self.connections = []


class H2CProxyProtocol(H2ProxyProtocol):
    """
    One HTTP/2 visitor connection whose streams go to h2c service
    connections; see the module.
    """

    exchangeType = H2CExchange
    exchange: H2CExchange

    def __init__(self, factory: Any, services: ServicePool, visitor: str | None,
                 ownsServices: bool) -> None:
        super().__init__(factory, None, visitor, False)
        self.services, self._ownsServices = services, ownsServices
        self._waiting: dict[int, defer.Deferred[ServiceH2]] = {}

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """
        Gone: every stream is reset at the service.
        """
        super().connectionLost(reason)
        for waiting in list(self._waiting.values()):
            waiting.cancel()
        if self._ownsServices:
            self.services.close()

    def pauseProducing(self) -> None:
        """
        The visitor reads too slowly: no response byte moves, and it is not
        read.
        """
        self.exchange.visitorFull(True)
        self.transport.pauseProducing()

    def resumeProducing(self) -> None:
        """
        It caught up.
        """
        self.moved()
        self.exchange.visitorFull(False)
        if not self._closing:
            self.transport.resumeProducing()

    def toVisitor(self, data: bytes) -> None:
        """
        Write to the visitor: a byte moved (a long stream whose visitor
        says nothing for a while is not idle).
        """
        self.moved()
        super().toVisitor(data)

    def openService(self, stream: int) -> None:
        """
        A connection with room for C{stream}.
        """
        waiting = self._waiting[stream] = self.services.acquire()
        waiting.addCallbacks(self._attached, self._refused,
                             callbackArgs=(stream,), errbackArgs=(stream,))

    def _attached(self, service: ServiceH2, stream: int) -> None:
        self._waiting.pop(stream, None)
        self.exchange.serviceAttached(stream, service)

    def _refused(self, reason: Failure, stream: int) -> None:
        self._waiting.pop(stream, None)
        if not reason.check(defer.CancelledError):
            self.log.debug("HTTP/2: no h2c service connection: {why}",
                           why=reason.getErrorMessage())
            self.exchange.serviceFailed(stream)

    def releaseService(self, stream: int, reusable: bool) -> None:
        """
        Done with C{stream} (the exchange reset it at the service if it was
        not over); a wait for a connection is cancelled.
        """
        waiting = self._waiting.pop(stream, None)
        if waiting is not None:
            waiting.cancel()

    def pauseService(self, stream: int, paused: bool) -> None:
        """
        Nothing: the service's windows hold what it may send.
        """


class HTTP1Refused(Protocol):
    """
    An HTTP/1.1 visitor of an h2c share: C{502} saying why, then closed.
    """

    transport: Any
    answered = False

    def dataReceived(self, data: bytes) -> None:
        """
        Answer the first bytes (a request's): nothing the visitor sends goes
        anywhere.
        """
        if self.answered:
            return
        self.answered = True
        self.transport.write(
            b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (len(HTTP1_REFUSAL_BODY), HTTP1_REFUSAL_BODY))
        self.transport.loseConnection()

