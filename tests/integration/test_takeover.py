"""
C{nfltr relay --takeover}: a new relay takes the listening sockets of the
one running on its data directory, which drains and stops; no connection is
refused meanwhile, and agents and connectors come back to the new relay
(real processes).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from nfltr.cli.processes import wait_for_file
from tests.integration.harness import Process, StackTestCase, exchange, nfltr
from tests.integration.prober import TLSProber

#: Replacements in a row.
ROUNDS = 3


class TakeoverTests(StackTestCase):
    """
    A relay replaced three times in a row by C{--takeover}.
    """

    def successor(self) -> Process:
        """
        Start a relay with C{--takeover} on the stack's data directory; it,
        once listening.
        """
        relay = self.stack.start(nfltr(
            "relay", "--takeover", "--data-dir", str(self.stack.data),
            "--tls", "tcp:0:interface=127.0.0.1", "--admin", "tcp:0:interface=127.0.0.1",
            "--http", "tcp:0:interface=127.0.0.1"), "relay (successor)")
        relay.wait_for(r"relay listening")
        return relay

    def test_replacedRefusingNobody(self) -> None:
        """
        While relays replace each other, a TLS connection every 20 ms to
        the port is always answered; each old relay exits 0; the port, the
        certificate and the HTTP port stay; the tunnel works through the
        last relay (its agent and connector came back).
        """
        key = self.stack.key("alice")
        service = self.stack.service()
        _, pin = self.stack.agent(key, "web", service)
        assert pin is not None
        _, local = self.stack.connector(key, "web", service, "--pin", pin)
        self.assertEqual(exchange(local, b"ECHO\nhello", half_close=True), b"hello")
        before = json.loads((self.stack.data / "relay.json").read_text())
        port = int(before["tls"].rsplit(":", 1)[1])
        prober = TLSProber(port, self.stack.ca).start()
        old = self.stack.relay
        try:
            for _ in range(ROUNDS):
                time.sleep(0.3)
                new = self.successor()
                self.assertEqual(old.wait_exit(60), 0)
                self.assertIn("handed the listeners (tls, http) to a successor", old.output())
                old = new
            time.sleep(0.3)
        finally:
            prober.stop()
        self.assertEqual(prober.failed, [])
        self.assertGreater(len(prober.results), 20)
        after = json.loads(wait_for_file(self.stack.data / "relay.json"))
        self.assertEqual((after["tls"], after["http"], after["ca"]),
                         (before["tls"], before["http"], before["ca"]))
        self.assertEqual(after["pid"], old.popen.pid)
        deadline = time.monotonic() + 30
        while True:
            try:
                echoed = exchange(local, b"ECHO\nagain", half_close=True, timeout=10)
            except OSError:
                echoed = b""
            if echoed == b"again" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(echoed, b"again")
        self.assertNotIn("Traceback", old.output())

    def test_nothingToTake(self) -> None:
        """
        C{--takeover} on a data directory where no relay runs ends at once
        with a clear message, status 1.
        """
        relay = self.stack.start(nfltr(
            "relay", "--takeover", "--data-dir", str(Path(self.mktemp()).absolute()),
            "--tls", "tcp:0:interface=127.0.0.1", "--admin", "tcp:0:interface=127.0.0.1",
            "--http", "none"), "relay (nothing to take)")
        self.assertEqual(relay.wait_exit(30), 1)
        self.assertIn("no relay runs on", relay.output())
        self.assertNotIn("Traceback", relay.output())
