"""
A smoke run of L{bench.suspended} (a few sessions, real processes): the benchmark works, its
sessions resume byte-exact, and its report and options read as documented.  (Its figures are
not checked: speed and memory are never asserted in a test.)
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from bench.suspended import ACK_THRESHOLD, parse_args, report, run


class SuspendedSmokeTests(SynchronousTestCase):
    """
    C{python -m bench.suspended --sessions 3}.
    """

    def test_smoke(self) -> None:
        """
        Three sessions with 4 KiB each way are opened, suspended by the relay's SIGKILL and
        resumed after its restart: all three end byte-exact with a clean end; the report has a
        row per process.
        """
        doc = run(3, 4096)
        self.assertEqual((doc["exact"], doc["failures"]), (3, []))
        self.assertEqual(set(doc["rss_kib"]), {"idle", "open", "suspended", "resumed"})
        text = report(doc)
        self.assertIn("| agent |", text)
        self.assertIn("| connector |", text)
        self.assertIn("3 of 3", text)

    def test_options(self) -> None:
        """
        The defaults are 1,000 sessions of 64 KiB; in-flight bytes at or over the threshold of
        acknowledgements (they would not all stay held) and no sessions are refused.
        """
        args = parse_args([])
        self.assertEqual((args.sessions, args.in_flight), (1000, 65536))
        for bad in (["--sessions", "0"], ["--in-flight", str(ACK_THRESHOLD)]):
            self.assertRaises(SystemExit, parse_args, bad)
