"""
Tests for L{nfltr.wire.proxy_protocol}: the PROXY protocol's headers,
written and read, in both versions, whole and a byte at a time.
"""

from __future__ import annotations

import contextlib
import ipaddress
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.proxy_protocol import (
    MAX_V1,
    MAX_V2_BODY,
    V1,
    V2,
    V2_SIGNATURE,
    ProxyHeader,
    ProxyHeaderError,
    ProxyHeaderParser,
    encode,
    may_be_header,
    parse_address,
)

ports = st.integers(0, 65535)
v4 = st.ip_addresses(v=4).map(str)
v6 = st.ip_addresses(v=6).map(str)
pairs = st.one_of(st.tuples(st.tuples(v4, ports), st.tuples(v4, ports)),
                  st.tuples(st.tuples(v6, ports), st.tuples(v6, ports)))


def feed(data: bytes, step: int) -> tuple[ProxyHeader | None, bytes]:
    """
    Feed C{data} C{step} bytes at a time: the header and the rest.
    """
    parser = ProxyHeaderParser()
    for i in range(0, len(data), step):
        header = parser.feed(data[i:i + step])
        if header is not None:
            return header, parser.rest + data[i + step:]
    return None, b""


class RoundTripTests(SynchronousTestCase):
    """
    What L{encode} writes, L{ProxyHeaderParser} reads.
    """

    @given(st.sampled_from([V1, V2]), pairs, st.binary(max_size=64), st.integers(1, 40))
    def test_roundTrip(self, version: str, pair: Any, after: bytes, step: int) -> None:
        """
        Any addresses of one family, either version, fed in any steps: the
        same addresses, and the bytes after the header untouched.
        """
        source, destination = pair
        header, rest = feed(encode(version, source, destination) + after, step)
        self.assertEqual(header, ProxyHeader(source, destination))
        self.assertEqual(rest, after)

    @given(st.sampled_from([V1, V2]), st.tuples(v4, ports), st.tuples(v6, ports))
    def test_mixedFamilies(self, version: str, source: Any, destination: Any) -> None:
        """
        An IPv4 source towards an IPv6 destination is written as IPv6 (the
        IPv4 address mapped).
        """
        header, _ = feed(encode(version, source, destination), 1000)
        assert header is not None and header.source is not None
        self.assertEqual(ipaddress.IPv6Address(header.source[0]).ipv4_mapped,
                         ipaddress.IPv4Address(source[0]))

    def test_golden(self) -> None:
        """
        The bytes of each version, as haproxy and nginx read them.
        """
        self.assertEqual(encode(V1, ("192.0.2.1", 5555), ("10.0.0.1", 80)),
                         b"PROXY TCP4 192.0.2.1 10.0.0.1 5555 80\r\n")
        self.assertEqual(
            encode(V2, ("192.0.2.1", 5555), ("10.0.0.1", 80)),
            V2_SIGNATURE + bytes.fromhex("21 11 000c c0000201 0a000001 15b3 0050"),
        )

    def test_badEncode(self) -> None:
        """
        A host that is not an address, or an unknown version, is refused.
        """
        self.assertRaises(ValueError, encode, V1, ("example.com", 1), ("10.0.0.1", 2))
        self.assertRaises(ValueError, encode, "v3", ("10.0.0.1", 1), ("10.0.0.1", 2))


