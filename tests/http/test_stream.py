"""
Tests for the stream path (L{nfltr.http.stream}, L{nfltr.http._stream}):
the full proxy's behaviour tests run on it (what both paths must do alike),
with the few where the stream path differs by design replaced by its own;
then what is only its own.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet import defer
from twisted.internet.address import IPv6Address
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactor, StringTransport
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http import BackendConnection, FunctionBackend, HTTPLimits, HTTPProxyFactory
from nfltr.http.stream import StreamProxyProtocol
from nfltr.wire.policy import policy_from_options
from tests.test_splice import SocketLikeTransport

from . import test_flow, test_proxy, test_smuggling, test_tls, test_upgrade
from .helpers import (
    Harness,
    OnStreamPath,
    ScriptedServer,
    Visitor,
    fixed,
    parseResponses,
    request,
)
from .test_smuggling import HOSTS, LengthOnlyServer, status


def received(visitor: Any) -> bytes:
    """
    All a visitor received.
    """
    return bytes(visitor.received)


class ForwardingTests(OnStreamPath, test_proxy.ForwardingTests):
    def test_http10Visitor(self) -> None:
        """
        An HTTP/1.0 visitor's request goes on as HTTP/1.0 (so the service
        frames its response for HTTP/1.0), asking this hop's connection to
        stay open; the visitor's connection closes after its response.
        """
        h = Harness(fixed(b"abc"))
        visitor, _ = h.visit(request(version=b"1.0"))
        [server] = h.backend.servers
        [(sent, _)] = server.requests
        self.assertEqual(sent.http_version, b"1.0")
        self.assertIn((b"connection", b"keep-alive"), list(sent.headers))
        self.assertTrue(visitor.cleanlyClosed)
        self.assertIn(b"\r\nConnection: close\r\n", received(visitor))
        self.assertEqual(parseResponses(received(visitor))[0][1], b"abc")

    def test_visitorAddress(self) -> None:
        """
        The forwarding headers name an IPv6 visitor; the factory's
        connections take the stream path.
        """
        h = Harness(fixed(b"ok"))
        h.visit(request(), address=IPv6Address("TCP", "2001:db8::1", 443))
        headers = dict(h.backend.servers[0].requests[0][0].headers)
        self.assertEqual(
            headers[b"forwarded"], b'for="[2001:db8::1]";proto=https;host=example.test')
        self.assertIsInstance(h.factory.proxyFor(None), StreamProxyProtocol)


class SplitTests(OnStreamPath, test_proxy.SplitTests):
    pass


class KeepAliveTests(OnStreamPath, test_proxy.KeepAliveTests):
    def test_sequentialRequestsOnePooledConnection(self) -> None:
        """
        Three requests in turn on one visitor connection are all served by
        one service connection, which stays with the visitor's and goes
        back to the shared pool when it closes.
        """
        h = Harness(fixed(b"ok"), pool=True)
        visitor, _ = h.visit(request())
        h.send(visitor, request(target=b"/2"))
        h.send(visitor, request(target=b"/3"))
        self.assertEqual(len(parseResponses(received(visitor), [b"GET"] * 3, False)), 3)
        self.assertEqual(len(h.backend.servers[0].requests), 3)
        assert h.pool is not None
        self.assertEqual(h.pool.idle, [])
        visitor.transport.loseConnection()
        h.network.run()
        self.assertEqual(len(h.pool.idle), 1)
        self.assertEqual(len(h.backend.servers), 1)


class ErrorTests(OnStreamPath, test_proxy.ErrorTests):
    pass


class TimeoutTests(OnStreamPath, test_proxy.TimeoutTests):
    pass


class ExchangeTimeoutTests(OnStreamPath, test_proxy.ExchangeTimeoutTests):
    pass


class GateTests(OnStreamPath, test_proxy.GateTests):
    def test_everyRequestChecked(self) -> None:
        """
        The gate sees every request of a keep-alive connection: the second,
        without credentials, gets 401 after the first's response, and never
        reaches the service.
        """
        policy = policy_from_options("ann:s3cret", None, [], [])
        h = Harness(fixed(b"secret page"), gate=policy.gate)
        good = request(headers=b"Authorization: Basic YW5uOnMzY3JldA==\r\n")
        visitor, _ = h.visit(good + request(target=b"/second"))
        responses = parseResponses(received(visitor), [b"GET", b"GET"])
        self.assertEqual([r.status_code for r, _, _ in responses], [200, 401])
        self.assertEqual([r.target for r, _ in h.backend.servers[0].requests], [b"/"])
        self.assertTrue(visitor.cleanlyClosed)


class RefusedFramingTests(OnStreamPath, test_smuggling.RefusedFramingTests):
    pass


#: Heads the full proxy repairs and the stream path refuses (it forwards
#: heads as they came, so the next hop must read them one way only).
REPAIRED = {
    "bare LF": b"POST /a HTTP/1.1\nHost: blog.test\nContent-Length: 2\n\nok",
    "bare LF in one line": b"POST /a HTTP/1.1\r\nHost: blog.test\nContent-Length: 2\r\n\r\nok",
    "obs-fold": b"GET /a HTTP/1.1\r\nHost: blog.test\r\nX-A: 1\r\n\t2\r\n\r\n",
    "equal lengths": b"POST /a HTTP/1.1\r\nHost: blog.test\r\nContent-Length: 2\r\n"
                     b"Content-Length: 2\r\n\r\nok",
    "length list": b"POST /a HTTP/1.1\r\nHost: blog.test\r\nContent-Length: 2, 2\r\n\r\nok",
    "no Host": b"GET /a HTTP/1.1\r\n\r\n",
    "two Hosts": b"GET /a HTTP/1.1\r\nHost: blog.test\r\nHost: blog.test\r\n\r\n",
    "HTTP/2 line": b"GET /a HTTP/2.0\r\nHost: blog.test\r\n\r\n",
    "NUL in a value": b"GET /a HTTP/1.1\r\nHost: blog.test\r\nX: a\x00b\r\n\r\n",
    "sign in a length": b"POST /a HTTP/1.1\r\nHost: blog.test\r\nContent-Length: +2\r\n\r\nok",
}


class ForwardedFramingTests(OnStreamPath, test_smuggling.ForwardedFramingTests):
    def refused(self, raw: bytes) -> None:
        """
        C{raw} gets 400 and a closed connection; nothing reaches the service.
        """
        for readSize in (len(raw), 1):
            h = Harness(serve=LengthOnlyServer, pool=True, hosts=HOSTS, readSize=readSize)
            visitor, _ = h.visit(raw)
            self.assertEqual(status(received(visitor)), 400, raw)
            self.assertTrue(visitor.cleanlyClosed)
            self.assertEqual(h.backend.servers, [])

    def test_sameContentLengths(self) -> None:
        """
        Repeated lengths, even equal: 400.
        """
        self.refused(REPAIRED["equal lengths"])
        self.refused(REPAIRED["length list"])

    def test_obsFoldUnfolded(self) -> None:
        """
        An obs-fold: 400 (RFC 9112 section 5.2 lets a server refuse it).
        """
        self.refused(REPAIRED["obs-fold"])

    def test_bareLF(self) -> None:
        """
        A bare LF line end: 400.
        """
        self.refused(REPAIRED["bare LF"])
        self.refused(REPAIRED["bare LF in one line"])

    def test_repairedRefused(self) -> None:
        """
        Every case in L{REPAIRED}: 400, nothing forwarded.
        """
        for raw in REPAIRED.values():
            self.refused(raw)

    def test_chunkedStaysChunked(self) -> None:
        """
        A chunked request body reaches the service as it came, extensions
        included, with no C{Content-Length}.
        """
        raw = (b"POST /a HTTP/1.1\r\nHost: blog.test\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"3;ext=1\r\nabc\r\n0\r\n\r\n")
        got = self.forward(raw)
        self.assertNotIn(b"content-length", got.lower())
        self.assertIn(b"\r\nTransfer-Encoding: chunked\r\n", got)
        self.assertTrue(got.endswith(b"\r\n\r\n3;ext=1\r\nabc\r\n0\r\n\r\n"))


class MisdirectedTests(OnStreamPath, test_smuggling.MisdirectedTests):
    pass


class CaptureTests(OnStreamPath, test_smuggling.CaptureTests):
    pass


class PooledFramingTests(OnStreamPath, test_smuggling.PooledFramingTests):
    def pooled(self, h: Harness) -> int:
        """
        Idle pooled connections once the visitors closed theirs (a service
        connection stays with its visitor's until then).
        """
        for visitor in h.visitors:
            if visitor.lost is None:
                visitor.transport.loseConnection()
        h.network.run()
        return super().pooled(h)

    def test_closeDelimited(self) -> None:
        """
        A response delimited by the service's close: the visitor's
        connection closes after it too (the stream path does not chunk it
        again), told so; nothing is pooled.
        """
        h = Harness(lambda request, body: (b"HTTP/1.1 200 OK\r\n\r\nall", True), pool=True)
        visitor, _ = h.visit(request())
        [(_, body, _)] = parseResponses(received(visitor))
        self.assertEqual(body, b"all")
        self.assertIn(b"\r\nConnection: close\r\n", received(visitor))
        self.assertTrue(visitor.cleanlyClosed)
        self.assertEqual(self.pooled(h), 0)


class AnyHeadTests(OnStreamPath, test_smuggling.AnyHeadTests):
    pass


class UpgradeTests(OnStreamPath, test_upgrade.UpgradeTests):
    def test_switch(self) -> None:
        """
        The upgrade request reaches the service with its C{Upgrade} and
        C{Connection: upgrade}; the C{101} reaches the visitor as the
        service wrote it, followed by what came in the same write; what the
        visitor sent after its request reaches the service.
        """
        _, visitor, _, server = self.upgraded()
        assert server.head is not None
        head = server.head.lower()
        self.assertIn(b"\r\nupgrade: websocket", head)
        self.assertIn(b"\r\nconnection: upgrade", head)
        self.assertEqual(server.raw, b"early bytes")
        self.assertEqual(
            received(visitor), test_upgrade.SWITCH + b"hello from backendecho:early bytes")

    def test_rawBothWays(self) -> None:
        """
        After the switch, bytes pass unchanged both ways (what looks like
        HTTP too), and the pool never gets the connection.
        """
        h, visitor, proxy, server = self.upgraded()
        before = len(received(visitor))
        assert isinstance(visitor, Visitor)
        h.send(visitor, b"GET / HTTP/1.1\r\n\r\n")
        self.assertEqual(server.raw, b"early bytesGET / HTTP/1.1\r\n\r\n")
        self.assertEqual(received(visitor)[before:], b"echo:GET / HTTP/1.1\r\n\r\n")
        assert isinstance(proxy, StreamProxyProtocol)
        self.assertTrue(proxy.exchange.raw)
        assert h.pool is not None
        self.assertEqual(h.pool.idle, [])

    def test_refused(self) -> None:
        """
        A service that answers an upgrade request with a plain response:
        it goes to the visitor as one, and the connection carries on.
        """
        answer = b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 4\r\n\r\nnope"
        h = Harness(serve=lambda: test_upgrade.UpgradeServer(answer))
        visitor, proxy = h.visit(test_upgrade.UPGRADE)
        [(response, body, _)] = parseResponses(received(visitor), closed=False)
        self.assertEqual((response.status_code, body), (426, b"nope"))
        self.assertIsNone(visitor.lost)
        assert isinstance(proxy, StreamProxyProtocol)
        self.assertFalse(proxy.exchange.raw)


class BackpressureTests(OnStreamPath, test_flow.BackpressureTests):
    def test_chunkedDownloadStreams(self) -> None:
        """
        A response of unknown length streams to the visitor whole, under
        flow control, and its connection closes after it.
        """
        body = b"z" * test_flow.MIB
        h = Harness(lambda request, received: (b"HTTP/1.0 200 OK\r\n\r\n" + body, True))
        visitor, _ = h.visit(request())
        [(_, got, _)] = parseResponses(received(visitor))
        self.assertEqual(got, body)
        self.assertTrue(visitor.cleanlyClosed)

    def test_pipelineBounded(self) -> None:
        """
        A visitor that pipelines far ahead is no longer read once
        L{HTTPLimits.max_pipelined} requests wait for their responses, and
        is read again as they come.
        """
        limits = HTTPLimits(max_pipelined=3)
        h = Harness(serve=lambda: test_flow._Silent(fixed(b"")), limits=limits)
        visitor, proxy = h.visit(request())
        for _ in range(100):
            visitor.transport.write(request(headers=b"X-Pad: " + b"p" * 1000 + b"\r\n"))
        h.network.run()
        self.assertEqual(proxy.transport.producerState, "paused")
        server = h.backend.servers[0]
        self.assertEqual(len(server.requests), 3)
        server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        h.network.run()
        self.assertEqual(len(server.requests), 4)


class TLSVisitorTests(OnStreamPath, test_tls.TLSVisitorTests):
    pass


def socketBackend() -> tuple[FunctionBackend, list[SocketLikeTransport]]:
    """
    A backend whose connections are each over a new L{SocketLikeTransport}
    (Twisted's own write path, over a socket that takes nothing until the
    test gives it room), and the list they go in.
    """
    sockets: list[SocketLikeTransport] = []

    def connect(conn: BackendConnection) -> defer.Deferred[BackendConnection]:
        sock = SocketLikeTransport(MemoryReactor())
        sockets.append(sock)
        conn.makeConnection(sock)
        return defer.succeed(conn)

    return FunctionBackend(connect), sockets


class SwitchedHalfCloseTests(SynchronousTestCase):
    """
    After a switch, the visitor's end of input half-closes the service
    connection, over Twisted's own write path (L{SocketLikeTransport}).
    """

    def switched(self) -> tuple[StreamProxyProtocol, StringTransport, SocketLikeTransport]:
        """
        A visitor switched to raw bytes (C{101}) with a service connection
        over a socket that takes nothing until the test gives it room.
        """
        backend, sockets = socketBackend()
        proxy = HTTPProxyFactory(backend, Clock()).proxyFor(None)
        assert isinstance(proxy, StreamProxyProtocol)
        visitor = StringTransport()
        proxy.makeConnection(visitor)
        proxy.dataReceived(test_upgrade.UPGRADE)
        [sock] = sockets
        assert proxy.backend is not None
        proxy.backend.dataReceived(test_upgrade.SWITCH)
        self.assertTrue(proxy.exchange.raw)
        sock.drain()  # the upgrade request went out
        del sock.sent[:]
        sock.room = 0
        return proxy, visitor, sock

    def test_eofBehindFullServiceHalfCloses(self) -> None:
        """
        The visitor's end of input that comes while the bytes before it
        fill the service's socket (a TLS C{close_notify} read with the last
        records) still shuts the service connection's write side once the
        socket drained, and not before.  Twisted's write path resumes a
        paused producer instead of shutting the write side when its buffer
        empties, so the visitor's side must stop being that producer first:
        otherwise the service never sees the end of the stream.
        """
        proxy, visitor, sock = self.switched()
        proxy.dataReceived(b"x" * 4096)
        self.assertEqual(visitor.producerState, "paused")
        proxy.readConnectionLost()
        self.assertFalse(sock.writeClosed)
        sock.drain()
        self.assertEqual(bytes(sock.sent), b"x" * 4096)
        self.assertTrue(sock.writeClosed)
        self.assertFalse(sock.disconnecting)

    def test_halfCloseThenClose(self) -> None:
        """
        The visitor half-closes after the switch: the service reads to the
        end and closes, and then both connections end cleanly.
        """
        h = Harness(serve=test_upgrade.UpgradeServer, stream=True)
        visitor, proxy = h.visit(test_upgrade.UPGRADE)
        [server] = h.backend.servers
        visitor.transport.write(b"last")
        visitor.transport.loseWriteConnection()
        h.network.run()
        self.assertEqual(server.raw, b"last")
        self.assertIsNotNone(server.lost)
        self.assertTrue(visitor.eof)
        self.assertTrue(visitor.cleanlyClosed)
        self.assertIsNone(proxy.backend)


class StreamOnlyTests(SynchronousTestCase):
    """
    What only the stream path does.
    """

    def test_bytesAsTheyCame(self) -> None:
        """
        A response goes to the visitor byte for byte as the service wrote
        it (its hop-by-hop C{Keep-Alive} too), and a body as it came.
        """
        raw = (b"HTTP/1.1 200 Fine\r\nKeep-Alive: timeout=5\r\nX-Odd:   spaced  \r\n"
               b"Transfer-Encoding: chunked\r\n\r\n2;x=y\r\nok\r\n0\r\nT: 1\r\n\r\n")
        h = Harness(lambda request, body: (raw, False), stream=True)
        visitor, _ = h.visit(request() + request())
        self.assertEqual(received(visitor), raw * 2)
        self.assertIsNone(visitor.lost)

    def test_serviceCloseHidden(self) -> None:
        """
        A service that closes its connection after each response: the
        visitor is not told C{close} (its head is written again without
        it) and keeps its connection; the next request gets a new service
        connection.
        """
        h = Harness(fixed(b"ok", close=True), stream=True)
        visitor, _ = h.visit(request())
        h.send(visitor, request())
        self.assertEqual(len(parseResponses(received(visitor), [b"GET"] * 2, False)), 2)
        self.assertNotIn(b"close", received(visitor).lower())
        self.assertEqual(len(h.backend.servers), 2)
        self.assertIsNone(visitor.lost)

    def test_visitorCloseAdded(self) -> None:
        """
        A visitor's C{Connection: close} does not reach the service (its
        connection may serve others); the response says C{close} and the
        visitor's connection ends after it.
        """
        h = Harness(fixed(b"ok"), pool=True, stream=True)
        visitor, _ = h.visit(request(headers=b"Connection: close\r\n"))
        [(sent, _)] = h.backend.servers[0].requests
        self.assertNotIn(b"connection", dict(sent.headers))
        self.assertIn(b"\r\nConnection: close\r\n", received(visitor))
        self.assertTrue(visitor.cleanlyClosed)
        assert h.pool is not None
        self.assertEqual(len(h.pool.idle), 1)

    def test_refusalInTurn(self) -> None:
        """
        A malformed request pipelined behind a good one is answered 400
        after the good one's response, never forwarded.
        """
        h = Harness(serve=LengthOnlyServer, stream=True, hosts=HOSTS)
        good = b"GET /a HTTP/1.1\r\nHost: blog.test\r\n\r\n"
        visitor, _ = h.visit(good + REPAIRED["obs-fold"])
        responses = parseResponses(received(visitor), [b"GET", b"GET"])
        self.assertEqual([r.status_code for r, _, _ in responses], [200, 400])
        self.assertEqual([seen[0] for seen in h.backend.servers[0].seen], [b"GET /a HTTP/1.1"])

    def test_earlyAnswerNotPooled(self) -> None:
        """
        A response before the request's body was all sent: the visitor is
        told C{close}, and the service connection is not pooled.
        """
        answered: list[bool] = []

        class Early(ScriptedServer):
            def dataReceived(self, data: bytes) -> None:
                if not answered:
                    answered.append(True)
                    self.transport.write(b"HTTP/1.1 413 Too Big\r\nContent-Length: 0\r\n\r\n")

        h = Harness(serve=lambda: Early(fixed(b"")), pool=True, stream=True)
        visitor, _ = h.visit(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        self.assertIn(b"\r\nConnection: close\r\n", received(visitor))
        assert h.pool is not None
        self.assertEqual(h.pool.idle, [])

    @settings(max_examples=60)
    @given(st.lists(st.sampled_from([b"GET", b"HEAD", b"POST", b"PUT"]), min_size=1, max_size=6),
           st.integers(min_value=1, max_value=64))
    def test_pipelinedMethodsInOrder(self, methods: list[bytes], readSize: int) -> None:
        """
        Pipelined requests of any methods, any read sizes: every response
        comes back in order, bodies to all but C{HEAD}.
        """
        def handler(request: Any, body: bytes) -> tuple[bytes, bool]:
            answer = request.method + request.target
            head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(answer)
            return head + (b"" if request.method == b"HEAD" else answer), False

        h = Harness(handler, readSize=readSize, stream=True)
        raw = b"".join(request(m, b"/%d" % i, body=b"x" * i if m in (b"POST", b"PUT") else b"")
                       for i, m in enumerate(methods))
        visitor, _ = h.visit(raw)
        responses = parseResponses(received(visitor), methods, False)
        expected = [b"" if m == b"HEAD" else m + b"/%d" % i for i, m in enumerate(methods)]
        self.assertEqual([body for _, body, _ in responses], expected)


class _HeadTap:
    """
    An L{nfltr.http.IExchangeTap} that records the heads it is told of.
    """

    def __init__(self) -> None:
        self.heard: list[tuple[Any, ...]] = []

    def opened(self, *args: Any) -> _HeadTap:
        self.heard.append(("opened", *args))
        return self

    def openedHead(self, method: bytes, target: bytes, head: bytes, visitor: Any) -> _HeadTap:
        self.heard.append(("openedHead", method, target, head))
        return self

    def response(self, status: int, headers: Any) -> None:
        self.heard.append(("response", status))

    def responseHead(self, status: int, head: bytes) -> None:
        self.heard.append(("responseHead", status, head))

    def requestBody(self, data: bytes) -> None:
        pass

    def responseBody(self, data: bytes) -> None:
        pass

    def ended(self, outcome: str) -> None:
        self.heard.append(("ended", outcome))

    def switchedData(self, fromVisitor: bool, data: bytes) -> None:
        pass


class TapHeadTests(SynchronousTestCase):
    """
    The stream path tells a tap of each head as bytes: the request's as it
    came, the response's as it went to the visitor.
    """

    def test_heads(self) -> None:
        """
        A request head goes to the tap whole, as the visitor sent it; a
        response head as the visitor got it (written again here, saying
        C{close}, since the visitor asked for it).
        """
        tap = _HeadTap()
        h = Harness(fixed(b"ok", extra=b"X-App: yes\r\n"), stream=True)
        h.factory.tap = tap
        sent = request(headers=b"X-Odd-Case: Value\r\nConnection: close\r\n")
        visitor, _ = h.visit(sent)
        opened, response, ended = tap.heard
        self.assertEqual(opened, ("openedHead", b"GET", b"/", sent))
        self.assertEqual(response[:2], ("responseHead", 200))
        self.assertTrue(received(visitor).startswith(response[2]))
        self.assertIn(b"Connection: close\r\n", response[2])
        self.assertEqual(ended, ("ended", "complete"))
