"""
The relay under socket activation (systemd's C{LISTEN_FDS}, Twisted's
C{systemd:} endpoints): it serves on sockets it is given, and a restart
that goes through them refuses nobody: the socket stays open between the
two processes, and connections made meanwhile wait in its queue for the
next relay instead of being refused.

The test plays systemd's part: it holds the listening sockets and starts
each relay with them as descriptors 3 and 4, C{LISTEN_FDS}, C{LISTEN_PID}
and C{LISTEN_FDNAMES} set as systemd sets them.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
import urllib.request
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.processes import Child, nfltr_command, wait_for_file
from tests.integration.prober import TLSProber


def listening() -> socket.socket:
    """
    A TCP socket listening on 127.0.0.1, any port, that children inherit.
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    sock.set_inheritable(True)
    return sock


def activated_relay(data: Path, tls: socket.socket, admin: socket.socket) -> Child:
    """
    C{nfltr relay} given C{tls} and C{admin} as systemd gives sockets: as
    descriptors 3 and 4, named, C{LISTEN_PID} its own (bash sets it to its
    pid, which C{exec} keeps).
    """
    relay = " ".join(nfltr_command(
        "relay", "--data-dir", str(data), "--tls", "systemd:domain=INET:name=tls",
        "--admin", "systemd:domain=INET:name=admin", "--http", "none"))
    script = (f"exec 3<&{tls.fileno()} 4<&{admin.fileno()}; "
              f"export LISTEN_PID=$$ LISTEN_FDS=2 LISTEN_FDNAMES=tls:admin; exec {relay}")
    return Child(["bash", "-c", script], name="relay", pass_fds=(tls.fileno(), admin.fileno()))


class SocketActivationTests(SynchronousTestCase):
    """
    A relay on sockets it was given, and a restart through them.
    """

    skip = None if shutil.which("bash") else "bash is not installed"

    def setUp(self) -> None:
        self.tls, self.admin = listening(), listening()
        self.addCleanup(self.tls.close)
        self.addCleanup(self.admin.close)
        self.data = Path(self.mktemp())
        self.relays: list[Child] = []
        self.addCleanup(lambda: [r.stop() for r in self.relays])

    def start(self) -> Child:
        relay = activated_relay(self.data, self.tls, self.admin)
        self.relays.append(relay)
        relay.wait_for(r"relay listening")
        return relay

    def health(self) -> bytes:
        port = self.admin.getsockname()[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            return answer.read()

    def test_restartRefusesNobody(self) -> None:
        """
        The relay serves TLS and its admin listener on the sockets it was
        given; replaced by a new relay (the old one stopped with SIGTERM,
        the new one started on the same sockets), every TLS handshake made
        meanwhile, every 20 ms, succeeds: connections made between the two
        waited for the new relay.
        """
        self.start()
        self.assertEqual(self.health().strip(), b"ok")
        info = json.loads(wait_for_file(self.data / "relay.json"))
        prober = TLSProber(self.tls.getsockname()[1], info["ca"]).start()
        try:
            for _ in range(2):
                time.sleep(0.5)
                old = self.relays[-1]
                old.popen.send_signal(15)
                self.assertEqual(old.wait_exit(60), 0)
                before = len(prober.results)
                self.start()
                time.sleep(0.5)
                self.assertGreater(len(prober.results), before)
        finally:
            prober.stop()
        self.assertEqual(prober.failed, [])
        self.assertGreater(len(prober.results), 20)
        self.assertEqual(self.health().strip(), b"ok")
        self.assertNotIn("Traceback", "\n".join(r.output() for r in self.relays))
