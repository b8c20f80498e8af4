# -*- test-case-name: tests.http.test_pool -*-
"""
A pool of idle keep-alive backend connections for the HTTP proxy.

A L{BackendPool} hands out connections: an idle one if it has one that is
still fit for a request (the server has not closed it, read nothing since),
a new one otherwise, and takes back those whose exchange ended cleanly with
keep-alive on both sides.  It keeps at most L{HTTPLimits.pool_max_idle}
idle connections (closing the oldest beyond that), each for at most
L{HTTPLimits.pool_idle_timeout} seconds.  Connections in use are not
counted: there is at most one per visitor connection.
"""

from __future__ import annotations

from collections import OrderedDict

from twisted.internet import defer, interfaces

from ._limits import DEFAULT_LIMITS, HTTPLimits
from .backend import BackendConnection, IBackend


class BackendPool:
    """
    Hands out backend connections, reusing idle keep-alive ones; see the
    module.

    @ivar backend: how new connections are made.
    @ivar closed: L{close} was called: connections given back are closed.
    """

    def __init__(
        self,
        backend: IBackend,
        clock: interfaces.IReactorTime,
        limits: HTTPLimits = DEFAULT_LIMITS,
    ) -> None:
        self.backend = backend
        self.clock = clock
        self.limits = limits
        self.closed = False
        self._idle: OrderedDict[BackendConnection, interfaces.IDelayedCall | None] = OrderedDict()

    @property
    def idle(self) -> list[BackendConnection]:
        """
        The idle connections, oldest first.
        """
        return list(self._idle)

    def acquire(self, fresh: bool = False) -> defer.Deferred[BackendConnection]:
        """
        A connection for one request: the most recently used idle one that
        is still usable, unless C{fresh}, or a new one.

        @return: fires with the connection; cancelling it cancels a new
            connection's attempt.
        """
        if not fresh:
            while self._idle:
                conn, timer = self._idle.popitem(last=True)
                _cancel(timer)
                if conn.usable:
                    conn.reused = True
                    return defer.succeed(conn)
                conn.abort()
        conn = BackendConnection(self.limits)
        conn.onLost = self._lost
        return self.backend.connect(conn).addCallback(lambda _: conn)

    def release(self, conn: BackendConnection, reusable: bool = True) -> None:
        """
        Take C{conn} back: keep it idle if C{reusable} and still usable and
        there is room, close it otherwise.
        """
        if not reusable or self.closed or not conn.usable or self.limits.pool_max_idle == 0:
            conn.close()
            return
        timeout = self.limits.pool_idle_timeout
        timer = None if timeout is None else self.clock.callLater(timeout, self._expire, conn)
        self._idle[conn] = timer
        most = self.limits.pool_max_idle
        while most is not None and len(self._idle) > most:
            oldest, oldTimer = self._idle.popitem(last=False)
            _cancel(oldTimer)
            oldest.close()

    def close(self) -> None:
        """
        Close every idle connection, and every connection given back later.
        """
        self.closed = True
        while self._idle:
            conn, timer = self._idle.popitem(last=False)
            _cancel(timer)
            conn.close()

    def _expire(self, conn: BackendConnection) -> None:
        self._idle.pop(conn, None)
        conn.close()

    def _lost(self, conn: BackendConnection) -> None:
        _cancel(self._idle.pop(conn, None))


def _cancel(timer: interfaces.IDelayedCall | None) -> None:
    if timer is not None and timer.active():
        timer.cancel()
