"""
Tests of L{nfltr.relay.ssh._forwards}: what forwarding requests mean.
"""

from __future__ import annotations

import contextlib
import struct

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.ssh import _forwards as fw
from nfltr.wire.messages import agent_target, http_target, share_target


def request(address: bytes, port: int) -> bytes:
    return struct.pack(">L", len(address)) + address + struct.pack(">L", port)


class ParseTests(SynchronousTestCase):
    """
    Requests' data is parsed strictly, with messages.
    """

    def test_forwardRequest(self) -> None:
        """
        Address (lowercased) and port; the address may be empty.
        """
        self.assertEqual(fw.parse_forward_request(request(b"Blog", 80)), ("blog", 80))
        self.assertEqual(fw.parse_forward_request(request(b"", 0)), ("", 0))

    def test_malformedForwardRequests(self) -> None:
        """
        Truncated, trailing, oversized, non-ASCII or out-of-range requests
        raise L{fw.RequestError}.
        """
        for data in [b"", b"\x00\x00", request(b"a", 80)[:-1], request(b"a", 80) + b"x",
                     struct.pack(">L", 1000) + b"a" * 1000 + struct.pack(">L", 1),
                     request("é".encode(), 80), request(b"a", 70000)]:
            self.assertRaises(fw.RequestError, fw.parse_forward_request, data)

    def test_directTcpip(self) -> None:
        """
        Host and port of a direct-tcpip open; the originator is skipped.
        """
        data = request(b"Web", 8080) + request(b"127.0.0.1", 5555)
        self.assertEqual(fw.parse_direct_tcpip(data), ("web", 8080))
        self.assertRaises(fw.RequestError, fw.parse_direct_tcpip, request(b"web", 0)
                          + request(b"x", 1))
        self.assertRaises(fw.RequestError, fw.parse_direct_tcpip, request(b"web", 1))

    @given(st.binary(max_size=80))
    def test_garbageNeverCrashes(self, data: bytes) -> None:
        """
        Any bytes either parse or raise L{fw.RequestError}.
        """
        for parse in (fw.parse_forward_request, fw.parse_direct_tcpip):
            with contextlib.suppress(fw.RequestError):
                parse(data)

    # Plain alphabets, not from_regex: a regex strategy's first draws took a second on a busy
    # machine and failed Hypothesis's too-slow health check.
    @given(st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=20),
           st.integers(0, 65535), st.text("0123456789.", min_size=1, max_size=15),
           st.integers(0, 65535))
    def test_forwardedRoundTrip(self, address: str, port: int, origin: str, oport: int) -> None:
        """
        A packed forwarded-tcpip open reads back as it was packed.
        """
        data = fw.pack_forwarded_tcpip(address, port, origin, oport)
        self.assertEqual(data[: 4 + len(address) + 4], request(address.encode(), port))
        if port:
            self.assertEqual(fw.parse_direct_tcpip(data), (address, port))


class ClassifyTests(SynchronousTestCase):
    """
    What a C{-R} publishes.
    """

    def test_kinds(self) -> None:
        """
        NAME:80 is a share URL, NAME:443 passthrough, an agent address a TCP
        share of the user's agent.
        """
        self.assertEqual(fw.classify("blog", 80, "u"), (fw.HTTP, "blog"))
        self.assertEqual(fw.classify("blog", 443, "u"), (fw.PASSTHROUGH, "blog"))
        for address in ("", "localhost", "*", "0.0.0.0", "127.0.0.1", "::1"):
            self.assertEqual(fw.classify(address, 22, "laptop"), (fw.TCP, "laptop"))

    def test_refusals(self) -> None:
        """
        Other ports for a name, IP addresses, bad names and users that are
        not agent names are refused with a hint.
        """
        with self.assertRaises(fw.RequestError) as e:
            fw.classify("blog", 8080, "u")
        self.assertIn("-R blog:80:HOST:PORT", str(e.exception))
        for address in ("10.0.0.1", "bad_name", "a.b"):
            self.assertRaises(fw.RequestError, fw.classify, address, 80, "u")
        with self.assertRaises(fw.RequestError) as e:
            fw.classify("localhost", 22, "Bad_User")
        self.assertIn("NAME@relay", str(e.exception))


class TableTests(SynchronousTestCase):
    """
    L{fw.ForwardTable} keeps a connection's forwards.
    """

    def test_allocateAndTarget(self) -> None:
        """
        Port 0 gets the lowest free port from L{fw.FIRST_ALLOCATED_PORT}; the
        relay's targets find their forwards.
        """
        table = fw.ForwardTable(4)
        first = table.check("localhost", 0, "box")
        table.add(first)
        second = table.check("", 0, "box")
        table.add(second)
        self.assertEqual((first.port, second.port),
                         (fw.FIRST_ALLOCATED_PORT, fw.FIRST_ALLOCATED_PORT + 1))
        share = table.check("blog", 80, "box")
        table.add(share)
        tls = table.check("site", 443, "box")
        table.add(tls)
        self.assertEqual(table.for_target(agent_target(first.port)), (first, None))
        self.assertEqual(table.for_target(http_target("blog")), (share, None))
        self.assertEqual(table.for_target(share_target("site", "1.2.3.4:5")), (tls, "1.2.3.4:5"))
        self.assertIsNone(table.for_target(http_target("site")))
        self.assertIsNone(table.for_target(share_target("blog", "1.2.3.4:5")))
        self.assertIsNone(table.for_target("tcp:1"))
        self.assertIsNone(table.for_target("garbage"))
        self.assertEqual(table.remove("localhost", fw.FIRST_ALLOCATED_PORT), first)
        self.assertIsNone(table.for_target(agent_target(first.port)))

    def test_limitsAndDuplicates(self) -> None:
        """
        At most C{limit} forwards; the same address and port, share name or
        TCP port is refused twice.
        """
        table = fw.ForwardTable(2)
        table.add(table.check("blog", 80, "u"))
        self.assertRaises(fw.RequestError, table.check, "blog", 80, "u")
        self.assertRaises(fw.RequestError, table.check, "blog", 443, "u")
        table.add(table.check("", 22, "u"))
        self.assertRaises(fw.RequestError, table.check, "other", 80, "u")
        table = fw.ForwardTable(4)
        table.add(table.check("", 22, "u"))
        self.assertRaises(fw.RequestError, table.check, "localhost", 22, "u")

    def test_visitor(self) -> None:
        """
        The originator of a forwarded channel is the visitor, when known.
        """
        self.assertEqual(fw.split_visitor("10.1.2.3:4567"), ("10.1.2.3", 4567))
        self.assertEqual(fw.split_visitor("[::1]:80"), ("::1", 80))
        self.assertEqual(fw.split_visitor(None), ("127.0.0.1", 0))
        self.assertEqual(fw.split_visitor("junk"), ("127.0.0.1", 0))
