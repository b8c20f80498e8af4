"""
Tests for draining a proxy's visitor connection (L{nfltr.http.IDrainable}):
the connection ends at a response boundary, the close announced on a
response, never on an idle connection nor within a response.  The HTTP/1.1
tests are written once and run on both paths (the full proxy and the stream
path); then HTTP/2 and the ALPN chooser.
"""

from __future__ import annotations

import contextlib
from typing import Any

import h11
from h2.exceptions import ProtocolError
from hpack import Encoder
from hyperframe.frame import DataFrame, Frame, GoAwayFrame, HeadersFrame, RstStreamFrame
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.http import IDrainable

from .h2helpers import H2Visitor, h2Harness, visit
from .helpers import Harness, OnStreamPath, Visitor, fixed, parseResponses, request
from .test_tls import visitOverTLS


def received(visitor: Any) -> bytes:
    """
    All a visitor received.
    """
    return bytes(visitor.received)


def echo(request: h11.Request, body: bytes) -> tuple[bytes, bool]:
    """
    Answer with the request's body.
    """
    return fixed(body)(request, body)


class DrainTests(SynchronousTestCase):
    """
    HTTP/1.1 visitor connections drained (on the full proxy; the stream
    path runs them too, below).
    """

    def test_interface(self) -> None:
        """
        A visitor connection's proxy provides L{IDrainable}.
        """
        _, proxy = Harness(fixed(b"ok")).visit()
        self.assertTrue(verifyObject(IDrainable, proxy))

    def test_idleWaitsForTheNextRequest(self) -> None:
        """
        A connection idle when drained stays open (closing it could meet a
        request on its way); its next request is answered with
        C{Connection: close}, then the connection closes cleanly.
        """
        h = Harness(fixed(b"ok"))
        visitor, proxy = h.visit(request())
        proxy.drain()
        h.network.run()
        self.assertIsNone(visitor.lost)
        self.assertNotIn(b"close", received(visitor).lower())
        h.send(visitor, request(target=b"/2"))
        first, second = parseResponses(received(visitor), [b"GET", b"GET"])
        self.assertEqual((first[1], second[1]), (b"ok", b"ok"))
        self.assertIn((b"connection", b"close"), list(second[0].headers))
        self.assertTrue(visitor.cleanlyClosed)

    def test_requestInFlight(self) -> None:
        """
        Drained while a request's body is on its way: the request reaches
        the service whole, its response says C{Connection: close} and is
        delivered whole, then the connection closes cleanly.
        """
        h = Harness(echo)
        body = b"x" * 1000
        whole = request(b"POST", b"/up", body=body)
        visitor, proxy = h.visit(whole[:-500])
        proxy.drain()
        h.send(visitor, whole[-500:])
        [(response, got, _)] = parseResponses(received(visitor))
        self.assertEqual(got, body)
        self.assertIn((b"connection", b"close"), list(response.headers))
        self.assertTrue(visitor.cleanlyClosed)
        self.assertEqual(h.backend.servers[0].requests[0][1], body)

    def test_twice(self) -> None:
        """
        Draining twice is draining once.
        """
        h = Harness(fixed(b"ok"))
        visitor, proxy = h.visit()
        proxy.drain()
        proxy.drain()
        h.send(visitor, request())
        [(response, _, _)] = parseResponses(received(visitor))
        self.assertIn((b"connection", b"close"), list(response.headers))
        self.assertTrue(visitor.cleanlyClosed)


class StreamDrainTests(OnStreamPath, DrainTests):
    pass


def frames(data: bytes) -> list[Any]:
    """
    The HTTP/2 frames in C{data} (after the server's preface).
    """
    out, at = [], 0
    while at + 9 <= len(data):
        frame, length = Frame.parse_frame_header(memoryview(data[at:at + 9]))
        frame.parse_body(memoryview(data[at + 9:at + 9 + length]))
        out.append(frame)
        at += 9 + length
    return out


class RawH2Visitor(H2Visitor):
    """
    An HTTP/2 visitor that keeps every byte it got, to be read frame by
    frame: the C{h2} client stops at a C{GOAWAY}, whose open streams the
    proxy's drain lets finish.
    """

    def __init__(self) -> None:
        super().__init__()
        self.raw = bytearray()

    def dataReceived(self, data: bytes) -> None:
        self.raw += data
        with contextlib.suppress(ProtocolError):
            super().dataReceived(data)


def write(visitor: H2Visitor, frame: Any) -> None:
    """
    Write C{frame} as it is (the C{h2} client sends nothing after a C{GOAWAY}).
    """
    visitor.transport.write(frame.serialize())


