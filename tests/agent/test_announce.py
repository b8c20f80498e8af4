"""
Tests for what L{nfltr.agent.AgentService} tells its user: the fingerprint
and the C{tcp-connect} command only once the relay welcomed the agent, a
command that can be pasted on the agent's own machine, and how visitors
trust a share.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import (
    AgentService,
    agent_options,
    free_local_ports,
    http_agent_options,
    prepare_agent,
)
from nfltr.link import RefusalReason

from .helpers import Echo, FakeServices, LogCapture, Network, TestRelay

KEY = "nfk_agent-key"
RELAY_PIN = "sha256:" + "11" * 32


class AnnounceFixture:
    """
    Agent C{box} sharing 3000 and 3001 on the test relay, not started.
    """

    def __init__(self, case: SynchronousTestCase, freePorts: Any = None) -> None:
        self.network = Network()
        self.relay = TestRelay(self.network)
        self.endpoint = self.relay.endpoint()
        self.logs = LogCapture(case)
        self.announced: list[str] = []
        self.fatal: list[str] = []
        options = agent_options(
            ["3000", "3001"],
            {"name": "box", "state-dir": case.mktemp(), "relay-pin": RELAY_PIN, "key": KEY},
            environ={},
        )
        self.setup = prepare_agent(options)
        self.agent = AgentService(
            self.network.clock, self.setup, self.announced.append, self.fatal.append,
            endpoint=self.endpoint, connector=FakeServices(self.network, {3000: Echo}),
        )
        self.agent.freePorts = freePorts or (lambda count: [43001, 43002][:count])

    def start(self) -> None:
        self.agent.startService()
        self.network.run()


class AfterWelcomeTests(SynchronousTestCase):
    """
    The hints wait for the relay's welcome.
    """

    def test_refusedSaysNothing(self) -> None:
        """
        An agent the relay refuses (a wrong key) prints no fingerprint and
        no command: only the refusal.
        """
        f = AnnounceFixture(self)
        f.relay.policy = lambda app: (RefusalReason.UNAUTHORIZED, "invalid API key")
        f.start()
        self.assertEqual(f.announced, [])
        self.assertEqual(f.fatal, ["relay refused: invalid API key"])

    def test_notBeforeWelcome(self) -> None:
        """
        While the relay has not answered the hello, nothing is printed;
        the welcome prints the fingerprint and one command per port.
        """
        f = AnnounceFixture(self)
        f.relay.policy = lambda app: None
        f.start()
        self.assertEqual(f.announced, [])
        f.relay.policy = lambda app: {"type": "welcome", "account": "acme"}
        f.endpoint.cut()
        f.network.advance(1)
        self.assertEqual(len(f.announced), 3, f.announced)
        self.assertIn(str(f.setup.fingerprint), f.announced[0])

    def test_onceOnly(self) -> None:
        """
        A reconnection does not print the hints again.
        """
        f = AnnounceFixture(self)
        f.start()
        self.assertEqual(len(f.announced), 3)
        f.endpoint.cut()
        f.network.advance(1)
        self.assertEqual(f.endpoint.attempts, 2)
        self.assertEqual(len(f.announced), 3)


class FreePortTests(SynchronousTestCase):
    """
    The printed command listens on a free local port, not the service's.
    """

    def test_hintUsesFreePorts(self) -> None:
        """
        Each port's command listens on a port the OS said was free, one
        for each, never the service's own.
        """
        f = AnnounceFixture(self)
        f.start()
        fp = f.setup.fingerprint
        self.assertTrue(f.announced[1].endswith(
            f"nfltr tcp-connect box 3000 --listen 127.0.0.1:43001 --pin {fp} "
            f"--relay localhost:8443 --relay-pin {RELAY_PIN}"
        ), f.announced[1])
        self.assertIn("tcp-connect box 3001 --listen 127.0.0.1:43002 ", f.announced[2])

    def test_freeLocalPorts(self) -> None:
        """
        L{free_local_ports} returns distinct ports of 127.0.0.1 that can be
        listened on.
        """
        ports = free_local_ports(3)
        self.assertEqual(len(set(ports)), 3)
        for port in ports:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))


class ShareTrustTests(SynchronousTestCase):
    """
    How visitors trust a share URL, for each mode where the relay's share CA
    signs the certificate they see.
    """

    CA_PEM = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"

    def welcomeShare(self, mode: str, answer: dict[str, Any], state: str | None = None,
                     observe: Callable[[str], None] | None = None) -> list[str]:
        network = Network()
        relay = TestRelay(network)
        state = state or self.mktemp()
        options = http_agent_options("8080", {
            "name": "blog", "mode": mode, "state-dir": state, "relay-pin": RELAY_PIN, "key": KEY,
            "inspect-ui": "none",
        }, environ={})
        announced: list[str] = []

        def announce(line: str) -> None:
            if observe is not None:
                observe(line)
            announced.append(line)

        agent = AgentService(
            network.clock, prepare_agent(options), announce, lambda line: None,
            endpoint=relay.endpoint(), connector=FakeServices(network, {}),
        )
        share = {"name": "blog", "mode": mode, "url": "https://blog.localhost:8443/", **answer}
        relay.policy = lambda app: {"type": "welcome", "account": "acme", "shares": [share]}
        agent.startService()
        network.run()
        return announced

    def test_inspect(self) -> None:
        """
        An inspect share (the relay ends TLS) prints the C{curl --cacert}
        line for the CA the relay named, saved in the state directory.
        """
        lines = self.welcomeShare("inspect", {"ca": self.CA_PEM})
        self.assertEqual(len(lines), 2, lines)
        self.assertRegex(
            lines[1],
            r"^visitors trust the relay's share CA: curl --cacert \S+/share-ca\.crt "
            r"https://blog\.localhost:8443/$",
        )

    def test_savedBeforeAnnounced(self) -> None:
        """
        The share CA file is written before the share's URL is printed: a
        reader of the output (a script waiting for the URL, a test) that
        then uses the file finds it.
        """
        state = Path(self.mktemp())
        seen: list[bool] = []

        def observe(line: str) -> None:
            if line.startswith("share https://"):
                seen.append((state / "share-ca.crt").exists())

        self.welcomeShare("inspect", {"ca": self.CA_PEM}, str(state), observe)
        self.assertEqual(seen, [True])

    def test_inspectOperatorCertificate(self) -> None:
        """
        An inspect share the relay serves with the operator's certificate
        says so instead; a relay that says neither (an older one) gets no
        trust line rather than a wrong one.
        """
        lines = self.welcomeShare("inspect", {"operator_cert": True})
        self.assertEqual(lines[1:], [
            "visitors trust it as they trust the relay's own certificate (its --cert)"
        ])
        self.assertEqual(len(self.welcomeShare("inspect", {})), 1)
