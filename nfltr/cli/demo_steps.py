# -*- test-case-name: tests.integration.test_demo -*-
"""
The steps of C{nfltr demo} (L{nfltr.cli.demo}): the whole path on this
machine, as real processes.

It starts a small web service (in this process), a relay, an agent next to
the service and a connector, all on 127.0.0.1 with free ports in a
temporary directory; fetches a page through the tunnel; publishes the same
service at an end-to-end encrypted share URL and fetches it there; prints
what happened and the commands to do it by hand; and cleans everything up.
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import ssl
import tempfile
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from nfltr.cli.processes import Child, nfltr_command, wait_for_file

PAGE = b"Hello from a service that no visitor can reach directly.\n"


class _Page(BaseHTTPRequestHandler):
    """
    Answers every GET with L{PAGE}.
    """

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        """
        Quiet: the demo prints its own story.
        """


@contextmanager
def web_service() -> Iterator[int]:
    """
    A small HTTP service on 127.0.0.1; yields its port.
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def fetch_share(url: str, cafile: str) -> tuple[int, bytes]:
    """
    GET C{url} (C{https://NAME.localhost:PORT/}) verified with C{cafile},
    connecting to 127.0.0.1: C{*.localhost} names are not in every
    resolver (curl and browsers resolve them to loopback themselves).
    """
    parts = urlsplit(url)
    context = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(("127.0.0.1", parts.port or 443), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname=parts.hostname) as tls:
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
        connection.sock = tls
        connection.request("GET", parts.path or "/")
        response = connection.getresponse()
        return response.status, response.read()


class Demo:
    """
    The demo's steps; L{run} runs them and always cleans up.
    """

    def __init__(self, say: Callable[[str], None] = print) -> None:
        self.say = say
        self.tmp = Path(tempfile.mkdtemp(prefix="nfltr-demo-"))
        self.children: list[Child] = []

    def start(self, name: str, *args: str, key: str | None = None) -> Child:
        env = {"NFLTR_KEY": key} if key else None
        child = Child(nfltr_command(*args), env, name)
        self.children.append(child)
        return child

    def run(self) -> int:
        """
        Run the demo; 0 if the page came back through the tunnel.
        """
        try:
            with web_service() as port:
                return self._steps(port)
        except RuntimeError as e:
            self.say(f"demo failed: {e}")
            return 1
        finally:
            for child in reversed(self.children):
                child.stop()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _steps(self, service: int) -> int:
        say = self.say
        say(f"1. A web service listens on 127.0.0.1:{service} (only this machine can reach it).")
        data = self.tmp / "relay"
        self.start("relay", "relay", "--data-dir", str(data), "--tls",
                   "tcp:0:interface=127.0.0.1", "--admin", "tcp:0:interface=127.0.0.1",
                   "--http", "none")
        info = json.loads(wait_for_file(data / "relay.json"))
        relay, ca = info["tls"], info["ca"]
        say(f"2. A relay listens on {relay}; its certificate fingerprint is {info['fingerprint']}.")
        key = self._key(data)
        say("3. An account 'demo' and an API key for it are created on the relay.")
        agent = self.start("agent", "tcp", str(service), "--name", "demo", "--relay", relay,
                           "--ca", ca, "--state-dir", str(self.tmp / "agent"), key=key)
        pin = agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        agent.wait_for(r"connected to the relay")
        say(f"4. An agent next to the service dialled out to the relay and shares port {service};")
        say(f"   it ends TLS itself, with a key whose fingerprint is {pin}.")
        client = self.start("connector", "tcp-connect", "demo", str(service), "--listen",
                            "127.0.0.1:0", "--pin", pin, "--relay", relay, "--ca", ca, key=key)
        local = int(client.wait_for(r"listening on [\d.]+:(\d+)").group(1))
        say(f"5. A connector listens on 127.0.0.1:{local}; each connection to it becomes an")
        say("   end-to-end encrypted session through the relay to the agent.")
        url = f"http://127.0.0.1:{local}/"
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read()
            status = response.status
        say(f"6. GET {url} through the tunnel answered {status}: {body.decode().strip()!r}")
        share = self.start("share", "http", str(service), "--name", "demo-site", "--relay",
                           relay, "--ca", ca, "--state-dir", str(self.tmp / "site"), key=key)
        shareURL = share.wait_for(r"share (https://\S+) ").group(1)
        say(f"7. Another agent publishes the same service at {shareURL}: the agent ends the")
        say("   visitor's TLS with a key only it holds; the relay routes by the TLS server name")
        say("   and forwards ciphertext.")
        shareStatus, shareBody = fetch_share(shareURL, info["share_ca"])
        say(f"8. GET {shareURL} (trusting the relay's share CA) answered {shareStatus}: "
            f"{shareBody.decode().strip()!r}")
        self._byHand()
        return 0 if body == PAGE and shareBody == PAGE else 1

    def _key(self, data: Path) -> str:
        for args in (("accounts", "create", "demo"), ("keys", "create", "--account", "demo")):
            child = self.start(args[0], *args, "--data-dir", str(data))
            if child.wait_exit() != 0:
                raise RuntimeError(f"nfltr {' '.join(args)} failed:\n{child.output()}")
        return child.lines[0].strip()

    def _byHand(self) -> None:
        self.say("\nTo do the same by hand, for a service on port 3000 (one terminal each):")
        for line in (
            "nfltr relay --tls tcp:8443",
            "nfltr accounts create alice && nfltr keys create --account alice   # prints KEY",
            "NFLTR_KEY=KEY nfltr tcp 3000 --name web --relay localhost:8443 "
            "--ca ~/.local/share/nfltr/relay/tls/ca.crt   # prints its fingerprint FP",
            "NFLTR_KEY=KEY nfltr tcp-connect web 3000 --listen 127.0.0.1:9000 --pin FP "
            "--relay localhost:8443 --ca ~/.local/share/nfltr/relay/tls/ca.crt",
            "curl http://127.0.0.1:9000/",
            "NFLTR_KEY=KEY nfltr http 3000 --name site --relay localhost:8443 "
            "--ca ~/.local/share/nfltr/relay/tls/ca.crt   # prints the share URL",
            "curl --cacert ~/.local/share/nfltr/relay/tls/share-ca.crt "
            "https://site.localhost:8443/",
        ):
            self.say(f"  $ {line}")
        self.say("More: docs/operating.md.  Everything this demo started is stopped now.")
