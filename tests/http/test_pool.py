"""
Tests for L{nfltr.http.pool}: the backend pool (reuse, idle eviction, max
idle, connections closed by the server), the backend connection protocol,
and the backend adapters.
"""

from __future__ import annotations

from typing import Any

import h11
from twisted.internet import defer
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactor, StringTransport
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http import (
    BackendConnection,
    BackendPool,
    EndpointBackend,
    FunctionBackend,
    HTTPLimits,
)

from .helpers import FakeBackend, Network, ScriptedServer, fixed


class PoolTests(SynchronousTestCase):
    """
    A pool hands out idle connections that are still usable, or new ones.
    """

    def setUp(self) -> None:
        self.network = Network()
        self.backend = FakeBackend(self.network, lambda: ScriptedServer(fixed(b"ok")))

    def pool(self, **limits: Any) -> BackendPool:
        """
        A pool on the fake backend.
        """
        return BackendPool(self.backend, self.network.clock, HTTPLimits(**limits))

    def test_reuse(self) -> None:
        """
        A connection given back is handed out again, marked reused; the
        most recently given back first.
        """
        pool = self.pool()
        a = self.successResultOf(pool.acquire())
        b = self.successResultOf(pool.acquire())
        self.assertFalse(a.reused)
        pool.release(a)
        pool.release(b)
        self.assertEqual(pool.idle, [a, b])
        self.assertIs(self.successResultOf(pool.acquire()), b)
        self.assertTrue(b.reused)
        self.assertEqual(len(self.backend.servers), 2)

    def test_fresh(self) -> None:
        """
        A fresh connection is asked for: the idle ones stay idle.
        """
        pool = self.pool()
        a = self.successResultOf(pool.acquire())
        pool.release(a)
        self.assertIsNot(self.successResultOf(pool.acquire(fresh=True)), a)
        self.assertEqual(pool.idle, [a])

    def test_idleTimeout(self) -> None:
        """
        An idle connection is closed after the idle timeout.
        """
        pool = self.pool(pool_idle_timeout=30.0)
        conn = self.successResultOf(pool.acquire())
        pool.release(conn)
        self.network.advance(29)
        self.assertEqual(pool.idle, [conn])
        self.network.advance(1)
        self.assertEqual(pool.idle, [])
        self.assertTrue(conn.closed)
        self.assertIsNotNone(self.backend.servers[0].lost)

    def test_timerCancelledOnReuse(self) -> None:
        """
        A connection handed out again is not closed by its idle timer.
        """
        pool = self.pool(pool_idle_timeout=30.0)
        conn = self.successResultOf(pool.acquire())
        pool.release(conn)
        self.successResultOf(pool.acquire())
        self.network.advance(60)
        self.assertFalse(conn.closed)

    def test_maxIdle(self) -> None:
        """
        Beyond the most idle connections allowed, the oldest is closed.
        """
        pool = self.pool(pool_max_idle=2)
        conns = [self.successResultOf(pool.acquire()) for _ in range(3)]
        for conn in conns:
            pool.release(conn)
        self.network.run()
        self.assertEqual(pool.idle, conns[1:])
        self.assertTrue(conns[0].closed)

    def test_noIdle(self) -> None:
        """
        With no idle connections allowed, every connection given back closes.
        """
        pool = self.pool(pool_max_idle=0)
        conn = self.successResultOf(pool.acquire())
        pool.release(conn)
        self.network.run()
        self.assertTrue(conn.closed)

    def test_notReusable(self) -> None:
        """
        A connection given back as not reusable, or in the middle of an
        exchange, is closed.
        """
        pool = self.pool()
        a = self.successResultOf(pool.acquire())
        pool.release(a, reusable=False)
        b = self.successResultOf(pool.acquire())
        get = h11.Request(method="GET", target="/", headers=[("Host", "x")])
        b.transport.write(b.client.send(get))
        pool.release(b)
        self.network.run()
        self.assertEqual(pool.idle, [])
        self.assertTrue(a.closed and b.closed)

    def test_closedByServer(self) -> None:
        """
        A pooled connection the server closes leaves the pool, and is not
        handed out.
        """
        pool = self.pool()
        conn = self.successResultOf(pool.acquire())
        pool.release(conn)
        self.backend.servers[0].transport.loseConnection()
        self.network.run()
        self.assertEqual(pool.idle, [])
        self.assertIsNot(self.successResultOf(pool.acquire()), conn)

    def test_endOfInputNotHandedOut(self) -> None:
        """
        A pooled connection whose end of input was read, or that is closing,
        is not handed out even before it is gone.
        """
        pool = self.pool()
        for spoil in (lambda c: c.readConnectionLost(), lambda c: c.transport.loseConnection()):
            conn = BackendConnection()
            conn.makeConnection(StringTransport())
            pool.release(conn)
            self.assertEqual(pool.idle, [conn])
            spoil(conn)
            self.assertFalse(conn.usable)
            self.assertIsNot(self.successResultOf(pool.acquire()), conn)

    def test_bytesWhileIdle(self) -> None:
        """
        Bytes from an idle connection abort it.
        """
        pool = self.pool()
        conn = self.successResultOf(pool.acquire())
        pool.release(conn)
        self.backend.servers[0].transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        self.network.run()
        self.assertEqual(pool.idle, [])
        self.assertTrue(conn.transport.aborted)

    def test_close(self) -> None:
        """
        Closing the pool closes its idle connections, and the connections
        given back later.
        """
        pool = self.pool()
        a = self.successResultOf(pool.acquire())
        b = self.successResultOf(pool.acquire())
        pool.release(a)
        pool.close()
        pool.release(b)
        self.network.run()
        self.assertEqual(pool.idle, [])
        self.assertTrue(a.closed and b.closed)
        self.assertEqual(self.network.clock.getDelayedCalls(), [])

    def test_cancel(self) -> None:
        """
        Cancelling an acquisition cancels the connection attempt.
        """
        self.backend.hold = True
        d = self.pool().acquire()
        d.cancel()
        self.assertEqual(self.backend.cancelled, 1)
        self.failureResultOf(d, defer.CancelledError)

    def test_refused(self) -> None:
        """
        A refused attempt fails the acquisition.
        """
        self.backend.refuse = True
        self.failureResultOf(self.pool().acquire())


class BackendAdapterTests(SynchronousTestCase):
    """
    Backends made from a function or an endpoint.
    """

    def test_function(self) -> None:
        """
        L{FunctionBackend} calls its function with the protocol.
        """
        seen: list[Any] = []
        proto = Protocol()
        backend = FunctionBackend(lambda p: seen.append(p) or defer.succeed(p))
        self.assertIs(self.successResultOf(backend.connect(proto)), proto)
        self.assertEqual(seen, [proto])

    def test_endpoint(self) -> None:
        """
        L{EndpointBackend} connects the very protocol through the endpoint.
        """
        reactor = MemoryReactor()
        backend = EndpointBackend(TCP4ClientEndpoint(reactor, "127.0.0.1", 3000))
        proto = Protocol()
        d = backend.connect(proto)
        host, port, factory, _, _ = reactor.tcpClients[0]
        self.assertEqual((host, port), ("127.0.0.1", 3000))
        self.assertIs(factory.buildProtocol(None)._wrappedProtocol, proto)
        self.assertNoResult(d)
