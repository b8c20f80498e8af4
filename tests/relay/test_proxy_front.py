"""
Tests for L{nfltr.relay.proxy_front}: the PROXY protocol from a trusted
load balancer, and a header from anywhere else refused.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer, providedBy

from nfltr.relay.proxy_front import (
    BAD_HEADER,
    TIMEOUT,
    UNTRUSTED,
    ProxyFrontFactory,
    proxy_front,
)
from nfltr.wire.proxy_protocol import V1, V2, encode, encode_unknown
from tests.relay.test_tap import parse

BALANCER = IPv4Address("TCP", "10.0.0.5", 40000)
OUTSIDER = IPv4Address("TCP", "203.0.113.9", 40000)
CLIENT = ("192.0.2.44", 5555)
SERVICE = ("10.0.0.1", 443)


@implementer(IHalfCloseableProtocol)
class Inner(Protocol):
    """
    Records what it is given.
    """

    def __init__(self, addr: Any) -> None:
        self.addr = addr
        self.received = b""
        self.made = False
        self.eof = False

    def connectionMade(self) -> None:
        self.made = True

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def readConnectionLost(self) -> None:
        self.eof = True

    def writeConnectionLost(self) -> None:
        pass


class Inners(Factory):
    """
    Builds L{Inner}s, kept in C{built}; declines the addresses in
    C{declined}.
    """

    def __init__(self) -> None:
        self.built: list[Inner] = []
        self.declined: set[str] = set()

    def buildProtocol(self, addr: Any) -> Inner | None:
        if addr.host in self.declined:
            return None
        inner = Inner(addr)
        self.built.append(inner)
        return inner


class FrontTests(SynchronousTestCase):
    """
    L{ProxyFrontFactory} trusting 10.0.0.0/8.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.inners = Inners()
        self.front = ProxyFrontFactory(self.inners, [ipaddress.ip_network("10.0.0.0/8")],
                                       self.clock, 5)

    def connect(self, addr: Any) -> tuple[Any, StringTransport]:
        protocol = self.front.buildProtocol(addr)
        transport = StringTransport(peerAddress=addr)
        protocol.makeConnection(transport)
        return protocol, transport

    def test_trusted(self) -> None:
        """
        From a trusted balancer, the header's client is the connection's:
        the wrapped factory builds for it, C{getPeer} answers it, and the
        bytes after the header (in the same read) follow, for either
        version.
        """
        for version in (V1, V2):
            protocol, transport = self.connect(BALANCER)
            protocol.dataReceived(encode(version, CLIENT, SERVICE) + b"hello")
            inner = self.inners.built[-1]
            self.assertEqual((inner.addr.host, inner.addr.port), CLIENT)
            self.assertEqual(inner.transport.getPeer(), IPv4Address("TCP", *CLIENT))
            self.assertEqual(inner.received, b"hello")
            inner.transport.write(b"back")
            self.assertEqual(transport.value(), b"back")
            self.assertTrue(all(i.providedBy(inner.transport) for i in providedBy(transport)))

    def test_ipv6(self) -> None:
        """
        An IPv6 client is an L{IPv6Address}.
        """
        protocol, _ = self.connect(BALANCER)
        protocol.dataReceived(encode(V2, ("2001:db8::7", 1), ("2001:db8::1", 2)))
        self.assertEqual(self.inners.built[0].addr, IPv6Address("TCP", "2001:db8::7", 1))

    def test_byteAtATime(self) -> None:
        """
        A header that comes a byte at a time is read whole.
        """
        protocol, _ = self.connect(BALANCER)
        for byte in encode(V1, CLIENT, SERVICE) + b"x":
            protocol.dataReceived(bytes([byte]))
        self.assertEqual(self.inners.built[0].addr.host, CLIENT[0])
        self.assertEqual(self.inners.built[0].received, b"x")

    def test_healthCheck(self) -> None:
        """
        A header naming nobody leaves the balancer's address.
        """
        protocol, _ = self.connect(BALANCER)
        protocol.dataReceived(encode_unknown(V2))
        self.assertEqual(self.inners.built[0].addr, BALANCER)

    def test_noHeader(self) -> None:
        """
        A trusted connection without a header is refused, counted.
        """
        protocol, transport = self.connect(BALANCER)
        protocol.dataReceived(b"GET / HTTP/1.1\r\n")
        self.assertTrue(transport.disconnecting)
        self.assertEqual(self.inners.built, [])
        self.assertEqual(self.front.refused[BAD_HEADER], 1)

    def test_timeout(self) -> None:
        """
        No header within the timeout: refused.
        """
        _, transport = self.connect(BALANCER)
        self.clock.advance(5)
        self.assertTrue(transport.disconnecting)
        self.assertEqual(self.front.refused[TIMEOUT], 1)

    def test_declined(self) -> None:
        """
        The wrapped factory may decline the client (its per-source limit):
        the connection is closed.
        """
        self.inners.declined.add(CLIENT[0])
        protocol, transport = self.connect(BALANCER)
        protocol.dataReceived(encode(V1, CLIENT, SERVICE))
        self.assertTrue(transport.disconnecting)

    def test_untrustedPlain(self) -> None:
        """
        From elsewhere, the wrapped protocol is connected at once (it may
        speak first) and gets every byte.
        """
        protocol, _ = self.connect(OUTSIDER)
        inner = self.inners.built[0]
        self.assertTrue(inner.made)
        self.assertEqual(inner.addr, OUTSIDER)
        protocol.dataReceived(b"\x16\x03\x01")
        protocol.dataReceived(b"more")
        self.assertEqual(inner.received, b"\x16\x03\x01more")

    def test_untrustedHeader(self) -> None:
        """
        A PROXY header from elsewhere is refused, whole or in pieces, in
        either version; nothing of it reaches the wrapped protocol.
        """
        for version in (V1, V2):
            data = encode(version, CLIENT, SERVICE)
            protocol, transport = self.connect(OUTSIDER)
            protocol.dataReceived(data[:3])
            protocol.dataReceived(data[3:])
            self.assertTrue(transport.disconnecting)
            self.assertEqual(self.inners.built[-1].received, b"")
        self.assertEqual(self.front.refused[UNTRUSTED], 2)

    def test_untrustedPrefixReleased(self) -> None:
        """
        First bytes that only began like a header are passed on once they
        are not one, and at EOF.
        """
        protocol, _ = self.connect(OUTSIDER)
        protocol.dataReceived(b"PRO")
        self.assertEqual(self.inners.built[0].received, b"")
        protocol.dataReceived(b"TOCOL")
        self.assertEqual(self.inners.built[0].received, b"PROTOCOL")
        protocol, _ = self.connect(OUTSIDER)
        protocol.dataReceived(b"\r\n")
        protocol.readConnectionLost()
        self.assertEqual(self.inners.built[1].received, b"\r\n")
        self.assertTrue(self.inners.built[1].eof)

    def test_halfClose(self) -> None:
        """
        A trusted client's EOF is a half-close for a protocol that takes one.
        """
        protocol, _ = self.connect(BALANCER)
        protocol.dataReceived(encode(V1, CLIENT, SERVICE))
        protocol.readConnectionLost()
        self.assertTrue(self.inners.built[0].eof)

    def test_none(self) -> None:
        """
        Without trusted networks the factory is not wrapped.
        """
        self.assertIs(proxy_front(self.inners, (), self.clock, 5), self.inners)


