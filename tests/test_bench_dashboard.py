"""
Tests for the dashboard benchmark (L{bench.dashboard}): its event-stream
reader and its table (the run itself is a benchmark, not a test).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from bench.dashboard import markdown, parse_events

_DATA = st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b)


class ParseEventsTests(SynchronousTestCase):
    """
    L{parse_events} reads server-sent events as C{EventStreams} writes them.
    """

    def test_events(self) -> None:
        """
        Complete events come out with their name and data; comments and
        the C{retry} field give none; an unfinished event stays behind.
        """
        stream = (b"retry: 2000\n\nevent: snapshot\ndata: {\"a\":1}\n\n"
                  b": a comment\n\ndata: x\ndata: y\n\nevent: snapshot\ndata: {")
        events, rest = parse_events(stream)
        self.assertEqual(events, [("snapshot", b'{"a":1}'), ("message", b"x\ny")])
        self.assertEqual(rest, b"event: snapshot\ndata: {")

    @given(st.lists(_DATA, min_size=1, max_size=5), st.integers(min_value=0, max_value=400))
    def test_anySplit(self, datas: list[bytes], cut: int) -> None:
        """
        However the bytes arrive, the same events come out.
        """
        stream = b"".join(b"event: snapshot\ndata: " + d + b"\n\n" for d in datas)
        cut = min(cut, len(stream))
        first, rest = parse_events(stream[:cut])
        second, left = parse_events(rest + stream[cut:])
        self.assertEqual(first + second, [("snapshot", d) for d in datas])
        self.assertEqual(left, b"")


class MarkdownTests(SynchronousTestCase):
    """
    The result as a table.
    """

    def test_table(self) -> None:
        """
        One row with every figure, spreads as median (min, max).
        """
        text = markdown({
            "agents": 1000, "streams": 1, "relay_cores_idle": 0.012,
            "relay_cores_streaming": 0.02, "snapshot_cpu_ms": 8.0,
            "snapshot_bytes_median": 295000, "snapshot_gap_s": [0.99, 1.0, 1.01],
            "appear_s": [0.5, 0.7, 0.9], "leave_s": [0.9],
        })
        row = text.splitlines()[-1]
        self.assertIn("| 1000 | 1 | 0.0120 | 0.0200 | 8.0 | 288 KiB |", row)
        self.assertIn("0.70 (min 0.50, max 0.90)", row)

    def test_oneSnapshot(self) -> None:
        """
        A window with one snapshot has no interval: the cell says n/a.
        """
        text = markdown({
            "agents": 20, "streams": 1, "relay_cores_idle": 0.0, "relay_cores_streaming": 0.0,
            "snapshot_cpu_ms": 0.0, "snapshot_bytes_median": 6000, "snapshot_gap_s": None,
            "appear_s": [0.6], "leave_s": [0.9],
        })
        self.assertIn("| 6 KiB | n/a |", text.splitlines()[-1])
