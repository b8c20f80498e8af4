"""
Tests for HTTP/2 to visitors: L{nfltr.http._h2frames} (the attacks seen in
the frames), L{nfltr.http._h2} (the exchange) and L{nfltr.http.h2proxy}
(its Twisted adapter, and the choice ALPN makes), on the in-memory network
of L{tests.http.helpers} with an C{h2} client as the visitor.
"""

from __future__ import annotations

import hashlib
from typing import Any

import h11
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
)
from h2.settings import Settings
from hyperframe.frame import ContinuationFrame, HeadersFrame, PingFrame, SettingsFrame
from hypothesis import given
from hypothesis import strategies as st
from twisted.internet import interfaces
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.http import H2Limits, HTTPLimits
from nfltr.http._h2frames import PREFACE, FrameWatch
from nfltr.http.h2proxy import H2ProxyProtocol

from .helpers import Harness, ScriptedServer, Visitor, fixed

MIB = 1024 * 1024


class H2Visitor(Protocol):
    """
    A visitor speaking HTTP/2 with the C{h2} library: records each stream's
    response, body and trailers, and the C{GOAWAY} it got.
    """

    def __init__(self, window: int | None = None) -> None:
        self.conn = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self.window = window
        self.responses: dict[int, dict[bytes, bytes]] = {}
        self.bodies: dict[int, bytearray] = {}
        self.trailers: dict[int, dict[bytes, bytes]] = {}
        self.ended: set[int] = set()
        self.reset: dict[int, int] = {}
        self.goaway: int | None = None
        self.lost: Any = None
        self.autoAck = True
        self.sending: dict[int, tuple[bytearray, Any]] = {}

    def connectionMade(self) -> None:
        self.conn.initiate_connection()
        if self.window is not None:
            self.conn.update_settings({4: self.window})
        self.flush()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.transport.write(data)

    def dataReceived(self, data: bytes) -> None:
        if self.goaway is not None:
            return
        for event in self.conn.receive_data(data):
            if isinstance(event, ResponseReceived):
                self.responses[event.stream_id] = dict(event.headers)
            elif isinstance(event, DataReceived):
                self.bodies.setdefault(event.stream_id, bytearray()).extend(event.data)
                if self.autoAck:
                    self.conn.acknowledge_received_data(event.flow_controlled_length,
                                                        event.stream_id)
            elif isinstance(event, TrailersReceived):
                self.trailers[event.stream_id] = dict(event.headers)
            elif isinstance(event, StreamEnded):
                self.ended.add(event.stream_id)
            elif isinstance(event, StreamReset):
                self.reset[event.stream_id] = event.error_code
            elif isinstance(event, ConnectionTerminated):
                self.goaway = event.error_code
        self.sendBodies()
        self.flush()

    def connectionLost(self, reason: Any = None) -> None:
        self.lost = reason

    def get(self, path: bytes = b"/", method: bytes = b"GET", body: bytes | None = None,
            extra: list[tuple[bytes, bytes]] | None = None,
            trailers: list[tuple[bytes, bytes]] | None = None) -> int:
        """
        Send a request; its stream.
        """
        sid = self.conn.get_next_available_stream_id()
        headers = [(b":method", method), (b":path", path), (b":scheme", b"https"),
                   (b":authority", b"example.test"), *(extra or [])]
        self.conn.send_headers(sid, headers, end_stream=body is None)
        if body is not None:
            self.sending[sid] = (bytearray(body), trailers)
            self.sendBodies()
        self.flush()
        return sid

    def sendBodies(self) -> None:
        """
        What the windows let through of the request bodies.
        """
        for sid, (body, trailers) in list(self.sending.items()):
            while body:
                size = min(self.conn.local_flow_control_window(sid), 16384, len(body))
                if size <= 0:
                    break
                self.conn.send_data(sid, bytes(body[:size]))
                del body[:size]
            if not body:
                del self.sending[sid]
                if trailers is None:
                    self.conn.end_stream(sid)
                else:
                    self.conn.send_headers(sid, trailers, end_stream=True)


def h2Harness(handler: Any = None, **options: Any) -> Harness:
    """
    A harness whose proxy takes HTTP/2 from the visitors ALPN says so.
    """
    return Harness(handler or fixed(b"hello"), stream=True, h2=True, **options)


