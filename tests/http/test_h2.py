"""
Tests for HTTP/2 to visitors: L{nfltr.http._h2} (the exchange) and
L{nfltr.http.h2proxy} (its Twisted adapter, and the choice ALPN makes), on
the in-memory network of L{tests.http.helpers} with an C{h2} client as the
visitor (L{tests.http.h2helpers}).
"""

from __future__ import annotations

import hashlib
from typing import Any

import h11
from h2.errors import ErrorCodes
from twisted.internet import error, interfaces
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.http import H2Limits, HTTPLimits, HTTPProxyFactory
from nfltr.http.h2proxy import ALPNChooser, H2ProxyProtocol
from tests.test_e2ee import TLSOverSession

from .h2helpers import MIB, H2Visitor, h2Harness, visit
from .helpers import Harness, ScriptedServer, Visitor, fixed
from .test_stream import socketBackend

#: What the proxy may write to a service connection (per stream) before it
#: is full: the in-memory network's high-water mark and one more frame.
HELD_BEFORE_FULL = 64 * 1024 + 16 * 1024


def digest(request: h11.Request, body: bytes) -> tuple[bytes, bool]:
    """
    Answer with the request body's SHA-256.
    """
    return fixed(hashlib.sha256(body).hexdigest().encode())(request, body)


class Stalled(ScriptedServer):
    """
    A service that reads nothing until its transport is resumed.
    """

    def connectionMade(self) -> None:
        self.transport.pauseProducing()


def stalledFirst(count: int) -> Any:
    """
    Makes the first C{count} services L{Stalled}, the others answer.
    """
    made = [0]

    def serve() -> ScriptedServer:
        made[0] += 1
        return Stalled(digest) if made[0] <= count else ScriptedServer(digest)

    return serve


def sentOf(visitor: H2Visitor, sid: int, body: bytes) -> int:
    """
    How much of C{body} the visitor sent on C{sid}.
    """
    return len(body) - len(visitor.sending.get(sid, (b"", None))[0])


