"""
Secrets never appear in logs: a full run at debug level, with every kind of
credential in use, and a search of everything every process printed.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from .harness import Stack, exchange, missing

KEY_SECRET = "s3cr3t-pass-5b1"
BEARER = "tok-bearer-77c2"
HEADER_VALUE = "hook-value-93ad"


class SecretsTests(SynchronousTestCase):
    """
    API keys, Basic passwords, bearer tokens and required header values.
    """

    skip = missing('curl')

    def test_noSecretInLogs(self) -> None:
        """
        An agent and a connector (API keys), an inspect share and an e2ee
        share with Basic auth, a bearer token and a required header, all at
        debug level, used with right and wrong credentials: no process
        prints any of the secrets, nor the Basic credentials' base64 form.
        """
        stack = Stack(Path(self.mktemp()).absolute(), relay_extra=("--log-level", "debug"))
        self.addCleanup(stack.close)
        key = stack.key("alice")
        service = stack.service()
        _, pin = stack.agent(key, "box", service, "--verbose")
        _, local = stack.connector(key, "box", service, "--pin", str(pin), "--verbose")
        self.assertEqual(exchange(local, b"MARKER hi\n"), b"hi\n")
        policy = ("--basic-auth", f"ann:{KEY_SECRET}", "--bearer", BEARER,
                  "--require-header", f"X-Hook: {HEADER_VALUE}", "--verbose")
        ca = str(stack.data / "tls" / "share-ca.crt")
        port = stack.address.rsplit(":", 1)[1]
        for mode in ("inspect", "e2ee"):
            name = f"{mode}-site"
            stack.http_agent(key, name, stack.web_service(), "--mode", mode, *policy)
            url = f"https://{name}.localhost:{port}/headers"
            for args in ((), ("--user", f"ann:{KEY_SECRET}"), ("--oauth2-bearer", BEARER),
                         ("--user", "ann:wrong"), ("--header", f"X-Hook: {HEADER_VALUE}")):
                subprocess.run(
                    ["curl", "-sS", "-o", "/dev/null", "--cacert", ca, "--resolve",
                     f"{name}.localhost:{port}:127.0.0.1", *args, url],
                    capture_output=True, timeout=60, check=True,
                )
        stack.close()
        printed = "\n".join(p.output() for p in stack.processes)
        self.assertIn("DEBUG", printed.upper())  # debug output was on
        basic = base64.b64encode(f"ann:{KEY_SECRET}".encode()).decode()
        # nfltr_<keyid>_<secret>: the secret is URL-safe base64 and may hold "_" itself, so
        # split from the left (a split from the right once searched the log for a lone "4").
        secret_part = key.split("_", 2)[2]
        self.assertEqual(len(secret_part), 43)
        for secret in (key, secret_part, KEY_SECRET, BEARER, HEADER_VALUE, basic):
            self.assertNotIn(secret, printed)
