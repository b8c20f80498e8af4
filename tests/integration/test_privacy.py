"""
The relay sees only ciphertext of an end-to-end encrypted tunnel.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .harness import Stack, StackTestCase, exchange

MARKER = "nfltr-plaintext-marker-7f3a9c"


class CapturingStack(StackTestCase):
    """
    A stack whose relay records everything its links receive.
    """

    def setUp(self) -> None:
        self.capture = Path(self.mktemp()).absolute()
        self.capture.parent.mkdir(parents=True, exist_ok=True)
        os.environ["NFLTR_TEST_CAPTURE"] = str(self.capture)
        self.addCleanup(os.environ.pop, "NFLTR_TEST_CAPTURE", None)
        self.stack = Stack(
            Path(self.mktemp()).absolute(),
            [sys.executable, "-m", "tests.integration.capture_relay"],
        )
        self.addCleanup(self.stack.close)

    def roundTrip(self, *mode: str) -> bytes:
        key = self.stack.key("alice")
        service = self.stack.service()
        _, pin = self.stack.agent(key, "secret", service, *mode)
        extra = ("--pin", pin) if pin else mode
        _, local = self.stack.connector(key, "secret", service, *extra)
        answer = exchange(local, f"MARKER {MARKER}\n".encode())
        self.assertEqual(answer, f"{MARKER}\n".encode())
        return self.capture.read_bytes()


class EndToEndPrivacyTests(CapturingStack):
    """
    What the relay reads.
    """

    def test_relayNeverSeesPlaintext(self) -> None:
        """
        A marker sent both ways through an end-to-end encrypted tunnel
        never appears in the bytes the relay's links received.
        """
        seen = self.roundTrip()
        self.assertGreater(len(seen), 1000)
        self.assertNotIn(MARKER.encode(), seen)

    def test_captureWorks(self) -> None:
        """
        The same capture of a plain tunnel (--e2ee false) does contain the
        marker: the check above can fail.
        """
        seen = self.roundTrip("--e2ee", "false")
        self.assertIn(MARKER.encode(), seen)


class SharePrivacyTests(CapturingStack):
    """
    What the relay reads of a share URL's traffic.
    """

    def fetchMarker(self, mode: str) -> bytes:
        """
        Publish a web service in C{mode}, fetch a response that carries the
        marker through the share URL, and return what the relay's links read.
        """
        from .test_shares import ShareBehaviour

        class Visitor(ShareBehaviour):
            stack = self.stack

        visitor = Visitor()
        visitor.mode = mode
        url = visitor.publish()
        head = visitor.curl(urls=[f"{url}headers?{MARKER}"])
        self.assertIn(MARKER.encode(), head)
        return self.capture.read_bytes()

    def test_e2eeShare(self) -> None:
        """
        Through an e2ee share the marker in the response never appears in
        the relay's reads.
        """
        seen = self.fetchMarker("e2ee")
        self.assertGreater(len(seen), 1000)
        self.assertNotIn(MARKER.encode(), seen)

    def test_inspectShare(self) -> None:
        """
        Through an inspect share it does: the check above can fail.
        """
        self.assertIn(MARKER.encode(), self.fetchMarker("inspect"))