class H2ProxyTests(SynchronousTestCase):
    """
    HTTP/2 visitors through the proxy to an HTTP/1.1 service.
    """

    def test_interfaces(self) -> None:
        """
        The chooser listens for the handshake; the HTTP/2 proxy is its
        visitor transport's push producer, and hears of the visitor's end of
        input (L{H2OverE2EETests}).
        """
        harness = h2Harness()
        chooser = visit(harness, H2Visitor())
        self.assertTrue(verifyObject(interfaces.IHandshakeListener, chooser))
        self.assertIsInstance(chooser.chosen, H2ProxyProtocol)
        self.assertTrue(verifyObject(interfaces.IPushProducer, chooser.chosen))
        self.assertTrue(verifyObject(interfaces.IHalfCloseableProtocol, chooser.chosen))

    def test_http11WithoutH2(self) -> None:
        """
        A handshake that chose no protocol (or http/1.1) gets the HTTP/1.1
        proxy.
        """
        harness = h2Harness()
        visitor = Visitor(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
        chooser = visit(harness, visitor, None)
        self.assertNotIsInstance(chooser.chosen, H2ProxyProtocol)
        self.assertIn(b"hello", bytes(visitor.received))

    def test_getAndForwardedHeaders(self) -> None:
        """
        Several GETs on one connection each reach the service as HTTP/1.1
        with Host and the forwarding headers, and come back whole.
        """
        harness = h2Harness()
        visitor = H2Visitor()
        visit(harness, visitor)
        streams = [visitor.get(b"/a"), visitor.get(b"/b")]
        harness.network.run()
        for sid in streams:
            self.assertEqual(visitor.responses[sid][b":status"], b"200")
            self.assertEqual(bytes(visitor.bodies[sid]), b"hello")
            self.assertIn(sid, visitor.ended)
        requests = [r for server in harness.backend.servers for r, _ in server.requests]
        self.assertEqual(sorted(r.target for r in requests), [b"/a", b"/b"])
        headers = dict(requests[0].headers)
        self.assertEqual(headers[b"host"], b"example.test")
        self.assertEqual(headers[b"x-forwarded-proto"], b"https")

    def test_spareServiceConnection(self) -> None:
        """
        Streams one after another on a visitor connection take the service
        connection the last one gave back, not the pool's; it goes back to
        the pool with the visitor connection.
        """
        harness = Harness(fixed(b"hello"), pool=True, stream=True, h2=True)
        visitor = H2Visitor()
        visit(harness, visitor)
        streams = []
        for _ in range(3):
            streams.append(visitor.get())
            harness.network.run()
        self.assertEqual([bytes(visitor.bodies[sid]) for sid in streams], [b"hello"] * 3)
        self.assertEqual(len(harness.backend.servers), 1)
        assert harness.pool is not None
        self.assertEqual(harness.pool.idle, [])
        visitor.transport.loseConnection()
        harness.network.run()
        self.assertEqual(len(harness.pool.idle), 1)

    def test_cookiesJoined(self) -> None:
        """
        A request's cookie headers (HTTP/2 sends each crumb apart) reach the
        service as one C{cookie} header (RFC 9113 section 8.2.3).
        """
        harness = h2Harness()
        visitor = H2Visitor()
        visit(harness, visitor)
        visitor.get(extra=[(b"cookie", b"a=1"), (b"accept", b"*/*"), (b"cookie", b"b=2")])
        harness.network.run()
        headers = harness.backend.servers[0].requests[0][0].headers
        self.assertEqual([v for n, v in headers if n == b"cookie"], [b"a=1; b=2"])

    def test_postBothWays(self) -> None:
        """
        A request body without a length goes chunked, one with a length as
        it is; the echoed bodies come back.
        """
        def echo(request: h11.Request, body: bytes) -> tuple[bytes, bool]:
            return fixed(body[::-1])(request, body)

        harness = h2Harness(echo)
        visitor = H2Visitor()
        visit(harness, visitor)
        body = bytes(range(256)) * 200
        chunked = visitor.get(b"/up", b"POST", body)
        sized = visitor.get(b"/up", b"POST", body, [(b"content-length", b"%d" % len(body))])
        harness.network.run()
        for sid in (chunked, sized):
            self.assertEqual(bytes(visitor.bodies[sid]), body[::-1])
        seen = {dict(r.headers).get(b"transfer-encoding") for s in harness.backend.servers
                for r, _ in s.requests}
        self.assertEqual(seen, {b"chunked", None})

    def test_trailersBothWays(self) -> None:
        """
        C{te: trailers} reaches the service; request trailers go on in the
        chunked body and the response's trailers come back as HTTP/2
        trailers (as gRPC needs).
        """
        got: list[bytes] = []

        class Trailing(ScriptedServer):
            def dataReceived(self, data: bytes) -> None:
                got.append(data)
                if b"0\r\ngrpc-timeout: 1S\r\n\r\n" in b"".join(got):
                    self.transport.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/grpc\r\n"
                        b"transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n"
                        b"0\r\ngrpc-status: 0\r\n\r\n")

        harness = Harness(serve=lambda: Trailing(fixed(b"")), stream=True, h2=True)
        visitor = H2Visitor()
        visit(harness, visitor)
        sid = visitor.get(b"/svc/Call", b"POST", b"\x00\x00\x00\x00\x00",
                          [(b"te", b"trailers"), (b"content-type", b"application/grpc")],
                          trailers=[(b"grpc-timeout", b"1S")])
        harness.network.run()
        sent = b"".join(got)
        self.assertIn(b"TE: trailers\r\n", sent)
        self.assertEqual(bytes(visitor.bodies[sid]), b"hello")
        self.assertEqual(visitor.trailers[sid], {b"grpc-status": b"0"})

    def test_policyOnEveryStream(self) -> None:
        """
        The gate checks each stream: one without the header is refused and
        never reaches the service; one with it goes on.
        """
        class Denied:
            status, headers = 401, ((b"WWW-Authenticate", b'Basic realm="x"'),)

        def gate(headers: Any, visitor: Any) -> Any:
            return None if (b"authorization", b"ok") in headers else Denied()

        harness = h2Harness(gate=gate)
        visitor = H2Visitor()
        visit(harness, visitor)
        allowed = visitor.get(b"/in", extra=[(b"authorization", b"ok")])
        refused = visitor.get(b"/out", b"POST", b"secret")
        harness.network.run()
        self.assertEqual(visitor.responses[allowed][b":status"], b"200")
        self.assertEqual(visitor.responses[refused][b":status"], b"401")
        self.assertEqual(visitor.responses[refused][b"www-authenticate"], b'Basic realm="x"')
        targets = [r.target for s in harness.backend.servers for r, _ in s.requests]
        self.assertEqual(targets, [b"/in"])

    def test_hostOfAnotherShare(self) -> None:
        """
        An :authority the share does not serve is 421, never forwarded.
        """
        harness = h2Harness(hosts=["blog.example"])
        visitor = H2Visitor()
        visit(harness, visitor)
        sid = visitor.get()
        harness.network.run()
        self.assertEqual(visitor.responses[sid][b":status"], b"421")
        self.assertEqual(harness.backend.servers, [])

    def test_notOneRequestLine(self) -> None:
        """
        A :path with a space or a control, or a :method that is not a token
        would not make one HTTP/1.1 request line: 400, never forwarded.
        """
        harness = h2Harness()
        visitor = H2Visitor()
        visit(harness, visitor)
        visitor.conn.config.validate_outbound_headers = False
        streams = [visitor.get(b"/a HTTP/1.1\x01"), visitor.get(b"/a\tb"),
                   visitor.get(b"/", b"GE T")]
        harness.network.run()
        for sid in streams:
            self.assertEqual(visitor.responses[sid][b":status"], b"400")
        self.assertEqual(harness.backend.servers, [])

    def test_requestBytesAcknowledgedWhenWritten(self) -> None:
        """
        A service that does not read: the visitor's window is not opened
        again once the service connection is full, so what the visitor can
        send stays bounded; once the service reads, the whole body goes on.
        """
        harness = Harness(serve=lambda: Stalled(digest), stream=True, h2=True)
        visitor = H2Visitor()
        visit(harness, visitor)
        body = bytes(range(256)) * (4 * MIB // 256)
        sid = visitor.get(b"/up", b"POST", body)
        harness.network.run()
        server = harness.backend.servers[0]
        sent = sentOf(visitor, sid, body)
        # The stream's window, and what went before the service connection was full.
        self.assertLess(sent, H2Limits().initial_window + HELD_BEFORE_FULL)
        server.transport.resumeProducing()
        harness.network.run()
        self.assertEqual(bytes(visitor.bodies[sid]), hashlib.sha256(body).hexdigest().encode())

    def test_windows(self) -> None:
        """
        The visitor may send each stream's request body up to
        L{H2Limits.initial_window} and all of them together up to
        L{H2Limits.connection_window} (raised from HTTP/2's 65,535 after
        the preface), by default and as set.
        """
        for limits in (H2Limits(), H2Limits(initial_window=300_000, connection_window=900_000)):
            harness = h2Harness(h2limits=limits)
            visitor = H2Visitor()
            visit(harness, visitor)
            self.assertEqual(visitor.conn.outbound_flow_control_window, limits.connection_window)
            sid = visitor.conn.get_next_available_stream_id()
            visitor.conn.send_headers(sid, [(b":method", b"POST"), (b":path", b"/"),
                                            (b":scheme", b"https"), (b":authority", b"x")])
            self.assertEqual(visitor.conn.local_flow_control_window(sid), limits.initial_window)
        self.assertGreater(H2Limits().connection_window, 65_535)
        self.assertGreater(H2Limits().initial_window, 65_535)

    def test_uploadsOnOneAndManyStreams(self) -> None:
        """
        Uploads of several MiB, on one stream and on ten at once, reach the
        service whole.
        """
        harness = h2Harness(digest)
        visitor = H2Visitor()
        visit(harness, visitor)
        alone = b"a" * (4 * MIB)
        bodies = {visitor.get(b"/up", b"POST", alone): alone}
        harness.network.run()
        many = [bytes([n]) * (2 * MIB + n) for n in range(10)]
        bodies.update({visitor.get(b"/up", b"POST", body): body for body in many})
        harness.network.run()
        for sid, body in bodies.items():
            self.assertEqual(bytes(visitor.bodies[sid]),
                             hashlib.sha256(body).hexdigest().encode())

    def test_stuckServicesBoundWhatIsHeld(self) -> None:
        """
        Ten uploads to services that read nothing: the visitor could send
        (and the proxy holds) at most the connection's window and what went
        to each service connection before it was full, each stream at most
        its own window more; once the services read, every upload arrives.
        """
        limits = H2Limits(initial_window=256 * 1024, connection_window=MIB)
        harness = Harness(serve=lambda: Stalled(digest), stream=True, h2=True, h2limits=limits)
        visitor = H2Visitor()
        visit(harness, visitor)
        bodies = {visitor.get(b"/up", b"POST", bytes([n]) * MIB): bytes([n]) * MIB
                  for n in range(10)}
        harness.network.run()
        sent = {sid: sentOf(visitor, sid, body) for sid, body in bodies.items()}
        for each in sent.values():
            self.assertLessEqual(each, limits.initial_window + HELD_BEFORE_FULL)
        bound = limits.connection_window + len(bodies) * HELD_BEFORE_FULL
        self.assertLessEqual(sum(sent.values()), bound)
        held = sum(server.transport.unread for server in harness.backend.servers)
        self.assertLessEqual(held, bound)
        for server in harness.backend.servers:
            server.transport.resumeProducing()
        harness.network.run()
        for sid, body in bodies.items():
            self.assertEqual(bytes(visitor.bodies[sid]),
                             hashlib.sha256(body).hexdigest().encode())

    def test_stalledUploadHoldsOnlyItsStream(self) -> None:
        """
        Two uploads on one connection, larger than the connection's window,
        the first to a service that reads nothing: the second arrives whole
        while the first is stalled (the connection's credit comes back as
        the second's bytes go on), and the stalled one made the visitor
        send (and the share hold) at most its stream's window and what its
        service connection took before it was full.  Once that service
        reads, the first arrives too.
        """
        for limits in (H2Limits(), H2Limits(initial_window=128 * 1024,
                                            connection_window=256 * 1024)):
            harness = Harness(serve=stalledFirst(1), stream=True, h2=True, h2limits=limits)
            servers = harness.backend.servers
            visitor = H2Visitor()
            visit(harness, visitor)
            size = 2 * limits.connection_window
            stalled, moving = bytes(range(256)) * (size // 256), b"m" * size
            first = visitor.get(b"/up", b"POST", stalled)
            harness.network.run()
            second = visitor.get(b"/up", b"POST", moving)
            harness.network.run()
            self.assertEqual(bytes(visitor.bodies[second]),
                             hashlib.sha256(moving).hexdigest().encode())
            self.assertNotIn(first, visitor.bodies)
            sent = sentOf(visitor, first, stalled)
            self.assertLessEqual(sent, limits.initial_window + HELD_BEFORE_FULL)
            self.assertLessEqual(servers[0].transport.unread,
                                 limits.initial_window + HELD_BEFORE_FULL)
            servers[0].transport.resumeProducing()
            harness.network.run()
            self.assertEqual(bytes(visitor.bodies[first]),
                             hashlib.sha256(stalled).hexdigest().encode())

    def test_resetsGiveRequestWindowsBack(self) -> None:
        """
        Streams the visitor resets while their request bytes wait for a
        full service connection give the connection's window back: after
        more such streams than it has room for, the next upload still goes.
        """
        limits = H2Limits(initial_window=64 * 1024, connection_window=128 * 1024)
        harness = Harness(serve=stalledFirst(12), stream=True, h2=True, h2limits=limits)
        visitor = H2Visitor()
        visit(harness, visitor)
        for _ in range(12):
            sid = visitor.get(b"/up", b"POST", b"y" * 300_000)
            harness.network.run()
            visitor.conn.reset_stream(sid, ErrorCodes.CANCEL)
            visitor.sending.pop(sid, None)
            visitor.flush()
            harness.network.run()
        body = b"z" * 300_000
        sid = visitor.get(b"/up", b"POST", body)
        harness.network.run()
        self.assertEqual(bytes(visitor.bodies[sid]), hashlib.sha256(body).hexdigest().encode())

    def test_serviceClosesAfterItsResponse(self) -> None:
        """
        A response that ends with the service's connection comes back
        whole, and the proxy closes its side of that connection.
        """
        harness = h2Harness(lambda request, body: (
            b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", True))
        visitor = H2Visitor()
        visit(harness, visitor)
        sid = visitor.get()
        harness.network.run()
        self.assertEqual(bytes(visitor.bodies[sid]), b"until the end")
        self.assertIn(sid, visitor.ended)
        self.assertIsNotNone(harness.backend.servers[0].transport.peer.lost)

    def test_lengthsThatDiffer(self) -> None:
        """
        A content-length of two values ends the connection (h2 refuses it as
        a protocol error); nothing reaches the service.
        """
        harness = h2Harness()
        visitor = H2Visitor()
        visit(harness, visitor)
        visitor.conn.config.validate_outbound_headers = False
        visitor.get(b"/", b"POST", b"", [(b"content-length", b"0, 1")])
        harness.network.run()
        self.assertEqual(visitor.goaway, ErrorCodes.PROTOCOL_ERROR)
        self.assertEqual(harness.backend.servers, [])

    def test_slowReaderBoundsMemory(self) -> None:
        """
        A visitor that does not open its window: the proxy holds at most
        its per-stream buffer and a read, the service is paused; once the
        window opens, the whole response arrives.
        """
        body = bytes(range(256)) * (4 * MIB // 256)
        harness = h2Harness(fixed(body))
        visitor = H2Visitor()
        visitor.autoAck = False
        chooser = visit(harness, visitor)
        sid = visitor.get()
        harness.network.run()
        self.assertLess(len(visitor.bodies[sid]), 70 * 1024)
        held = sum(len(s.out) for s in chooser.chosen.exchange.streams.values())
        self.assertLessEqual(held, 64 * 1024 + 16 * 1024)
        read = len(body) - harness.backend.servers[0].transport.peer.unread
        self.assertLess(read, 256 * 1024)
        visitor.autoAck = True
        while sid not in visitor.ended:
            got = len(visitor.bodies[sid])
            visitor.conn.acknowledge_received_data(got, sid)
            visitor.conn.increment_flow_control_window(got)
            visitor.flush()
            harness.network.run()
        self.assertEqual(bytes(visitor.bodies[sid]), body)

    def test_tap(self) -> None:
        """
        The inspector's tap hears of each stream: its request, response,
        bodies and end, and of a refused one.
        """
        heard: list[Any] = []

        class Capture:
            def __init__(self, *opened: Any) -> None:
                heard.append(("opened", opened[0], opened[1]))

            def requestBody(self, data: bytes) -> None:
                heard.append(("requestBody", data))

            def response(self, status: int, headers: Any) -> None:
                heard.append(("response", status))

            def responseBody(self, data: bytes) -> None:
                heard.append(("responseBody", data))

            def ended(self, outcome: str) -> None:
                heard.append(("ended", outcome))

        class Tap:
            def opened(self, *args: Any) -> Capture:
                return Capture(*args)

        harness = h2Harness(hosts=["example.test"])
        harness.factory.tap = Tap()
        visitor = H2Visitor()
        visit(harness, visitor)
        visitor.get(b"/up", b"POST", b"abc")
        harness.network.run()
        self.assertEqual(heard, [("opened", b"POST", b"/up"), ("requestBody", b"abc"),
                                 ("response", 200), ("responseBody", b"hello"),
                                 ("ended", "complete")])

    def test_timeouts(self) -> None:
        """
        A connection without a stream is closed after the idle timeout; one
        whose stream moves no byte, after the exchange timeout; both with
        GOAWAY.
        """
        harness = h2Harness(limits=HTTPLimits(idle_timeout=10, exchange_timeout=30))
        idle = H2Visitor()
        visit(harness, idle)
        harness.backend.hold = True
        stalled = H2Visitor()
        visit(harness, stalled)
        stalled.get()
        harness.network.advance(5)
        self.assertIsNone(idle.lost)
        for _ in range(4):
            harness.network.advance(2)
        self.assertEqual(idle.goaway, ErrorCodes.NO_ERROR)
        self.assertIsNotNone(idle.lost)
        self.assertIsNone(stalled.lost)
        for _ in range(12):
            harness.network.advance(2.5)
        self.assertEqual(stalled.goaway, ErrorCodes.NO_ERROR)
        self.assertIsNotNone(stalled.lost)
        self.assertEqual(harness.backend.cancelled, 1)

    def test_serviceDown(self) -> None:
        """
        A service that cannot be reached gets the stream a 502.
        """
        harness = h2Harness()
        harness.backend.refuse = True
        visitor = H2Visitor()
        visit(harness, visitor)
        sid = visitor.get()
        harness.network.run()
        self.assertEqual(visitor.responses[sid][b":status"], b"502")


class H2OverE2EETests(SynchronousTestCase):
    """
    HTTP/2 under an e2ee share's TLS, as on the agent: real OpenSSL over a
    link session (L{tests.test_e2ee.TLSOverSession}), ALPN choosing C{h2}.
    """

    def connected(self) -> tuple[ALPNChooser, TLSOverSession, H2Visitor, list[Any]]:
        """
        An HTTP/2 visitor connected through the proxy, whose service
        connections are each over a socket; the proxy's clock never moves.
        """
        backend, sockets = socketBackend()
        proxy = HTTPProxyFactory(backend, Clock(), stream=True, h2=True).proxyFor(None)
        assert isinstance(proxy, ALPNChooser)
        tls = TLSOverSession(self, proxy, alpn=(b"h2", b"http/1.1"))
        visitor = H2Visitor()
        tls.open(visitor)
        tls.pair.run()
        self.assertIsInstance(proxy.chosen, H2ProxyProtocol)
        self.assertEqual(tls.pair.listener.connection.session_count, 1)
        return proxy, tls, visitor, sockets

    def assertClosed(self, tls: TLSOverSession, visitor: H2Visitor) -> None:
        """
        The visitor got a clean close, after C{GOAWAY} (no error), and the
        session is gone from both links.
        """
        self.assertIsNotNone(visitor.lost)
        self.assertTrue(visitor.lost.check(error.ConnectionDone), visitor.lost)
        self.assertEqual(tls.pair.listener.connection.session_count, 0)
        self.assertEqual(tls.pair.dialer.connection.session_count, 0)
        self.assertEqual(visitor.goaway, ErrorCodes.NO_ERROR)

    def test_closeNotifyCloses(self) -> None:
        """
        A visitor that sends its C{close_notify} (its end of input) gets the
        connection closed at once, not at the idle timeout.
        """
        _, tls, visitor, _ = self.connected()
        visitor.transport.loseWriteConnection()
        tls.pair.run()
        self.assertClosed(tls, visitor)

    def test_closeNotifyWithAStreamOpen(self) -> None:
        """
        A C{close_notify} right after a request: the connection closes at
        once all the same, and the stream's service connection is let go.
        """
        _, tls, visitor, sockets = self.connected()
        visitor.get()
        tls.pair.run()
        [sock] = sockets
        sock.drain()
        self.assertIn(b"GET / HTTP/1.1", bytes(sock.sent))
        visitor.transport.loseWriteConnection()
        tls.pair.run()
        self.assertClosed(tls, visitor)
        self.assertTrue(sock.disconnecting)
