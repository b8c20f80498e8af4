"""
Helpers for the HTTP proxy's tests: an in-memory network of stream
connections on a Clock that behaves like TCP where the proxy cares (flow
control, half-close, close after the bytes written, abort), fake backends,
and a few scripted HTTP peers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import h11
from twisted.internet import defer, error
from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

_EOF = object()
_RESET = object()

VISITOR_ADDRESS = IPv4Address("TCP", "203.0.113.5", 4711)


class End(StringTransport):
    """
    One end of an in-memory connection.

    What is written goes to the peer's inbox at once; the peer's protocol
    gets it when the network runs and while this end's peer reads (not
    paused).  When the peer holds more than the network's high-water mark
    unread, the producer registered here is paused, and resumed once it
    drained.  C{loseConnection} sends an end of input after the bytes (a
    half-closeable protocol gets C{readConnectionLost}, any other
    C{connectionLost}) and loses this end; C{abortConnection} loses both
    ends at once, with errors.

    @ivar written: every byte written here.
    @ivar lost: why this end's protocol lost the connection, once it did.
    @ivar aborted: this end was aborted.
    @ivar writeClosed: this end half-closed.
    @ivar maxUnread: the most the peer ever held unread from this end.
    """

    def __init__(self, network: Network, protocol: Any, host: Any = None, peer: Any = None) -> None:
        super().__init__(host, peer, lenient=True)
        self.network = network
        self.protocol = protocol
        self.peer: End | None = None
        self.inbox: deque[Any] = deque()
        self.unread = 0
        self.written = bytearray()
        self.lost: Failure | None = None
        self.aborted = False
        self.writeClosed = False
        self.throttled = False
        self.maxUnread = 0

    def write(self, data: bytes) -> None:
        if self.disconnecting or self.writeClosed or self.lost is not None:
            return
        self.written += data
        peer = self.peer
        assert peer is not None
        if peer.lost is None and data:
            peer.inbox.append(bytes(data))
            peer.unread += len(data)
            self.maxUnread = max(self.maxUnread, peer.unread)
            if peer.unread > self.network.highWater and self.producer and not self.throttled:
                self.throttled = True
                self.producer.pauseProducing()

    def loseWriteConnection(self) -> None:
        if not self.writeClosed and self.lost is None:
            self.writeClosed = True
            assert self.peer is not None
            self.peer.inbox.append(_EOF)

    def abortConnection(self) -> None:
        self.aborted = True
        self.disconnecting = True

    def unregisterProducer(self) -> None:
        super().unregisterProducer()
        self.throttled = False

    def step(self) -> bool:
        """
        Deliver what this end's protocol can take now; lose this end if
        it was closed.  Whether anything happened.
        """
        moved = False
        while self.inbox and self.lost is None and self.producerState == "producing":
            item = self.inbox.popleft()
            moved = True
            if item is _RESET:
                self._lose(Failure(error.ConnectionLost()))
            elif item is _EOF:
                self._eof()
            else:
                readSize = self.network.readSize
                if len(item) > readSize:
                    item, rest = item[:readSize], item[readSize:]
                    self.inbox.appendleft(rest)
                self.unread -= len(item)
                self.protocol.dataReceived(item)
        peer = self.peer
        if peer is not None and peer.throttled and self.unread <= self.network.highWater // 2:
            peer.throttled = False
            if peer.producer is not None:
                peer.producer.resumeProducing()
            moved = True
        if self.disconnecting and self.lost is None:
            moved = True
            self._close()
        return moved

    def _eof(self) -> None:
        halfCloseable = IHalfCloseableProtocol(self.protocol, None)
        if halfCloseable is not None:
            halfCloseable.readConnectionLost()
        else:
            self.disconnecting = True

    def _close(self) -> None:
        peer = self.peer
        assert peer is not None
        if self.aborted:
            if peer.lost is None:
                peer.inbox.clear()
                peer.unread = 0
                peer.inbox.append(_RESET)
            self._lose(Failure(error.ConnectionAborted()))
        else:
            if peer.lost is None and not self.writeClosed:
                peer.inbox.append(_EOF)
            self._lose(Failure(error.ConnectionDone()))

    def _lose(self, reason: Failure) -> None:
        self.lost = reason
        self.disconnecting = True
        if self.producer is not None:
            self.producer.stopProducing()
            self.producer = None
        self.protocol.connectionLost(reason)


class Network:
    """
    In-memory connections (L{End} pairs), run together on one clock.

    @ivar highWater: unread bytes above which a writer's producer is paused.
    @ivar readSize: the most one C{dataReceived} gets.
    """

    def __init__(
        self, clock: Clock | None = None, highWater: int = 64 * 1024, readSize: int = 16 * 1024
    ) -> None:
        self.clock = clock or Clock()
        self.highWater = highWater
        self.readSize = readSize
        self.ends: list[End] = []

    def connect(self, server: Any, client: Any, clientAddress: Any = None) -> tuple[End, End]:
        """
        Join two protocols; C{clientAddress} is the server's peer address.
        """
        serverEnd = End(self, server, peer=clientAddress)
        clientEnd = End(self, client)
        serverEnd.peer, clientEnd.peer = clientEnd, serverEnd
        self.ends += [serverEnd, clientEnd]
        server.makeConnection(serverEnd)
        client.makeConnection(clientEnd)
        return serverEnd, clientEnd

    def run(self, rounds: int = 1_000_000) -> None:
        """
        Deliver until nothing moves.
        """
        for _ in range(rounds):
            moved = False
            now = self.clock.seconds()
            if any(call.getTime() <= now for call in self.clock.getDelayedCalls()):
                # Calls due now (TLS write batching, for one).
                self.clock.advance(0)
                moved = True
            for end in list(self.ends):
                moved = end.step() or moved
            self.ends = [end for end in self.ends if end.lost is None or end.inbox]
            if not moved:
                return
        raise AssertionError("the network never went quiet")

    def advance(self, seconds: float) -> None:
        """
        Let time pass, then run.
        """
        self.run()
        self.clock.advance(seconds)
        self.run()


class FakeBackend:
    """
    An L{nfltr.http.IBackend} that joins each protocol to a new server
    protocol on the network, or refuses, or leaves the attempt pending.

    @ivar servers: the server protocols, in order.
    @ivar pending: attempts left pending (when C{hold}).
    """

    def __init__(self, network: Network, serve: Callable[[], Protocol]) -> None:
        self.network = network
        self.serve = serve
        self.refuse = False
        self.hold = False
        self.servers: list[Any] = []
        self.pending: list[defer.Deferred[Any]] = []
        self.cancelled = 0

    def connect(self, protocol: Any) -> defer.Deferred[Any]:
        if self.refuse:
            return defer.fail(error.ConnectionRefusedError())
        if self.hold:
            def cancel(d: defer.Deferred[Any]) -> None:
                self.cancelled += 1

            d: defer.Deferred[Any] = defer.Deferred(cancel)
            self.pending.append(d)
            return d
        server = self.serve()
        self.servers.append(server)
        self.network.connect(server, protocol)
        return defer.succeed(protocol)


@implementer(IHalfCloseableProtocol)
class Visitor(Protocol):
    """
    A raw visitor: writes C{request} once connected, records what it gets.

    @ivar received: every byte received.
    @ivar lost: why the connection was lost, once it was.
    """

    def __init__(self, request: bytes = b"") -> None:
        self.request = request
        self.received = bytearray()
        self.lost: Failure | None = None
        self.eof = False

    def connectionMade(self) -> None:
        if self.request:
            self.transport.write(self.request)

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def readConnectionLost(self) -> None:
        self.eof = True
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:
        pass

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        self.lost = reason

    @property
    def cleanlyClosed(self) -> bool:
        """
        Whether the connection ended with a clean close.
        """
        return self.lost is not None and self.lost.check(error.ConnectionDone) is not None


Handler = Callable[[h11.Request, bytes], "tuple[bytes, bool]"]


class ScriptedServer(Protocol):
    """
    A backend: parses requests with h11 and, for each complete one, writes
    the raw bytes C{handler(request, body)} returns, then closes if it says
    so.

    @ivar requests: the requests, with their bodies.
    @ivar chunks: the body chunks as they came.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.conn = h11.Connection(h11.SERVER)
        self.requests: list[tuple[h11.Request, bytes]] = []
        self.chunks: list[bytes] = []
        self.lost: Failure | None = None
        self._request: h11.Request | None = None
        self._body = bytearray()

    def dataReceived(self, data: bytes) -> None:
        self.conn.receive_data(data)
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._request, self._body = event, bytearray()
            elif isinstance(event, h11.Data):
                self.chunks.append(bytes(event.data))
                self._body += event.data
            elif isinstance(event, h11.EndOfMessage):
                self._respond()
            else:
                return

    def _respond(self) -> None:
        assert self._request is not None
        self.requests.append((self._request, bytes(self._body)))
        raw, close = self.handler(self._request, bytes(self._body))
        self.transport.write(raw)
        if close:
            self.transport.loseConnection()
            return
        # Keep the h11 parser in step, as if it had sent the response itself.
        trailing = self.conn.trailing_data[0]
        self.conn = h11.Connection(h11.SERVER)
        if trailing:
            self.conn.receive_data(trailing)

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        self.lost = reason


