"""
Tests for L{nfltr.wire.constants}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.constants import canned_response


class CannedResponseTests(SynchronousTestCase):
    """
    L{canned_response} makes a whole response that an HTTP/1.1 client frames exactly.
    """

    def test_framing(self) -> None:
        """
        The status line, a plain-text type, a Content-Length equal to the body's and a close,
        then the body and nothing after it.
        """
        body = "non-ASCII body: é\n".encode()
        response = canned_response(b"400 Bad Request", body)
        head, _, rest = response.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        self.assertEqual(lines[0], b"HTTP/1.1 400 Bad Request")
        self.assertIn(b"Content-Length: %d" % (len(body),), lines)
        self.assertIn(b"Connection: close", lines)
        self.assertIn(b"Content-Type: text/plain; charset=utf-8", lines)
        self.assertEqual(rest, body)
