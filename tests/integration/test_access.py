"""
Who may reach what, and what users are told when something is wrong: real
processes, two accounts.
"""

from __future__ import annotations

import socket

from .harness import StackTestCase, exchange, nfltr, run

MARKER = "hello-through-the-tunnel"


def closed_port() -> int:
    """
    A loopback port nothing listens on.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AccessTests(StackTestCase):
    """
    The ownership rule, keys and their revocation.
    """

    def setUp(self) -> None:
        super().setUp()
        self.alice = self.stack.key("alice")
        self.bob = self.stack.key("bob")
        self.service = self.stack.service()
        self.agent, self.pin = self.stack.agent(self.alice, "web", self.service)

    def marker(self, port: int) -> bytes | None:
        """
        Ask the service through C{port} for the marker; what came back, or
        None if the connection was reset (a refusal never looks like a
        clean end of stream).
        """
        try:
            return exchange(port, f"MARKER {MARKER}\n".encode(), timeout=20)
        except ConnectionResetError:
            return None

    def refusalLine(self, key: str, agent: str, port: int) -> str:
        """
        Connect through a connector for C{agent}:C{port} (with C{--wait}, so
        that it listens despite its check at start); the line it prints
        about the refusal, with the agent's name blanked.
        """
        client, local = self.stack.connector(key, agent, port, "--pin", self.pin, "--wait")
        client.wait_for(r"listening anyway")
        self.assertIsNone(self.marker(local))
        line = client.wait_for(r"no such agent|refused|reset").string
        return line.split(": ", 1)[-1].replace(f"{agent}:{port}", "AGENT:PORT")

    def test_ownerPasses(self) -> None:
        """
        A connector with a key of the agent's account reaches the service.
        """
        _, local = self.stack.connector(self.alice, "web", self.service, "--pin", self.pin)
        self.assertEqual(self.marker(local), f"{MARKER}\n".encode())

    def test_refusalsAreIndistinguishable(self) -> None:
        """
        Another account's agent, a missing agent and a port the agent does
        not share all give the same refusal; the relay stays up and the
        owner still gets through.
        """
        lines = {
            "other account": self.refusalLine(self.bob, "web", self.service),
            "missing agent": self.refusalLine(self.bob, "ghost", self.service),
            "owner, missing agent": self.refusalLine(self.alice, "ghost", self.service),
            "unshared port": self.refusalLine(self.alice, "web", closed_port()),
        }
        self.assertEqual(len(set(lines.values())), 1, lines)
        self.assertIn("no such agent or port", lines["other account"])
        self.test_ownerPasses()

    def test_revokedKeyIsCut(self) -> None:
        """
        Revoking a key disconnects the connector using it, which exits
        with one line naming the revocation; the agent on another key of
        the same account goes on.
        """
        second = self.stack.key("alice")
        client, local = self.stack.connector(second, "web", self.service, "--pin", self.pin)
        self.assertEqual(self.marker(local), f"{MARKER}\n".encode())
        keyid = second.split("_")[1]
        done = run("keys", "revoke", keyid, "--data-dir", str(self.stack.data))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertNotEqual(client.wait_exit(), 0)
        self.assertEqual(len([x for x in client.lines if "revoked" in x]), 1, client.output())
        self.test_ownerPasses()

    def test_wrongKey(self) -> None:
        """
        A wrong key: the connector exits non-zero with one clear line.
        """
        client = self.stack.start(
            nfltr("tcp-connect", "web", str(self.service), "--listen", "127.0.0.1:0",
                  "--pin", self.pin, *self.stack.relay_args()),
            "bad key", {"NFLTR_KEY": "nfltr_000000000000_" + "A" * 43},
        )
        self.assertNotEqual(client.wait_exit(), 0)
        self.assertEqual(
            len([x for x in client.lines if "invalid API key" in x]), 1, client.output()
        )
        self.assertNotIn("Traceback", client.output())

    def startChecked(self, agent: str, pin: str) -> tuple[int, str]:
        """
        Start a connector for C{agent} without C{--wait}: its exit status
        and output.
        """
        client = self.stack.start(
            nfltr("tcp-connect", agent, str(self.service), "--listen", "127.0.0.1:0",
                  "--pin", pin, *self.stack.relay_args()),
            f"checked {agent}", {"NFLTR_KEY": self.alice},
        )
        return client.wait_exit(), client.output()

    def test_pinMismatch(self) -> None:
        """
        A connector pinning another key is told at start that the
        fingerprints differ, and exits non-zero without listening.
        """
        wrong = "sha256:" + "00" * 32
        status, output = self.startChecked("web", wrong)
        self.assertNotEqual(status, 0)
        self.assertNotIn("listening on", output)
        self.assertIn(f"does not match --pin {wrong}", output)
        self.assertIn(self.pin, output)

    def test_missingAgentExits(self) -> None:
        """
        A connector for an agent that does not exist exits non-zero at
        start with the relay's refusal in words, without listening.
        """
        status, output = self.startChecked("ghost", self.pin)
        self.assertNotEqual(status, 0)
        self.assertNotIn("listening on", output)
        self.assertIn(
            f"nfltr: ghost:{self.service}: no such agent or port (or not yours) "
            "(--wait listens anyway, until the agent is up)", output,
        )

    def test_serviceRefuses(self) -> None:
        """
        An agent whose service is down: the connector says so in one line;
        other tunnels are unaffected.
        """
        down = closed_port()
        _, pin = self.stack.agent(self.alice, "down", down)
        client, local = self.stack.connector(self.alice, "down", down, "--pin", pin, "--wait")
        self.assertIsNone(self.marker(local))
        client.wait_for(r"service refused the connection")
        self.test_ownerPasses()
