"""
Tests for L{nfltr.agent._proxy}: the PROXY header an agent run with
C{--proxy-protocol} writes first on each connection to its service.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import AgentService, ConfigError, agent_options, http_agent_options, prepare_agent
from nfltr.agent._proxy import header_writer, proxy_version
from nfltr.wire.proxy_protocol import V1, V2, encode, encode_unknown

from .helpers import Echo, FakeServices, Network, Recorder, TestRelay

SERVICE = IPv4Address("TCP", "127.0.0.1", 3000)


class WriterTests(SynchronousTestCase):
    """
    L{proxy_version} and L{header_writer}.
    """

    def test_version(self) -> None:
        """
        v1 and v2, any case; nothing is none; anything else is refused.
        """
        self.assertEqual((proxy_version("V1"), proxy_version("v2"), proxy_version(None)),
                         (V1, V2, None))
        with self.assertRaises(ConfigError) as caught:
            proxy_version("v3")
        self.assertIn("--proxy-protocol v3: use v1 or v2", str(caught.exception))

    def test_header(self) -> None:
        """
        The visitor is the source, the service the destination; an unknown
        visitor gets a header naming nobody; no version, no writer.
        """
        writer = header_writer(V2, "192.0.2.9:5555")
        assert writer is not None
        self.assertEqual(writer(SERVICE), encode(V2, ("192.0.2.9", 5555), ("127.0.0.1", 3000)))
        v6 = header_writer(V1, "[2001:db8::9]:1")
        assert v6 is not None
        self.assertEqual(v6(IPv6Address("TCP", "::1", 3000)),
                         b"PROXY TCP6 2001:db8::9 ::1 1 3000\r\n")
        unknown = header_writer(V1, None)
        assert unknown is not None
        self.assertEqual(unknown(SERVICE), encode_unknown(V1))
        self.assertIsNone(header_writer(None, "192.0.2.9:5555"))

    def test_httpModes(self) -> None:
        """
        C{nfltr http --proxy-protocol} in every mode, plain HTTP too; the
        hello declares the share addressed.
        """
        values: dict[str, Any] = {"state-dir": self.mktemp(), "relay-pin": "sha256:" + "1" * 64,
                                  "key": "k", "proxy-protocol": "v2"}
        for extra in ({"mode": "e2ee"}, {"mode": "passthrough"}, {"mode": "inspect"},
                      {"plain-http": "true"}):
            options = http_agent_options("3000", {**values, **extra}, environ={})
            self.assertEqual(options.http[0].proxy_protocol, V2)


class SessionTests(SynchronousTestCase):
    """
    An agent with C{--proxy-protocol v1 --e2ee false} on the test relay.
    """

    def setUp(self) -> None:
        self.network = Network()
        self.relay = TestRelay(self.network)
        self.services = FakeServices(self.network, {3000: Echo})
        options = agent_options(
            ["3000"], {"name": "box", "state-dir": self.mktemp(), "e2ee": "false",
                       "relay-pin": "sha256:" + "1" * 64, "key": "k", "proxy-protocol": "v1"},
            environ={},
        )
        self.agent = AgentService(self.network.clock, prepare_agent(options), lambda _: None,
                                  lambda _: None, endpoint=self.relay.endpoint(),
                                  connector=self.services)
        self.agent.startService()
        self.network.run()

    def test_addressed(self) -> None:
        """
        The hello asks for clients' addresses; a session naming one gets a
        header naming it, then the client's bytes.
        """
        self.assertEqual(self.relay.hellos[0]["tcp"],
                         [{"port": 3000, "e2ee": False, "addressed": True}])
        client = Recorder(b"hello")
        self.relay.agents["box"].openSession("tcp:3000@192.0.2.9:5555", client)
        self.network.run()
        received = self.services.services[3000][0].received
        self.assertTrue(received.startswith(b"PROXY TCP4 192.0.2.9 "), received)
        self.assertTrue(received.endswith(b"\r\nhello"), received)

    def test_unaddressed(self) -> None:
        """
        A session without an address (an older relay) gets a header naming
        nobody.
        """
        self.relay.agents["box"].openSession("tcp:3000", Recorder(b"x"))
        self.network.run()
        self.assertEqual(self.services.services[3000][0].received, b"PROXY UNKNOWN\r\nx")

    def test_otherPort(self) -> None:
        """
        An addressed target for a port not shared is refused.
        """
        self.relay.agents["box"].openSession("tcp:3001@192.0.2.9:5555", Recorder(b"x"))
        self.network.run()
        self.assertEqual(self.services.services.get(3001, []), [])
