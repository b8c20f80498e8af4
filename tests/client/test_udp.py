# -*- test-case-name: tests.client.test_udp -*-
"""
Tests for L{nfltr.client.UDPConnector} and L{nfltr.client.udp_connect_options}
(C{nfltr udp-connect}), on the test relay and a fake UDP reactor.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import ConfigError
from nfltr.client import UDPConnector, datagram_limits, udp_connect_options
from nfltr.udp import DatagramLimits
from nfltr.wire.messages import welcome
from tests.agent.helpers import LogCapture, Network, TestRelay
from tests.udp.helpers import UDPClock

RELAY_PIN = "sha256:" + "11" * 32
VALUES = {"relay-pin": RELAY_PIN, "key": "k"}


class OptionTests(SynchronousTestCase):
    """
    L{udp_connect_options}.
    """

    def test_defaults(self) -> None:
        """
        Without C{--listen}, any free port of 127.0.0.1; the port given is
        kept.
        """
        options = udp_connect_options("box", "53", VALUES, environ={})
        self.assertEqual((options.agent, options.port), ("box", 53))
        self.assertEqual((options.listen_host, options.listen_port), ("127.0.0.1", 0))
        self.assertIsNone(options.agent_tls)
        options = udp_connect_options("box", 53, {**VALUES, "listen": "[::1]:5353"}, environ={})
        self.assertEqual((options.listen_host, options.listen_port), ("::1", 5353))

    def test_refused(self) -> None:
        """
        A bad agent name or port is refused.
        """
        self.assertRaises(ConfigError, udp_connect_options, "Bad_Name", "53", VALUES, environ={})
        self.assertRaises(ConfigError, udp_connect_options, "box", "0", VALUES, environ={})


class LimitTests(SynchronousTestCase):
    """
    L{datagram_limits}: C{--idle-timeout} and C{--max-sessions}.
    """

    def test_limits(self) -> None:
        """
        Defaults without the options; given ones are taken; impossible ones
        refused.
        """
        self.assertEqual(datagram_limits({}), DatagramLimits())
        self.assertEqual(datagram_limits({"idle-timeout": "5", "max-sessions": "3"}),
                         DatagramLimits(5.0, 3))
        for values in ({"idle-timeout": "0"}, {"idle-timeout": "x"}, {"max-sessions": "0"},
                       {"idle-timeout": "1e9"}, {"max-sessions": "1.5"}):
            self.assertRaises(ConfigError, datagram_limits, values)


class ConnectorTests(SynchronousTestCase):
    """
    L{UDPConnector} on the test relay.
    """

    def setUp(self) -> None:
        self.clock = UDPClock()
        self.network = Network(self.clock)
        self.relay = TestRelay(self.network, lambda app: welcome("acme", None))
        self.announced: list[str] = []
        self.fatal: list[str] = []
        options = udp_connect_options("box", "53", {**VALUES, "listen": "127.0.0.1:0"},
                                      environ={})
        self.connector = UDPConnector(self.clock, options, self.announced.append,
                                      self.fatal.append, endpoint=self.relay.endpoint())

    def test_listensOnceWelcomed(self) -> None:
        """
        It listens once the relay welcomed it, and says where.
        """
        self.connector.startService()
        self.assertEqual(self.clock.ports, [])
        self.network.run()
        [port] = self.clock.ports
        self.assertEqual(port.interface, "127.0.0.1")
        self.assertEqual(self.announced, ["listening on 127.0.0.1:40000 (UDP)"])

    def test_sessionPerVisitor(self) -> None:
        """
        A visitor's datagram opens a datagram session for C{udp:box:53};
        one the relay refuses ends, and the visitor is forgotten.
        """
        self.connector.startService()
        self.network.run()
        table = self.connector.entrance.table
        self.connector.entrance.datagramReceived(b"q", ("127.0.0.1", 1000))
        self.assertEqual((len(table), table.forwarded), (1, 1))
        self.network.run()
        self.assertEqual(len(table), 0)

    def test_noLinkDrops(self) -> None:
        """
        While the link is down, datagrams are dropped and counted.
        """
        self.connector.startService()
        self.network.run()
        self.connector.relayDown()
        self.connector.entrance.datagramReceived(b"q", ("127.0.0.1", 1000))
        self.assertEqual(self.connector.entrance.table.dropped, 1)

    def test_cannotListen(self) -> None:
        """
        A socket that cannot be opened stops the connector, saying so.
        """
        self.clock.fail = True
        self.connector.startService()
        self.network.run()
        self.assertEqual(len(self.fatal), 1)
        self.assertIn("cannot listen on 127.0.0.1:0", self.fatal[0])

    def test_stop(self) -> None:
        """
        Stopping closes the socket and logs what the datagrams became.
        """
        logs = LogCapture(self)
        self.connector.startService()
        self.network.run()
        self.connector.relayDown()
        self.connector.entrance.datagramReceived(b"q", ("127.0.0.1", 1000))
        self.connector.stopService()
        self.network.run()
        self.assertFalse(self.clock.ports[0].listening)
        self.assertIn("1 datagrams received, 0 forwarded, 1 dropped, 0 answers returned",
                      logs.allText())
