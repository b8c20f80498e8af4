"""
Tests for h2c to the service: L{nfltr.http._h2service} (one h2c
connection), L{nfltr.http._h2c} (the exchange) and L{nfltr.http.h2c} (the
pool and the Twisted adapter), on the in-memory network of
L{tests.http.helpers}: an C{h2} client as the visitor, an C{h2} server as
the service.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import DataReceived, RequestReceived, StreamEnded, StreamReset, TrailersReceived
from hyperframe.frame import GoAwayFrame
from hypothesis import given
from hypothesis import strategies as st
from twisted.internet.protocol import Protocol
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http import H2Limits
from nfltr.http._h2service import GoAwayFilter
from nfltr.http.h2c import HTTP1_REFUSAL_BODY, H2CProxyProtocol

from .h2helpers import H2Visitor, visit
from .helpers import Harness, Visitor

Headers = list[tuple[bytes, bytes]]


class H2Service(Protocol):
    """
    A service speaking h2c: for each request whose stream ended, calls
    C{answer(self, sid)}; records heads, bodies, trailers and resets.
    """

    def __init__(self, answer: Callable[[H2Service, int], None] | None = None) -> None:
        self.conn = H2Connection(H2Configuration(client_side=False, header_encoding=None))
        self.answer = answer or _hello
        self.heads: dict[int, dict[bytes, bytes]] = {}
        self.bodies: dict[int, bytearray] = {}
        self.trailers: dict[int, dict[bytes, bytes]] = {}
        self.reset: dict[int, int] = {}
        self.autoAck = True
        #: With C{autoAck}, streams' windows are opened too (else only the connection's).
        self.streamAck = True
        #: Bytes of response each stream still sends as its windows allow (L{pump}).
        self.pending: dict[int, int] = {}

    def connectionMade(self) -> None:
        self.conn.initiate_connection()
        self.flush()

    def dataReceived(self, data: bytes) -> None:
        for event in self.conn.receive_data(data):
            if isinstance(event, RequestReceived):
                self.heads[event.stream_id] = dict(event.headers)
            elif isinstance(event, DataReceived):
                self.bodies.setdefault(event.stream_id, bytearray()).extend(event.data)
                if self.autoAck and self.streamAck:
                    self.conn.acknowledge_received_data(event.flow_controlled_length,
                                                        event.stream_id)
                elif self.autoAck:  # the connection's window only
                    self.conn.increment_flow_control_window(event.flow_controlled_length)
            elif isinstance(event, TrailersReceived):
                self.trailers[event.stream_id] = dict(event.headers)
            elif isinstance(event, StreamEnded):
                self.answer(self, event.stream_id)
            elif isinstance(event, StreamReset):
                self.reset[event.stream_id] = event.error_code
                self.pending.pop(event.stream_id, None)
        self.pump()
        self.flush()

    def pump(self) -> None:
        """
        What the windows let through of the pending responses.
        """
        for sid in list(self.pending):
            while self.pending[sid]:
                size = min(self.conn.local_flow_control_window(sid), 16384, self.pending[sid])
                if size <= 0:
                    break
                self.pending[sid] -= size
                self.conn.send_data(sid, b"x" * size, end_stream=not self.pending[sid])
            if not self.pending[sid]:
                del self.pending[sid]

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.transport.write(data)

    def respond(self, sid: int, body: bytes, trailers: Headers | None = None,
                head: Headers = ()) -> None:
        """
        200 with C{body} (as far as the window lets it), then C{trailers}.
        """
        self.conn.send_headers(sid, [(b":status", b"200"), *head])
        self.conn.send_data(sid, body, end_stream=trailers is None)
        if trailers is not None:
            self.conn.send_headers(sid, trailers, end_stream=True)


def _hello(service: H2Service, sid: int) -> None:
    service.respond(sid, b"hello")


def h2cHarness(answer: Callable[[H2Service, int], None] | None = None,
               **options: Any) -> Harness:
    """
    A harness whose proxy speaks h2c to an L{H2Service}.
    """
    harness = Harness(serve=lambda: H2Service(answer), stream=True, h2=True, h2c=True,
                      **options)
    return harness


def sendAll(size: int) -> Callable[[H2Service, int], None]:
    """
    Answers with C{size} bytes, sent as the service's windows allow.
    """
    def answer(service: H2Service, sid: int) -> None:
        service.conn.send_headers(sid, [(b":status", b"200")])
        service.pending[sid] = size
        service.pump()

    return answer


class H2CTests(SynchronousTestCase):
    """
    HTTP/2 visitors through the proxy to an h2c service.
    """

    def setUp(self) -> None:
        self.visitor = H2Visitor()

    def start(self, answer: Callable[[H2Service, int], None] | None = None,
              **options: Any) -> Harness:
        harness = h2cHarness(answer, **options)
        chooser = visit(harness, self.visitor)
        self.assertIsInstance(chooser.chosen, H2CProxyProtocol)
        self.proxy = chooser.chosen
        return harness

    def test_grpcLikeCall(self) -> None:
        """
        A request with a body, C{te: trailers} and trailers reaches the
        service as one stream with all three and the forwarding headers;
        the response's body and trailers (C{grpc-status}) come back.
        """
        def answer(service: H2Service, sid: int) -> None:
            service.respond(sid, bytes(service.bodies[sid])[::-1],
                            [(b"grpc-status", b"0")], [(b"content-type", b"application/grpc")])

        harness = self.start(answer)
        sid = self.visitor.get(b"/svc/Call", b"POST", b"abc" * 1000,
                               [(b"te", b"trailers"), (b"content-type", b"application/grpc")],
                               trailers=[(b"grpc-timeout", b"1S")])
        harness.network.run()
        service = harness.backend.servers[0]
        head = service.heads[1]
        self.assertEqual(head[b":path"], b"/svc/Call")
        self.assertEqual(head[b":authority"], b"example.test")
        self.assertEqual(head[b"te"], b"trailers")
        self.assertEqual(head[b"x-forwarded-proto"], b"https")
        self.assertEqual(service.trailers[1], {b"grpc-timeout": b"1S"})
        self.assertEqual(bytes(self.visitor.bodies[sid]), (b"abc" * 1000)[::-1])
        self.assertEqual(self.visitor.trailers[sid], {b"grpc-status": b"0"})
        self.assertIn(sid, self.visitor.ended)

    def test_trailersOnly(self) -> None:
        """
        A response that is one HEADERS frame ending the stream (gRPC's
        Trailers-Only) reaches the visitor as one.
        """
        def answer(service: H2Service, sid: int) -> None:
            service.conn.send_headers(sid, [(b":status", b"200"), (b"grpc-status", b"5")],
                                      end_stream=True)

        harness = self.start(answer)
        sid = self.visitor.get()
        harness.network.run()
        self.assertEqual(self.visitor.responses[sid][b"grpc-status"], b"5")
        self.assertIn(sid, self.visitor.ended)
        self.assertNotIn(sid, self.visitor.bodies)

    def test_informational(self) -> None:
        """
        A 103 Early Hints goes to the visitor as informational HEADERS
        before the response.
        """
        def answer(service: H2Service, sid: int) -> None:
            service.conn.send_headers(sid, [(b":status", b"103"), (b"link", b"</a.css>")])
            service.respond(sid, b"page")

        harness = self.start(answer)
        sid = self.visitor.get()
        harness.network.run()
        self.assertEqual(self.visitor.informational[sid],
                         [{b":status": b"103", b"link": b"</a.css>"}])
        self.assertEqual(bytes(self.visitor.bodies[sid]), b"page")

    def test_slowStreamHoldsOnlyItself(self) -> None:
        """
        A visitor stream whose window stays shut holds its service stream
        at the stream's window (the service cannot send more); another
        stream on the same connections completes.
        """
        limits = H2Limits(max_stream_buffer=16 * 1024, initial_window=64 * 1024)

        def answer(service: H2Service, sid: int) -> None:
            sendAll(1024 * 1024 if service.heads[sid][b":path"] == b"/big" else 5)(service, sid)

        self.visitor.window = 1024
        self.visitor.autoAck = False
        harness = self.start(answer, h2limits=limits)
        big = self.visitor.get(b"/big")
        harness.network.run()
        small = self.visitor.get(b"/small")
        harness.network.run()
        service = harness.backend.servers[0]
        self.assertEqual(service.conn.local_flow_control_window(1), 0)
        proxy = harness.factory.services.connections[0].h2
        self.assertLessEqual(len(self.visitor.bodies.get(big, b"")), 1024)
        self.assertLessEqual(len(self.proxy.exchange.streams[big].out), limits.initial_window)
        self.assertIn(small, self.visitor.ended)
        self.assertEqual(len(harness.backend.servers), 1)
        self.assertIn(1, proxy.streams)

    def test_responseWindowsRaised(self) -> None:
        """
        The service may send each stream L{H2Limits.initial_window} bytes of
        response before any comes back (HTTP/2's 65,535, or
        C{max_stream_buffer}, would let a response move that much per round
        trip to the service), and its connection as much for every stream
        it carries, by default and as set.
        """
        for limits in (H2Limits(), H2Limits(initial_window=300_000, service_streams=7)):
            self.visitor = H2Visitor()
            harness = self.start(lambda service, sid: None, h2limits=limits)
            self.visitor.get()
            harness.network.run()
            service = harness.backend.servers[0]
            self.assertEqual(service.conn.local_flow_control_window(1), limits.initial_window)
            self.assertEqual(service.conn.outbound_flow_control_window,
                             limits.initial_window * limits.service_streams)

    def test_slowVisitorBoundsResponses(self) -> None:
        """
        A visitor that reads nothing, with big responses on many streams:
        the share holds at most each stream's window, and for the
        connection's streams together its C{connection_window} beyond
        C{max_stream_buffer} each; once the visitor reads, every response
        arrives whole.
        """
        limits = H2Limits(max_stream_buffer=16 * 1024, initial_window=256 * 1024,
                          connection_window=600 * 1024)
        size = 1024 * 1024
        self.visitor.window = 1024
        self.visitor.autoAck = False
        harness = self.start(sendAll(size), h2limits=limits)
        streams = [self.visitor.get() for _ in range(6)]
        harness.network.run()
        held = {sid: len(s.out) for sid, s in self.proxy.exchange.streams.items()}
        self.assertEqual(held[streams[0]], limits.initial_window - 1024)
        self.assertLessEqual(max(held.values()), limits.initial_window)
        self.assertLessEqual(sum(held.values()),
                             limits.connection_window + len(streams) * limits.max_stream_buffer)
        self.visitor.autoAck = True
        self.visitor.conn.update_settings({4: 65535})
        for sid in streams:
            got = len(self.visitor.bodies.get(sid, b""))
            self.visitor.conn.acknowledge_received_data(got, sid)
        self.visitor.flush()
        harness.network.run()
        for sid in streams:
            self.assertEqual(len(self.visitor.bodies[sid]), size)

    def test_requestWindowFollowsService(self) -> None:
        """
        Request bytes open the visitor's window only once the service's
        window took them: a service that does not read holds the visitor's
        upload, the proxy holding at most the stream's window; once it
        reads, the whole body arrives.
        """
        body = bytes(range(256)) * 4096
        limits = H2Limits(initial_window=128 * 1024)
        harness = self.start(lambda service, sid: service.respond(sid, b"done"), h2limits=limits)
        self.visitor.get()
        harness.network.run()
        service = harness.backend.servers[0]
        service.autoAck = False
        sid = self.visitor.get(b"/up", b"POST", body)
        harness.network.run()
        got = len(service.bodies[3])
        self.assertLessEqual(got, 65535)
        unsent = len(self.visitor.sending[sid][0])
        self.assertLessEqual(len(body) - unsent - got, limits.initial_window)  # what it holds
        service.autoAck = True
        service.conn.acknowledge_received_data(got, 3)
        service.flush()
        harness.network.run()
        self.assertEqual(bytes(service.bodies[3]), body)
        self.assertEqual(bytes(self.visitor.bodies[sid]), b"done")

    def test_rapidReset(self) -> None:
        """
        The visitor's limits hold on an h2c share: streams reset while in
        flight past max_resets end the connection with ENHANCE_YOUR_CALM.
        """
        harness = self.start(lambda service, sid: None, h2limits=H2Limits(max_resets=5))
        for _ in range(10):
            sid = self.visitor.get(b"/slow", b"POST", b"x")
            self.visitor.conn.reset_stream(sid, ErrorCodes.CANCEL)
        self.visitor.flush()
        harness.network.run()
        self.assertEqual(self.visitor.goaway, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_resetsGiveResponseWindowsBack(self) -> None:
        """
        Streams the visitor resets while response bytes are held for them
        (its window shut) give the service connection's window back: after
        more such streams than it has room for, the next is still served.
        """
        limits = H2Limits(max_stream_buffer=16 * 1024, service_streams=4)

        def answer(service: H2Service, sid: int) -> None:
            service.conn.send_headers(sid, [(b":status", b"200")])
            size = min(service.conn.local_flow_control_window(sid), 16 * 1024)
            service.conn.send_data(sid, b"x" * size, end_stream=size < 16 * 1024)

        self.visitor.window = 1024
        harness = self.start(answer, h2limits=limits)
        for _ in range(12):
            self.visitor.autoAck = False
            sid = self.visitor.get()
            harness.network.run()
            self.visitor.conn.reset_stream(sid, ErrorCodes.CANCEL)
            self.visitor.flush()
            harness.network.run()
        self.visitor.autoAck = True
        sid = self.visitor.get()
        harness.network.run()
        self.assertTrue(self.visitor.bodies.get(sid))

    def test_resetsGiveRequestWindowsBack(self) -> None:
        """
        Streams the visitor resets while request bytes wait for the
        service's window give the visitor connection's window back: after
        more such streams than it has room for, the next upload still goes.
        """
        harness = self.start(lambda service, sid: service.respond(sid, b"done"),
                             h2limits=H2Limits(max_concurrent_streams=4,
                                               initial_window=64 * 1024,
                                               connection_window=256 * 1024))
        self.visitor.get()
        harness.network.run()
        service = harness.backend.servers[0]
        service.streamAck = False
        for _ in range(12):
            sid = self.visitor.get(b"/up", b"POST", b"y" * 100_000)
            harness.network.run()
            self.visitor.conn.reset_stream(sid, ErrorCodes.CANCEL)
            self.visitor.sending.pop(sid, None)
            self.visitor.flush()
            harness.network.run()
        service.streamAck = True
        sid = self.visitor.get(b"/up", b"POST", b"z" * 1000)
        harness.network.run()
        self.assertEqual(bytes(self.visitor.bodies[sid]), b"done")

    def test_visitorResetCancels(self) -> None:
        """
        A visitor's RST_STREAM cancels the service's stream.
        """
        harness = self.start(lambda service, sid: None)
        sid = self.visitor.get(b"/slow", b"POST", b"x")
        harness.network.run()
        self.visitor.conn.reset_stream(sid, ErrorCodes.CANCEL)
        self.visitor.flush()
        harness.network.run()
        self.assertEqual(harness.backend.servers[0].reset, {1: ErrorCodes.CANCEL})

    def test_serviceReset(self) -> None:
        """
        The service's reset before its response is a 502; after it, the
        visitor's stream is reset with the service's code.
        """
        def answer(service: H2Service, sid: int) -> None:
            if sid == 3:
                service.conn.send_headers(sid, [(b":status", b"200")])
            service.conn.reset_stream(sid, ErrorCodes.ENHANCE_YOUR_CALM)

        harness = self.start(answer)
        early = self.visitor.get()
        harness.network.run()
        late = self.visitor.get()
        harness.network.run()
        self.assertEqual(self.visitor.responses[early][b":status"], b"502")
        self.assertEqual(self.visitor.reset[late], ErrorCodes.ENHANCE_YOUR_CALM)

    def test_goAway(self) -> None:
        """
        A GOAWAY from the service refuses the streams it did not take
        (REFUSED_STREAM to the visitor), lets the others finish, and the
        next stream goes on a new connection.
        """
        held: list[int] = []

        def answer(service: H2Service, sid: int) -> None:
            if service is not harness.backend.servers[0]:
                _hello(service, sid)
                return
            held.append(sid)
            if len(held) == 2:
                service.flush()
                service.transport.write(GoAwayFrame(0, last_stream_id=1).serialize())
                service.respond(1, b"first")

        harness = self.start(answer)
        first, second = self.visitor.get(), self.visitor.get()
        harness.network.run()
        self.assertEqual(bytes(self.visitor.bodies[first]), b"first")
        self.assertEqual(self.visitor.reset[second], ErrorCodes.REFUSED_STREAM)
        third = self.visitor.get()
        harness.network.run()
        self.assertEqual(bytes(self.visitor.bodies[third]), b"hello")
        self.assertEqual(len(harness.backend.servers), 2)

    def test_poolBounded(self) -> None:
        """
        With one connection of one stream, a second stream in flight finds
        no room: 502; the first is served.
        """
        limits = H2Limits(service_connections=1, service_streams=1)
        held: list[int] = []

        def answer(service: H2Service, sid: int) -> None:
            held.append(sid)

        harness = self.start(answer, h2limits=limits)
        first, second = self.visitor.get(), self.visitor.get()
        harness.network.run()
        self.assertEqual(self.visitor.responses[second][b":status"], b"502")
        service = harness.backend.servers[0]
        service.respond(held[0], b"one")
        service.flush()
        harness.network.run()
        self.assertEqual(bytes(self.visitor.bodies[first]), b"one")
        self.assertEqual(len(harness.backend.servers), 1)

    def test_http1Refused(self) -> None:
        """
        An HTTP/1.1 visitor gets a 502 saying the share speaks HTTP/2 only;
        nothing reaches the service.
        """
        harness = h2cHarness()
        visitor = Visitor(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
        visit(harness, visitor, None)
        received = bytes(visitor.received)
        self.assertTrue(received.startswith(b"HTTP/1.1 502 "), received)
        self.assertIn(HTTP1_REFUSAL_BODY, received)
        self.assertEqual(harness.backend.servers, [])


class PoolIdleTests(SynchronousTestCase):
    """
    The h2c pool closes a connection that carried no stream for
    L{H2Limits.service_idle_timeout}.
    """

    def start(self, timeout: float | None,
              answer: Callable[[H2Service, int], None] | None = None) -> Harness:
        self.visitor = H2Visitor()
        harness = h2cHarness(answer, h2limits=H2Limits(service_idle_timeout=timeout))
        visit(harness, self.visitor)
        return harness

    def test_idleClosed(self) -> None:
        """
        Each stream that ends starts the wait anew; after the timeout with
        no stream the connection says GOAWAY and is closed, and the next
        stream dials a new one.
        """
        harness = self.start(5)
        first = self.visitor.get()
        harness.network.advance(4)
        second = self.visitor.get()
        harness.network.advance(4)
        services = harness.factory.services
        self.assertEqual(len(services.connections), 1)
        self.assertEqual(len(harness.backend.servers), 1)
        harness.network.advance(1.5)
        self.assertEqual(services.connections, [])
        service = harness.backend.servers[0]
        self.assertIsNotNone(service.transport.lost)
        self.assertTrue(service.conn.state_machine.state.name.startswith("CLOSED"))
        third = self.visitor.get()
        harness.network.run()
        for sid in (first, second, third):
            self.assertEqual(bytes(self.visitor.bodies[sid]), b"hello")
        self.assertEqual(len(harness.backend.servers), 2)

    def test_busyKept(self) -> None:
        """
        A connection with a stream in flight is kept however long it takes;
        the wait starts once the stream is over.
        """
        held: list[int] = []
        harness = self.start(5, lambda service, sid: held.append(sid))
        sid = self.visitor.get()
        harness.network.advance(20)
        services = harness.factory.services
        self.assertEqual(len(services.connections), 1)
        service = harness.backend.servers[0]
        service.respond(held[0], b"late")
        service.flush()
        harness.network.advance(4)
        self.assertEqual(bytes(self.visitor.bodies[sid]), b"late")
        self.assertEqual(len(services.connections), 1)
        harness.network.advance(2)
        self.assertEqual(services.connections, [])

    def test_noTimeout(self) -> None:
        """
        With no idle timeout, an idle connection stays until the service
        closes it.
        """
        harness = self.start(None)
        self.visitor.get()
        harness.network.advance(50)
        self.assertEqual(len(harness.factory.services.connections), 1)
        self.assertIsNone(harness.backend.servers[0].transport.lost)


class PoolRetireTests(SynchronousTestCase):
    """
    The h2c pool of a share withdrawn (L{ServicePool.retire}), or whose
    connections must not take new streams (L{ServicePool.drain}): each
    connection is closed once its streams are done.
    """

    def start(self) -> tuple[Harness, list[int], list[int]]:
        """
        Two connections of one stream each: the first's stream in flight
        (its answer held), the second's over.
        """
        self.visitor = H2Visitor()
        held: list[int] = []

        def answer(service: H2Service, sid: int) -> None:
            if service is harness.backend.servers[0]:
                held.append(sid)
            else:
                _hello(service, sid)

        harness = h2cHarness(answer, h2limits=H2Limits(service_streams=1))
        visit(harness, self.visitor)
        busy = self.visitor.get()
        harness.network.run()
        done = self.visitor.get()
        harness.network.run()
        self.assertEqual(bytes(self.visitor.bodies[done]), b"hello")
        self.assertEqual(len(harness.backend.servers), 2)
        return harness, [done, busy], held

    def assertClosedOnceDone(self, harness: Harness, busy: int, held: list[int]) -> None:
        """
        The idle connection is closed with GOAWAY at once; the busy one
        once its stream is done, its response whole.
        """
        harness.network.run()
        working, idle = harness.backend.servers
        self.assertIsNotNone(idle.transport.lost)
        self.assertTrue(idle.conn.state_machine.state.name.startswith("CLOSED"))
        self.assertIsNone(working.transport.lost)
        working.respond(held[0], b"last")
        working.flush()
        harness.network.run()
        self.assertEqual(bytes(self.visitor.bodies[busy]), b"last")
        self.assertIsNotNone(working.transport.lost)

    def test_retire(self) -> None:
        """
        A share withdrawn: its connections close once their streams are
        done; a new stream gets 502, no new connection.
        """
        harness, (_, busy), held = self.start()
        harness.factory.retire()
        self.assertClosedOnceDone(harness, busy, held)
        late = self.visitor.get()
        harness.network.run()
        self.assertEqual(self.visitor.responses[late][b":status"], b"502")
        self.assertEqual(len(harness.backend.servers), 2)

    def test_drain(self) -> None:
        """
        Drained, the connections made so far close once their streams are
        done; a new stream goes on a new connection.
        """
        harness, (_, busy), held = self.start()
        harness.factory.services.drain()
        self.assertEqual(harness.factory.services.connections, [])
        self.assertClosedOnceDone(harness, busy, held)
        late = self.visitor.get()
        harness.network.run()
        self.assertEqual(bytes(self.visitor.bodies[late]), b"hello")
        self.assertEqual(len(harness.backend.servers), 3)


class H1InformationalTests(SynchronousTestCase):
    """
    1xx from an HTTP/1.1 service to an HTTP/2 visitor.
    """

    def test_continueAndEarlyHints(self) -> None:
        """
        A 100 Continue and a 103 Early Hints go to the visitor as
        informational HEADERS, then the response.
        """
        class Informing(Protocol):
            def dataReceived(self, data: bytes) -> None:
                if data.endswith(b"0\r\n\r\n"):
                    self.transport.write(
                        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n"
                        b"Link: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

        harness = Harness(serve=Informing, stream=True, h2=True)
        visitor = H2Visitor()
        visit(harness, visitor)
        sid = visitor.get(b"/up", b"POST", b"body", [(b"expect", b"100-continue")])
        harness.network.run()
        self.assertEqual([h[b":status"] for h in visitor.informational[sid]], [b"100", b"103"])
        self.assertEqual(visitor.informational[sid][1][b"link"], b"</a.css>")
        self.assertEqual(bytes(visitor.bodies[sid]), b"ok")


_frames = st.lists(st.tuples(st.sampled_from([0x0, 0x1, 0x4, 0x6, 0x7, 0x8]),
                             st.integers(0, 2**31 - 1), st.binary(max_size=40)), max_size=8)


class GoAwayFilterTests(SynchronousTestCase):
    """
    L{GoAwayFilter}: what h2 gets of the service's frames.
    """

    @given(_frames, st.lists(st.integers(1, 64), max_size=12))
    def test_framesSplitAnyhow(self, frames: list[tuple[int, int, bytes]],
                               cuts: list[int]) -> None:
        """
        However the bytes are cut, every frame but GOAWAY passes as it came
        and each GOAWAY's last stream id is found, in order.
        """
        wire, kept, lasts = b"", b"", []
        for kind, last, debug in frames:
            if kind == 0x7:
                frame = GoAwayFrame(0, last_stream_id=last, additional_data=debug).serialize()
                lasts.append(last)
            else:
                frame = len(debug).to_bytes(3, "big") + bytes([kind, 0]) + b"\0\0\0\1" + debug
                kept += frame
            wire += frame
        watch, passed, found, at = GoAwayFilter(), b"", [], 0
        for size in [*cuts, len(wire)]:
            out, goAways = watch.feed(wire[at:at + size])
            passed, at = passed + out, at + size
            found += goAways
        self.assertEqual(passed, kept)
        self.assertEqual(found, lasts)

    def test_shortGoAway(self) -> None:
        """
        A GOAWAY too short to name a stream counts as one that took none.
        """
        out, found = GoAwayFilter().feed(b"\0\0\0\x07\0\0\0\0\0")
        self.assertEqual((out, found), (b"", [0]))
