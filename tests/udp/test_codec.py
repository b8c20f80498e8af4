# -*- test-case-name: tests.udp.test_codec -*-
"""
Tests for L{nfltr.udp._codec}.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.udp import (
    MAX_DATAGRAM,
    DatagramDecoder,
    DatagramTooLarge,
    encode_datagram,
)

datagrams = st.lists(st.binary(max_size=300), max_size=20)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, start = [], 0
    for p in points:
        out.append(data[start:p])
        start = p
    out.append(data[start:])
    return out


class CodecTests(SynchronousTestCase):
    """
    The datagram framing keeps message boundaries.
    """

    @given(datagrams, st.lists(st.integers(min_value=0), max_size=30))
    def test_roundTripAnySplit(self, payloads: list[bytes], cuts: list[int]) -> None:
        """
        Datagrams encoded then fed in reads cut anywhere come back the same,
        in order, and nothing is left pending.
        """
        wire = b"".join(encode_datagram(p) for p in payloads)
        decoder = DatagramDecoder()
        out: list[bytes] = []
        for piece in _split(wire, cuts):
            out.extend(decoder.feed(piece))
        self.assertEqual(out, payloads)
        self.assertEqual(decoder.pending, 0)

    @given(st.binary(max_size=2000))
    def test_anyInputIsSafe(self, data: bytes) -> None:
        """
        Any bytes decode without an error, byte by byte or whole, to the
        same datagrams, and hold less than one largest datagram pending.
        """
        whole = DatagramDecoder()
        one = DatagramDecoder()
        byByte: list[bytes] = []
        for i in range(len(data)):
            byByte.extend(one.feed(data[i:i + 1]))
        self.assertEqual(whole.feed(data), byByte)
        self.assertLess(whole.pending, MAX_DATAGRAM + 2)

    def test_largest(self) -> None:
        """
        A datagram of L{MAX_DATAGRAM} bytes is carried; one byte more is our
        caller's error.
        """
        payload = b"x" * MAX_DATAGRAM
        self.assertEqual(DatagramDecoder().feed(encode_datagram(payload)), [payload])
        self.assertRaises(DatagramTooLarge, encode_datagram, payload + b"x")

    def test_empty(self) -> None:
        """
        An empty datagram is a datagram (UDP allows it).
        """
        self.assertEqual(DatagramDecoder().feed(encode_datagram(b"") * 2), [b"", b""])
