"""
Tests for an agent's public ports (L{nfltr.agent._public_ports}, and the
options and sessions of L{nfltr.agent}): C{--public-port}, the hello, the
plain sessions of visitors, and a relay too old to publish them.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import AgentService, ConfigError, agent_options, prepare_agent
from nfltr.agent._public_ports import OLD_RELAY, public_port_lines
from nfltr.wire.messages import welcome

from .helpers import Echo, FakeServices, Network, Recorder, TestRelay

RELAY_PIN = "sha256:" + "11" * 32
MARKER = b"visitor bytes 51c2"


def options(case: SynchronousTestCase, *public: str, allow: list[str] | None = None) -> Any:
    return agent_options(
        ["3000", "3001"],
        {"name": "box", "state-dir": case.mktemp(), "relay-pin": RELAY_PIN, "key": "k",
         "public-port": list(public), "allow-ip": allow},
        environ={},
    )


class OptionTests(SynchronousTestCase):
    """
    C{--public-port} and C{--allow-ip} of C{nfltr tcp}.
    """

    def test_inOrder(self) -> None:
        """
        Each public port goes with the port in the same place; 0 is any.
        """
        checked = options(self, "20001", "0", allow=["10.0.0.0/8"])
        self.assertEqual(checked.public_ports, (20001, 0))
        self.assertEqual(checked.allow, (ipaddress.ip_network("10.0.0.0/8"),))

    def test_bad(self) -> None:
        """
        Too many, a bad port, a bad network, or an allow list without a
        public port: each named.
        """
        for public, allow, words in [
            (("1", "2", "3"), None, "one for each PORT"),
            (("70000",), None, "--public-port 70000"),
            (("x",), None, "--public-port x"),
            (("1",), ["nope"], "--allow-ip 'nope'"),
            ((), ["10.0.0.0/8"], "only for --public-port"),
        ]:
            with self.assertRaises(ConfigError) as caught:
                options(self, *public, allow=allow)
            self.assertIn(words, str(caught.exception))


def publicWelcome(app: dict[str, Any]) -> dict[str, Any]:
    """
    Welcome the agent, naming the public port of each TCP share that asked.
    """
    ports = [{"port": s["port"], "public_port": s["public_port"] or 20000}
             for s in app["tcp"] if "public_port" in s]
    return welcome("acme", app.get("name"), public_ports=ports)


class AgentTests(SynchronousTestCase):
    """
    An agent with C{--public-port 20001} for port 3000, on the test relay.
    """

    def start(self, policy: Any = publicWelcome) -> None:
        self.network = Network()
        self.relay = TestRelay(self.network, policy)
        self.services = FakeServices(self.network, {3000: Echo})
        self.fatal: list[str] = []
        self.announced: list[str] = []
        self.setup = prepare_agent(options(self, "20001", allow=["192.0.2.0/24"]))
        self.agent = AgentService(
            self.network.clock, self.setup, self.announced.append, self.fatal.append,
            endpoint=self.relay.endpoint(), connector=self.services,
        )
        self.agent.startService()
        self.network.run()

    def test_hello(self) -> None:
        """
        The hello asks for the public port, with its allow list, on the
        first port only.
        """
        self.start()
        self.assertEqual(self.relay.hellos[0]["tcp"], [
            {"port": 3000, "e2ee": True, "public_port": 20001, "allow": ["192.0.2.0/24"]},
            {"port": 3001, "e2ee": True},
        ])

    def test_announced(self) -> None:
        """
        The agent says where visitors connect, and that it is not end-to-end
        encrypted.
        """
        self.start()
        [line] = [a for a in self.announced if a.startswith("public port")]
        self.assertIn("public port localhost:20001 -> port 3000", line)
        self.assertIn("not end-to-end encrypted", line)

    def test_plainSession(self) -> None:
        """
        A visitor's session C{public:3000@VISITOR} carries the service's
        bytes as they are (no TLS at the agent), though port 3000's
        C{tcp:3000} sessions are end to end.
        """
        self.start()
        client = Recorder(MARKER)
        self.relay.agents["box"].openSession("public:3000@192.0.2.9:5555", client)
        self.network.run()
        self.assertEqual(client.received, MARKER)
        self.assertEqual(self.services.services[3000][0].received, MARKER)

    def test_notPublished(self) -> None:
        """
        A public target for a port without a public port is refused.
        """
        self.start()
        client = Recorder(MARKER)
        self.relay.agents["box"].openSession("public:3001@192.0.2.9:5555", client)
        self.network.run()
        self.assertEqual(client.received, b"")
        self.assertEqual(self.services.services.get(3001, []), [])

    def test_oldRelay(self) -> None:
        """
        A relay whose welcome names no public ports (it does not know them)
        stops the agent, saying so.
        """
        self.start(lambda app: welcome("acme", app.get("name")))
        self.assertEqual(self.fatal, [OLD_RELAY])


class LineTests(SynchronousTestCase):
    """
    L{public_port_lines}.
    """

    def test_malformed(self) -> None:
        """
        Entries that are not a port and a public port are left out.
        """
        answer = {"public_ports": [{"port": 1, "public_port": 2}, {"port": "1"}, 7]}
        self.assertEqual(len(public_port_lines("[::1]:8443", answer)), 1)
        self.assertIn("[::1]:2 -> port 1", public_port_lines("[::1]:8443", answer)[0])