class OptionTests(SynchronousTestCase):
    """
    C{--proxy-protocol-from}.
    """

    def test_values(self) -> None:
        """
        None by default; networks and addresses, comma-separated; a mistake
        names the option and the part.
        """
        config = parse().config
        assert config is not None
        self.assertEqual(config.proxy_from, ())
        config = parse("--proxy-protocol-from", "10.0.0.0/8, 192.0.2.1,::1").config
        assert config is not None
        self.assertEqual([str(n) for n in config.proxy_from],
                         ["10.0.0.0/8", "192.0.2.1/32", "::1/128"])
        error = self.assertRaises(usage.UsageError, parse, "--proxy-protocol-from", "10.0.0.0/8,x")
        self.assertIn("--proxy-protocol-from", str(error))
        self.assertIn("'x' is not an address", str(error))


class AddressedHTTPTests(SynchronousTestCase):
    """
    A share declared C{addressed}: the relay's HTTP proxy gives each visitor
    connection a backend of its own, whose sessions name the visitor.
    """

    def test_visitorBackend(self) -> None:
        """
        Only an addressed share gets a backend per visitor; its sessions'
        target is C{http:NAME@ADDRESS}, which parses back to the name and
        the visitor, and the proxy hands each visitor its own backend.
        """
        from nfltr.http import HTTPProxyFactory
        from nfltr.relay.shares import LinkSessionBackend, ShareRegistry
        from nfltr.wire.messages import INSPECT, HttpShare, parse_http_visitor
        from tests.relay.test_shares import FakeLink

        link = FakeLink()
        registry = ShareRegistry(None, Clock(), ())
        addressed = HttpShare("blog", 80, INSPECT, addressed=True)
        self.assertIsNone(registry._visitorBackend(HttpShare("blog", 80, INSPECT), lambda: link))
        backendFor = registry._visitorBackend(addressed, lambda: link)
        assert backendFor is not None
        backendFor("192.0.2.1:5").connect(Protocol())
        [(target, _)] = link.opened
        self.assertEqual(target, "http:blog@192.0.2.1:5")
        self.assertEqual(parse_http_visitor(target), ("blog", "192.0.2.1:5"))
        self.assertEqual(parse_http_visitor("http:blog"), ("blog", None))
        factory = HTTPProxyFactory(LinkSessionBackend("blog", lambda: link), Clock(),
                                   backendFor=backendFor)
        proxy = factory.proxyFor("192.0.2.9:7")
        self.assertEqual(proxy.source.backend.visitor, "192.0.2.9:7")


