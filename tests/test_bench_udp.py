# -*- test-case-name: tests.test_bench_udp -*-
"""
Smoke tests for the UDP benchmark (L{bench.udp}, L{bench._udp_report}): its
options, the rotation of the paths, a run's figures, the medians and the
ratios to C{direct}, its tables, and one tiny real run of every path in
child processes (a fraction of a second each: not a benchmark).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from bench._udp_report import PATHS, figures, markdown, orders, summarize
from bench.udp import parse_args

ROOT = Path(__file__).resolve().parent.parent


def _run(path: str, n: int, rate: float, cpu_s: dict[str, float], lost: int = 0) -> dict[str, Any]:
    """
    The record of a run of 2 seconds at C{rate} answered a second in round
    C{n}.
    """
    answered = int(rate * 2)
    return {"round": n, **figures(path, answered + lost, answered, 2.0, cpu_s, 0.05)}


class OptionsTests(SynchronousTestCase):
    """
    L{bench.udp.parse_args}.
    """

    def test_defaults(self) -> None:
        """
        Every path, 3 rounds, 512-byte datagrams, 32 unanswered at once.
        """
        args = parse_args([])
        self.assertEqual((args.paths, args.rounds, args.size, args.window),
                         (list(PATHS), 3, 512, 32))
        self.assertEqual(list(PATHS), ["direct", "tunnel", "public"])

    def test_paths(self) -> None:
        """
        C{--paths} takes a comma-separated selection, in the order given.
        """
        self.assertEqual(parse_args(["--paths", "public, direct"]).paths, ["public", "direct"])

    def test_refused(self) -> None:
        """
        Impossible settings, unknown or repeated paths are refused.
        """
        for bad in (["--seconds", "0"], ["--window", "0"], ["--size", "70000"],
                    ["--rounds", "0"], ["--paths", "direct,udp"], ["--paths", ","],
                    ["--paths", "tunnel,tunnel"]):
            with self.assertRaises(SystemExit, msg=bad):
                parse_args(bad)


class ReportTests(SynchronousTestCase):
    """
    L{bench._udp_report}.
    """

    def test_orders(self) -> None:
        """
        The order rotates by one a round, each path once a round.
        """
        self.assertEqual(orders(["a", "b", "c"], 4),
                         [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]])

    def test_figures(self) -> None:
        """
        A run's rate, loss and CPU milliseconds per 1,000 datagrams
        answered, for the roles of its path only, and their total.
        """
        r = figures("public", 2100, 2000, 2.0,
                    {"relay": 0.05, "agent": 0.1, "connector": 9.0}, 0.25)
        self.assertEqual((r["datagrams_per_s"], r["lost"], r["others_cores"]), (1000.0, 100, 0.25))
        self.assertEqual(r["cpu_ms_per_1000"], {"relay": 25.0, "agent": 50.0, "total": 75.0})
        self.assertEqual(figures("direct", 5, 0, 1.0, {}, 0.0)["cpu_ms_per_1000"], {})

    def test_summary(self) -> None:
        """
        Per path: medians over the rounds, the loss summed, and the median
        of the per-round ratios to C{direct} (not the ratio of the medians).
        """
        cpu = {"relay": 0.02, "agent": 0.04, "connector": 0.06}
        runs = [
            _run("direct", 1, 1000, {}), _run("tunnel", 1, 900, cpu, lost=3),
            _run("direct", 2, 4000, {}), _run("tunnel", 2, 1000, cpu),
            _run("direct", 3, 2000, {}), _run("tunnel", 3, 1500, cpu, lost=1),
        ]
        s = summarize(runs, ["direct", "tunnel", "public"])
        self.assertEqual(set(s), {"direct", "tunnel"})
        self.assertEqual(s["direct"]["vs_direct"], 1.0)
        self.assertEqual(s["tunnel"]["datagrams_per_s"], 1000)
        # Ratios 0.9, 0.25, 0.75: their median, where the medians' ratio is 0.5.
        self.assertEqual(s["tunnel"]["vs_direct"], 0.75)
        self.assertEqual((s["tunnel"]["lost"], s["tunnel"]["sent"]), (4, 6804))
        self.assertAlmostEqual(s["tunnel"]["cpu_ms_per_1000"]["connector"], 0.06e3 / 2)

    def test_summaryWithoutDirect(self) -> None:
        """
        Without C{direct} in the run, no path has a ratio to it.
        """
        s = summarize([_run("public", 1, 100, {"relay": 0.1, "agent": 0.1})], ["public"])
        self.assertNotIn("vs_direct", s["public"])

    def test_markdown(self) -> None:
        """
        The medians table shows each path's rate, ratio, loss, its roles'
        CPU (a dash for a role not on the path) and others' cores; the runs
        table every run.
        """
        runs = [_run("direct", 1, 20000, {}),
                _run("public", 1, 10000, {"relay": 0.2, "agent": 0.3}, lost=7)]
        doc = {"settings": {"size": 512, "window": 32, "rounds": 1, "seconds": 2.0},
               "runs": runs, "summary": summarize(runs, ["direct", "public"])}
        text = markdown(doc)
        self.assertIn("| direct | 20,000 | 1.00 | 0 of 40,000 | - | - | - | - | 0.05 |", text)
        self.assertIn("| public | 10,000 | 0.50 | 7 of 20,007 | 10.0 | 15.0 | - | 25.0 | 0.05 |",
                      text)
        self.assertIn("| 1 | public | 10,000 | 7 of 20,007 | 10.0 | 15.0 | - | 25.0 |", text)


class TinyRunTests(SynchronousTestCase):
    """
    L{bench.udp} end to end.
    """

    def test_tinyRun(self) -> None:
        """
        One round of a fraction of a second a path through real processes
        answers datagrams on every path, writes its figures, and
        C{--report} prints them again.
        """
        out = Path(self.mktemp()).absolute()
        done = subprocess.run(
            [sys.executable, "-m", "bench.udp", "--seconds", "0.3", "--rounds", "1",
             "--json", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        result = json.loads(out.read_text())
        self.assertEqual([r["path"] for r in result["runs"]], list(PATHS))
        for path, entry in result["summary"].items():
            self.assertGreater(entry["datagrams_per_s"], 0, path)
        self.assertEqual(set(result["summary"]["tunnel"]["cpu_ms_per_1000"]),
                         {"relay", "agent", "connector", "total"})
        self.assertEqual(set(result["summary"]["public"]["cpu_ms_per_1000"]),
                         {"relay", "agent", "total"})
        again = subprocess.run(
            [sys.executable, "-m", "bench.udp", "--report", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )
        self.assertEqual(again.stdout.strip(), done.stdout.strip())
