# -*- test-case-name: tests.relay.test_public_udp -*-
"""
Tests for L{nfltr.relay.public_udp}: public UDP ports, driven by a real
agent link over iosim on a Clock that listens on a fake UDP reactor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.link import RefusalReason
from nfltr.relay.port_ranges import PortRanges, parse_port_ranges
from nfltr.relay.public_udp import PublicUDPOpener, public_udp_ports
from nfltr.streams import AdmissionLimits
from nfltr.udp import DatagramCounts, DatagramLimits, DatagramSession, UDPEntrance
from nfltr.udp.interfaces import IDatagramOpener
from nfltr.wire.messages import agent_hello
from nfltr.wire.policy import parse_networks
from nfltr.wire.udp import PUBLIC_UDP_PORTS, UdpShare
from tests.link.twisted_helpers import RecordingHandler
from tests.udp.helpers import UDPClock

from .helpers import RelayHarness

A_KEY, A2_KEY, B_KEY = "aaaaaaaaaaaa", "a2a2a2a2a2a2", "bbbbbbbbbbbb"


@dataclass
class Config:
    """
    The relay configuration fields public UDP ports read.
    """

    public_ports: PortRanges
    public_ports_per_account: int = 2
    public_ports_interface: str = "127.0.0.1"
    admission: AdmissionLimits = field(default_factory=AdmissionLimits)
    udp_limits: DatagramLimits = field(default_factory=DatagramLimits)


def echo(session: Any) -> DatagramSession:
    """
    An agent's datagram session that answers each datagram with itself.
    """
    proto = DatagramSession(print)
    proto.deliver = proto.send
    return proto


class PublicUDPTests(SynchronousTestCase):
    """
    An agent publishes its UDP port 53 on a relay UDP port.
    """

    def setUp(self) -> None:
        self.clock = UDPClock()
        self.h = RelayHarness(clock=self.clock)
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyB = self.h.store.addKey(B_KEY, "bravo")
        self.config = Config(parse_port_ranges("20000-20009"),
                             admission=AdmissionLimits(per_source_open=2))
        relay = self.h.relay
        relay.publicUDPPorts = public_udp_ports(relay, self.config, self.clock)
        self.agentHandler = RecordingHandler(echo)

    def agent(self, key: str, name: str, *shares: UdpShare) -> Any:
        hello = agent_hello(key, name, [])
        hello["udp"] = [share.to_json() for share in shares]
        return self.h.dial(hello, self.agentHandler)

    def entrance(self) -> tuple[UDPEntrance, Any]:
        [port] = self.clock.ports
        assert isinstance(port.protocol, UDPEntrance)
        return port.protocol, port

    def test_interface(self) -> None:
        """
        A public port's opener keeps the contract its socket's table relies
        on.
        """
        opener = PublicUDPOpener(20005, self.h.relay.publicUDPPorts, None, self.clock)
        self.assertTrue(verifyObject(IDatagramOpener, opener))

    def test_published(self) -> None:
        """
        The welcome names the port got; a visitor's datagram reaches the
        agent as C{udp:53} and the answer goes back to the visitor.
        """
        dialer = self.agent(self.keyA, "dns", UdpShare(53, 20005))
        self.assertEqual(dialer.controls[0][PUBLIC_UDP_PORTS],
                         [{"port": 53, "public_port": 20005}])
        entrance, port = self.entrance()
        self.assertEqual(port.interface, "127.0.0.1")
        entrance.datagramReceived(b"query", ("192.0.2.1", 4000))
        self.h.run()
        self.assertEqual([s.target for s in self.agentHandler.sessions], ["udp:53"])
        self.assertEqual(port.written, [(b"query", ("192.0.2.1", 4000))])

    def test_anyFree(self) -> None:
        """
        Port 0 asks for any free one: the lowest.
        """
        dialer = self.agent(self.keyA, "dns", UdpShare(53, 0))
        self.assertEqual(dialer.controls[0][PUBLIC_UDP_PORTS],
                         [{"port": 53, "public_port": 20000}])

    def test_outsideRanges(self) -> None:
        """
        A port outside the ranges is refused, naming them.
        """
        dialer = self.agent(self.keyA, "dns", UdpShare(53, 30000))
        self.assertEqual(dialer.controls[0]["reason"], RefusalReason.INVALID.value)
        self.assertIn("outside the relay's public ports", dialer.controls[0]["message"])
        self.assertEqual(self.clock.ports, [])

    def test_leasedToAccount(self) -> None:
        """
        Another account cannot take a port an account holds; its listener
        stays the first agent's.
        """
        self.agent(self.keyA, "dns", UdpShare(53, 20005))
        dialer = self.agent(self.keyB, "other", UdpShare(53, 20005))
        self.assertEqual(dialer.controls[-1]["reason"], RefusalReason.CONFLICT.value)
        self.assertEqual(len(self.clock.ports), 1)

    def test_withdrawnWithAgent(self) -> None:
        """
        The port stops listening when its agent leaves.
        """
        dialer = self.agent(self.keyA, "dns", UdpShare(53, 20005))
        dialer.link.transport.loseConnection()
        self.h.run()
        self.assertFalse(self.clock.ports[0].listening)

    def test_allowList(self) -> None:
        """
        A visitor outside the allow list is dropped and counted; one inside
        reaches the agent.
        """
        self.agent(self.keyA, "dns", UdpShare(53, 20005, parse_networks(["192.0.2.0/24"])))
        entrance, port = self.entrance()
        entrance.datagramReceived(b"no", ("198.51.100.1", 4000))
        entrance.datagramReceived(b"yes", ("192.0.2.1", 4000))
        self.h.run()
        self.assertEqual(entrance.table.dropped, 1)
        self.assertEqual(port.written, [(b"yes", ("192.0.2.1", 4000))])

    def test_perSourceLimit(self) -> None:
        """
        One source's sessions beyond the per-source limit are dropped and
        counted; another source's still open.
        """
        self.agent(self.keyA, "dns", UdpShare(53, 20005))
        entrance, _ = self.entrance()
        for n in range(3):
            entrance.datagramReceived(b"x", ("192.0.2.1", 4000 + n))
        entrance.datagramReceived(b"y", ("192.0.2.2", 4000))
        self.h.run()
        self.assertEqual(entrance.table.dropped, 1)
        self.assertEqual(len(self.agentHandler.sessions), 3)

    def test_noPublicPorts(self) -> None:
        """
        A relay without public ports refuses an agent that asks for one.
        """
        self.h.relay.publicUDPPorts = None
        dialer = self.agent(self.keyA, "dns", UdpShare(53, 20005))
        self.assertEqual(dialer.controls[0]["reason"], RefusalReason.INVALID.value)
        self.assertIn("--public-ports", dialer.controls[0]["message"])


class MetricsTests(SynchronousTestCase):
    """
    The public UDP ports' datagrams are exported as
    C{nfltr_public_udp_datagrams_total}.
    """

    def test_counted(self) -> None:
        """
        Every public UDP port counts into the relay service's counts, which
        the collector exports by outcome.
        """
        from prometheus_client import generate_latest
        from prometheus_client.parser import text_string_to_metric_families

        from nfltr.relay.metrics import metrics_registry
        from nfltr.streams import Admission

        clock = UDPClock()
        h = RelayHarness(clock=clock)
        key = h.store.addKey(A_KEY, "acme")
        counts = DatagramCounts()
        h.relay.publicUDPPorts = public_udp_ports(
            h.relay, Config(parse_port_ranges("20000-20009")), clock, counts,
        )
        hello = agent_hello(key, "dns", [])
        hello["udp"] = [UdpShare(53, 20001).to_json(), UdpShare(54, 20002).to_json()]
        h.dial(hello, RecordingHandler(echo))
        for port in clock.ports:
            port.protocol.datagramReceived(b"q", ("192.0.2.1", 4000))
        h.run()
        self.assertEqual(counts, DatagramCounts(received=2, forwarded=2, returned=2))
        service = SimpleNamespace(relay=h.relay, router=None, tlsAdmission=Admission(),
                                  httpAdmission=None, udpCounts=counts)
        text = generate_latest(metrics_registry(service)).decode()
        seen = {
            s.labels.get("outcome"): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "nfltr_public_udp_datagrams_total"
        }
        self.assertEqual(seen, {"received": 2, "forwarded": 2, "dropped": 0, "returned": 2})
