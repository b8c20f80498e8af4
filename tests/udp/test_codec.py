# -*- test-case-name: tests.udp.test_codec -*-
"""
Tests for L{nfltr.udp._codec}, and docs/link-protocol.md section 17 against the code.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import FrameType
from nfltr.udp import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    MAX_DATAGRAM,
    DatagramDecoder,
    DatagramTooLarge,
    encode_datagram,
)
from nfltr.wire.udp import MAX_UDP_SHARES, UDP_FEATURE
from tests.link.helpers import raw_frame

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


SPEC = Path(__file__).resolve().parents[2] / "docs" / "link-protocol.md"


def _section() -> str:
    text = SPEC.read_text()
    start = text.index("## 17. Datagram sessions")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


class SpecTests(SynchronousTestCase):
    """
    docs/link-protocol.md section 17 and the code agree.
    """

    def test_goldenBytes(self) -> None:
        """
        The section's example frames are what a datagram session writes.
        """
        rows = dict(re.findall(r"^\| `DATA` session 3, (.+?) \| `([0-9a-f ]+)` \|$", _section(),
                               re.MULTILINE))
        payloads = {
            'the datagram "hi"': encode_datagram(b"hi"),
            'an empty datagram then "a"': encode_datagram(b"") + encode_datagram(b"a"),
        }
        self.assertEqual(set(rows), set(payloads))
        for name, payload in payloads.items():
            self.assertEqual(bytes.fromhex(rows[name].replace(" ", "")),
                             raw_frame(FrameType.DATA, 3, payload), name)

    def test_limits(self) -> None:
        """
        Each limit the section names has the code's value.
        """
        section = _section()
        for name, value in [("MAX_UDP_SHARES", MAX_UDP_SHARES), ("MAX_DATAGRAM", MAX_DATAGRAM),
                            ("DEFAULT_IDLE_TIMEOUT", int(DEFAULT_IDLE_TIMEOUT)),
                            ("DEFAULT_MAX_SESSIONS", DEFAULT_MAX_SESSIONS)]:
            self.assertRegex(section, rf"`{name}`[^0-9]*?\(?{value}\b", name)
        self.assertIn(f"lists `{UDP_FEATURE}`", section)
