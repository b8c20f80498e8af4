"""
The relay's onion service and dialing through Tor, end to end on the tests'
private Tor network (L{tests.tor_network}): an agent dials the relay's
C{.onion} address through a client tor and publishes shares; visitors reach
them through Tor (SOCKS) and through the relay's normal TLS port; a TCP share
carries bytes both ways through Tor.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from twisted.trial.unittest import SynchronousTestCase

from nfltr.tor import new_client_keys
from tests.integration.harness import Stack, missing, nfltr
from tests.integration.web_service import pattern
from tests.tor_control import Controller
from tests.tor_network import TorClient, TorNetwork, missing_tor, shared_network
from tests.tor_socks import socks5_connect

#: Seconds a relay has to bring its onion service up on the private network.
ONION_UP_TIMEOUT = 120.0
#: The relay's own bound on an attempt (--onion-timeout): shorter, so that an attempt that
#: runs out of time says why (its line names the directories not answered) before the test
#: gives up.
ONION_ATTEMPT_TIMEOUT = 100.0
#: Seconds an agent has to reach the relay through Tor and publish.
TOR_DIAL_TIMEOUT = 90.0
CURL_TIMEOUT = 90.0
#: Bytes sent each way through the TCP share.
TCP_BYTES = 8 << 20


def onion_stack(tmp: Path, network: TorNetwork, *extra: str) -> tuple[Stack, str]:
    """
    A relay whose TLS port is also an onion service (port 443) published by the network's
    first client tor, share domain its onion address; it, and its C{ADDRESS.onion}.
    """
    service = network.clients[0]
    stack = Stack(tmp, relay_extra=("--onion", "443", "--tor-control", service.control_endpoint,
                                    "--onion-timeout", f"{ONION_ATTEMPT_TIMEOUT:g}",
                                    "--share-domain", "onion", *extra))
    try:
        stack.relay.wait_for(r"onion service up", ONION_UP_TIMEOUT)
    except AssertionError as e:
        stack.close()  # the caller has no stack to close yet
        raise AssertionError(f"{e}\n{network.logs(service.node)}") from None
    onion = stack.info["onion"]
    return stack, onion.rsplit(":", 1)[0]


def tor_args(address: str, client: TorClient, ca: str) -> list[str]:
    """
    How an agent or connector reaches the relay's onion address through C{client}.
    """
    return ["--relay", f"{address}:443", "--ca", ca, "--tor", str(client.socks_port)]


# The relay the tests of L{OnionRelayTests} share (one onion service to publish, not one
# per test), stopped when the test process exits.
_SHARED: dict[str, Any] = {}


def _close(stack: Stack) -> None:
    stack.close()
    shutil.rmtree(stack.tmp, ignore_errors=True)


class OnionRelayTests(SynchronousTestCase):
    """
    One relay with an onion service, shared by the tests of the class.
    """

    skip = missing_tor() or missing("curl")

    def setUp(self) -> None:
        network = shared_network()
        if "stack" not in _SHARED:
            stack, address = onion_stack(Path(tempfile.mkdtemp(prefix="nfltr-onion-")), network,
                                         "--ssh", "tcp:0:interface=127.0.0.1", "--onion-ssh", "22")
            atexit.register(_close, stack)
            _SHARED.update(stack=stack, address=address, key=stack.key("alice"))
        self.stack: Stack = _SHARED["stack"]
        self.address: str = _SHARED["address"]
        self.key: str = _SHARED["key"]
        self.visitor = network.clients[1]

    def test_relayJson(self) -> None:
        """
        relay.json names the onion address of the TLS port; the address is the relay's
        share domain, and its certificate names it (the agents below check it with --ca).
        """
        info = json.loads((self.stack.data / "relay.json").read_text())
        self.assertEqual(info["onion"], f"{self.address}:443")
        self.assertRegex(self.address, r"^[a-z2-7]{56}\.onion$")

    def test_sshPortThroughTor(self) -> None:
        """
        The onion address's port 22 (C{--onion-ssh}) reaches the relay's SSH port: it
        greets with its SSH version line.
        """
        info = json.loads((self.stack.data / "relay.json").read_text())
        self.assertEqual(info["onion_ssh"], f"{self.address}:22")
        with socks5_connect(self.visitor.socks_port, self.address, 22) as sock:
            sock.settimeout(TOR_DIAL_TIMEOUT)
            self.assertTrue(sock.recv(64).startswith(b"SSH-2.0-"))

    def test_ready(self) -> None:
        """
        Once the onion service is up, /readyz answers 200 and the metric says 1.
        """
        admin = f"http://{self.stack.info['admin']}"
        with urllib.request.urlopen(f"{admin}/readyz", timeout=10) as answer:
            self.assertEqual(answer.status, 200)
        with urllib.request.urlopen(f"{admin}/metrics", timeout=10) as answer:
            self.assertIn(b"\nnfltr_onion_service_up 1.0\n", answer.read())

    def http_share(self, name: str, *extra: str) -> str:
        """
        A web service published by an agent that dials the relay's onion address; its URL.
        """
        port = self.stack.web_service()
        agent = self.stack.start(
            nfltr("http", str(port), "--name", name, "--state-dir",
                  str(self.stack.tmp / f"agent-{name}"),
                  *tor_args(self.address, self.visitor, self.stack.ca), *extra),
            f"http agent {name}", {"NFLTR_KEY": self.key},
        )
        return agent.wait_for(r"share (https://\S+) ", TOR_DIAL_TIMEOUT).group(1)

    def curl(self, url: str, *args: str) -> bytes:
        """
        GET C{url} with curl, trusting the share CA; the body.
        """
        done = subprocess.run(
            ["curl", "--silent", "--show-error", "--fail", "--cacert",
             str(self.stack.data / "tls" / "share-ca.crt"), *args, url],
            capture_output=True, timeout=CURL_TIMEOUT, check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"curl failed ({done.returncode}): {done.stderr.decode()}")
        return done.stdout

    def test_httpShareThroughTorAndDirect(self) -> None:
        """
        An agent that reached the relay through Tor publishes a share under the onion name;
        a visitor gets it through Tor (curl over the visitor tor's SOCKS port, the name
        resolved by tor) and through the relay's normal TLS port.
        """
        url = self.http_share("web")
        parts = urlsplit(url)
        self.assertEqual(parts.hostname, f"web.{self.address}")
        self.assertEqual(parts.port or 443, 443)
        body = pattern(64 * 1024)
        through_tor = self.curl(
            f"{url}bytes/{len(body)}", "--socks5-hostname", f"127.0.0.1:{self.visitor.socks_port}",
        )
        self.assertEqual(through_tor, body)
        direct_port = int(self.stack.address.rsplit(":", 1)[1])
        direct = self.curl(
            f"https://web.{self.address}:{direct_port}/bytes/{len(body)}",
            "--resolve", f"web.{self.address}:{direct_port}:127.0.0.1",
        )
        self.assertEqual(direct, body)

    def test_ordinaryAddressThroughTor(self) -> None:
        """
        C{--tor} also reaches a relay by its ordinary address, through a Tor exit (the
        agents-on-hostile-networks use), its certificate checked the same.
        """
        port = self.stack.web_service()
        agent = self.stack.start(
            nfltr("http", str(port), "--name", "viaexit", "--state-dir",
                  str(self.stack.tmp / "agent-viaexit"), *self.stack.relay_args(),
                  "--tor", str(self.visitor.socks_port)),
            "http agent viaexit", {"NFLTR_KEY": self.key},
        )
        url = agent.wait_for(r"share (https://\S+) ", TOR_DIAL_TIMEOUT).group(1)
        self.assertIn(f"viaexit.{self.address}", url)
        self.assertIn("connected to the relay at 127.0.0.1:", agent.output())
        # The link is a stream of the visitor tor's, open to the relay's TLS port.
        client = self.visitor
        with Controller(client.control_port, client.cookie, [client.node]) as control:
            streams = control.getinfo("stream-status")
        self.assertRegex(streams, rf"SUCCEEDED \d+ {re.escape(self.stack.address)}\b")

    def test_websocketTransportThroughTor(self) -> None:
        """
        The WebSocket transport (C{--transport websocket}) reaches the onion address too.
        """
        url = self.http_share("wsweb", "--transport", "websocket")
        body = self.curl(
            f"{url}bytes/1024", "--socks5-hostname", f"127.0.0.1:{self.visitor.socks_port}",
        )
        self.assertEqual(body, pattern(1024))

    def test_tcpShareThroughTor(self) -> None:
        """
        A TCP share whose agent and connector both reach the relay through Tor carries
        8 MiB each way, the same bytes (SHA-256) back.
        """
        port = self.stack.service()
        agent = self.stack.start(
            nfltr("tcp", str(port), "--name", "tcp", "--state-dir",
                  str(self.stack.tmp / "agent-tcp"),
                  *tor_args(self.address, self.visitor, self.stack.ca)),
            "tcp agent", {"NFLTR_KEY": self.key},
        )
        pin = agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        agent.wait_for(r"online|connected|welcome", TOR_DIAL_TIMEOUT)
        connector = self.stack.start(
            nfltr("tcp-connect", "tcp", str(port), "--listen", "127.0.0.1:0", "--pin", pin,
                  *tor_args(self.address, self.visitor, self.stack.ca)),
            "tcp-connect", {"NFLTR_KEY": self.key},
        )
        local = int(connector.wait_for(r"listening on [\d.]+:(\d+)").group(1))
        sent, received = echo_through(local, TCP_BYTES)
        self.assertEqual(received, sent)


def echo_through(port: int, size: int) -> tuple[str, str]:
    """
    Send C{size} bytes to the echo service behind 127.0.0.1:C{port} while reading its
    answer; the SHA-256 of what was sent and of what came back.
    """
    data = os.urandom(size)
    digest = hashlib.sha256()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        def write() -> None:
            sock.sendall(b"ECHO\n" + data)
            sock.shutdown(socket.SHUT_WR)

        writer = threading.Thread(target=write)
        writer.start()
        while chunk := sock.recv(256 * 1024):
            digest.update(chunk)
        writer.join(120)
    return hashlib.sha256(data).hexdigest(), digest.hexdigest()


class OnionRestartTests(SynchronousTestCase):
    """
    A relay restarted on its data directory keeps its onion address, and an agent that
    dials it through Tor comes back.
    """

    skip = missing_tor()

    def test_restart(self) -> None:
        """
        After a restart relay.json names the same onion address, and the agent's link is
        up again (it says so a second time).

        The agent's tor is told C{SIGNAL NEWNYM} once the relay is back: while the relay was
        down, each failed attempt made that tor ask another directory for the service's
        descriptor, and tor asks a directory at most once in 15 minutes; the private
        network has only five (docs/tor.md, "Restarting an onion relay").
        """
        network = shared_network()
        stack, address = onion_stack(Path(self.mktemp()).absolute(), network)
        self.addCleanup(stack.close)
        client = network.client()
        key = stack.key("bob")
        agent = stack.start(
            nfltr("tcp", str(stack.service()), "--name", "back", "--state-dir",
                  str(stack.tmp / "agent-back"), *tor_args(address, client, stack.ca)),
            "tcp agent", {"NFLTR_KEY": key},
        )
        agent.wait_for(r"connected to the relay", TOR_DIAL_TIMEOUT)
        online = len(agent.lines)
        stack.relay.stop()
        (stack.data / "relay.json").unlink(missing_ok=True)
        again = stack.start(stack.relay.args, "relay again")
        again.wait_for(r"onion service up", ONION_UP_TIMEOUT)
        info = json.loads((stack.data / "relay.json").read_text())
        self.assertEqual(info["onion"], f"{address}:443")
        with Controller(client.control_port, client.cookie, [client.node]) as control:
            control.command("SIGNAL NEWNYM")
        back = re.compile(r"connected to the relay")
        deadline = time.monotonic() + TOR_DIAL_TIMEOUT
        while not any(back.search(line) for line in agent.lines[online:]):
            self.assertLess(time.monotonic(), deadline, agent.output())
            time.sleep(0.2)


class ClientAuthorizationTests(SynchronousTestCase):
    """
    With C{--onion-client-keys}, only a tor that holds one of the keys reaches the relay's
    onion service.
    """

    skip = missing_tor()

    def test_onlyWithKey(self) -> None:
        """
        A client tor without the key cannot connect to the onion address (SOCKS refuses);
        once given the private key (C{ONION_CLIENT_AUTH_ADD}) it can.
        """
        network = shared_network()
        keys = new_client_keys()
        tmp = Path(self.mktemp()).absolute()
        tmp.mkdir(parents=True)
        (tmp / "clients").write_text(f"descriptor:x25519:{keys.public}\n")
        stack, address = onion_stack(tmp / "stack", network, "--onion-client-keys",
                                     str(tmp / "clients"))
        self.addCleanup(stack.close)
        client = network.client()
        with self.assertRaises(AssertionError) as caught:
            socks5_connect(client.socks_port, address, 443).close()
        self.assertIn("could not connect", str(caught.exception))
        with Controller(client.control_port, client.cookie, [client.node]) as control:
            service = address.removesuffix(".onion")
            control.command(f"ONION_CLIENT_AUTH_ADD {service} x25519:{keys.private}")
        # Tor may first refuse from what it remembers of the failed attempt: try again.
        deadline = time.monotonic() + TOR_DIAL_TIMEOUT
        while True:
            try:
                socks5_connect(client.socks_port, address, 443).close()
            except (AssertionError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)  # between two attempts, not to hammer the client tor
                continue
            break
