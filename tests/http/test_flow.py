"""
Tests for the flow control of L{nfltr.http.proxy}: the visitor and the
backend connection in use pause each other, so bodies stream through
bounded buffers both ways.
"""

from __future__ import annotations

import hashlib

import h11
from twisted.trial.unittest import SynchronousTestCase

from .helpers import Harness, ScriptedServer, fixed, parseResponses, request

MIB = 1024 * 1024


def _Silent(handler: object) -> ScriptedServer:
    """
    A backend that reads requests and never answers.
    """
    return ScriptedServer(lambda r, b: (b"", False))


class BackpressureTests(SynchronousTestCase):
    """
    Each side's transport pauses the other's.
    """

    def uploading(self) -> tuple[Harness, object, object]:
        """
        A visitor in the middle of a POST to a backend that does not answer.
        """
        h = Harness(serve=lambda: _Silent(fixed(b"")))
        head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % MIB
        visitor, proxy = h.visit(head + b"a" * 1000)
        return h, visitor, proxy

    def test_backendFullPausesVisitor(self) -> None:
        """
        When the backend connection's transport pauses its producer, the
        visitor's transport is paused, and resumed with it.
        """
        _, _, proxy = self.uploading()
        backendTransport = proxy.backend.transport  # type: ignore[attr-defined]
        visitorTransport = proxy.transport  # type: ignore[attr-defined]
        self.assertTrue(backendTransport.streaming)
        backendTransport.producer.pauseProducing()
        self.assertEqual(visitorTransport.producerState, "paused")
        backendTransport.producer.resumeProducing()
        self.assertEqual(visitorTransport.producerState, "producing")

    def test_visitorFullPausesBackend(self) -> None:
        """
        When the visitor's transport pauses its producer, the backend
        connection's transport is paused, and resumed with it.
        """
        _, _, proxy = self.uploading()
        backendTransport = proxy.backend.transport  # type: ignore[attr-defined]
        visitorTransport = proxy.transport  # type: ignore[attr-defined]
        visitorTransport.producer.pauseProducing()
        self.assertEqual(backendTransport.producerState, "paused")
        visitorTransport.producer.resumeProducing()
        self.assertEqual(backendTransport.producerState, "producing")

    def test_pausedByBothReasons(self) -> None:
        """
        The visitor stays paused while any reason holds it: the backend
        being full, and too many bytes waiting for a backend connection.
        """
        _, _, proxy = self.uploading()
        backendTransport = proxy.backend.transport  # type: ignore[attr-defined]
        visitorTransport = proxy.transport  # type: ignore[attr-defined]
        backendTransport.producer.pauseProducing()
        proxy.readVisitor(False)  # type: ignore[attr-defined]
        backendTransport.producer.resumeProducing()
        self.assertEqual(visitorTransport.producerState, "paused")
        proxy.readVisitor(True)  # type: ignore[attr-defined]
        self.assertEqual(visitorTransport.producerState, "producing")

    def test_uploadStreams(self) -> None:
        """
        A 1 MiB body to a backend that stops reading: the proxy stops
        reading the visitor once the backend's buffer is full, and holds no
        more than about a read beyond it; once the backend reads again the
        whole body arrives, in many pieces.
        """
        h = Harness(fixed(b"done"))
        body = hashlib.sha256(b"seed").digest() * (MIB // 32)
        head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        visitor, proxy = h.visit(head)
        server = h.backend.servers[0]
        server.transport.pauseProducing()
        for offset in range(0, len(body), 16 * 1024):
            h.send(visitor, body[offset:offset + 16 * 1024])
        self.assertEqual(proxy.transport.producerState, "paused")
        self.assertLess(proxy.backend.transport.maxUnread, 64 * 1024 + 3 * 16 * 1024)
        server.transport.resumeProducing()
        h.network.run()
        self.assertEqual(server.requests[0][1], body)
        self.assertGreater(len(server.chunks), 16)
        self.assertEqual(parseResponses(bytes(visitor.received), [b"POST"], False)[0][1], b"done")

    def test_downloadStreams(self) -> None:
        """
        A 1 MiB response to a visitor that stops reading: the proxy stops
        reading the backend once the visitor's buffer is full; once the
        visitor reads again every byte arrives.
        """
        body = hashlib.sha256(b"other").digest() * (MIB // 32)
        h = Harness(fixed(body))
        visitor, proxy = h.visit()
        visitor.transport.pauseProducing()
        h.send(visitor, request())
        self.assertEqual(proxy.backend.transport.producerState, "paused")
        self.assertLess(proxy.transport.maxUnread, 64 * 1024 + 3 * 16 * 1024)
        visitor.transport.resumeProducing()
        h.network.run()
        [(_, received, _)] = parseResponses(bytes(visitor.received), closed=False)
        self.assertEqual(len(received), MIB)
        self.assertEqual(hashlib.sha256(received).digest(), hashlib.sha256(body).digest())

    def test_chunkedDownloadStreams(self) -> None:
        """
        The same for a response of unknown length, chunked to the visitor.
        """
        body = b"z" * MIB

        def handler(request: h11.Request, received: bytes) -> tuple[bytes, bool]:
            return b"HTTP/1.0 200 OK\r\n\r\n" + body, True

        h = Harness(handler)
        visitor, _ = h.visit(request())
        [(_, received, _)] = parseResponses(bytes(visitor.received), closed=False)
        self.assertEqual(received, body)
        self.assertIsNone(visitor.lost)

    def test_pipelineBounded(self) -> None:
        """
        A visitor that pipelines far ahead of its responses is no longer
        read once more than the head limit waits, and is read again when
        its requests are served.
        """
        h = Harness(serve=lambda: _Silent(fixed(b"")))
        visitor, proxy = h.visit(request())
        for _ in range(100):
            visitor.transport.write(request(headers=b"X-Pad: " + b"p" * 1000 + b"\r\n"))
        h.network.run()
        self.assertEqual(proxy.transport.producerState, "paused")
        server = h.backend.servers[0]
        server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        h.network.run()
        self.assertEqual(len(server.requests), 2)
