"""
A few tests of L{nfltr.http} on real loopback sockets (the real reactor,
ports chosen by the system), where reads, closes and their order are the
kernel's: the close-delimited race, and keep-alive through a shared pool.
"""

from __future__ import annotations

import hashlib
from typing import Any

from twisted.internet import defer, error, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase

from nfltr.http import BackendPool, EndpointBackend, HTTPProxyFactory

from .helpers import ScriptedServer, fixed, parseResponses, request

LOOPBACK = "127.0.0.1"


def body(n: int) -> bytes:
    """
    The body of response C{n}: sizes from 0 to 64 KiB.
    """
    return (hashlib.sha256(b"%d" % n).digest() * 2048)[: (n * 7919) % 65536]


class HTTP10Backend(Protocol):
    """
    Answers one request HTTP/1.0-style: no length, the body then a close,
    in one write.
    """

    buffer = b""

    def dataReceived(self, data: bytes) -> None:
        self.buffer += data
        if b"\r\n\r\n" in self.buffer:
            n = int(self.buffer.split(b" ", 2)[1][1:])
            self.transport.write(b"HTTP/1.0 200 OK\r\nContent-Type: x\r\n\r\n" + body(n))
            self.transport.loseConnection()
            self.buffer = b""


class Fetch(Protocol):
    """
    Writes C{data}, then collects everything until the connection ends.
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.received = bytearray()
        self.done: defer.Deferred[tuple[bytes, Failure]] = defer.Deferred()

    def connectionMade(self) -> None:
        self.transport.write(self.data)

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        self.done.callback((bytes(self.received), reason))


class LoopbackTests(TestCase):
    """
    The proxy between real sockets.
    """

    # A stuck exchange fails the test soon rather than after trial's two minutes.
    timeout = 30

    def listen(self, factory: Any) -> int:
        """
        Listen on a loopback port; stop at the end of the test.
        """
        port = reactor.listenTCP(0, factory, interface=LOOPBACK)  # type: ignore[attr-defined]
        self.addCleanup(port.stopListening)
        return int(port.getHost().port)

    def proxy(self, backend: Any) -> int:
        """
        A proxy in front of C{backend}, listening.
        """
        return self.listen(HTTPProxyFactory(backend, reactor))  # type: ignore[arg-type]

    async def fetch(self, port: int, data: bytes) -> tuple[bytes, Failure]:
        """
        What a visitor that writes C{data} to C{port} gets, and how its
        connection ended.
        """
        fetch = Fetch(data)
        await connectProtocol(TCP4ClientEndpoint(reactor, LOOPBACK, port), fetch)
        return await fetch.done

    @defer.inlineCallbacks
    def test_closeDelimitedRace(self) -> Any:
        """
        500 visitors in turn against a backend that sends its body and
        closes in one go: every byte of every body arrives, framed for the
        visitor (chunked, or close-delimited for HTTP/1.0), and every
        visitor connection ends cleanly.
        """
        backendPort = self.listen(Factory.forProtocol(HTTP10Backend))
        backend = EndpointBackend(TCP4ClientEndpoint(reactor, LOOPBACK, backendPort))
        port = self.proxy(backend)
        for n in range(500):
            version = b"1.0" if n % 2 else b"1.1"
            data = request(target=b"/%d" % n, headers=b"Connection: close\r\n", version=version)
            received, reason = yield defer.Deferred.fromCoroutine(self.fetch(port, data))
            self.assertTrue(reason.check(error.ConnectionDone), n)
            [(response, got, _)] = parseResponses(received)
            self.assertEqual(response.status_code, 200)
            self.assertEqual(hashlib.sha256(got).digest(), hashlib.sha256(body(n)).digest(), n)

    @defer.inlineCallbacks
    def test_keepAlive(self) -> Any:
        """
        Twenty pipelined requests on one visitor connection go through one
        pooled backend connection.
        """
        servers: list[ScriptedServer] = []
        gone: list[defer.Deferred[None]] = []

        def serve() -> ScriptedServer:
            server = ScriptedServer(fixed(b"pong"))
            lost = defer.Deferred[None]()
            server.connectionLost = lambda reason: lost.callback(None)  # type: ignore[method-assign]
            servers.append(server)
            gone.append(lost)
            return server

        backendPort = self.listen(Factory.forProtocol(serve))
        endpoint = TCP4ClientEndpoint(reactor, LOOPBACK, backendPort)
        pool = BackendPool(EndpointBackend(endpoint), reactor)  # type: ignore[arg-type]
        port = self.proxy(pool)
        data = b"".join(request(target=b"/%d" % n) for n in range(19))
        data += request(headers=b"Connection: close\r\n")
        received, reason = yield defer.Deferred.fromCoroutine(self.fetch(port, data))
        self.assertTrue(reason.check(error.ConnectionDone))
        responses = parseResponses(received, [b"GET"] * 20)
        self.assertEqual([got for _, got, _ in responses], [b"pong"] * 20)
        self.assertEqual(len(servers), 1)
        self.assertEqual(len(servers[0].requests), 20)
        pool.close()
        yield defer.gatherResults(gone)
