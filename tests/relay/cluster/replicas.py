"""
Two replicas in memory, on one L{Clock}, for the tests of what a visitor of
a share gets through either (L{tests.relay.cluster.test_withdrawn_share},
L{tests.relay.cluster.test_unknown_share}): their TLS ports as the relay
builds them (real TLS, L{twisted.test.iosim}), their HTTP port's router, a
replica link from C{b} to C{a}, and presence records in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.test.iosim import FakeTransport, IOPump, connect
from twisted.trial.unittest import SynchronousTestCase

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
from nfltr.sni.twisted import SNIRouterFactory
from nfltr.store import StoreUnavailable
from nfltr.tls import ShareCA, client_creator, ensure_relay_pki, server_context_factory
from tests.relay.cluster.test_replica_link import _Records
from tests.relay.helpers import FakeStore, RecordingTransport, RelayHarness
from tests.relay.test_tls_port import Greeter

VISITOR = IPv4Address("TCP", "192.0.2.7", 40000)
REQUEST = b"GET / HTTP/1.1\r\nHost: web.localhost\r\n\r\n"
PLAIN_REQUEST = b"GET / HTTP/1.1\r\nHost: web.localhost\r\nConnection: close\r\n\r\n"
#: What the HTTP port's redirect answers here (any host it does not route).
REDIRECT = b"HTTP/1.1 308 redirect\r\n\r\n"


class Records(_Records):
    """
    Presence records in memory (none at first); while C{down}, every
    look-up fails as a directory that cannot answer does.
    """

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], dict[str, str]] = {}
        self.down = False

    def lookup(self, kind: str, name: str) -> Deferred[dict[str, str] | None]:
        if self.down:
            return fail(StoreUnavailable("the directory is down"))
        return succeed(self.records.get((kind, name)))


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

    def __init__(self, case: TwoReplicasCase, replica: str) -> None:
        clock = case.clock
        self.name = replica
        self.registry = ShareRegistry(ShareCA.load(case.pki, "localhost"), clock, (),
                                      Leases(60))
        self.registry.httpPort = 8080
        self.harness = RelayHarness(case.store, self.registry, clock)
        self.peers = Peers(lambda other: succeed("127.0.0.1:1"), case.dial, 1, clock)
        presence = RedisPresence(case.records, replica, clock)
        self.remote = RemoteRoutes(self.harness.relay, presence, self.peers, clock)
        self.shares = ClusterShareRoutes(self.registry, self.remote)
        self.plain = ClusterPlainRoutes(self.registry, self.remote)


@dataclass
class Visit:
    """
    One TLS visitor's connection to a TLS port.

    @ivar app: the visitor's application (a L{Greeter}).
    @ivar server: the port's end of the connection.
    @ivar port: the port's factory (its counters).
    """

    app: Greeter
    server: RecordingTransport
    port: SNIRouterFactory

    @property
    def written(self) -> bytes:
        """
        Every byte the port sent the visitor.
        """
        return bytes(self.server.written)


class TwoReplicasCase(SynchronousTestCase):
    """
    Replicas C{a} and C{b} (C{self.a}, C{self.b}), publishing nothing yet;
    C{b} dials C{a} for a replica link.
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

    def port(self, replica: Replica, shares: IShareRoutes) -> SNIRouterFactory:
        """
        C{replica}'s TLS port, routed by C{shares}.
        """
        return tls_port_factory(replica.harness.relay,
                                server_context_factory(self.pki.cert, self.pki.key),
                                self.config, shares, self.clock)

    def visitPort(self, port: SNIRouterFactory, name: str = "web") -> Visit:
        """
        A TLS visitor of C{NAME.localhost} (trusting the share CA) on
        C{port}: its GET sent once the handshake is done, pumped until
        quiet.
        """
        app = Greeter(REQUEST)
        creator = client_creator(f"{name}.localhost", ca_path=self.pki.share_ca_cert)
        client = TLSMemoryBIOFactory(creator, True, Factory.forProtocol(lambda: app),
                                     clock=self.clock).buildProtocol(VISITOR)
        server = port.buildProtocol(VISITOR)
        written = RecordingTransport(server, isServer=True)
        self.pumps.append(connect(server, written, client,
                                  FakeTransport(client, isServer=False), greet=False,
                                  clock=self.clock))
        self.settle()
        return Visit(app, written, port)

    def visit(self, replica: Replica, shares: IShareRoutes, name: str = "web") -> Greeter:
        """
        A visitor of C{NAME.localhost} on a new TLS port of C{replica}'s
        routed by C{shares} (L{visitPort}).
        """
        return self.visitPort(self.port(replica, shares), name).app

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
