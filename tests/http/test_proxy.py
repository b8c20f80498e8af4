"""
Tests for L{nfltr.http.proxy}: requests and responses through the proxy
between an in-memory visitor and in-memory backends: forwarding, framing,
keep-alive, errors and timeouts.
"""

from __future__ import annotations

import hashlib

import h11
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet import error
from twisted.internet.address import IPv6Address, UNIXAddress
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http import HTTPLimits, HTTPProxyProtocol
from nfltr.http.proxy import addressText

from .helpers import Harness, ScriptedServer, fixed, parseResponses, request


def headersOf(event: h11.Request | h11.Response) -> dict[bytes, list[bytes]]:
    """
    Header values by lowercased name.
    """
    out: dict[bytes, list[bytes]] = {}
    for name, value in event.headers:
        out.setdefault(name, []).append(value)
    return out


class ForwardingTests(SynchronousTestCase):
    """
    Requests reach the backend rewritten; responses come back whole.
    """

    def test_getWithContentLength(self) -> None:
        """
        A GET reaches the backend with the forwarding headers and without
        hop-by-hop ones; its response comes back with status, reason phrase,
        headers and body, and the visitor connection stays open.
        """
        h = Harness(fixed(b"hello", status=b"203 Quite Custom", extra=b"X-App: 1\r\n"))
        visitor, _ = h.visit(request(headers=b"Connection: keep-alive, X-Drop\r\nX-Drop: 1\r\n"))
        [(response, body, _)] = parseResponses(bytes(visitor.received), closed=False)
        self.assertEqual(
            (response.status_code, response.reason, body), (203, b"Quite Custom", b"hello")
        )
        self.assertEqual(headersOf(response)[b"x-app"], [b"1"])
        [(sent, _)] = h.backend.servers[0].requests
        headers = headersOf(sent)
        self.assertEqual(headers[b"x-forwarded-for"], [b"203.0.113.5"])
        self.assertEqual(headers[b"x-forwarded-proto"], [b"https"])
        self.assertEqual(headers[b"forwarded"], [b"for=203.0.113.5;proto=https;host=example.test"])
        self.assertNotIn(b"x-drop", headers)
        self.assertNotIn(b"connection", headers)
        self.assertIsNone(visitor.lost)

    def test_postWithContentLength(self) -> None:
        """
        A request body with a Content-Length reaches the backend whole.
        """
        body = bytes(range(256)) * 40
        h = Harness(fixed(b"ok"))
        visitor, _ = h.visit(request(b"POST", body=body))
        self.assertEqual(h.backend.servers[0].requests[0][1], body)
        self.assertEqual(parseResponses(bytes(visitor.received), closed=False)[0][1], b"ok")

    def test_chunkedRequest(self) -> None:
        """
        A chunked request body goes to the backend chunked, and whole.
        """
        h = Harness(fixed(b"ok"))
        raw = request(b"POST", headers=b"Transfer-Encoding: chunked\r\n")
        visitor, _ = h.visit(raw + b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        sent, body = h.backend.servers[0].requests[0]
        self.assertEqual(body, b"abcde")
        self.assertEqual(headersOf(sent)[b"transfer-encoding"], [b"chunked"])
        self.assertEqual(parseResponses(bytes(visitor.received), closed=False)[0][1], b"ok")

    def test_chunkedResponse(self) -> None:
        """
        A chunked response reaches an HTTP/1.1 visitor chunked, and whole.
        """
        raw = (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        )
        h = Harness(lambda r, b: (raw, False))
        visitor, _ = h.visit(request())
        [(response, body, _)] = parseResponses(bytes(visitor.received), closed=False)
        self.assertEqual(body, b"hello world")
        self.assertEqual(headersOf(response)[b"transfer-encoding"], [b"chunked"])

    def test_headResponse(self) -> None:
        """
        The response to a HEAD keeps its Content-Length and has no body; its
        backend connection is not reused (a server that sent the body anyway
        would answer the next request with it).
        """
        def handler(request: h11.Request, body: bytes) -> tuple[bytes, bool]:
            head = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n"
            return head + (b"" if request.method == b"HEAD" else b"body"), False

        h = Harness(handler)
        visitor, _ = h.visit(request(b"HEAD") + request())
        responses = parseResponses(bytes(visitor.received), [b"HEAD", b"GET"], closed=False)
        self.assertEqual([body for _, body, _ in responses], [b"", b"body"])
        self.assertEqual(headersOf(responses[0][0])[b"content-length"], [b"4"])
        self.assertEqual(len(h.backend.servers), 2)

    def test_http10Visitor(self) -> None:
        """
        An HTTP/1.0 visitor gets a body of unknown length delimited by the
        close of its connection.
        """
        raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        h = Harness(lambda r, b: (raw, False))
        visitor, _ = h.visit(request(version=b"1.0"))
        self.assertNotIn(b"chunked", bytes(visitor.received))
        self.assertTrue(visitor.cleanlyClosed)
        self.assertEqual(parseResponses(bytes(visitor.received))[0][1], b"abc")

    def test_closeDelimitedRace(self) -> None:
        """
        500 visitors in turn, each with C{Connection: close}, against a
        backend that answers HTTP/1.0-style (no length) and closes right
        after the body in the same write: every byte of every body arrives,
        and every visitor connection ends cleanly.
        """
        def handler(request: h11.Request, body: bytes) -> tuple[bytes, bool]:
            n = int(request.target[1:])
            return b"HTTP/1.0 200 OK\r\nContent-Type: x\r\n\r\n" + _body(n), True

        h = Harness(handler)
        for n in range(500):
            version = b"1.0" if n % 3 == 0 else b"1.1"
            visitor, _ = h.visit(request(
                target=b"/%d" % n, headers=b"Connection: close\r\n", version=version
            ))
            self.assertTrue(visitor.cleanlyClosed, n)
            [(_, body, _)] = parseResponses(bytes(visitor.received))
            self.assertEqual(len(body), len(_body(n)), n)
            self.assertEqual(hashlib.sha256(body).digest(), hashlib.sha256(_body(n)).digest())

    def test_informational(self) -> None:
        """
        A C{100 Continue} reaches an HTTP/1.1 visitor before the response;
        an HTTP/1.0 visitor gets the response alone.
        """
        raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        h = Harness(lambda r, b: (raw, False))
        visitor, _ = h.visit(request(b"POST", headers=b"Expect: 100-continue\r\n", body=b"x"))
        [(_, body, info)] = parseResponses(bytes(visitor.received), closed=False)
        self.assertEqual([i.status_code for i in info], [100])
        self.assertEqual(body, b"ok")
        visitor, _ = h.visit(request(b"POST", body=b"x", version=b"1.0"))
        self.assertFalse(bytes(visitor.received).startswith(b"HTTP/1.1 100"))
        self.assertEqual(parseResponses(bytes(visitor.received))[0][1], b"ok")

    def test_hostRewrite(self) -> None:
        """
        A factory with a host gives the backend that C{Host}.
        """
        h = Harness(fixed(b"ok"), host=b"127.0.0.1:3000")
        h.visit(request())
        headers = headersOf(h.backend.servers[0].requests[0][0])
        self.assertEqual(headers[b"host"], [b"127.0.0.1:3000"])
        self.assertEqual(headers[b"x-forwarded-host"], [b"example.test"])

    def test_forwardingOff(self) -> None:
        """
        With forwarding off the visitor's forwarding headers pass as they are.
        """
        h = Harness(fixed(b"ok"), forwarded=False)
        h.visit(request(headers=b"X-Forwarded-For: 198.51.100.7\r\n"))
        headers = headersOf(h.backend.servers[0].requests[0][0])
        self.assertEqual(headers[b"x-forwarded-for"], [b"198.51.100.7"])
        self.assertNotIn(b"forwarded", headers)

    def test_visitorAddress(self) -> None:
        """
        C{buildProtocol} derives the visitor from an IPv4 or IPv6 address;
        other addresses give an unknown visitor.
        """
        self.assertEqual(addressText(IPv6Address("TCP", "2001:db8::1", 443)), "[2001:db8::1]:443")
        self.assertIsNone(addressText(UNIXAddress("/tmp/x")))
        h = Harness(fixed(b"ok"))
        h.visit(request(), address=IPv6Address("TCP", "2001:db8::1", 443))
        headers = headersOf(h.backend.servers[0].requests[0][0])
        self.assertEqual(
            headers[b"forwarded"], [b'for="[2001:db8::1]";proto=https;host=example.test']
        )
        self.assertIsInstance(h.factory.proxyFor(None), HTTPProxyProtocol)


class SplitTests(SynchronousTestCase):
    """
    However the bytes are cut into reads, the same requests and responses
    go through.
    """

    @settings(max_examples=40, deadline=None)
    @given(
        st.integers(min_value=1, max_value=300),
        st.lists(st.binary(max_size=400), min_size=1, max_size=4),
        st.booleans(),
    )
    def test_anyReads(self, readSize: int, bodies: list[bytes], chunked: bool) -> None:
        """
        Pipelined POSTs, echoed back with a length or chunked, every read
        of every connection at most C{readSize} bytes: each body reaches the
        backend and comes back whole, in order, over one backend connection.
        """
        def handler(request: h11.Request, body: bytes) -> tuple[bytes, bool]:
            if not chunked:
                head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
                return head + body, False
            chunk = b"%x\r\n%s\r\n" % (len(body), body) if body else b""
            head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            return head + chunk + b"0\r\n\r\n", False

        h = Harness(handler, readSize=readSize)
        visitor, _ = h.visit(b"".join(request(b"POST", body=body) for body in bodies))
        responses = parseResponses(bytes(visitor.received), [b"POST"] * len(bodies), False)
        self.assertEqual([got for _, got, _ in responses], bodies)
        self.assertEqual([got for _, got in h.backend.servers[0].requests], bodies)
        self.assertEqual(len(h.backend.servers), 1)


def _body(n: int) -> bytes:
    return hashlib.sha256(b"%d" % n).digest() * ((n * 37) % 2000)


class KeepAliveTests(SynchronousTestCase):
    """
    Visitor connections carry several requests; backend connections are reused.
    """

    def test_sequentialRequestsOnePooledConnection(self) -> None:
        """
        Three requests in turn on one visitor connection are all served by
        one backend connection from the shared pool, which keeps it after.
        """
        h = Harness(fixed(b"ok"), pool=True)
        visitor, _ = h.visit(request())
        h.send(visitor, request(target=b"/2"))
        h.send(visitor, request(target=b"/3"))
        self.assertEqual(len(parseResponses(bytes(visitor.received), [b"GET"] * 3, False)), 3)
        self.assertEqual(len(h.backend.servers), 1)
        self.assertEqual(len(h.backend.servers[0].requests), 3)
        assert h.pool is not None
        self.assertEqual(len(h.pool.idle), 1)

    def test_poolSharedAcrossVisitors(self) -> None:
        """
        Visitor connections in turn share the pooled connection.
        """
        h = Harness(fixed(b"ok"), pool=True)
        for _ in range(3):
            visitor, _ = h.visit(request(headers=b"Connection: close\r\n"))
            self.assertTrue(visitor.cleanlyClosed)
        self.assertEqual(len(h.backend.servers), 1)

    def test_pipelined(self) -> None:
        """
        Pipelined requests are answered in order, one at a time (on a new
        backend connection after the HEAD, whose response announced a
        length).
        """
        def handler(request: h11.Request, body: bytes) -> tuple[bytes, bool]:
            head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
            return head + (b"" if request.method == b"HEAD" else request.target[1:3]), False

        h = Harness(handler)
        pipelined = request(target=b"/aa") + request(b"HEAD", b"/bb") + request(target=b"/cc")
        visitor, _ = h.visit(pipelined)
        responses = parseResponses(bytes(visitor.received), [b"GET", b"HEAD", b"GET"], False)
        self.assertEqual([body for _, body, _ in responses], [b"aa", b"", b"cc"])
        self.assertEqual(len(h.backend.servers), 2)

    def test_bareBackendOneConnectionPerVisitor(self) -> None:
        """
        Without a shared pool one backend connection serves a visitor
        connection's requests, and closes with it.
        """
        h = Harness(fixed(b"ok"))
        visitor, _ = h.visit(request())
        h.send(visitor, request())
        self.assertEqual(len(h.backend.servers), 1)
        visitor.transport.loseConnection()
        h.network.run()
        self.assertIsNotNone(h.backend.servers[0].lost)

    def test_backendCloseNotReused(self) -> None:
        """
        A backend connection whose response said C{Connection: close} is
        not reused; the visitor connection goes on.
        """
        h = Harness(fixed(b"ok", close=True), pool=True)
        visitor, _ = h.visit(request())
        h.send(visitor, request())
        self.assertEqual(len(h.backend.servers), 2)
        self.assertIsNone(visitor.lost)
        self.assertNotIn(b"close", bytes(visitor.received).lower())

    def test_visitorCloseEndsConnection(self) -> None:
        """
        A visitor's C{Connection: close} closes its connection after the
        response, which says so.
        """
        h = Harness(fixed(b"ok"), pool=True)
        visitor, _ = h.visit(request(headers=b"Connection: close\r\n"))
        self.assertTrue(visitor.cleanlyClosed)
        self.assertIn(b"connection: close", bytes(visitor.received).lower())

    def test_visitorHalfClose(self) -> None:
        """
        A visitor that half-closes after its request still gets the response,
        then the connection closes.
        """
        h = Harness(fixed(b"ok"))
        visitor, _ = h.visit()
        visitor.transport.write(request())
        visitor.transport.loseWriteConnection()
        h.network.run()
        self.assertEqual(parseResponses(bytes(visitor.received))[0][1], b"ok")
        self.assertTrue(visitor.cleanlyClosed)

    def test_staleConnectionRetried(self) -> None:
        """
        A pooled connection that closes on the next request without a byte
        of response is replaced, once, for a safe request without a body.
        """
        answered: list[int] = []

        def handler(request: h11.Request, body: bytes) -> tuple[bytes, bool]:
            answered.append(1)
            if len(answered) == 2:
                return b"", True
            return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", False

        h = Harness(handler, pool=True)
        visitor, _ = h.visit(request())
        h.send(visitor, request())
        self.assertEqual(len(parseResponses(bytes(visitor.received), [b"GET"] * 2, False)), 2)
        self.assertEqual(len(h.backend.servers), 2)

    def test_staleConnectionNotRetriedWithBody(self) -> None:
        """
        A request whose body went out is not sent again: 502.
        """
        answered: list[int] = []

        def handler(request: h11.Request, body: bytes) -> tuple[bytes, bool]:
            answered.append(1)
            if len(answered) == 2:
                return b"", True
            return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", False

        h = Harness(handler, pool=True)
        visitor, _ = h.visit(request())
        h.send(visitor, request(b"POST", body=b"data"))
        responses = parseResponses(bytes(visitor.received), [b"GET", b"POST"])
        self.assertEqual(responses[1][0].status_code, 502)
        self.assertEqual(len(h.backend.servers), 1)


class ErrorTests(SynchronousTestCase):
    """
    What goes wrong gets an error response, or a cut.
    """

    def assertError(self, visitor: object, status: int) -> None:
        """
        The visitor got a short text/plain error with C{status}, then a close.
        """
        received = bytes(visitor.received)  # type: ignore[attr-defined]
        [(response, body, _)] = parseResponses(received)
        self.assertEqual(response.status_code, status)
        self.assertEqual(headersOf(response)[b"content-type"], [b"text/plain; charset=utf-8"])
        self.assertTrue(body.startswith(b"%d " % status))
        self.assertTrue(visitor.cleanlyClosed)  # type: ignore[attr-defined]

    def test_backendRefused(self) -> None:
        """
        A backend that cannot be reached: 502.
        """
        h = Harness(fixed(b"ok"))
        h.backend.refuse = True
        visitor, _ = h.visit(request())
        self.assertError(visitor, 502)

    def test_backendClosesWithoutResponse(self) -> None:
        """
        A backend that closes without answering: 502.
        """
        h = Harness(lambda r, b: (b"", True))
        visitor, _ = h.visit(request())
        self.assertError(visitor, 502)

    def test_malformedResponse(self) -> None:
        """
        A backend that answers something else than HTTP: 502.
        """
        h = Harness(lambda r, b: (b"SSH-2.0-OpenSSH\r\n\r\n", False))
        visitor, _ = h.visit(request())
        self.assertError(visitor, 502)

    def test_responseHeadTooLarge(self) -> None:
        """
        A response head above the limit: 502.
        """
        big = b"X-Big: " + b"a" * 2000 + b"\r\n"
        h = Harness(fixed(b"ok", extra=big), limits=HTTPLimits(max_response_head_size=1024))
        visitor, _ = h.visit(request())
        self.assertError(visitor, 502)

    def test_backendClosesMidBody(self) -> None:
        """
        A backend that closes in the middle of a body: the visitor connection
        is aborted, so the cut response does not look complete.
        """
        raw = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 500
        h = Harness(lambda r, b: (raw, True))
        visitor, proxy = h.visit(request())
        self.assertIsNotNone(visitor.lost)
        self.assertFalse(visitor.cleanlyClosed)
        self.assertTrue(proxy.transport.aborted)

    def test_backendClosesMidChunkedBody(self) -> None:
        """
        The same for a chunked body: no last chunk is made up.
        """
        raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
        h = Harness(lambda r, b: (raw, True))
        visitor, _ = h.visit(request())
        self.assertFalse(visitor.cleanlyClosed)
        self.assertNotIn(b"0\r\n\r\n", bytes(visitor.received))

    def test_malformedRequest(self) -> None:
        """
        A request that is not HTTP: 400, and no backend connection.
        """
        h = Harness(fixed(b"ok"))
        visitor, _ = h.visit(b"HELLO THERE\r\n\r\n")
        self.assertError(visitor, 400)
        self.assertEqual(h.backend.servers, [])

    def test_http11WithoutHost(self) -> None:
        """
        An HTTP/1.1 request without C{Host}: 400.
        """
        h = Harness(fixed(b"ok"))
        visitor, _ = h.visit(b"GET / HTTP/1.1\r\n\r\n")
        self.assertError(visitor, 400)

    def test_oversizedHead(self) -> None:
        """
        A request head above the limit: 431.
        """
        h = Harness(fixed(b"ok"), limits=HTTPLimits(max_request_head_size=4096))
        visitor, _ = h.visit(request(headers=b"X-Big: " + b"a" * 8000 + b"\r\n"))
        self.assertError(visitor, 431)
        self.assertEqual(h.backend.servers, [])

    def test_connect(self) -> None:
        """
        CONNECT is not supported: 405.
        """
        h = Harness(fixed(b"ok"))
        visitor, _ = h.visit(b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n")
        self.assertError(visitor, 405)
        self.assertEqual(h.backend.servers, [])

    def test_visitorGoneMidResponse(self) -> None:
        """
        A visitor that goes away during a response takes the backend
        connection with it: aborted, not pooled.
        """
        raw = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10
        h = Harness(lambda r, b: (raw, False), pool=True)
        visitor, _ = h.visit(request())
        visitor.transport.abortConnection()
        h.network.run()
        server = h.backend.servers[0]
        self.assertIsNotNone(server.lost)
        self.assertTrue(server.lost.check(error.ConnectionLost))
        assert h.pool is not None
        self.assertEqual(h.pool.idle, [])

    def test_visitorGoneWhileConnecting(self) -> None:
        """
        A visitor that goes away while the backend connection is being made
        cancels the attempt.
        """
        h = Harness(fixed(b"ok"))
        h.backend.hold = True
        visitor, _ = h.visit(request())
        visitor.transport.abortConnection()
        h.network.run()
        self.assertEqual(h.backend.cancelled, 1)


class TimeoutTests(SynchronousTestCase):
    """
    The idle timeout: between requests, and for the whole of a head.
    """

    def test_idleCloses(self) -> None:
        """
        A visitor that sends nothing for the idle timeout is closed quietly.
        """
        h = Harness(fixed(b"ok"))
        visitor, _ = h.visit()
        h.network.advance(59)
        self.assertIsNone(visitor.lost)
        h.network.advance(1)
        self.assertTrue(visitor.cleanlyClosed)
        self.assertEqual(bytes(visitor.received), b"")

    def test_idleAfterResponse(self) -> None:
        """
        The timeout counts again from the end of each response.
        """
        h = Harness(fixed(b"ok"))
        visitor, _ = h.visit()
        h.network.advance(50)
        h.send(visitor, request())
        h.network.advance(50)
        self.assertIsNone(visitor.lost)
        h.network.advance(10)
        self.assertTrue(visitor.cleanlyClosed)

    def test_partialHead(self) -> None:
        """
        A head trickled in, never complete within the timeout: 408.
        """
        h = Harness(fixed(b"ok"))
        visitor, _ = h.visit(b"GET / HTTP/1.1\r\n")
        for _ in range(6):
            h.send(visitor, b"X: y\r\n")
            h.network.advance(10)
        [(response, _, _)] = parseResponses(bytes(visitor.received))
        self.assertEqual(response.status_code, 408)
        self.assertTrue(visitor.cleanlyClosed)

    def test_noTimeout(self) -> None:
        """
        With no idle (and no exchange) timeout, nothing is timed.
        """
        h = Harness(fixed(b"ok"), limits=HTTPLimits(idle_timeout=None, pool_idle_timeout=None,
                                                     exchange_timeout=None))
        visitor, _ = h.visit()
        self.assertEqual(h.clock.getDelayedCalls(), [])
        h.send(visitor, request())
        self.assertEqual(h.clock.getDelayedCalls(), [])

    def test_backendConnectionUnaffected(self) -> None:
        """
        A response that takes longer than the idle timeout is not cut.
        """
        class Slow(ScriptedServer):
            def _respond(self) -> None:
                self.requests.append((self._request, b""))  # type: ignore[arg-type]

        h = Harness(serve=lambda: Slow(fixed(b"")))
        visitor, _ = h.visit(request())
        h.network.advance(120)
        self.assertIsNone(visitor.lost)
        h.backend.servers[0].transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        h.network.run()
        self.assertEqual(parseResponses(bytes(visitor.received), closed=False)[0][1], b"ok")


class Silent(ScriptedServer):
    """
    A backend that reads the request and never answers (the test writes
    for it).
    """

    def _respond(self) -> None:
        self.requests.append((self._request, b""))  # type: ignore[arg-type]


class ExchangeTimeoutTests(SynchronousTestCase):
    """
    The exchange timeout: a request in flight during which nothing moves
    either way.
    """

    limits = HTTPLimits(exchange_timeout=300.0)

    def test_silentBackend(self) -> None:
        """
        A backend that never answers: after the exchange timeout the
        visitor gets C{504} and the backend connection is dropped.
        """
        h = Harness(serve=lambda: Silent(fixed(b"")), limits=self.limits)
        visitor, _ = h.visit(request())
        h.network.advance(299)
        self.assertIsNone(visitor.lost)
        h.network.advance(2)
        [(response, _, _)] = parseResponses(bytes(visitor.received))
        self.assertEqual(response.status_code, 504)
        self.assertTrue(h.backend.servers[0].lost)

    def test_slowButMoving(self) -> None:
        """
        A response whose bytes trickle, each within the timeout, is not cut
        however long it takes in all.
        """
        h = Harness(serve=lambda: Silent(fixed(b"")), limits=self.limits)
        visitor, _ = h.visit(request())
        backend = h.backend.servers[0].transport
        backend.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")
        for n in range(10):
            h.network.advance(250)
            backend.write(b"%d" % n)
            h.network.run()
        [(response, body, _)] = parseResponses(bytes(visitor.received), closed=False)
        self.assertEqual((response.status_code, body), (200, b"0123456789"))
        self.assertIsNone(visitor.lost)

    def test_stalledMidBody(self) -> None:
        """
        A response that stops halfway: the visitor's connection is cut (not
        closed cleanly: the body is short).
        """
        h = Harness(serve=lambda: Silent(fixed(b"")), limits=self.limits)
        visitor, _ = h.visit(request())
        h.backend.servers[0].transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12")
        h.network.run()
        h.network.advance(301)
        self.assertIsNotNone(visitor.lost)
        self.assertFalse(visitor.cleanlyClosed)

    def test_idleBetweenRequestsUntouched(self) -> None:
        """
        Between requests only the idle timeout counts.
        """
        h = Harness(fixed(b"ok"), limits=HTTPLimits(idle_timeout=None, exchange_timeout=300.0,
                                                     pool_idle_timeout=None))
        visitor, _ = h.visit(request())
        h.network.advance(10_000)
        self.assertIsNone(visitor.lost)

    def test_none(self) -> None:
        """
        With no exchange timeout, a silent backend is waited for.
        """
        h = Harness(serve=lambda: Silent(fixed(b"")),
                    limits=HTTPLimits(exchange_timeout=None, idle_timeout=None))
        visitor, _ = h.visit(request())
        self.assertEqual(h.clock.getDelayedCalls(), [])
        self.assertIsNone(visitor.lost)


class GateTests(SynchronousTestCase):
    """
    A gate (a share's policy) answers refused requests itself: they never
    reach the backend.
    """

    def test_refusedNeverReachesBackend(self) -> None:
        """
        A request the gate refuses gets the gate's status and challenge
        header and no backend connection is made; one it lets through is
        forwarded.
        """
        from nfltr.wire.policy import policy_from_options

        policy = policy_from_options("ann:s3cret", None, [], [])
        h = Harness(fixed(b"secret page"), gate=policy.gate)
        visitor, _ = h.visit(request())
        [(response, body, _)] = parseResponses(bytes(visitor.received), closed=True)
        self.assertEqual(response.status_code, 401)
        self.assertEqual(
            headersOf(response)[b"www-authenticate"], [b'Basic realm="nfltr", charset="UTF-8"']
        )
        self.assertNotIn(b"secret page", body)
        self.assertEqual(h.backend.servers, [])
        good = request(headers=b"Authorization: Basic YW5uOnMzY3JldA==\r\n")
        visitor, _ = h.visit(good)
        [(response, body, _)] = parseResponses(bytes(visitor.received), closed=False)
        self.assertEqual((response.status_code, body), (200, b"secret page"))
