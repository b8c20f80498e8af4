"""
A relay whose onion service cannot come up (tor not installed, tor's control port
refusing, a tor that never publishes) says why in one line, answers C{/readyz}
with 503, and serves its other listeners all the same.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.processes import wait_for_file
from nfltr.tor import OnionKey
from tests.integration.harness import Process, nfltr
from tests.tor_network import missing_tor


def closed_port() -> int:
    """
    A loopback port nobody listens on (bound, then let go).
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OnionFailureTests(SynchronousTestCase):
    """
    Each test starts a relay with C{--onion} and a tor it cannot use.
    """

    def relay(self, *extra: str, env: dict[str, str] | None = None) -> tuple[Process, dict]:
        """
        Start a relay with an onion service; it, and its relay.json.
        """
        data = Path(self.mktemp()).absolute()
        process = Process(
            nfltr("relay", "--data-dir", str(data), "--tls", "tcp:0:interface=127.0.0.1",
                  "--admin", "tcp:0:interface=127.0.0.1", "--http", "none",
                  "--onion", "443", "--onion-timeout", "5", *extra),
            env, "relay",
        )
        self.addCleanup(process.stop)
        return process, json.loads(wait_for_file(data / "relay.json"))

    def assertServing(self, info: dict) -> None:
        """
        The relay's admin port answers /healthz, /readyz says 503, its TLS port accepts.
        """
        admin = f"http://{info['admin']}"
        with urllib.request.urlopen(f"{admin}/healthz", timeout=10) as answer:
            self.assertEqual(answer.status, 200)
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"{admin}/readyz", timeout=10)
        self.assertEqual(caught.exception.code, 503)
        with urllib.request.urlopen(f"{admin}/metrics", timeout=10) as answer:
            self.assertIn(b"\nnfltr_onion_service_up 0.0\n", answer.read())
        host, port = info["tls"].rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=10).close()
        self.assertRegex(info["onion"], r"^[a-z2-7]{56}\.onion:443$")

    def test_controlPortRefusing(self) -> None:
        """
        Nobody on the control port: the log names it and says when the next try comes.
        relay.json names the onion address of the SSH port too (C{--onion-ssh}).
        """
        port = closed_port()
        process, info = self.relay("--tor-control", f"tcp:127.0.0.1:{port}", "--ssh",
                                   "tcp:0:interface=127.0.0.1", "--onion-ssh", "22")
        self.assertEqual(info["onion_ssh"], info["onion"].replace(":443", ":22"))
        line = process.wait_for(r"onion service \S+ is not up: .*")
        self.assertIn(f"tor's control port tcp:127.0.0.1:{port}", line.group(0))
        self.assertIn("next try in 30 s", line.group(0))
        self.assertServing(info)

    def test_torMissing(self) -> None:
        """
        C{--tor-control launch} without tor installed: the log says to install it or to
        give a control port.
        """
        empty = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, empty)
        process, info = self.relay("--tor-control", "launch", env={"PATH": empty})
        line = process.wait_for(r"onion service \S+ is not up: .*")
        self.assertIn("tor is not installed", line.group(0))
        self.assertIn("--tor-control", line.group(0))
        self.assertServing(info)

    def test_neverPublished(self) -> None:
        """
        A tor that answers but has no network (C{DisableNetwork 1}) never uploads the
        descriptor: after --onion-timeout the log says so.
        """
        if missing_tor():
            raise self.skipTest(missing_tor())
        tor_dir = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, tor_dir, True)
        tor = subprocess.Popen(
            ["tor", "--ignore-missing-torrc", "--defaults-torrc", os.devnull, "--quiet",
             "--DataDirectory", str(tor_dir), "--DisableNetwork", "1", "--SocksPort", "0",
             "--ControlPort", "auto", "--ControlPortWriteToFile", str(tor_dir / "control"),
             "--CookieAuthentication", "1", "--__OwningControllerProcess", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.addCleanup(tor.wait, 10)
        self.addCleanup(tor.terminate)
        control = wait_for_file(tor_dir / "control").strip().rsplit(":", 1)[1]
        process, info = self.relay("--tor-control", f"tcp:127.0.0.1:{control}")
        line = process.wait_for(r"onion service \S+ is not up: .*")
        self.assertIn("not published within 5 s", line.group(0))
        self.assertServing(info)


class AgentTorFailureTests(SynchronousTestCase):
    """
    An agent told to launch tor where none is installed says so, and keeps trying.
    """

    def test_torMissing(self) -> None:
        """
        C{--tor launch} without tor: the agent's log says tor is not installed, and what to
        give instead.
        """
        empty = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, empty)
        onion = OnionKey(bytes(32)).address
        agent = Process(
            nfltr("tcp", "22", "--name", "lonely", "--state-dir",
                  str(Path(self.mktemp()).absolute()),
                  "--relay", f"{onion}:443", "--relay-pin", "sha256:" + "ab" * 32,
                  "--tor", "launch"),
            {"PATH": empty, "NFLTR_KEY": "nfk_unused"}, "agent",
        )
        self.addCleanup(agent.stop)
        line = agent.wait_for(r"cannot reach the relay .*")
        self.assertIn("tor is not installed", line.group(0))
        self.assertIn("--tor with the SOCKS port", line.group(0))