class MetricsTests(SynchronousTestCase):
    """
    The relay's metrics count the PROXY front's refusals, shared by every
    listener, when it has trusted networks.
    """

    def test_refused(self) -> None:
        """
        Refusals of several listeners' PROXY fronts land in one count per
        reason, exported as the relay's metric.
        """
        from types import SimpleNamespace

        from nfltr.relay.agents import Relay
        from nfltr.relay.metrics import metrics_registry
        from nfltr.relay.proxy_front import REFUSALS
        from tests.relay.helpers import FakeStore
        from tests.relay.test_metrics import samples

        refused = dict.fromkeys(REFUSALS, 0)
        inners = Inners()
        trusted = [ipaddress.ip_network("10.0.0.0/8")]
        for _ in range(2):  # two listeners, one count
            front = proxy_front(inners, trusted, Clock(), 5, refused)
            protocol = front.buildProtocol(OUTSIDER)
            protocol.makeConnection(StringTransport())
            protocol.dataReceived(encode(V1, CLIENT, SERVICE))
        service = SimpleNamespace(
            relay=Relay(FakeStore(), Clock()), router=None, tlsAdmission=None,
            httpAdmission=None, config=SimpleNamespace(proxy_from=trusted), proxyRefused=refused,
        )
        seen = samples(metrics_registry(service))
        self.assertEqual(seen[("nfltr_proxy_protocol_refused_total",
                               (("reason", UNTRUSTED),))], 2)
        service.config.proxy_from = []
        self.assertNotIn(("nfltr_proxy_protocol_refused_total", (("reason", UNTRUSTED),)),
                         samples(metrics_registry(service)))
