"""
Smoke tests for the in-process benchmark of resumable sessions' cost (L{bench.resume_cost}):
a tiny run of each load.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from bench.resume_cost import LOADS, markdown, parse_args, run


class ResumeCostTests(SynchronousTestCase):
    """
    Every load runs to its end with and without resumption, and is reported.
    """

    def test_tinyRun(self) -> None:
        """
        One round of each load, e2ee and plain, moves all its bytes or exchanges (a stall
        raises) and gives CPU and call figures for both cases; the table has a row per load.
        """
        for extra in ([], ["--plain"]):
            args = parse_args(["--rounds", "1", "--mb", "1", "--exchanges", "100", *extra])
            results = run(args)
            self.assertEqual(set(results), set(LOADS))
            for by in results.values():
                for resume in (False, True):
                    self.assertEqual(len(by[resume]["cpu"]), 1)
                    self.assertGreater(by[resume]["calls"][0], 0)
            table = markdown(results, args)
            for name in LOADS:
                self.assertIn(f"| {name} |", table)

    def test_badArguments(self) -> None:
        """
        Fewer exchanges than two per session are refused.
        """
        self.assertRaises(SystemExit, parse_args, ["--exchanges", "10"])
