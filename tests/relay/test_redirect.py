"""
Tests for L{nfltr.relay.redirect}, the HTTP port.
"""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.redirect import https_location, redirect_site


class LocationTests(SynchronousTestCase):
    """
    L{https_location}: where a plain-HTTP request is sent.
    """

    def test_keepsHostAndPath(self) -> None:
        """
        The Host header's name (its port dropped) and the path and query are
        kept; the HTTPS port is named unless it is 443.
        """
        self.assertEqual(
            https_location(b"Blog.Example.com:8080", "relay", 8443, b"/a?b=c"),
            b"https://blog.example.com:8443/a?b=c",
        )
        self.assertEqual(
            https_location(b"blog.example.com", "relay", 443, b"/"), b"https://blog.example.com/"
        )
        self.assertEqual(
            https_location(b"[::1]:8080", "relay", 8443, b"/x"), b"https://[::1]:8443/x"
        )

    def test_badHost(self) -> None:
        """
        A missing or malformed Host (header injection, user info, spaces) is
        replaced by the relay's name; a path that is not absolute becomes /.
        """
        for host in (None, b"", b"evil.com\r\nSet-Cookie: x", b"a@b.com", b"a b", b"x" * 300):
            self.assertEqual(
                https_location(host, "relay.example.com", 443, b"/p"),
                b"https://relay.example.com/p",
            )
        self.assertEqual(
            https_location(b"a.com", "r", 443, b"http://other/"), b"https://a.com/"
        )


class SiteTests(SynchronousTestCase):
    """
    The HTTP port's site over a transport.
    """

    def request(self, raw: bytes) -> bytes:
        site = redirect_site("relay.example.com", lambda: 8443, Clock())
        protocol = site.buildProtocol(IPv4Address("TCP", "192.0.2.1", 1234))
        transport = StringTransport()
        protocol.makeConnection(transport)
        protocol.dataReceived(raw)
        return transport.value()

    def test_noVersionBanner(self) -> None:
        """
        The answer names no server software or version (no C{Server}
        header).
        """
        answer = self.request(b"GET / HTTP/1.1\r\nHost: blog.localhost\r\n\r\n")
        self.assertTrue(answer.startswith(b"HTTP/1.1 308 "), answer)
        self.assertNotIn(b"\r\nserver:", answer.lower())

    def test_redirect(self) -> None:
        """
        A GET gets a 308 to the HTTPS URL with a short body; a POST keeps its
        method (308, not 301).
        """
        for method in (b"GET", b"POST"):
            answer = self.request(
                method + b" /hello?x=1 HTTP/1.1\r\nHost: blog.localhost:8080\r\n"
                b"Content-Length: 0\r\n\r\n"
            )
            self.assertTrue(answer.startswith(b"HTTP/1.1 308 "), answer)
            self.assertIn(b"\r\nLocation: https://blog.localhost:8443/hello?x=1\r\n", answer)
