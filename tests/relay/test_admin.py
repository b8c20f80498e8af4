"""
Tests for L{nfltr.relay.admin}: raw HTTP requests against the admin site.
"""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.admin import admin_site


def request(raw: bytes) -> bytes:
    """
    Send C{raw} to a fresh admin site connection; return the response.
    """
    site = admin_site()
    protocol = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
    transport = StringTransport()
    protocol.makeConnection(transport)
    protocol.dataReceived(raw)
    protocol.connectionLost(None)
    return transport.value()


class AdminSiteTests(SynchronousTestCase):
    """
    The admin site answers health checks and nothing else.
    """

    def test_healthz(self) -> None:
        """
        C{GET /healthz} answers 200 with body C{ok}.
        """
        response = request(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(response.startswith(b"HTTP/1.1 200 OK\r\n"), response)
        self.assertTrue(response.endswith(b"\r\n\r\nok\n"), response)

    def test_headHealthz(self) -> None:
        """
        C{HEAD /healthz} answers 200 without a body.
        """
        response = request(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(response.startswith(b"HTTP/1.1 200 OK\r\n"), response)
        self.assertTrue(response.endswith(b"\r\n\r\n"), response)

    def test_otherPaths(self) -> None:
        """
        The root, unknown paths and paths below C{/healthz} are 404.
        """
        for path in (b"/", b"/metrics", b"/healthz/x", b"/healthz/"):
            response = request(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertTrue(response.startswith(b"HTTP/1.1 404 "), (path, response))

    def test_noTracebacks(self) -> None:
        """
        The site never shows tracebacks.
        """
        self.assertFalse(admin_site().displayTracebacks)