def visit(harness: Harness, visitor: Protocol, alpn: bytes | None = b"h2") -> Any:
    """
    Connect C{visitor} through a new proxy whose handshake chose C{alpn}.
    """
    chooser = harness.factory.buildProtocol(None)
    serverEnd, _ = harness.network.connect(chooser, visitor)
    serverEnd.negotiatedProtocol = alpn
    chooser.handshakeCompleted()
    harness.network.run()
    return chooser


class FrameWatchTests(SynchronousTestCase):
    """
    L{FrameWatch} sees the attacks in the frame headers.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.watch = FrameWatch(H2Limits(max_control_frames=5, max_header_block_frames=4,
                                         max_header_block_size=1000), self.clock.seconds)

    def test_continuationFlood(self) -> None:
        """
        A header block of more frames than allowed breaks the limit at the
        frame over it.
        """
        self.assertIsNone(self.watch.feed(PREFACE + HeadersFrame(1, data=b"x").serialize()))
        for _ in range(3):
            self.assertIsNone(self.watch.feed(ContinuationFrame(1, data=b"y").serialize()))
        self.assertEqual(self.watch.feed(ContinuationFrame(1, data=b"y").serialize()),
                         "a header block of too many frames")

    def test_blockBytesFromTheFrameHeader(self) -> None:
        """
        A CONTINUATION announcing more bytes than the block may take breaks
        the limit at its 9-byte header, before any of its payload came.
        """
        self.watch.feed(PREFACE + HeadersFrame(1, data=b"x" * 10).serialize())
        head = ContinuationFrame(1, data=b"y" * 2000).serialize()[:9]
        self.assertEqual(self.watch.feed(head), "a header block too large")

    def test_endedBlocksDoNotAddUp(self) -> None:
        """
        Header blocks that end (END_HEADERS) are counted apart.
        """
        self.watch.feed(PREFACE)
        for sid in range(1, 40, 2):
            frame = HeadersFrame(sid, data=b"x" * 500)
            frame.flags.add("END_HEADERS")
            self.assertIsNone(self.watch.feed(frame.serialize()))

    def test_controlFlood(self) -> None:
        """
        More SETTINGS and PINGs than allowed in a window break the limit;
        acknowledgements do not count, and a new window counts anew.
        """
        self.watch.feed(PREFACE)
        ack = PingFrame(0, opaque_data=b"12345678")
        ack.flags.add("ACK")
        for _ in range(10):
            self.assertIsNone(self.watch.feed(ack.serialize()))
        for _ in range(3):
            self.assertIsNone(self.watch.feed(PingFrame(0, opaque_data=b"12345678").serialize()))
        self.clock.advance(11)
        for _ in range(5):
            self.assertIsNone(self.watch.feed(SettingsFrame(0).serialize()))
        self.assertEqual(self.watch.feed(PingFrame(0, opaque_data=b"12345678").serialize()),
                         "too many SETTINGS or PING frames")

    @given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
    def test_anySplit(self, cuts: list[int]) -> None:
        """
        However the bytes are cut, the watch sees the same frames.
        """
        watch = FrameWatch(H2Limits(max_header_block_frames=4), Clock().seconds)
        data = PREFACE + HeadersFrame(1, data=b"x").serialize()
        data += b"".join(ContinuationFrame(1, data=b"y").serialize() for _ in range(4))
        broken, pos = None, 0
        turn = 0
        while pos < len(data):
            cut = cuts[turn % len(cuts)]
            broken = watch.feed(data[pos:pos + cut]) or broken
            pos, turn = pos + cut, turn + 1
        self.assertEqual(broken, "a header block of too many frames")


class H2LimitsTests(SynchronousTestCase):
    """
    L{H2Limits} refuses limits that are not.
    """

    def test_invalid(self) -> None:
        """
        Zero, negative and non-integer counts, and a window beyond HTTP/2's,
        raise L{ValueError}.
        """
        for bad in ({"max_concurrent_streams": 0}, {"max_resets": -1},
                    {"max_header_list_size": 1.5}, {"rate_window": 0},
                    {"initial_window": 2**31}):
            self.assertRaises(ValueError, H2Limits, **bad)


class H2ProxyTests(SynchronousTestCase):
    """
    HTTP/2 visitors through the proxy to an HTTP/1.1 service.
    """

    def test_interfaces(self) -> None:
        """
        The chooser listens for the handshake; the HTTP/2 proxy is its
        visitor transport's push producer.
        """
        harness = h2Harness()
        chooser = visit(harness, H2Visitor())
        self.assertTrue(verifyObject(interfaces.IHandshakeListener, chooser))
        self.assertIsInstance(chooser.chosen, H2ProxyProtocol)
        self.assertTrue(verifyObject(interfaces.IPushProducer, chooser.chosen))

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
        def echo(request: h11.Request, body: bytes) -> tuple[bytes, bool]:
            return fixed(hashlib.sha256(body).hexdigest().encode())(request, body)

        class Stalled(ScriptedServer):
            def connectionMade(self) -> None:
                self.transport.pauseProducing()

        harness = Harness(serve=lambda: Stalled(echo), stream=True, h2=True)
        visitor = H2Visitor()
        visit(harness, visitor)
        body = bytes(range(256)) * (4 * MIB // 256)
        sid = visitor.get(b"/up", b"POST", body)
        harness.network.run()
        server = harness.backend.servers[0]
        sent = len(body) - len(visitor.sending.get(sid, (b"", None))[0])
        self.assertLess(sent, 512 * 1024)
        server.transport.resumeProducing()
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


class H2AttackTests(SynchronousTestCase):
    """
    Each attack closes its connection with C{GOAWAY}; another visitor is
    served meanwhile.
    """

    def attack(self, limits: H2Limits, frames: Any, code: int) -> None:
        harness = h2Harness(h2limits=limits)
        harness.backend.hold = True
        bad = H2Visitor()
        visit(harness, bad)
        good = H2Visitor()
        visit(harness, good)
        frames(bad, harness)
        harness.network.run()
        self.assertEqual(bad.goaway, code)
        self.assertIsNotNone(bad.lost)
        harness.backend.hold = False
        sid = good.get()
        harness.network.run()
        self.assertEqual(good.responses[sid][b":status"], b"200")

    def test_rapidReset(self) -> None:
        """
        Requests cancelled in flight beyond C{max_resets}: ENHANCE_YOUR_CALM.
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            for _ in range(12):
                sid = bad.get()
                bad.conn.reset_stream(sid, ErrorCodes.CANCEL)
            bad.flush()

        self.attack(H2Limits(max_resets=10), frames, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_nothingAfterGoAway(self) -> None:
        """
        Frames that came in the same read as the one that broke a limit are
        not acted on (no stream of theirs reaches the service).
        """
        held: list[Any] = []

        def frames(bad: H2Visitor, harness: Harness) -> None:
            for _ in range(12):
                sid = bad.get()
                bad.conn.reset_stream(sid, ErrorCodes.CANCEL)
            for _ in range(5):
                bad.get()
            bad.flush()
            held.append(harness.backend)

        self.attack(H2Limits(max_resets=10), frames, ErrorCodes.ENHANCE_YOUR_CALM)
        # The eleventh reset broke the limit: eleven streams asked for a
        # service connection, and the good visitor's none (it got one).
        self.assertEqual(len(held[0].pending), 11)

    def test_continuationFlood(self) -> None:
        """
        A header block that never ends: ENHANCE_YOUR_CALM.
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            raw = HeadersFrame(1, data=b"\x82").serialize()
            raw += b"".join(ContinuationFrame(1, data=b"\x00" * 100).serialize()
                            for _ in range(50))
            bad.transport.write(raw)

        self.attack(H2Limits(), frames, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_pingFlood(self) -> None:
        """
        PINGs beyond C{max_control_frames}: ENHANCE_YOUR_CALM.
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            bad.transport.write(PingFrame(0, opaque_data=b"12345678").serialize() * 200)

        self.attack(H2Limits(), frames, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_settingsFlood(self) -> None:
        """
        SETTINGS beyond C{max_control_frames}: ENHANCE_YOUR_CALM.
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            bad.transport.write(SettingsFrame(0).serialize() * 200)

        self.attack(H2Limits(), frames, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_headerListTooLarge(self) -> None:
        """
        A header list over C{max_header_list_size}: the connection ends
        with h2's (ENHANCE_YOUR_CALM).
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            bad.get(extra=[(b"x-big", b"a" * 4000)] * 4)

        self.attack(H2Limits(max_header_list_size=8000), frames, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_tooManyStreams(self) -> None:
        """
        A visitor that opens more streams than the SETTINGS it acknowledged
        allow: PROTOCOL_ERROR (h2's answer).
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            bad.conn.remote_settings = Settings(client=False)
            for _ in range(3):
                bad.get()

        self.attack(H2Limits(max_concurrent_streams=2), frames, ErrorCodes.PROTOCOL_ERROR)
