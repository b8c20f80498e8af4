"""
Tests for L{nfltr.relay.update_ports}: an agent's C{update} adds, changes
and removes its public ports, TCP and UDP, and its UDP ports, over a real
dialer link (iosim on a Clock that listens on a fake UDP reactor).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.protocol import Factory
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.port_ranges import parse_port_ranges
from nfltr.relay.public_ports import PublicPorts
from nfltr.relay.public_udp import public_udp_ports
from nfltr.wire.messages import TcpShare, agent_hello
from nfltr.wire.udp import UdpShare
from nfltr.wire.update import update_message
from tests.udp.helpers import UDPClock

from .helpers import Dialer, RelayHarness
from .test_public_ports import Listening
from .test_public_udp import Config

A_KEY, B_KEY = "aaaaaaaaaaaa", "bbbbbbbbbbbb"


class UpdatePortsTests(SynchronousTestCase):
    """
    Agent C{box} of account C{acme} shares TCP port 22 on public port
    20001 and UDP port 53; the relay's public ports are 20000-20009, at
    most 2 per account and kind.
    """

    def setUp(self) -> None:
        self.clock = UDPClock()
        self.h = RelayHarness(clock=self.clock)
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyB = self.h.store.addKey(B_KEY, "bravo")
        relay = self.h.relay
        self.bound: dict[int, Listening] = {}
        relay.publicPorts = PublicPorts(parse_port_ranges("20000-20009"), 2,
                                        relay.directory.leases, self.clock, self.listen,
                                        lambda port: Factory())
        relay.publicUDPPorts = public_udp_ports(
            relay, Config(parse_port_ranges("20000-20009")), self.clock)
        hello = agent_hello(self.keyA, "box", [TcpShare(22, public_port=20001), TcpShare(80)])
        hello["udp"] = [UdpShare(53).to_json()]
        self.agent = self.h.dial(hello)
        self.assertEqual(self.agent.controls[0]["public_ports"],
                         [{"port": 22, "public_port": 20001}])

    def listen(self, port: int, factory: Any) -> Listening:
        self.bound[port] = Listening(port, factory)
        return self.bound[port]

    def update(self, agent: Dialer, message: dict[str, Any]) -> dict[str, Any]:
        agent.link.sendControl(message)
        self.h.run()
        return agent.controls[-1]

    def udpPorts(self) -> list[int]:
        ports = self.h.relay.publicUDPPorts
        assert ports is not None
        return sorted(e.port for e in ports)

    def entry(self) -> Any:
        entry = self.h.relay.directory.agent("box")
        assert entry is not None
        return entry

    def test_publicPortAdded(self) -> None:
        """
        A TCP share that asks for a public port gets it: the answer names
        it, as the welcome would; the kept port stays bound.
        """
        answer = self.update(self.agent, update_message(
            1, [TcpShare(22, public_port=20001), TcpShare(80, public_port=0)], [],
            [UdpShare(53)]))
        self.assertEqual(answer["public_ports"], [{"port": 80, "public_port": 20000}])
        self.assertNotIn("refused", answer)
        self.assertFalse(self.bound[20001].stopped)
        ports = self.h.relay.publicPorts
        assert ports is not None
        self.assertEqual(sorted(e.port for e in ports), [20000, 20001])
        self.assertIn("updated: ports 22, 80, UDP ports 53, URLs published none, withdrawn "
                      "none, public ports published 20000", "\n".join(self.h.messages()))

    def test_publicPortRemoved(self) -> None:
        """
        A share no longer asking for its public port has it withdrawn (its
        lease runs); the share itself stays routed.
        """
        answer = self.update(self.agent, update_message(
            1, [TcpShare(22), TcpShare(80)], [], [UdpShare(53)]))
        self.assertNotIn("refused", answer)
        self.assertTrue(self.bound[20001].stopped)
        self.assertEqual(self.entry().ports, frozenset({22, 80}))

    def test_publicPortMoved(self) -> None:
        """
        A share's public port changed: the old one is withdrawn, the new one
        published, within the per-account limit.
        """
        answer = self.update(self.agent, update_message(
            1, [TcpShare(22, public_port=20002), TcpShare(80, public_port=20003)], [], []))
        self.assertEqual(answer["public_ports"], [{"port": 22, "public_port": 20002},
                                                  {"port": 80, "public_port": 20003}])
        self.assertTrue(self.bound[20001].stopped)

    def test_publicPortRefused(self) -> None:
        """
        A public port another account holds refuses the whole update: the
        agent's ports, and its public port, stay as they were.
        """
        other = self.h.dial(agent_hello(self.keyB, "other", [TcpShare(5, public_port=20005)]))
        self.assertIn("public_ports", other.controls[0])
        answer = self.update(self.agent, update_message(
            1, [TcpShare(22), TcpShare(81, public_port=20005)], [], [UdpShare(53)]))
        self.assertEqual(answer["refused"], "conflict")
        self.assertFalse(self.bound[20001].stopped)
        self.assertEqual(self.entry().ports, frozenset({22, 80}))
        ports = self.h.relay.publicPorts
        assert ports is not None
        self.assertIs(ports.holderOf(20001), self.entry().holder)

    def test_udpChanged(self) -> None:
        """
        UDP ports added and removed are routed or not; a UDP share asking
        for a public UDP port gets it, named in the answer.
        """
        answer = self.update(self.agent, update_message(
            1, [TcpShare(22, public_port=20001), TcpShare(80)], [],
            [UdpShare(5353, public_port=20007)]))
        self.assertEqual(answer["public_udp_ports"], [{"port": 5353, "public_port": 20007}])
        self.assertEqual(self.entry().udp, frozenset({5353}))
        self.assertEqual(self.udpPorts(), [20007])
        answer = self.update(self.agent, update_message(
            2, [TcpShare(22, public_port=20001), TcpShare(80)], [], []))
        self.assertNotIn("refused", answer)
        self.assertEqual(self.entry().udp, frozenset())
        self.assertEqual(self.udpPorts(), [])
        self.assertEqual([p.listening for p in self.clock.ports], [False])

    def test_udpKeptWhenAbsent(self) -> None:
        """
        An update without C{udp} (an agent that does not declare UDP in
        its updates) leaves the UDP ports as they are.
        """
        self.update(self.agent, update_message(1, [TcpShare(22, public_port=20001)], []))
        self.assertEqual(self.entry().udp, frozenset({53}))

    def test_addressedKept(self) -> None:
        """
        A share that wants its clients' addresses (PROXY headers) keeps
        wanting them after an update.
        """
        self.update(self.agent, update_message(
            1, [TcpShare(22, public_port=20001, addressed=True), TcpShare(80)], []))
        self.assertEqual(self.entry().addressed, frozenset({22}))
