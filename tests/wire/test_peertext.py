"""
Tests for L{nfltr.wire.peertext}: peers' strings made safe to log, and the per-source throttle.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire import PEER_TEXT_LIMIT, LogThrottle, peerText


class PeerTextTests(SynchronousTestCase):
    """
    L{peerText} turns anything a peer sent into one short printable line.
    """

    def test_plainKept(self) -> None:
        """
        A short printable string comes back as it is.
        """
        self.assertEqual(peerText("draining: bye"), "draining: bye")

    def test_controlsEscaped(self) -> None:
        """
        Line breaks, escape sequences and other control characters are written as escapes, so a
        peer cannot split a log line or reach the operator's terminal.
        """
        self.assertEqual(peerText("a\nb\r\x1b[31m\u2028"), "a\\x0ab\\x0d\\x1b[31m\\u2028")

    def test_bytesDecoded(self) -> None:
        """
        Bytes are decoded as UTF-8, what does not decode replaced.
        """
        self.assertEqual(peerText(b"caf\xc3\xa9 \xff"), "caf\u00e9 \ufffd")

    def test_longCut(self) -> None:
        """
        A 60 KiB reason is cut to the limit, ending in C{...}.
        """
        text = peerText("x" * 60 * 1024)
        self.assertEqual(len(text), PEER_TEXT_LIMIT)
        self.assertTrue(text.endswith("..."))

    def test_exactLimitKept(self) -> None:
        """
        A string exactly at the limit is not cut.
        """
        self.assertEqual(peerText("y" * 10, limit=10), "y" * 10)
        self.assertEqual(peerText("y" * 11, limit=10), "y" * 7 + "...")

    def test_tinyLimitRefused(self) -> None:
        """
        A limit that cannot hold the ellipsis and one character is a programming error.
        """
        self.assertRaises(ValueError, peerText, "abc", 3)

    @given(st.one_of(st.text(), st.binary()), st.integers(min_value=4, max_value=400))
    def test_alwaysOneShortPrintableLine(self, value: str | bytes, limit: int) -> None:
        """
        Whatever the input, the result is printable and within the limit.
        """
        text = peerText(value, limit)
        self.assertLessEqual(len(text), limit)
        self.assertTrue(text.isprintable(), text)


class LogThrottleTests(SynchronousTestCase):
    """
    L{LogThrottle} lets a burst of lines through per source and kind, then one per interval.
    """

    def test_burstThenHeld(self) -> None:
        """
        The first C{burst} lines pass; the next ones are held back.
        """
        clock = Clock()
        throttle = LogThrottle(clock.seconds, burst=3, interval=10.0)
        self.assertEqual([throttle.allow("1.2.3.4", "goaway") for _ in range(5)],
                         [0, 0, 0, None, None])

    def test_refillReportsHeld(self) -> None:
        """
        After an interval one more line passes, saying how many were held back.
        """
        clock = Clock()
        throttle = LogThrottle(clock.seconds, burst=1, interval=10.0)
        throttle.allow("a", "k")
        throttle.allow("a", "k")
        throttle.allow("a", "k")
        clock.advance(10)
        self.assertEqual(throttle.allow("a", "k"), 2)
        self.assertIsNone(throttle.allow("a", "k"))

    def test_sourcesAndKindsApart(self) -> None:
        """
        One source's flood does not hold back another source, or another kind of line.
        """
        clock = Clock()
        throttle = LogThrottle(clock.seconds, burst=1)
        throttle.allow("a", "k")
        self.assertIsNone(throttle.allow("a", "k"))
        self.assertEqual(throttle.allow("b", "k"), 0)
        self.assertEqual(throttle.allow("a", "other"), 0)

    def test_boundedSources(self) -> None:
        """
        A flood of distinct sources keeps at most C{maxSources} remembered.
        """
        clock = Clock()
        throttle = LogThrottle(clock.seconds, maxSources=100)
        for n in range(1000):
            throttle.allow(f"10.0.{n // 256}.{n % 256}", "k")
        self.assertEqual(len(throttle), 100)

    def test_badSettingsRefused(self) -> None:
        """
        A burst below 1, a non-positive interval or no room for a source is refused.
        """
        clock = Clock()
        self.assertRaises(ValueError, LogThrottle, clock.seconds, burst=0)
        self.assertRaises(ValueError, LogThrottle, clock.seconds, interval=0)
        self.assertRaises(ValueError, LogThrottle, clock.seconds, maxSources=0)
