"""
The twistd plugins run as an operator runs them: C{twistd -n nfltr-relay} and
C{twistd -n nfltr-agent} as real processes, side by side in one working
directory, each logging at the level it was given.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.processes import READY_TIMEOUT, Child

from .harness import REPO, run

TWISTD = Path(sys.executable).parent / "twistd"
LOOPBACK = "tcp:0:interface=127.0.0.1"
# What the TLS port refuses (not TLS), and logs at debug level with the peer's address.
NOT_TLS = b"GET / HTTP/1.0\r\n\r\n"


class TwistdTests(SynchronousTestCase):
    """
    C{twistd -n nfltr-relay} and C{twistd -n nfltr-agent} in a temporary
    working directory, on loopback port 0.
    """

    def setUp(self) -> None:
        self.tmp = Path(self.mktemp()).absolute()
        self.tmp.mkdir(parents=True)
        self.children: list[Child] = []
        self.addCleanup(lambda: [child.stop() for child in reversed(self.children)])

    def twistd(self, name: str, *args: str, env: dict[str, str] | None = None) -> Child:
        """
        Start C{twistd -n ARGS} in the temporary directory, with this tree's
        nfltr (and plugins) first on the path.
        """
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        child = Child([str(TWISTD), "-n", *args], {"PYTHONPATH": path, **(env or {})}, name,
                      cwd=self.tmp)
        self.children.append(child)
        return child

    def relay(self, *extra: str) -> tuple[Child, dict[str, str]]:
        """
        Start a relay; it and its C{relay.json}.
        """
        data = self.tmp / "relay"
        relay = self.twistd("relay", "nfltr-relay", "--data-dir", str(data), "--tls", LOOPBACK,
                            "--admin", LOOPBACK, "--http", "none", *extra)
        state = data / "relay.json"
        deadline = time.monotonic() + READY_TIMEOUT
        while not state.exists():
            if relay.popen.poll() is not None or time.monotonic() > deadline:
                self.fail(f"the relay did not start:\n{relay.output()}")
            time.sleep(0.05)
        return relay, json.loads(state.read_text())

    def refuse(self, address: str) -> None:
        """
        Send the relay's TLS port something that is not TLS and read its
        answer to the end: the relay has logged the refusal by then.
        """
        host, port = address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=READY_TIMEOUT) as visitor:
            visitor.sendall(NOT_TLS)
            while visitor.recv(4096):
                pass

    def stopped(self, child: Child) -> str:
        """
        Stop C{child}; everything it printed.
        """
        child.stop()
        return child.output()

    def test_relayInfoLevel(self) -> None:
        """
        At the default level (info) the relay's log holds info lines and not
        one debug line, though a refusal on its TLS port was logged at debug.
        """
        relay, info = self.relay()
        self.refuse(info["tls"])
        output = self.stopped(relay)
        self.assertIn("#info] relay listening", output)
        self.assertNotIn("#debug", output)

    def test_relayDebugLevel(self) -> None:
        """
        With C{--log-level debug} the relay logs that refusal, at debug.
        """
        relay, info = self.relay("--log-level", "debug")
        self.refuse(info["tls"])
        output = self.stopped(relay)
        refusals = [line for line in output.splitlines() if "refused (not_tls" in line]
        self.assertEqual(len(refusals), 1, output)
        self.assertIn("#debug]", refusals[0])

    def test_relayAndAgent(self) -> None:
        """
        A relay and an agent under C{twistd -n} in one directory both run (no
        shared C{twistd.pid}: in the foreground neither writes a pidfile), and
        the agent logs no debug line at its default level.
        """
        relay, info = self.relay()
        data = str(self.tmp / "relay")
        run("accounts", "create", "ops", "--data-dir", data)
        key = run("keys", "create", "--account", "ops", "--data-dir", data).stdout.strip()
        agent = self.twistd(
            "agent", "nfltr-agent", "tcp", "3000", "--name", "box", "--relay", info["tls"],
            "--ca", info["ca"], "--state-dir", str(self.tmp / "agent"), env={"NFLTR_KEY": key},
        )
        agent.wait_for(r"connected to the relay")
        self.assertIsNone(relay.popen.poll(), relay.output())
        self.assertEqual(sorted(p.name for p in self.tmp.glob("*.pid")), [])
        output = self.stopped(agent)
        self.assertNotIn("#debug", output)
        self.assertNotIn(key, output)

    def test_agentUp(self) -> None:
        """
        C{twistd -n nfltr-agent up FILE} serves a config file's entries,
        and reloads it on SIGHUP.
        """
        _, info = self.relay()
        data = str(self.tmp / "relay")
        run("accounts", "create", "ops", "--data-dir", data)
        key = run("keys", "create", "--account", "ops", "--data-dir", data).stdout.strip()
        (self.tmp / "key").write_text(key)
        (self.tmp / "key").chmod(0o600)
        config = self.tmp / "agent.toml"
        config.write_text(
            f'relay = "{info["tls"]}"\nca = "{info["ca"]}"\nkey-file = "key"\nname = "box"\n'
            'state-dir = "agent"\n\n[[tcp]]\nport = 3000\n\n[[tcp]]\nport = 3001\n'
        )
        agent = self.twistd("agent", "nfltr-agent", "up", str(config))
        agent.wait_for(r"connected to the relay")
        agent.wait_for(r"connect to port 3001")
        config.write_text(config.read_text() + "\n[[tcp]]\nport = 3002\n")
        agent.popen.send_signal(signal.SIGHUP)
        agent.wait_for(r"connect to port 3002")
        agent.wait_for(r"reloaded: 1 entries started, 0 stopped, 2 unchanged")
        self.assertNotIn(key, self.stopped(agent))
