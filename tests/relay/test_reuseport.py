"""
Tests for L{nfltr.relay.reuseport}: the C{reuseport:PORT} endpoint string
(read and checked), and two listeners sharing one loopback port for real.
"""

from __future__ import annotations

import socket
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IStreamServerEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase, TestCase
from zope.interface.verify import verifyObject

from nfltr.cli.relay_options import check_endpoint
from nfltr.relay.reuseport import (
    DEFAULT_REUSEPORT_BACKLOG,
    ReusePortEndpoint,
    parse_reuseport,
    server_endpoint,
)

#: Connections made to a shared port: the chance that the kernel gives all
#: of them to one of two listeners is 2 ** (1 - CONNECTIONS).
CONNECTIONS = 64


def free_port() -> int:
    """
    A loopback port that was free a moment ago.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ParseTests(SynchronousTestCase):
    """
    L{parse_reuseport} and L{server_endpoint}.
    """

    def test_read(self) -> None:
        """
        The port, the interface (IPv6 escaped as Twisted's strings are) and
        the backlog; the caller's backlog when the string gives none.
        """
        shared = parse_reuseport("reuseport:8443:interface=127.0.0.1:backlog=7")
        assert shared is not None
        self.assertTrue(verifyObject(IStreamServerEndpoint, shared))
        self.assertEqual((shared.port, shared.interface, shared.backlog),
                         (8443, "127.0.0.1", 7))
        shared = parse_reuseport("REUSEPORT:443:interface=\\:\\:1", backlog=4096)
        assert shared is not None
        self.assertEqual((shared.port, shared.interface, shared.backlog), (443, "::1", 4096))
        shared = parse_reuseport("reuseport:1")
        assert shared is not None
        self.assertEqual((shared.interface, shared.backlog), ("", DEFAULT_REUSEPORT_BACKLOG))

    def test_others(self) -> None:
        """
        Other endpoint strings are Twisted's, with the relay's backlog.
        """
        self.assertIsNone(parse_reuseport("tcp:8443"))
        endpoint = server_endpoint(None, "tcp:8443:interface=127.0.0.1", 4096)
        self.assertEqual(endpoint._backlog, 4096)
        self.assertNotIsInstance(endpoint, ReusePortEndpoint)

    def test_bad(self) -> None:
        """
        A missing or out-of-range port, an unknown argument or a bad backlog
        is named, and refused as an option value.
        """
        for spec, words in (
            ("reuseport", "give a port"), ("reuseport:0", "give a port"),
            ("reuseport:65536", "give a port"), ("reuseport:http", "give a port"),
            ("reuseport:1:2", "give a port"), ("reuseport:1:ssl=yes", "unknown argument ssl"),
            ("reuseport:1:backlog=0", "backlog"), ("reuseport:1:backlog=x", "backlog"),
        ):
            error = self.assertRaises(ValueError, parse_reuseport, spec)
            self.assertIn(words, str(error))
            usage_error = self.assertRaises(usage.UsageError, check_endpoint, spec, "--tls")
            self.assertIn(words, str(usage_error))
        self.assertEqual(check_endpoint("reuseport:8443", "--tls"), "reuseport:8443")


class _CountingFactory(Factory):
    """
    Counts its connections, and closes each.
    """

    def __init__(self) -> None:
        self.count = 0

    def buildProtocol(self, addr: Any) -> Protocol:
        return _Count(self)


class _Count(Protocol):
    def __init__(self, owner: _CountingFactory) -> None:
        self.owner = owner

    def connectionMade(self) -> None:
        self.owner.count += 1
        assert self.transport is not None
        self.transport.loseConnection()


class SharedPortTests(TestCase):
    """
    Two listeners on one loopback port, on the real reactor.
    """

    def listen(self, port: int) -> tuple[_CountingFactory, Any]:
        factory = _CountingFactory()
        d = ReusePortEndpoint(reactor, port, "127.0.0.1").listen(factory)
        listening = self.successResultOf(d)
        self.addCleanup(listening.stopListening)
        return factory, listening

    def test_spread(self) -> None:
        """
        Connections to the shared port reach both listeners.
        """
        port = free_port()
        first, listening = self.listen(port)
        second, _ = self.listen(port)
        self.assertEqual(listening.getHost().port, port)

        async def connect() -> None:
            for _ in range(CONNECTIONS):
                with socket.create_connection(("127.0.0.1", port), timeout=10):
                    pass
            while first.count + second.count < CONNECTIONS:
                done: Deferred[None] = Deferred()
                reactor.callLater(0.01, done.callback, None)
                await done

        return ensureDeferred(connect()).addCallback(
            lambda _: self.assertTrue(first.count and second.count, (first.count, second.count)))

    def test_notShared(self) -> None:
        """
        A port held by a listener without C{SO_REUSEPORT} cannot be shared:
        the failure names the port.
        """
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen(1)
            port = holder.getsockname()[1]
            failure = self.failureResultOf(
                ReusePortEndpoint(reactor, port, "127.0.0.1").listen(Factory()),
                CannotListenError)
            self.assertIn(str(port), str(failure.value))