class H2DrainTests(SynchronousTestCase):
    """
    HTTP/2 visitor connections drained.
    """

    def test_goawayThenCloseAfterTheOpenStreams(self) -> None:
        """
        Drained with a request whose body is on its way: a C{GOAWAY}
        without error names that stream as the last, the request is
        answered whole, a stream opened after is refused (never reaches
        the service), and the connection closes once the open stream is
        done.
        """
        harness = h2Harness(echo)
        visitor = RawH2Visitor()
        chooser = visit(harness, visitor)
        self.assertTrue(verifyObject(IDrainable, chooser))
        self.assertTrue(verifyObject(IDrainable, chooser.chosen))
        sid = visitor.conn.get_next_available_stream_id()
        visitor.conn.send_headers(sid, [(b":method", b"POST"), (b":path", b"/up"),
                                        (b":scheme", b"https"), (b":authority", b"example.test")])
        visitor.conn.send_data(sid, b"abc")
        visitor.flush()
        harness.network.run()
        start = len(visitor.raw)
        chooser.drain()
        harness.network.run()
        [goaway] = frames(bytes(visitor.raw[start:]))
        self.assertIsInstance(goaway, GoAwayFrame)
        self.assertEqual((goaway.error_code, goaway.last_stream_id), (0, sid))
        self.assertIsNone(visitor.lost)
        late = sid + 2
        block = Encoder().encode([(b":method", b"GET"), (b":path", b"/late"),
                                  (b":scheme", b"https"), (b":authority", b"example.test")])
        write(visitor, HeadersFrame(late, block, flags=["END_HEADERS", "END_STREAM"]))
        write(visitor, DataFrame(sid, b"def", flags=["END_STREAM"]))
        harness.network.run()
        after = frames(bytes(visitor.raw[start:]))[1:]
        self.assertIn((RstStreamFrame, late), [(type(f), f.stream_id) for f in after])
        body = b"".join(f.data for f in after if isinstance(f, DataFrame) and f.stream_id == sid)
        self.assertEqual(body, b"abcdef")
        self.assertTrue([f for f in after if f.stream_id == sid and "END_STREAM" in f.flags])
        self.assertIsNotNone(visitor.lost)
        targets = [r.target for server in harness.backend.servers for r, _ in server.requests]
        self.assertEqual(targets, [b"/up"])

    def test_idleLeftToTheVisitor(self) -> None:
        """
        Drained with no stream open: the C{GOAWAY} goes, the connection
        stays for the visitor to close.
        """
        harness = h2Harness()
        visitor = H2Visitor()
        chooser = visit(harness, visitor)
        chooser.drain()
        harness.network.run()
        self.assertEqual(visitor.goaway, 0)
        self.assertIsNone(visitor.lost)


class ChooserDrainTests(SynchronousTestCase):
    """
    The ALPN chooser passes a drain on to the protocol it chose, even one
    chosen after.
    """

    def test_drainedBeforeTheHandshake(self) -> None:
        """
        Drained before the handshake chose HTTP/1.1: the first response
        says C{Connection: close}.
        """
        harness = h2Harness()
        visitor = Visitor()
        chooser = harness.factory.buildProtocol(None)
        serverEnd, _ = harness.network.connect(chooser, visitor)
        chooser.drain()
        serverEnd.negotiatedProtocol = None
        chooser.handshakeCompleted()
        harness.send(visitor, request())
        [(response, body, _)] = parseResponses(received(visitor))
        self.assertEqual(body, b"hello")
        self.assertIn((b"connection", b"close"), list(response.headers))


class TLSDrainTests(SynchronousTestCase):
    """
    A drained connection under end-to-end TLS (as a share's visitor
    connections are) closes once the visitor answered the proxy's
    C{close_notify}, not at the idle timeout.
    """

    def test_closesAfterTheVisitorsCloseNotify(self) -> None:
        """
        The answer to the request after a drain says C{Connection: close};
        the TLS connection then closes both ways at once (the proxy reads
        on while closing, so it sees the visitor's C{close_notify}): no
        timer is left waiting to abort it.
        """
        h = Harness(fixed(b"ok"), stream=True)
        visitor = Visitor()
        proxy = visitOverTLS(self.mktemp(), h, visitor)
        proxy.drain()
        h.send(visitor, request())
        [(response, body, _)] = parseResponses(received(visitor))
        self.assertEqual(body, b"ok")
        self.assertIn((b"connection", b"close"), list(response.headers))
        self.assertTrue(visitor.cleanlyClosed)
        self.assertEqual(h.clock.getDelayedCalls(), [])