def fixed(
    body: bytes, status: bytes = b"200 OK", close: bool = False, extra: bytes = b""
) -> Handler:
    """
    A handler that answers every request with C{body} and a Content-Length.
    """
    head = b"HTTP/1.1 " + status + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n"
    head += extra + (b"Connection: close\r\n" if close else b"")

    def handler(request: h11.Request, received: bytes) -> tuple[bytes, bool]:
        return head + b"\r\n" + body, close

    return handler


def request(
    method: bytes = b"GET", target: bytes = b"/", headers: bytes = b"", body: bytes = b"",
    version: bytes = b"1.1",
) -> bytes:
    """
    A raw request with a Host, and a Content-Length if it has a body.
    """
    head = method + b" " + target + b" HTTP/" + version + b"\r\nHost: example.test\r\n" + headers
    if body:
        head += b"Content-Length: " + str(len(body)).encode() + b"\r\n"
    return head + b"\r\n" + body


def parseResponses(
    data: bytes, methods: list[bytes] | None = None, closed: bool = True
) -> list[tuple[h11.Response, bytes, list[h11.InformationalResponse]]]:
    """
    The complete responses in C{data}, as an HTTP/1.1 client sees them (the
    connection closed after C{data} if C{closed}), one per method in
    C{methods} (default: GET).  Raises if C{data} is not a sequence of
    complete responses.
    """
    methods = methods or [b"GET"]
    out = []
    client = h11.Connection(h11.CLIENT)
    client.receive_data(data)
    if closed:
        client.receive_data(b"")
    for method in methods:
        if client.our_state is h11.DONE and client.their_state is h11.DONE:
            client.start_next_cycle()
        client.send(h11.Request(method=method, target=b"/", headers=[(b"Host", b"x")]))
        client.send(h11.EndOfMessage())
        info: list[h11.InformationalResponse] = []
        response, body = None, bytearray()
        while True:
            event = client.next_event()
            if isinstance(event, h11.InformationalResponse):
                info.append(event)
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                raise AssertionError(f"incomplete response: {event!r}")
        assert response is not None
        out.append((response, bytes(body), info))
    return out


