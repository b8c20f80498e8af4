"""
Tests for L{nfltr.http._exchange}, without Twisted: an L{Exchange} driven
by hand, its requests for I/O recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h11
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http import Exchange, HTTPLimits, Phase
from tests.test_layout import REPO, moduleName, twistedImports

from .helpers import parseResponses, request


class RecordingIO:
    """
    An L{nfltr.http.ExchangeIO} that records what is asked of it.

    @ivar visitor: bytes written to the visitor.
    @ivar backend: bytes written to the backend.
    @ivar calls: the other calls, as tuples.
    @ivar reading: whether the visitor is read.
    """

    def __init__(self) -> None:
        self.visitor = bytearray()
        self.backend = bytearray()
        self.calls: list[tuple[Any, ...]] = []
        self.reading = True
        self.timer = False

    def writeVisitor(self, data: bytes) -> None:
        self.visitor += data

    def writeBackend(self, data: bytes) -> None:
        self.backend += data

    def readVisitor(self, reading: bool) -> None:
        self.reading = reading

    def idleTimer(self, running: bool) -> None:
        self.timer = running

    def problem(self, what: str) -> None:
        self.calls.append(("problem", what))

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, *args))

    def names(self) -> list[str]:
        """
        The names of the calls made.
        """
        return [call[0] for call in self.calls]


def backendHead(raw: bytes) -> h11.Request:
    """
    The request in what the exchange wrote to the backend.
    """
    server = h11.Connection(h11.SERVER)
    server.receive_data(raw)
    event = server.next_event()
    assert isinstance(event, h11.Request)
    return event


class ExchangeTests(SynchronousTestCase):
    """
    The exchange's decisions.
    """

    def setUp(self) -> None:
        self.io = RecordingIO()
        self.exchange = Exchange(self.io, visitor="203.0.113.5:1")
        self.exchange.start()

    def connect(self, reused: bool = False) -> h11.Connection:
        """
        Give the exchange a backend connection.
        """
        client = h11.Connection(h11.CLIENT)
        self.assertTrue(self.exchange.backendConnected(client, reused))
        return client

    def test_sansIO(self) -> None:
        """
        The private modules of C{nfltr.http} do not import Twisted.
        """
        offenders = []
        for path in sorted(Path(REPO, "nfltr", "http").glob("_*.py")):
            offenders += twistedImports(path.read_text(encoding="utf-8"), moduleName(path))
        self.assertEqual(offenders, [])

    def test_requestWaitsForBackend(self) -> None:
        """
        A request head stops the idle timer and asks for a backend
        connection; the request goes to it once there, rewritten.
        """
        self.assertTrue(self.io.timer)
        self.exchange.visitorData(request())
        self.assertEqual(self.io.calls, [("connectBackend", False)])
        self.assertFalse(self.io.timer)
        self.assertEqual(self.io.backend, b"")
        self.connect()
        sent = backendHead(bytes(self.io.backend))
        self.assertIn((b"x-forwarded-for", b"203.0.113.5"), list(sent.headers))
        self.assertIs(self.exchange.phase, Phase.FORWARDING)

    def test_bytesWaitingBounded(self) -> None:
        """
        While a backend connection is found, the visitor is read until more
        than the head limit waits.
        """
        exchange = Exchange(self.io, limits=HTTPLimits(max_request_head_size=1000))
        exchange.visitorData(request(b"POST", body=b"x" * 5000)[:900])
        self.assertTrue(self.io.reading)
        exchange.visitorData(b"x" * 2000)
        self.assertFalse(self.io.reading)
        exchange.backendConnected(h11.Connection(h11.CLIENT), False)
        self.assertTrue(self.io.reading)

    def test_earlyResponse(self) -> None:
        """
        A response before the end of the request body: it goes out, the
        backend connection is not reusable, the visitor connection closes,
        and the rest of the body is dropped.
        """
        self.exchange.visitorData(request(b"POST", body=b"x" * 100)[:-90])
        self.connect()
        self.exchange.backendData(b"HTTP/1.1 413 Too Large\r\nContent-Length: 0\r\n\r\n")
        self.assertEqual(self.io.names(), ["connectBackend", "releaseBackend", "closeVisitor"])
        self.assertEqual(self.io.calls[1], ("releaseBackend", False))
        self.assertEqual(parseResponses(bytes(self.io.visitor))[0][0].status_code, 413)
        sent = len(self.io.backend)
        self.exchange.visitorData(b"x" * 90)
        self.assertEqual(len(self.io.backend), sent)

    def test_reusable(self) -> None:
        """
        A clean keep-alive exchange gives the backend connection back as
        reusable and starts the next cycle.
        """
        self.exchange.visitorData(request())
        client = self.connect()
        self.exchange.backendData(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        self.assertEqual(self.io.calls[-1], ("releaseBackend", True))
        self.assertEqual(client.states, {h11.CLIENT: h11.IDLE, h11.SERVER: h11.IDLE})
        self.assertIs(self.exchange.phase, Phase.IDLE)
        self.assertTrue(self.io.timer)

    def test_retry(self) -> None:
        """
        A reused connection closed before any response byte: the request
        goes again, whole, on a fresh connection.
        """
        self.exchange.visitorData(request())
        self.connect(reused=True)
        first = bytes(self.io.backend)
        self.exchange.backendLost(clean=True)
        self.assertEqual(self.io.names()[-2:], ["abortBackend", "connectBackend"])
        self.assertEqual(self.io.calls[-1], ("connectBackend", True))
        self.io.backend.clear()
        self.connect()
        self.assertEqual(bytes(self.io.backend), first)

    def test_noRetryAfterBytes(self) -> None:
        """
        A connection that sent part of a head before closing is not retried.
        """
        self.exchange.visitorData(request())
        self.connect(reused=True)
        self.exchange.backendData(b"HTTP/1.1 200")
        self.exchange.backendLost(clean=True)
        self.assertEqual(parseResponses(bytes(self.io.visitor))[0][0].status_code, 502)

    def test_noRetryFresh(self) -> None:
        """
        A new connection closed without a response: 502.
        """
        self.exchange.visitorData(request())
        self.connect()
        self.exchange.backendEOF()
        self.assertEqual(parseResponses(bytes(self.io.visitor))[0][0].status_code, 502)
        self.assertIn(("problem", "backend closed without a response"), self.io.calls)

    def test_errorToHead(self) -> None:
        """
        The error response to a HEAD has no body.
        """
        self.exchange.visitorData(request(b"HEAD"))
        self.exchange.backendFailed()
        [(response, body, _)] = parseResponses(bytes(self.io.visitor), [b"HEAD"])
        self.assertEqual((response.status_code, body), (502, b""))

    def test_informationalToHTTP10(self) -> None:
        """
        An HTTP/1.0 visitor gets no 1xx.
        """
        self.exchange.visitorData(request(version=b"1.0"))
        self.connect()
        self.exchange.backendData(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
        self.assertEqual(self.io.visitor, b"")

    def test_switchBeforeRequestEnd(self) -> None:
        """
        A 101 before the whole upgrade request went out aborts both sides.
        """
        headers = b"Connection: upgrade\r\nUpgrade: x\r\n"
        self.exchange.visitorData(request(b"POST", headers=headers, body=b"0123456789")[:-5])
        self.connect()
        self.exchange.backendData(
            b"HTTP/1.1 101 Switching\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"
        )
        self.assertEqual(self.io.names()[-2:], ["abortBackend", "abortVisitor"])
        self.assertIs(self.exchange.phase, Phase.CLOSED)

    def test_eofBeforeRequest(self) -> None:
        """
        A visitor's end of input between requests closes quietly.
        """
        self.exchange.visitorEOF()
        self.assertEqual(self.io.names(), ["closeVisitor"])
        self.assertEqual(self.io.visitor, b"")

    def test_idleTimeoutIgnoredMidRequest(self) -> None:
        """
        The idle timer firing late, during a request, changes nothing.
        """
        self.exchange.visitorData(request())
        self.exchange.idleTimeout()
        self.assertIs(self.exchange.phase, Phase.CONNECTING)

    def test_visitorLost(self) -> None:
        """
        Once the visitor is gone, nothing more happens.
        """
        self.exchange.visitorData(request())
        self.exchange.visitorLost()
        self.assertFalse(self.exchange.backendConnected(h11.Connection(h11.CLIENT), False))
        self.exchange.backendFailed()
        self.assertEqual(self.io.visitor, b"")


class LimitsTests(SynchronousTestCase):
    """
    L{HTTPLimits} refuses nonsense.
    """

    def test_invalid(self) -> None:
        """
        Negative sizes and non-positive timeouts are refused; None is fine.
        """
        for bad in (
            {"max_request_head_size": -1}, {"pool_max_idle": 1.5}, {"idle_timeout": 0},
            {"pool_idle_timeout": -3.0},
        ):
            self.assertRaises(ValueError, HTTPLimits, **bad)
        limits = HTTPLimits(max_request_head_size=None, idle_timeout=None)
        self.assertGreater(limits.requestHeadSize, 1 << 40)
