"""
Tests for the limits of HTTP/2 to visitors: L{nfltr.http._h2frames} (the
attacks seen in the frames), L{H2Limits}, and each attack through the proxy
ending its connection alone.
"""

from __future__ import annotations

from typing import Any

from h2.errors import ErrorCodes
from h2.settings import Settings
from hyperframe.frame import ContinuationFrame, HeadersFrame, PingFrame, SettingsFrame
from hypothesis import given
from hypothesis import strategies as st
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http import H2Limits
from nfltr.http._h2frames import PREFACE, FrameWatch

from .h2helpers import H2Visitor, h2Harness, visit
from .helpers import Harness


class FrameWatchTests(SynchronousTestCase):
    """
    L{FrameWatch} sees the attacks in the frame headers.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.watch = FrameWatch(H2Limits(max_control_frames=5, max_header_block_frames=4,
                                         max_header_block_size=1000), self.clock.seconds)

    def test_continuationFlood(self) -> None:
        """
        A header block of more frames than allowed breaks the limit at the
        frame over it.
        """
        self.assertIsNone(self.watch.feed(PREFACE + HeadersFrame(1, data=b"x").serialize()))
        for _ in range(3):
            self.assertIsNone(self.watch.feed(ContinuationFrame(1, data=b"y").serialize()))
        self.assertEqual(self.watch.feed(ContinuationFrame(1, data=b"y").serialize()),
                         "a header block of too many frames")

    def test_blockBytesFromTheFrameHeader(self) -> None:
        """
        A CONTINUATION announcing more bytes than the block may take breaks
        the limit at its 9-byte header, before any of its payload came.
        """
        self.watch.feed(PREFACE + HeadersFrame(1, data=b"x" * 10).serialize())
        head = ContinuationFrame(1, data=b"y" * 2000).serialize()[:9]
        self.assertEqual(self.watch.feed(head), "a header block too large")

    def test_endedBlocksDoNotAddUp(self) -> None:
        """
        Header blocks that end (END_HEADERS) are counted apart.
        """
        self.watch.feed(PREFACE)
        for sid in range(1, 40, 2):
            frame = HeadersFrame(sid, data=b"x" * 500)
            frame.flags.add("END_HEADERS")
            self.assertIsNone(self.watch.feed(frame.serialize()))

    def test_controlFlood(self) -> None:
        """
        More SETTINGS and PINGs than allowed in a window break the limit;
        acknowledgements do not count, and a new window counts anew.
        """
        self.watch.feed(PREFACE)
        ack = PingFrame(0, opaque_data=b"12345678")
        ack.flags.add("ACK")
        for _ in range(10):
            self.assertIsNone(self.watch.feed(ack.serialize()))
        for _ in range(3):
            self.assertIsNone(self.watch.feed(PingFrame(0, opaque_data=b"12345678").serialize()))
        self.clock.advance(11)
        for _ in range(5):
            self.assertIsNone(self.watch.feed(SettingsFrame(0).serialize()))
        self.assertEqual(self.watch.feed(PingFrame(0, opaque_data=b"12345678").serialize()),
                         "too many SETTINGS or PING frames")

    @given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
    def test_anySplit(self, cuts: list[int]) -> None:
        """
        However the bytes are cut, the watch sees the same frames.
        """
        watch = FrameWatch(H2Limits(max_header_block_frames=4), Clock().seconds)
        data = PREFACE + HeadersFrame(1, data=b"x").serialize()
        data += b"".join(ContinuationFrame(1, data=b"y").serialize() for _ in range(4))
        broken, pos = None, 0
        turn = 0
        while pos < len(data):
            cut = cuts[turn % len(cuts)]
            broken = watch.feed(data[pos:pos + cut]) or broken
            pos, turn = pos + cut, turn + 1
        self.assertEqual(broken, "a header block of too many frames")


class H2LimitsTests(SynchronousTestCase):
    """
    L{H2Limits} refuses limits that are not.
    """

    def test_invalid(self) -> None:
        """
        Zero, negative and non-integer counts, a window beyond HTTP/2's, a
        connection window below HTTP/2's own and an idle timeout that is not
        positive raise L{ValueError}.
        """
        for bad in ({"max_concurrent_streams": 0}, {"max_resets": -1},
                    {"max_header_list_size": 1.5}, {"rate_window": 0},
                    {"initial_window": 2**31}, {"connection_window": 2**31},
                    {"connection_window": 65_534}, {"service_idle_timeout": 0}):
            self.assertRaises(ValueError, H2Limits, **bad)


class H2AttackTests(SynchronousTestCase):
    """
    Each attack closes its connection with C{GOAWAY}; another visitor is
    served meanwhile.
    """

    def attack(self, limits: H2Limits, frames: Any, code: int) -> None:
        harness = h2Harness(h2limits=limits)
        harness.backend.hold = True
        bad = H2Visitor()
        visit(harness, bad)
        good = H2Visitor()
        visit(harness, good)
        frames(bad, harness)
        harness.network.run()
        self.assertEqual(bad.goaway, code)
        self.assertIsNotNone(bad.lost)
        harness.backend.hold = False
        sid = good.get()
        harness.network.run()
        self.assertEqual(good.responses[sid][b":status"], b"200")

    def test_rapidReset(self) -> None:
        """
        Requests cancelled in flight beyond C{max_resets}: ENHANCE_YOUR_CALM.
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            for _ in range(12):
                sid = bad.get()
                bad.conn.reset_stream(sid, ErrorCodes.CANCEL)
            bad.flush()

        self.attack(H2Limits(max_resets=10), frames, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_nothingAfterGoAway(self) -> None:
        """
        Frames that came in the same read as the one that broke a limit are
        not acted on (no stream of theirs reaches the service).
        """
        held: list[Any] = []

        def frames(bad: H2Visitor, harness: Harness) -> None:
            for _ in range(12):
                sid = bad.get()
                bad.conn.reset_stream(sid, ErrorCodes.CANCEL)
            for _ in range(5):
                bad.get()
            bad.flush()
            held.append(harness.backend)

        self.attack(H2Limits(max_resets=10), frames, ErrorCodes.ENHANCE_YOUR_CALM)
        # The eleventh reset broke the limit: eleven streams asked for a
        # service connection, and the good visitor's none (it got one).
        self.assertEqual(len(held[0].pending), 11)

    def test_continuationFlood(self) -> None:
        """
        A header block that never ends: ENHANCE_YOUR_CALM.
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            raw = HeadersFrame(1, data=b"\x82").serialize()
            raw += b"".join(ContinuationFrame(1, data=b"\x00" * 100).serialize()
                            for _ in range(50))
            bad.transport.write(raw)

        self.attack(H2Limits(), frames, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_pingFlood(self) -> None:
        """
        PINGs beyond C{max_control_frames}: ENHANCE_YOUR_CALM.
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            bad.transport.write(PingFrame(0, opaque_data=b"12345678").serialize() * 200)

        self.attack(H2Limits(), frames, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_settingsFlood(self) -> None:
        """
        SETTINGS beyond C{max_control_frames}: ENHANCE_YOUR_CALM.
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            bad.transport.write(SettingsFrame(0).serialize() * 200)

        self.attack(H2Limits(), frames, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_headerListTooLarge(self) -> None:
        """
        A header list over C{max_header_list_size}: the connection ends
        with h2's (ENHANCE_YOUR_CALM).
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            bad.get(extra=[(b"x-big", b"a" * 4000)] * 4)

        self.attack(H2Limits(max_header_list_size=8000), frames, ErrorCodes.ENHANCE_YOUR_CALM)

    def test_tooManyStreams(self) -> None:
        """
        A visitor that opens more streams than the SETTINGS it acknowledged
        allow: PROTOCOL_ERROR (h2's answer).
        """
        def frames(bad: H2Visitor, harness: Harness) -> None:
            bad.conn.remote_settings = Settings(client=False)
            for _ in range(3):
                bad.get()

        self.attack(H2Limits(max_concurrent_streams=2), frames, ErrorCodes.PROTOCOL_ERROR)