class Harness:
    """
    A proxy factory over a L{FakeBackend} on a L{Network}, and visitors.

    @ivar backend: the fake backend.
    @ivar pool: the shared pool, if one was asked for.
    """

    def __init__(
        self,
        handler: Handler | None = None,
        serve: Callable[[], Protocol] | None = None,
        pool: bool = False,
        limits: Any = None,
        highWater: int = 64 * 1024,
        readSize: int = 16 * 1024,
        stream: bool | None = None,
        **options: Any,
    ) -> None:
        """
        @param stream: the proxy takes the stream path, else the full one;
            by default, as L{defaultStream} says (see L{onStreamPath}).
        """
        if stream is None:
            stream = self.defaultStream
        from nfltr.http import BackendPool, HTTPLimits, HTTPProxyFactory

        self.network = Network(highWater=highWater, readSize=readSize)
        self.clock = self.network.clock
        limits = limits or HTTPLimits()
        if serve is None:
            assert handler is not None
            serve = lambda: ScriptedServer(handler)  # noqa: E731
        self.backend = FakeBackend(self.network, serve)
        self.visitors: list[Visitor] = []
        self.pool = BackendPool(self.backend, self.clock, limits) if pool else None
        self.factory = HTTPProxyFactory(
            self.pool or self.backend, self.clock, limits=limits, stream=stream, **options
        )

    #: Whether harnesses take the stream path unless told.
    defaultStream = False

    def visit(self, data: bytes = b"", address: Any = VISITOR_ADDRESS) -> tuple[Visitor, Any]:
        """
        A visitor connected through a new proxy, which wrote C{data}; the
        network has run.
        """
        visitor = Visitor(data)
        self.visitors.append(visitor)
        proxy = self.factory.buildProtocol(address)
        self.network.connect(proxy, visitor, address)
        self.network.run()
        return visitor, proxy

    def send(self, visitor: Visitor, data: bytes) -> None:
        """
        The visitor writes C{data}; the network runs.
        """
        visitor.transport.write(data)
        self.network.run()


class OnStreamPath(SynchronousTestCase):
    """
    Mixed into a copy of a test case of the full proxy's behaviour, runs
    it on the stream path: the behaviour that both paths share is tested
    once, run per path.
    """

    def setUp(self) -> None:
        super().setUp()
        self.patch(Harness, "defaultStream", True)
