"""
Tests for L{nfltr.wire.addresses}: addresses written as people write them.
"""

from __future__ import annotations

from twisted.internet.address import IPv4Address, IPv6Address, UNIXAddress
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire import format_address


class FormatAddressTests(SynchronousTestCase):
    """
    L{format_address} never shows a Python repr.
    """

    def test_ipv4(self) -> None:
        """
        An IPv4 address is C{HOST:PORT}.
        """
        self.assertEqual(format_address(IPv4Address("TCP", "127.0.0.1", 18443)), "127.0.0.1:18443")

    def test_ipv6(self) -> None:
        """
        An IPv6 address is bracketed: C{[HOST]:PORT}.
        """
        self.assertEqual(format_address(IPv6Address("TCP", "::1", 8443)), "[::1]:8443")

    def test_unix(self) -> None:
        """
        A UNIX socket is its path; one without a name says so, with no repr.
        """
        self.assertEqual(format_address(UNIXAddress(b"/run/nfltr.sock")), "/run/nfltr.sock")
        self.assertEqual(format_address(UNIXAddress(None)), "unix socket")

    def test_none(self) -> None:
        """
        No address (no transport yet) is C{?}.
        """
        self.assertEqual(format_address(None), "?")
