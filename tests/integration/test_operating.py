"""
docs/operating.md's commands, run as written (ports made free), in order.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.processes import Child, wait_for_file

from .harness import REPO, exchange, missing, start_service, start_web_service

DOC = REPO / "docs" / "operating.md"
LONG_RUNNING = {"relay": r"relay listening", "tcp": r"connected to the relay",
                "tcp-connect": r"listening on [\d.]+:(\d+)", "http": r"share (https://\S+)/ "}


def console_commands(text: str) -> list[str]:
    """
    The C{$ } lines of the doc's C{console} blocks, in order.
    """
    blocks = re.findall(r"```console\n(.*?)```", text, re.S)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def free_ports(command: str) -> str:
    """
    The command with its fixed listening ports replaced by port 0 on loopback.
    """
    return command.replace("tcp:8443", "tcp:0:interface=127.0.0.1").replace(
        "tcp:8080", "tcp:0:interface=127.0.0.1").replace(
        "tcp:9090:interface=127.0.0.1", "tcp:0:interface=127.0.0.1"
    )


def subcommand(command: str) -> str | None:
    """
    The nfltr subcommand a doc line runs (L{None} for another program).
    """
    words = [w for w in command.split() if "=" not in w or w.startswith("-")]
    return words[words.index("nfltr") + 1] if "nfltr" in words else None


class OperatingDocTests(SynchronousTestCase):
    """
    The operator page's commands work as written.
    """

    skip = missing('curl')

    def setUp(self) -> None:
        self.tmp = Path(self.mktemp()).absolute()
        self.tmp.mkdir(parents=True)
        self.children: list[Child] = []
        self.addCleanup(lambda: [c.stop() for c in reversed(self.children)])
        self.env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "DATA": str(self.tmp / "relay"), "AGENT_STATE": str(self.tmp / "agent"),
        }
        service, port = start_service(self.tmp)
        self.children.append(service)
        self.env["SERVICE_PORT"] = str(port)
        web, webPort = start_web_service(self.tmp)
        self.children.append(web)
        self.env["WEB_PORT"] = str(webPort)

    def shell(self, command: str) -> str:
        done = subprocess.run(["bash", "-c", command], env=self.env, capture_output=True,
                              text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
        self.assertEqual(done.returncode, 0, f"{command}\n{done.stdout}{done.stderr}")
        return done.stdout

    def background(self, command: str) -> Child:
        child = Child(["bash", "-c", command], self.env, command.split(maxsplit=1)[0])
        self.children.append(child)
        return child

    def test_commandsAsWritten(self) -> None:
        """
        Every console command of docs/operating.md runs in order against
        the relay it starts, and the connector it ends with carries bytes
        end to end.
        """
        commands = console_commands(DOC.read_text())
        self.assertGreaterEqual(len(commands), 6)
        local = None
        fetched = None
        for command in map(free_ports, commands):
            sub = subcommand(command)
            if sub not in LONG_RUNNING:
                out = self.shell(command)
                if "keys create" in command:
                    self.env["KEY"] = out.strip()
                if command.startswith("curl"):
                    fetched = out
                continue
            match = self.background(command).wait_for(LONG_RUNNING[sub])
            if sub == "relay":
                info = json.loads(wait_for_file(self.tmp / "relay" / "relay.json"))
                self.env["RELAY"] = info["tls"]
            elif sub == "tcp":
                self.env["PIN"] = self.children[-1].wait_for(r"(sha256:[0-9a-f]{64})").group(1)
            elif sub == "http":
                self.env["SHARE_URL"] = match.group(1)
            else:
                local = int(match.group(1))
        self.assertIsNotNone(local)
        self.assertEqual(exchange(local, b"MARKER operated\n"), b"operated\n")
        assert fetched is not None
        self.assertIn("GET /headers HTTP/1.1", fetched)
        self.assertIn("X-Forwarded-For: 127.0.0.1", fetched)
