"""
Tests for the Tor benchmark (L{bench.tor}): how it reads curl and sums up
rounds (the run itself is a benchmark, not a test).
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from bench.tor import markdown, parse_curl, round_figures, summarize


def _small(total: float) -> dict[str, float]:
    return {"connect": 0.001, "tls": 0.002, "first_byte": total, "total": total,
            "bytes_per_s": 1e5, "size": 1024.0}


class FiguresTests(SynchronousTestCase):
    """
    From curl's lines to a path's figures, rounds to medians and ratios.
    """

    def test_parse(self) -> None:
        """
        One dictionary per line of curl's write-out, blank lines skipped.
        """
        found = parse_curl("0.1 0.2 0.3 0.4 1000.0 1024\n\n0.0 0.0 0.01 0.02 2000 1024\n")
        self.assertEqual(len(found), 2)
        self.assertEqual(found[0], {"connect": 0.1, "tls": 0.2, "first_byte": 0.3,
                                    "total": 0.4, "bytes_per_s": 1000.0, "size": 1024.0})

    def test_round(self) -> None:
        """
        The first request's time, the median of the others, the download's
        speed in MiB/s; a short answer is an error, never a figure.
        """
        big = {"bytes_per_s": 2.0 * (1 << 20), "size": float(1 << 20)}
        figures = round_figures([_small(0.05), _small(0.01), _small(0.03), _small(0.02)], big, 1)
        self.assertEqual(figures, {"first_request_ms": 50.0, "keepalive_request_ms": 20.0,
                                   "download_mib_s": 2.0})
        with self.assertRaises(RuntimeError):
            round_figures([_small(0.05), {**_small(0.01), "size": 10.0}], big, 1)

    def test_summary(self) -> None:
        """
        Medians over rounds; a Tor path's ratio to direct is taken per
        round, then the median; the table names each path.
        """
        rounds = [
            {"direct": {"x": 1.0}, "tor-visitor": {"x": 10.0}},
            {"direct": {"x": 2.0}, "tor-visitor": {"x": 30.0}},
            {"direct": {"x": 4.0}, "tor-visitor": {"x": 20.0}},
        ]
        summary = summarize(rounds)
        self.assertEqual(summary["direct"], {"rounds": 3, "x": 2.0})
        self.assertEqual(summary["tor-visitor"]["x"], 20.0)
        self.assertEqual(summary["tor-visitor"]["x_vs_direct"], 10.0)
        table = markdown({
            "direct": {"first_request_ms": 4.0, "keepalive_request_ms": 0.5,
                       "download_mib_s": 50.0},
            "tor-visitor": {"first_request_ms": 80.0, "first_request_ms_vs_direct": 20.0,
                            "keepalive_request_ms": 15.0, "keepalive_request_ms_vs_direct": 30.0,
                            "download_mib_s": 1.0, "download_mib_s_vs_direct": 0.02}},
            {"relay start to onion service up": 1.8})
        self.assertIn("| tor-visitor | 80.0 (20.0x direct) | 15.0 (30.0x direct) |", table)
        self.assertIn("relay start to onion service up 1.8", table)
