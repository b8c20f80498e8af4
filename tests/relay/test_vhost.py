"""
Tests for L{nfltr.relay.vhost}, the HTTP port's front.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.vhost import HEAD_TIMEOUT, MAX_HEAD, HostRouterFactory, request_host

ADDRESS = IPv4Address("TCP", "192.0.2.1", 1234)


class Recorder(Protocol):
    def __init__(self, name: str) -> None:
        self.name = name
        self.received = b""

    def dataReceived(self, data: bytes) -> None:
        self.received += data


class HostTests(SynchronousTestCase):
    """
    L{request_host}.
    """

    def test_hosts(self) -> None:
        """
        The Host's name, lowercase, without its port; IPv6 literals keep
        their brackets; incomplete heads say so; malformed or host-less
        requests give None.
        """
        self.assertEqual(request_host(b"GET / HTTP/1.1\r\nHost: Blog.Localhost:8080\r\n\r\n"),
                         "blog.localhost")
        self.assertEqual(request_host(b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"), "[::1]")
        self.assertIs(request_host(b"GET / HTTP/1.1\r\nHost: blog"), False)
        self.assertIsNone(request_host(b"NOT HTTP\r\n\r\n"))
        self.assertIsNone(request_host(b"GET / HTTP/1.0\r\n\r\n"))

    def test_sameHostAsTheProxy(self) -> None:
        """
        The host is the one the share's proxy checks (L{nfltr.http}): an
        absolute-form target's authority wins over C{Host} (RFC 9112
        section 3.2.2), a final dot goes, a malformed host is none.
        """
        self.assertEqual(
            request_host(b"GET http://blog.localhost/ HTTP/1.1\r\nHost: other.localhost\r\n\r\n"),
            "blog.localhost",
        )
        self.assertEqual(request_host(b"GET / HTTP/1.1\r\nHost: blog.localhost.\r\n\r\n"),
                         "blog.localhost")
        self.assertIsNone(request_host(b"GET / HTTP/1.1\r\nHost: a@blog.localhost\r\n\r\n"))


class RouterTests(SynchronousTestCase):
    """
    L{HostRouterFactory} hands each connection to the share of its first
    Host, or to the fallback.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.made: list[Recorder] = []
        share = self.factory("share")
        self.router = HostRouterFactory(
            lambda host: share if host == "blog.localhost" else None, self.factory("fallback"),
            self.clock,
        )

    def factory(self, name: str) -> Factory:
        made = self.made

        class Made(Factory):
            def buildProtocol(self, addr: Any) -> Recorder:
                protocol = Recorder(name)
                made.append(protocol)
                return protocol

        return Made()

    def connect(self, *chunks: bytes) -> StringTransport:
        protocol = self.router.buildProtocol(ADDRESS)
        transport = StringTransport()
        protocol.makeConnection(transport)
        for chunk in chunks:
            protocol.dataReceived(chunk)
        return transport

    def test_share(self) -> None:
        """
        A head for a share's host, split over reads, goes whole to the
        share's protocol, followed by what comes after.
        """
        head = b"GET / HTTP/1.1\r\nHost: blog.localhost:8080\r\n\r\n"
        self.connect(head[:10], head[10:], b"more")
        [protocol] = self.made
        self.assertEqual((protocol.name, protocol.received), ("share", head + b"more"))

    def test_fallback(self) -> None:
        """
        Other hosts, malformed heads, and heads over the limit go to the
        fallback with every byte read.
        """
        for raw in (b"GET / HTTP/1.1\r\nHost: other.localhost\r\n\r\n", b"junk\r\n\r\n",
                    b"GET /" + b"a" * MAX_HEAD):
            self.made.clear()
            self.connect(raw)
            [protocol] = self.made
            self.assertEqual((protocol.name, protocol.received), ("fallback", raw))

    def test_timeout(self) -> None:
        """
        A connection without a whole head within the timeout is aborted.
        """
        transport = self.connect(b"GET / HTTP/1.1\r\n")
        self.clock.advance(HEAD_TIMEOUT)
        self.assertTrue(transport.disconnecting)
        self.assertEqual(self.made, [])

    def test_choiceLater(self) -> None:
        """
        A choice that comes later (a replica asks the directory): the
        connection is not read meanwhile, then handed whole to the factory
        chosen, or to the fallback for L{None}; a connection lost meanwhile
        is handed to nobody.
        """
        later: list[Deferred[Any]] = []
        share = self.factory("share")

        def choose(host: str) -> Deferred[Any]:
            later.append(Deferred())
            return later[-1]

        self.router.choose = choose
        head = b"GET / HTTP/1.1\r\nHost: blog.localhost\r\n\r\n"
        transport = self.connect(head)
        self.assertEqual((self.made, transport.producerState), ([], "paused"))
        later[0].callback(share)
        [protocol] = self.made
        self.assertEqual((protocol.name, protocol.received), ("share", head))
        self.assertEqual(transport.producerState, "producing")
        self.connect(head)
        later[1].callback(None)
        self.assertEqual((self.made[1].name, self.made[1].received), ("fallback", head))
        router = self.router.buildProtocol(ADDRESS)
        router.makeConnection(StringTransport())
        router.dataReceived(head)
        router.connectionLost(Failure(ConnectionDone()))
        later[2].callback(share)
        self.assertEqual(len(self.made), 2)
