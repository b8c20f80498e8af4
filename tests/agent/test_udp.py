# -*- test-case-name: tests.agent.test_udp -*-
"""
Tests for the agent's UDP services (L{nfltr.agent._udp}): C{nfltr udp
PORT} on the test relay.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import AgentService, ConfigError, agent_options, prepare_agent
from nfltr.agent._udp import OLD_RELAY_UDP
from nfltr.link.twisted import SessionResetError
from nfltr.udp import DatagramSession
from nfltr.wire.messages import NOT_FOUND_REASON, welcome
from nfltr.wire.udp import PUBLIC_UDP_PORTS
from tests.udp.helpers import FakeUDPReactor

from .helpers import FakeServices, Network, TestRelay

RELAY_PIN = "sha256:" + "11" * 32


def options(case: SynchronousTestCase, udp: list[str], tcp: list[str] | None = None) -> Any:
    return agent_options(
        tcp or [], {"name": "box", "state-dir": case.mktemp(), "relay-pin": RELAY_PIN, "key": "k"},
        environ={}, udp=udp,
    )


class Visitor(DatagramSession):
    """
    The relay's side of a datagram session: records the answers and how it
    ended.
    """

    def __init__(self) -> None:
        self.answers: list[bytes] = []
        self.lostReason: Failure | None = None
        super().__init__(self.answers.append)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.lostReason = reason
        super().connectionLost(reason)


class OptionTests(SynchronousTestCase):
    """
    The UDP ports of an agent's options.
    """

    def test_udpAlone(self) -> None:
        """
        UDP ports alone make an agent, with no TCP port and no key pair.
        """
        checked = options(self, ["53", "5353"])
        self.assertEqual((checked.ports, checked.udp), ((), (53, 5353)))
        self.assertIsNone(prepare_agent(checked).fingerprint)

    def test_refused(self) -> None:
        """
        A bad port, a port twice, too many ports are refused.
        """
        for udp, words in [(["0"], "invalid port"), (["53", "53"], "given twice"),
                           ([str(p) for p in range(1, 18)], "at most 16")]:
            caught = self.assertRaises(ConfigError, options, self, udp)
            self.assertIn(words, str(caught))


class AgentTests(SynchronousTestCase):
    """
    An agent sharing UDP port 53, on the test relay.
    """

    def start(self, policy: Any = None) -> None:
        self.network = Network()
        self.relay = TestRelay(self.network, policy or self.udpWelcome)
        self.fatal: list[str] = []
        self.announced: list[str] = []
        self.agent = AgentService(
            self.network.clock, prepare_agent(options(self, ["53"], ["3000"])),
            self.announced.append, self.fatal.append, endpoint=self.relay.endpoint(),
            connector=FakeServices(self.network, {}),
        )
        self.sockets = FakeUDPReactor()
        assert self.agent.udp is not None
        self.agent.udp.reactor = self.sockets
        self.agent.startService()
        self.network.run()

    @staticmethod
    def udpWelcome(app: dict[str, Any]) -> dict[str, Any]:
        return welcome("acme", app.get("name"), data_token="0" * 32)

    def open(self, target: str) -> Visitor:
        session = Visitor()
        self.relay.agents["box"].openSession(target, session)
        self.network.run()
        return session

    def test_hello(self) -> None:
        """
        The hello lists the UDP port beside the TCP one.
        """
        self.start()
        self.assertEqual(self.relay.hellos[0]["udp"], [{"port": 53}])
        self.assertEqual([s["port"] for s in self.relay.hellos[0]["tcp"]], [3000])

    def test_announced(self) -> None:
        """
        The agent prints the udp-connect command, saying it is not end-to-end
        encrypted.
        """
        self.start()
        [line] = [a for a in self.announced if "udp-connect" in a]
        self.assertIn("nfltr udp-connect box 53 --listen 127.0.0.1:", line)
        self.assertIn("not end-to-end encrypted", line)

    def test_datagramSession(self) -> None:
        """
        A C{udp:53} session is served by a socket connected to the service:
        datagrams both ways, the socket closed with the session.
        """
        self.start()
        session = self.open("udp:53")
        session.send(b"query")
        self.network.run()
        [port] = self.sockets.ports
        self.assertEqual(port.connected, ("127.0.0.1", 53))
        self.assertEqual(port.written, [(b"query", ("127.0.0.1", 53))])
        port.protocol.datagramReceived(b"answer", ("127.0.0.1", 53))
        self.network.run()
        self.assertEqual(session.answers, [b"answer"])
        session.close()
        self.network.run()
        self.assertFalse(port.listening)

    def test_unsharedPort(self) -> None:
        """
        A datagram session for a port not shared is refused as not found.
        """
        self.start()
        session = self.open("udp:54")
        self.assertEqual(self.sockets.ports, [])
        assert session.lostReason is not None
        error = session.lostReason.value
        self.assertIsInstance(error, SessionResetError)
        self.assertEqual(error.reason, NOT_FOUND_REASON)

    def test_noSocket(self) -> None:
        """
        When no UDP socket can be opened, the session is reset.
        """
        self.start()
        self.sockets.fail = True
        session = self.open("udp:53")
        self.assertFalse(session.open)

    def test_oldRelay(self) -> None:
        """
        A relay whose welcome does not list the C{udp} feature stops the
        agent, saying so.
        """
        self.start(lambda app: welcome("acme", app.get("name")))
        self.assertEqual(self.fatal, [OLD_RELAY_UDP])


class PublicTests(SynchronousTestCase):
    """
    C{nfltr udp 53 --public-port 20053 --allow-ip 192.0.2.0/24}.
    """

    def start(self, policy: Any) -> None:
        self.network = Network()
        self.relay = TestRelay(self.network, policy)
        self.fatal: list[str] = []
        self.announced: list[str] = []
        checked = agent_options(
            [], {"name": "box", "state-dir": self.mktemp(), "relay-pin": RELAY_PIN, "key": "k",
                 "public-port": ["20053"], "allow-ip": ["192.0.2.0/24"]},
            environ={}, udp=["53"],
        )
        self.agent = AgentService(
            self.network.clock, prepare_agent(checked), self.announced.append,
            self.fatal.append, endpoint=self.relay.endpoint(),
            connector=FakeServices(self.network, {}),
        )
        self.agent.startService()
        self.network.run()

    @staticmethod
    def published(app: dict[str, Any]) -> dict[str, Any]:
        message = welcome("acme", app.get("name"), data_token="0" * 32)
        message[PUBLIC_UDP_PORTS] = [{"port": 53, "public_port": 20053}]
        return message

    def test_hello(self) -> None:
        """
        The hello asks for the public port with its allow list.
        """
        self.start(self.published)
        self.assertEqual(self.relay.hellos[0]["udp"],
                         [{"port": 53, "public_port": 20053, "allow": ["192.0.2.0/24"]}])

    def test_announced(self) -> None:
        """
        The agent says where visitors send, and that it is not end-to-end
        encrypted.
        """
        self.start(self.published)
        [line] = [a for a in self.announced if a.startswith("public UDP port")]
        self.assertIn("public UDP port localhost:20053 -> UDP port 53", line)
        self.assertIn("not end-to-end encrypted", line)

    def test_relayWithoutPublicUDP(self) -> None:
        """
        A relay that carries UDP but names no public UDP port stops the
        agent, saying so.
        """
        self.start(lambda app: welcome("acme", app.get("name"), data_token="0" * 32))
        self.assertEqual(self.fatal, [OLD_RELAY_UDP])
