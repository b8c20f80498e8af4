"""
Tests for L{nfltr.inspect._ws} (WebSocket frame heads read as they pass),
and the inspector's view of a switched connection through a real proxy.
"""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http import SWITCHED
from nfltr.inspect import Ring
from nfltr.inspect._ws import FrameHeads

from ..http.helpers import Harness, OnStreamPath
from ..http.test_upgrade import UPGRADE, UpgradeServer


def frame(opcode: int, payload: bytes, masked: bool = True) -> bytes:
    """
    One WebSocket frame (RFC 6455 section 5.2).
    """
    size = len(payload)
    if size < 126:
        head = bytes([0x80 | opcode, (0x80 if masked else 0) | size])
    elif size < 1 << 16:
        head = bytes([0x80 | opcode, (0x80 if masked else 0) | 126]) + size.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, (0x80 if masked else 0) | 127]) + size.to_bytes(8, "big")
    if not masked:
        return head + payload
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


FRAMES = st.lists(st.tuples(st.sampled_from([1, 2, 8, 9, 10]), st.integers(0, 70000),
                            st.booleans()), max_size=6)


class FrameHeadsTests(SynchronousTestCase):
    """
    Frame heads read whatever the split.
    """

    @given(FRAMES, st.lists(st.integers(1, 5000), min_size=1, max_size=20))
    def test_anySplit(self, frames: list[tuple[int, int, bool]], cuts: list[int]) -> None:
        """
        Frames of every length class, masked or not, read the same whole or
        cut anywhere.
        """
        stream = b"".join(frame(op, b"x" * size, masked) for op, size, masked in frames)
        heads, seen, i = FrameHeads(), [], 0
        for cut in cuts * (len(stream) // max(1, sum(cuts)) + 1):
            seen += heads.feed(stream[i:i + cut])
            i += cut
            if i >= len(stream):
                break
        names = {1: "text", 2: "binary", 8: "close", 9: "ping", 10: "pong"}
        self.assertEqual(seen, [(names[op], size) for op, size, _ in frames])


class SwitchedTests(SynchronousTestCase):
    """
    The ring's view of an upgraded connection.
    """

    def test_framesCounted(self) -> None:
        """
        The exchange ends as switched with its 101, and the visitor's
        frames after it (those in the same write as the request too) are
        counted and listed.
        """
        h = Harness(serve=UpgradeServer, pool=True)
        ring = Ring(h.clock.seconds)
        h.factory.tap = ring
        visitor, _ = h.visit(UPGRADE + frame(1, b"hello"))
        h.send(visitor, frame(2, b"\x00" * 300) + frame(8, b""))
        [kept] = ring.exchanges
        self.assertEqual((kept.status, kept.outcome), (101, SWITCHED))
        self.assertEqual(kept.frameCount["visitor"], 3)
        self.assertEqual([(f["opcode"], f["size"]) for f in kept.frames if f["from"] == "visitor"],
                         [("text", 5), ("binary", 300), ("close", 0)])


class StreamSwitchedTests(OnStreamPath, SwitchedTests):
    """
    The same, on the stream path.
    """
