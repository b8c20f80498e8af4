"""
Tests for L{nfltr.relay.tls_port}: what the relay's TLS port does with each server name, with
real pyOpenSSL handshakes in memory (L{twisted.test.iosim} on one L{Clock}) through the same
factory the relay listens with.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from OpenSSL import SSL
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Factory, Protocol
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python.failure import Failure
from twisted.test.iosim import FakeTransport, connect
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from nfltr.link import DIALER
from nfltr.link.memory import LinkMemory
from nfltr.link.twisted import LinkProtocol
from nfltr.relay.config import RelayConfig
from nfltr.relay.share_routes import ShareRoutes
from nfltr.relay.tls_port import (
    TLSPortRoutes,
    check_share_domain,
    own_names,
    tls_port_factory,
)
from nfltr.sni import ClientHello
from nfltr.sni.twisted import (
    REFUSE,
    UNRECOGNIZED_NAME_ALERT,
    HandOver,
    ISpliceBackend,
    SNIRouterFactory,
    Splice,
)
from nfltr.tls import client_creator, ensure_relay_pki, ensure_self_signed, server_context_factory
from nfltr.wire.messages import TcpShare, agent_hello, client_hello, client_target
from tests.link.twisted_helpers import RecordingHandler
from tests.sni.helpers import live_hello
from tests.tls_helpers import Recorder

from .helpers import FakeStore, RecordingTransport, RelayHarness, without_token

ADDRESS = IPv4Address("TCP", "192.0.2.9", 50000)


def hello(name: str | None) -> ClientHello:
    return ClientHello(name, (), 0x0303, (0x0304,), False, ())


@implementer(ISpliceBackend)
class NamedBackend:
    def __init__(self, name: str) -> None:
        self.name = name

    def connect(self, protocol: Any, visitor: Any = None) -> None:
        raise AssertionError("not connected in these tests")


class OwnNamesTests(SynchronousTestCase):
    """
    L{own_names}: the server names the relay ends TLS for.
    """

    def test_names(self) -> None:
        """
        C{localhost} always; each DNS name as a ClientHello spells it (lowercase, no trailing
        dot, an internationalised name as its A-label); IP addresses and wildcards left out.
        """
        self.assertEqual(
            own_names(["Relay.Example.COM.", "192.0.2.1", "::1", "*.shares.example", "bücher.de"]),
            frozenset({"localhost", "relay.example.com", "xn--bcher-kva.de"}),
        )
        self.assertEqual(own_names([]), frozenset({"localhost"}))


class CheckShareDomainTests(SynchronousTestCase):
    """
    L{check_share_domain} normalises a share domain or says what is wrong.
    """

    def test_normalised(self) -> None:
        """
        A DNS name is lowercased, its trailing dot dropped, IDNA-encoded.
        """
        self.assertEqual(check_share_domain("localhost"), "localhost")
        self.assertEqual(check_share_domain("Shares.Example.COM."), "shares.example.com")
        self.assertEqual(check_share_domain("bücher.de"), "xn--bcher-kva.de")

    def test_refused(self) -> None:
        """
        An IP address, a wildcard, an empty name and a name with other characters are refused.
        """
        for bad in ("192.0.2.1", "::1", "*.example.com", "", "a b.example", "under_score.com"):
            e = self.assertRaises(ValueError, check_share_domain, bad)
            self.assertIn(repr(bad), str(e))


class ShareRoutesTests(SynchronousTestCase):
    """
    L{ShareRoutes}, the in-memory routing table.
    """

    def test_table(self) -> None:
        """
        Empty at first; a name routes to the backend last added for it until removed;
        removing an unknown name does nothing.
        """
        table = ShareRoutes()
        first, second = NamedBackend("1"), NamedBackend("2")
        self.assertIsNone(table.route("web"))
        table.add("web", first)
        table.add("web", second)
        self.assertEqual(table.route("web"), Splice(second))
        self.assertIsNone(table.route("other"))
        table.remove("web")
        table.remove("web")
        self.assertIsNone(table.route("web"))


class ChooseTests(SynchronousTestCase):
    """
    L{TLSPortRoutes.choose}: own names to the relay, share names to their share, others
    refused.
    """

    def setUp(self) -> None:
        self.relay = Factory()
        self.shares = ShareRoutes()
        self.web = NamedBackend("web")
        self.shares.add("web", self.web)
        self.shares.add("relay", NamedBackend("relay"))
        self.routes = TLSPortRoutes(
            self.relay, own_names(["relay.example.com"]), "example.com", self.shares
        )

    def test_relay(self) -> None:
        """
        No server name, C{localhost} and the relay's own names are ended by the relay, even
        a name that is also under the share domain.
        """
        for name in (None, "localhost", "relay.example.com"):
            self.assertEqual(self.routes.choose(hello(name)), HandOver(self.relay), name)

    def test_share(self) -> None:
        """
        C{LABEL.DOMAIN} for a share in the table is spliced to its backend.
        """
        self.assertEqual(self.routes.choose(hello("web.example.com")), Splice(self.web))

    def test_refused(self) -> None:
        """
        An unknown share, a deeper name under a known one, the share domain itself, and any
        other name are refused.
        """
        for name in ("nope.example.com", "a.web.example.com", "example.com", "web.example.org",
                     "web.example.com.evil", "webexample.com"):
            self.assertIs(self.routes.choose(hello(name)), REFUSE, name)

    def test_shareName(self) -> None:
        """
        The share name is the one label before the share domain.
        """
        self.assertEqual(self.routes.shareName("web.example.com"), "web")
        self.assertIsNone(self.routes.shareName("a.web.example.com"))
        self.assertIsNone(self.routes.shareName(".example.com"))
        self.assertIsNone(self.routes.shareName("example.com"))

    def test_tableChanges(self) -> None:
        """
        The table is asked on each connection: a share added later is routed, one removed is
        refused.
        """
        self.assertIs(self.routes.choose(hello("new.example.com")), REFUSE)
        backend = NamedBackend("new")
        self.shares.add("new", backend)
        self.assertEqual(self.routes.choose(hello("new.example.com")), Splice(backend))
        self.shares.remove("new")
        self.assertIs(self.routes.choose(hello("new.example.com")), REFUSE)


class TrickleTransport(RecordingTransport):
    """
    An iosim transport that delivers what it was written one byte per pump.

    @ivar deliveries: how many reads it delivered.
    """

    def __init__(self, protocol: Any, isServer: bool) -> None:
        super().__init__(protocol, isServer)
        self.pending = bytearray()
        self.deliveries = 0

    def getOutBuffer(self) -> bytes | None:
        more = super().getOutBuffer()
        if more:
            self.pending += more
        if not self.pending:
            return None
        self.deliveries += 1
        byte = bytes(self.pending[:1])
        del self.pending[:1]
        return byte


class Echo(Protocol):
    def dataReceived(self, data: bytes) -> None:
        self.transport.write(data)


class Greeter(Recorder):
    """
    A TLS client application that says something once the handshake is done.
    """

    def __init__(self, greeting: bytes) -> None:
        super().__init__()
        self.greeting = greeting

    def handshakeCompleted(self) -> None:
        super().handshakeCompleted()
        self.transport.write(self.greeting)


@implementer(ISpliceBackend)
class TLSEchoShare:
    """
    A share that ends TLS itself with its own key, as an end-to-end agent does, and echoes;
    joined to the router's end in memory.

    @ivar received: the transport of the router's end, with every byte the share received.
    """

    def __init__(self, harness: RelayHarness, directory: Path) -> None:
        self.harness = harness
        self.identity = ensure_self_signed(directory, "web")
        self.creator = server_context_factory(self.identity.cert, self.identity.key)
        self.received: RecordingTransport | None = None

    def connect(self, protocol: Any, visitor: Any = None) -> None:
        factory = TLSMemoryBIOFactory(
            self.creator, False, Factory.forProtocol(Echo), clock=self.harness.clock
        )
        server = factory.buildProtocol(ADDRESS)
        self.received = RecordingTransport(protocol, isServer=False)
        self.harness.pumps.append(connect(
            server, FakeTransport(server, isServer=True), protocol, self.received,
            greet=False, clock=self.harness.clock,
        ))


class TLSPortTests(SynchronousTestCase):
    """
    The relay's TLS port factory, as the relay builds it, on real TLS in memory.
    """

    def setUp(self) -> None:
        self.harness = RelayHarness(FakeStore())
        self.clock = self.harness.clock
        self.tmp = Path(self.mktemp())
        self.pki = ensure_relay_pki(self.tmp / "relay", ["relay.example.com"])
        self.shares = ShareRoutes()
        config = RelayConfig(
            self.tmp, names=("relay.example.com",), handshake_timeout=4.0,
        )
        creator = server_context_factory(self.pki.cert, self.pki.key)
        self.memory = LinkMemory()
        self.factory: SNIRouterFactory = tls_port_factory(
            self.harness.relay, creator, config, self.shares, self.clock, self.memory
        )

    def dial(
        self, name: str, app: Protocol, transport: type[RecordingTransport] = RecordingTransport,
        pin: str | None = None,
    ) -> tuple[RecordingTransport, RecordingTransport]:
        """
        Connect a TLS client for C{name} (verifying the relay's CA, or C{pin}) whose
        application is C{app}; pump until quiet.  The client's and the router's transports.
        """
        creator = client_creator(name, ca_path=None if pin else self.pki.ca_cert, pin=pin)
        clientFactory = TLSMemoryBIOFactory(
            creator, True, Factory.forProtocol(lambda: app), clock=self.clock
        )
        client = clientFactory.buildProtocol(ADDRESS)
        server = self.factory.buildProtocol(ADDRESS)
        clientIO = transport(client, isServer=False)
        serverIO = RecordingTransport(server, isServer=True)
        self.harness.pumps.append(
            connect(server, serverIO, client, clientIO, greet=False, clock=self.clock)
        )
        self.harness.run()
        return clientIO, serverIO

    def link(self, name: str, app: dict[str, Any], trickle: bool = False) -> LinkProtocol:
        handler = RecordingHandler(lambda session: Echo())
        link = LinkProtocol(DIALER, handler, self.clock, None, app)
        self.dial(name, link, TrickleTransport if trickle else RecordingTransport)
        return link

    def _checkLinkThrough(self, agentName: str, clientName: str, trickle: bool = False) -> None:
        agentKey = self.harness.store.addKey("a" * 12, "acme")
        clientKey = self.harness.store.addKey("b" * 12, "acme")
        agent = self.link(agentName, agent_hello(agentKey, "web", [TcpShare(3000)]), trickle)
        client = self.link(clientName, client_hello(clientKey))
        self.assertEqual(
            without_token(agent.handler.controls),
            [{"type": "welcome", "account": "acme", "name": "web", "shares": []}],
        )
        self.assertEqual(
            client.handler.controls,
            [{"type": "welcome", "account": "acme", "name": None, "shares": [],
              "features": ["resume"]}],
        )
        app = Recorder()
        client.openSession(client_target("web", 3000), app)
        self.harness.run()
        app.transport.write(b"through the router")
        self.harness.run()
        self.assertEqual(app.received, b"through the router")
        self.assertEqual(self.factory.routed, {"hand_over": 2, "splice": 0})
        self.assertEqual({k: v for k, v in self.factory.refused.items() if v}, {})

    def test_linkByOwnName(self) -> None:
        """
        An agent dialling the relay by its own name and a client dialling it by C{localhost}
        are welcomed over TLS ended by the relay, and a session's bytes come back from the
        agent's echo.
        """
        self._checkLinkThrough("relay.example.com", "localhost")

    def test_linksShareTheMemoryAccount(self) -> None:
        """
        Every link the TLS port accepts reports to the one account given.
        """
        self._checkLinkThrough("localhost", "localhost")
        links = [h.link for h in self.harness.relay.handlers]
        self.assertEqual(len(links), 2)
        self.assertTrue(all(link.memory is self.memory for link in links))

    def test_linkByAddress(self) -> None:
        """
        Clients dialling an IP address send no server name and reach the relay as before.
        """
        self._checkLinkThrough("127.0.0.1", "127.0.0.1")

    def test_helloByteByByte(self) -> None:
        """
        An agent whose whole stream, ClientHello included, arrives one byte per read still
        reaches the relay and works.
        """
        self._checkLinkThrough("localhost", "localhost", trickle=True)
        trickled = [p.clientIO for p in self.harness.pumps if isinstance(p.clientIO,
                                                                          TrickleTransport)]
        self.assertEqual(len(trickled), 1)
        self.assertGreater(trickled[0].deliveries, len(live_hello("localhost")))

    def test_httpAfterTLS(self) -> None:
        """
        An HTTP request over TLS to the relay's own name goes to the WebSocket
        endpoint, which answers a request that is no upgrade with 426.
        """
        app = Greeter(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.dial("localhost", app)
        self.assertTrue(app.handshook)
        self.assertTrue(app.received.startswith(b"HTTP/1.1 426 "), app.received)

    def test_sniffTimeoutFollows(self) -> None:
        """
        After the hand-over, a client of the relay's own name that finishes the handshake but
        sends nothing is cut by the same configured timeout, counted from the hand-over.
        """
        app = Recorder()
        self.dial("localhost", app)
        self.assertTrue(app.handshook)
        self.clock.advance(3.999)
        self.harness.run()
        self.assertIsNone(app.lost)
        self.clock.advance(0.001)
        self.harness.run()
        self.assertIsNotNone(app.lost)
        self.assertEqual(self.factory.refused["timeout"], 0)

    def test_unknownName(self) -> None:
        """
        A client asking for a name the relay does not serve gets exactly a fatal
        unrecognized_name alert, which its TLS stack reads as such, and the connection ends.
        """
        app = Greeter(b"never sent")
        _, serverIO = self.dial("nope.localhost", app)
        self.assertEqual(bytes(serverIO.written), UNRECOGNIZED_NAME_ALERT)
        self.assertFalse(app.handshook)
        assert app.lost is not None
        self.assertTrue(app.lost.check(SSL.Error), app.lost)
        self.assertIn("unrecognized name", str(app.lost.value))
        self.assertEqual(self.factory.refused["unrecognized_name"], 1)

    def test_unknownNamePythonSSL(self) -> None:
        """
        Python's C{ssl} reads the same answer as C{TLSV1_UNRECOGNIZED_NAME}.
        """
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(str(self.pki.ca_cert))
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        client = context.wrap_bio(incoming, outgoing, server_hostname="nope.localhost")
        self.assertRaises(ssl.SSLWantReadError, client.do_handshake)
        router = self.factory.buildProtocol(ADDRESS)
        serverIO = RecordingTransport(router, isServer=True)
        router.makeConnection(serverIO)
        router.dataReceived(outgoing.read())
        incoming.write(bytes(serverIO.written))
        e = self.assertRaises(ssl.SSLError, client.do_handshake)
        self.assertEqual(e.reason, "TLSV1_UNRECOGNIZED_NAME")

    def test_unknownShare(self) -> None:
        """
        A name under the share domain with no share in the table gets the same alert.
        """
        _, serverIO = self.dial("web.localhost", Greeter(b"x"))
        self.assertEqual(bytes(serverIO.written), UNRECOGNIZED_NAME_ALERT)

    def test_share(self) -> None:
        """
        A share name goes to its backend as raw bytes: the client's TLS is ended by the
        share's own key (its pin is checked), the share receives exactly the bytes the client
        sent, hello included, in order, and the echo comes back.
        """
        share = TLSEchoShare(self.harness, self.tmp / "share")
        self.shares.add("web", share)
        app = Greeter(b"hello share")
        clientIO, serverIO = self.dial("web.localhost", app, pin=share.identity.fingerprint)
        self.assertTrue(app.handshook)
        self.assertEqual(app.received, b"hello share")
        assert share.received is not None
        self.assertEqual(bytes(share.received.written), bytes(clientIO.written))
        self.assertGreater(len(clientIO.written), len(live_hello("web.localhost")) // 2)
        self.assertEqual(self.factory.routed, {"hand_over": 0, "splice": 1})
        self.assertNotIn(b"hello share", bytes(serverIO.written))

    def test_timeout(self) -> None:
        """
        The configured handshake timeout applies: a client that sends nothing is closed after
        4 s on the clock, not before.
        """
        router = self.factory.buildProtocol(ADDRESS)
        serverIO = RecordingTransport(router, isServer=True)
        router.makeConnection(serverIO)
        self.clock.advance(3.999)
        self.assertFalse(serverIO.disconnecting)
        self.clock.advance(0.001)
        self.assertTrue(serverIO.disconnecting)
        router.connectionLost(Failure(ConnectionError()))
        self.assertEqual(self.factory.refused["timeout"], 1)
