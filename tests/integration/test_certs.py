"""
The operator's certificate (C{--cert}/C{--key}) on a real relay: served for
the relay's names and for inspect shares it covers, and replaced on SIGHUP
without a restart.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import time
from pathlib import Path

from cryptography import x509
from twisted.trial.unittest import SynchronousTestCase

from nfltr.tls import spki_fingerprint

from ..relay.test_certs import self_signed
from .harness import Stack


def served(port: int, name: str) -> str:
    """
    The fingerprint of the certificate the relay serves for C{name}.
    """
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname=name) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return spki_fingerprint(x509.load_der_x509_certificate(der))


class OperatorCertificateTests(SynchronousTestCase):
    """
    C{nfltr relay --cert FILE --key FILE}.
    """

    def setUp(self) -> None:
        tmp = Path(self.mktemp()).absolute()
        self.first = self_signed(tmp / "first", ["localhost", "*.localhost"])
        self.second = self_signed(tmp / "second", ["localhost", "*.localhost"])
        self.live = tmp / "live"
        self.live.mkdir(parents=True)
        for source, name in zip(self.first, ("cert.pem", "key.pem"), strict=True):
            shutil.copy(source, self.live / name)
        self.stack = Stack(tmp / "stack", relay_extra=(
            "--cert", str(self.live / "cert.pem"), "--key", str(self.live / "key.pem")))
        self.addCleanup(self.stack.close)
        self.port = int(self.stack.address.rsplit(":", 1)[1])

    def fingerprint(self, files: tuple[Path, Path]) -> str:
        return spki_fingerprint(x509.load_pem_x509_certificate(files[0].read_bytes()))

    def test_servedAndReloaded(self) -> None:
        """
        The operator's certificate is served for the relay's name, written
        to relay.json, and serves an inspect share it covers; after the files
        change and a SIGHUP, new connections get the new one, and relay.json
        names it.
        """
        first, second = self.fingerprint(self.first), self.fingerprint(self.second)
        self.assertEqual(self.stack.info["fingerprint"], first)
        self.assertEqual(served(self.port, "localhost"), first)
        key = self.stack.key("alice")
        # Agents trust the operator's certificate (here by its key).
        address = self.stack.address
        self.stack.relay_args = lambda: ["--relay", address, "--relay-pin", first]  # type: ignore[method-assign]
        self.stack.http_agent(key, "shop", self.stack.web_service(), "--mode", "inspect")
        self.assertEqual(served(self.port, "shop.localhost"), first)
        for source, name in zip(self.second, ("cert.pem", "key.pem"), strict=True):
            shutil.copy(source, self.live / name)
        os.kill(self.stack.relay.popen.pid, signal.SIGHUP)
        deadline = time.monotonic() + 30
        while (now := served(self.port, "localhost")) != second and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(now, second)
        self.assertEqual(served(self.port, "shop.localhost"), second)
        self.stack.relay.wait_for(r"reloaded the certificate")
        written = json.loads((self.stack.data / "relay.json").read_text())
        self.assertEqual(written["fingerprint"], second)
