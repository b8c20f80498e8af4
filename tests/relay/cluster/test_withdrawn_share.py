"""
Tests for a load-balancing group's share whose every member, on every
replica, withdrew its service (health checks failing): its visitors get the
answer one relay gives (an C{inspect} share's, and a plain-HTTP URL's:
C{503} with C{Retry-After}) through every replica's port, the one that
holds the withdrawn members and one that holds none
(L{nfltr.relay.cluster.routes}).  Two replicas in memory, on one L{Clock}:
their TLS ports as the relay builds them (real TLS, L{twisted.test.iosim}),
their HTTP port's router, a replica link between them, and presence records
in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, succeed
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.test.iosim import FakeTransport, IOPump, connect
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.link import DIALER, LISTENER
from nfltr.link.twisted import LinkHandler, LinkProtocol
from nfltr.relay.cluster.listener import ReplicaLinkHandler
from nfltr.relay.cluster.peers import Peers
from nfltr.relay.cluster.presence import RedisPresence
from nfltr.relay.cluster.routes import ClusterPlainRoutes, ClusterShareRoutes, RemoteRoutes
from nfltr.relay.config import RelayConfig
from nfltr.relay.interfaces import IShareRoutes
from nfltr.relay.leases import Leases
from nfltr.relay.shares import ShareRegistry
from nfltr.relay.tls_port import tls_port_factory
from nfltr.relay.vhost import HostRouterFactory
from nfltr.tls import ShareCA, client_creator, ensure_relay_pki, server_context_factory
from nfltr.wire.messages import INSPECT, HttpShare
from tests.relay.cluster.test_replica_link import _Records
from tests.relay.helpers import FakeStore, RelayHarness
from tests.relay.test_groups import Member
from tests.relay.test_tls_port import Greeter

VISITOR = IPv4Address("TCP", "192.0.2.7", 40000)
REQUEST = b"GET / HTTP/1.1\r\nHost: web.localhost\r\n\r\n"
PLAIN_REQUEST = b"GET / HTTP/1.1\r\nHost: web.localhost\r\nConnection: close\r\n\r\n"
#: What the HTTP port's redirect answers here (any host it does not route).
REDIRECT = b"HTTP/1.1 308 redirect\r\n\r\n"


class Records(_Records):
    """
    Presence records in memory: share C{web} (acme's, inspect, also in plain
    HTTP) of group C{g}, whose one member, on replica C{a}, withdrew.
    """

    def __init__(self) -> None:
        self.records = {("share", "web"): {
            "replica": "a", "account": "acme", "mode": INSPECT, "plain": "1", "group": "g",
            "member:a": "9 withdrawn"}}


class Redirect(Protocol):
    """
    The HTTP port's fallback: answers L{REDIRECT} and closes.
    """

    def connectionMade(self) -> None:
        self.transport.write(REDIRECT)
        self.transport.loseConnection()


class Visitor(Protocol):
    """
    A plain-HTTP visitor: sends its request, records the answer.
    """

    def __init__(self) -> None:
        self.received = b""

    def connectionMade(self) -> None:
        self.transport.write(PLAIN_REQUEST)

    def dataReceived(self, data: bytes) -> None:
        self.received += data


class Replica:
    """
    One replica: a relay whose share registry and routes are the cluster's.
    """

    def __init__(self, case: WithdrawnEverywhereTests, replica: str) -> None:
        clock = case.clock
        self.name = replica
        self.registry = ShareRegistry(ShareCA.load(case.pki, "localhost"), clock, (),
                                      Leases(60))
        self.registry.httpPort = 8080
        self.harness = RelayHarness(case.store, self.registry, clock)
        peers = Peers(lambda other: succeed("127.0.0.1:1"), case.dial, 1, clock)
        presence = RedisPresence(case.records, replica, clock)
        self.remote = RemoteRoutes(self.harness.relay, presence, peers, clock)
        self.shares = ClusterShareRoutes(self.registry, self.remote)
        self.plain = ClusterPlainRoutes(self.registry, self.remote)


class WithdrawnEverywhereTests(SynchronousTestCase):
    """
    Replica C{a} holds the group's one member of the share C{web}
    (C{inspect}, also in plain HTTP), which withdrew; replica C{b} holds
    none.  A visitor of either replica gets what one relay answers.
    """

    def setUp(self) -> None:
        tmp = Path(self.mktemp())
        self.pki = ensure_relay_pki(tmp / "pki", [], share_domain="localhost")
        self.config = RelayConfig(tmp)
        self.store = FakeStore()
        self.records = Records()
        self.clock = Clock()
        self.pumps: list[IOPump] = []
        self.a, self.b = Replica(self, "a"), Replica(self, "b")
        member = Member(name="a")
        self.a.registry.publish(member, "acme", [HttpShare("web", 3000, INSPECT, plain=True)],
                                lambda: member, "g")
        self.a.registry.health.withdraw(member)

    def dial(self, address: str, handler: LinkHandler) -> Deferred[LinkProtocol]:
        """
        A replica link to replica C{a}, the only one another replica dials here.
        """
        dialer = LinkProtocol(DIALER, handler, self.clock, appHello={"role": "replica"})
        listener = LinkProtocol(LISTENER, ReplicaLinkHandler(self.a.harness.relay), self.clock)
        self.pumps.append(connect(listener, FakeTransport(listener, isServer=True), dialer,
                                  FakeTransport(dialer, isServer=False), greet=False,
                                  clock=self.clock))
        self.settle()
        return dialer.whenEstablished()

    def settle(self) -> None:
        """
        Pump every connection, and let time pass, until nothing moves.
        """
        for _ in range(200):
            self.clock.advance(0.01)
            if not any([pump.pump() for pump in list(self.pumps)]):
                return
        raise AssertionError("the connections never went quiet")

    def visit(self, replica: Replica, shares: IShareRoutes) -> Greeter:
        """
        A TLS visitor of C{web.localhost} (trusting the share CA) on
        C{replica}'s TLS port routed by C{shares}: its GET sent once the
        handshake is done, pumped until quiet.
        """
        port = tls_port_factory(replica.harness.relay,
                                server_context_factory(self.pki.cert, self.pki.key),
                                self.config, shares, self.clock)
        app = Greeter(REQUEST)
        creator = client_creator("web.localhost", ca_path=self.pki.share_ca_cert)
        client = TLSMemoryBIOFactory(creator, True, Factory.forProtocol(lambda: app),
                                     clock=self.clock).buildProtocol(VISITOR)
        server = port.buildProtocol(VISITOR)
        self.pumps.append(connect(server, FakeTransport(server, isServer=True), client,
                                  FakeTransport(client, isServer=False), greet=False,
                                  clock=self.clock))
        self.settle()
        return app

    def visitPlain(self, choose: Any) -> bytes:
        """
        What a plain-HTTP visitor of C{web.localhost} gets from an HTTP
        port routed by C{choose}.
        """
        port = HostRouterFactory(choose, Factory.forProtocol(Redirect), self.clock)
        visitor = Visitor()
        server = port.buildProtocol(VISITOR)
        self.pumps.append(connect(server, FakeTransport(server, isServer=True), visitor,
                                  FakeTransport(visitor, isServer=False), greet=False,
                                  clock=self.clock))
        self.settle()
        return visitor.received

    def test_interfaces(self) -> None:
        """
        The replicas' routing tables are L{IShareRoutes}.
        """
        self.assertTrue(verifyObject(IShareRoutes, self.a.shares))
        self.assertTrue(verifyObject(IShareRoutes, self.b.shares))

    def test_inspectThroughEveryReplica(self) -> None:
        """
        The share's visitor gets the same C{503} (with C{Retry-After}) one
        relay answers, through the replica that holds the withdrawn member
        and through the one that holds none (which carries the visitor to
        the other, whose TLS and answer it is); its TLS is ended by the
        share's certificate each time.
        """
        one = self.visit(self.a, self.a.registry)
        self.assertTrue(one.handshook)
        self.assertTrue(one.received.startswith(b"HTTP/1.1 503 "), one.received)
        self.assertIn(b"\r\nretry-after: 5\r\n", one.received.lower())
        for replica in (self.a, self.b):
            app = self.visit(replica, replica.shares)
            self.assertTrue(app.handshook, f"through replica {replica.name}")
            self.assertEqual(app.received, one.received, f"through replica {replica.name}")

    def test_plainThroughEveryReplica(self) -> None:
        """
        The share's plain-HTTP visitor gets the same C{503} one relay
        answers through either replica's HTTP port.
        """
        one = self.visitPlain(self.a.registry.plainRoute)
        self.assertTrue(one.startswith(b"HTTP/1.1 503 "), one)
        for replica in (self.a, self.b):
            self.assertEqual(self.visitPlain(replica.plain), one, f"through replica {replica.name}")

    def test_nothingAnywhere(self) -> None:
        """
        A share nobody publishes anywhere is still refused: the TLS port
        closes the visitor, the HTTP port redirects it.
        """
        del self.records.records["share", "web"]
        app = self.visit(self.b, self.b.shares)
        self.assertFalse(app.handshook)
        self.assertEqual(app.received, b"")
        self.assertEqual(self.visitPlain(self.b.plain), REDIRECT)