class ParserTests(SynchronousTestCase):
    """
    L{ProxyHeaderParser} on what is not a good header.
    """

    @given(st.binary(max_size=300), st.integers(1, 50))
    def test_anyBytes(self, data: bytes, step: int) -> None:
        """
        Any bytes are a header, not enough yet, or a L{ProxyHeaderError}:
        nothing else is raised.
        """
        with contextlib.suppress(ProxyHeaderError):
            feed(data, step)

    @given(st.sampled_from([V1, V2]), pairs, st.data())
    def test_anyByteChanged(self, version: str, pair: Any, data: Any) -> None:
        """
        A header with one byte changed is read or refused, never raising
        anything else.
        """
        raw = bytearray(encode(version, *pair))
        index = data.draw(st.integers(0, len(raw) - 1))
        raw[index] = data.draw(st.integers(0, 255))
        with contextlib.suppress(ProxyHeaderError):
            feed(bytes(raw), 7)

    def test_refused(self) -> None:
        """
        Each malformed header is refused, saying why.
        """
        cases = [
            (b"GET / HTTP/1.1\r\n", "no PROXY protocol header"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "PROXY TCP4|TCP6"),
            (b"PROXY TCP4 ::1 ::1 1 2\r\n", "another family"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n", "bad port"),
            (b"PROXY TCP4 x 5.6.7.8 1 2\r\n", "bad address"),
            (b"PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n", "bad address"),
            (b"PROXY " + b"x" * MAX_V1, "longer than 107"),
            (V2_SIGNATURE + bytes([0x31, 0x11, 0, 0]), "another version"),
            (V2_SIGNATURE + bytes([0x21, 0x11]) + (MAX_V2_BODY + 1).to_bytes(2, "big"),
             "longer than 4096"),
            (V2_SIGNATURE + bytes([0x21, 0x11, 0, 4, 1, 2, 3, 4]), "truncated"),
            (V2_SIGNATURE + bytes([0x21, 0x31, 0, 0]), "not TCP over IP"),
            (V2_SIGNATURE + bytes([0x2F, 0x11, 0, 0]), "unknown version 2 command"),
        ]
        for data, words in cases:
            with self.assertRaises(ProxyHeaderError) as caught:
                feed(data, 1000)
            self.assertIn(words, str(caught.exception))

    def test_noAddresses(self) -> None:
        """
        v1 C{UNKNOWN}, v2 C{LOCAL} and C{UNSPEC}: a header naming nobody.
        """
        nobody = ProxyHeader(None, None)
        for data in (b"PROXY UNKNOWN\r\n", b"PROXY UNKNOWN 1 2 3 4\r\n",
                     V2_SIGNATURE + bytes([0x20, 0x00, 0, 0]),
                     V2_SIGNATURE + bytes([0x21, 0x00, 0, 2, 9, 9])):
            self.assertEqual(feed(data + b"x", 3), (nobody, b"x"))

    def test_tlvsIgnored(self) -> None:
        """
        A version 2 header's TLVs after the addresses are read and ignored.
        """
        header = bytearray(encode(V2, ("192.0.2.1", 1), ("10.0.0.1", 2)))
        header[14:16] = (12 + 5).to_bytes(2, "big")
        self.assertEqual(feed(bytes(header) + b"\x04\x00\x02hi" + b"x", 4),
                         (ProxyHeader(("192.0.2.1", 1), ("10.0.0.1", 2)), b"x"))


class HelperTests(SynchronousTestCase):
    """
    L{may_be_header} and L{parse_address}.
    """

    @given(st.sampled_from([V1, V2]), pairs, st.integers(1, 12))
    def test_mayBe(self, version: str, pair: Any, length: int) -> None:
        """
        Every prefix of a header may be one.
        """
        self.assertTrue(may_be_header(encode(version, *pair)[:length]))

    def test_mayNotBe(self) -> None:
        """
        Other first bytes are not.
        """
        for data in (b"", b"GET /", b"\x16\x03\x01", b"SSH-2.0", b"PROXX", b"\r\n\r\nx"):
            self.assertFalse(may_be_header(data))

    @given(st.one_of(v4, v6), ports)
    def test_address(self, host: str, port: int) -> None:
        """
        C{HOST:PORT} and C{[V6]:PORT} are read back.
        """
        text = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.assertEqual(parse_address(text), (host, port))

    def test_notAddress(self) -> None:
        """
        Anything else is not an address.
        """
        for text in ("", "x:1", "1.2.3.4", "1.2.3.4:99999", "1.2.3.4:x"):
            self.assertIsNone(parse_address(text))
