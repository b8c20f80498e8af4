"""
The rounds' order, medians, per-round ratios, the targets and the report
(L{bench.peers.run}, L{bench.peers.report}).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SkipTest, SynchronousTestCase

from bench.peers.loads import Load
from bench.peers.report import (
    check_targets,
    markdown,
    plots,
    round_ratios,
    summarize,
)
from bench.peers.run import per_unit, schedule


def _run(tool: str, row: str, n: int, rate: float, **extra: Any) -> dict[str, Any]:
    return {
        "round": n, "tool": tool, "row": row, "attempt": 1, "counted": True,
        "contaminated": False, "rate": rate, "errors": 0, "p50_ms": 1.0, "p99_ms": 2.0,
        "other_cores": 0.05, "load_before": [1.0, 1.0, 1.0],
        "cpu_per_unit": {"relay": 0.1, "exposer": 0.2, "connector": 0.3, "sum": 0.6},
        "service_per_unit": 0.05, **extra,
    }


def _rounds(rates: dict[str, list[float]], row: str = "http-1") -> list[dict[str, Any]]:
    return [
        _run(tool, row, n, rate)
        for tool, values in rates.items() for n, rate in enumerate(values, 1)
    ]


class ScheduleTests(SynchronousTestCase):
    """
    L{schedule} interleaves the tools and rotates the order.
    """

    def test_interleaved(self) -> None:
        """
        Every tool once per round, in rounds; each round starts one tool
        later.
        """
        order = schedule(["a", "b", "c"], 4)
        self.assertEqual(order, [
            (1, "a"), (1, "b"), (1, "c"), (2, "b"), (2, "c"), (2, "a"),
            (3, "c"), (3, "a"), (3, "b"), (4, "a"), (4, "b"), (4, "c"),
        ])
        self.assertEqual(schedule([], 3), [])

    def test_perUnit(self) -> None:
        """
        CPU per GB received for bulk and 1 MiB loads, per 1,000 good
        requests otherwise; None when nothing was received.
        """
        self.assertEqual(per_unit(Load.parse("bulk-1"), 2.0, {"bytes": 4e9}), 0.5)
        self.assertEqual(per_unit(Load.parse("http-1"), 2.0, {"requests": 4000}), 0.5)
        self.assertIsNone(per_unit(Load.parse("http-1"), 2.0, {"requests": 0}))
        self.assertIsNone(per_unit(Load.parse("mib-50"), 2.0, {"requests": 0, "bytes": 500}))


class SummaryTests(SynchronousTestCase):
    """
    Medians and per-round ratios.
    """

    def test_medianOfRounds(self) -> None:
        """
        A tool's rate is the median over its counted runs; an uncounted
        attempt (a contaminated one that was repeated) is left out.
        """
        runs = _rounds({"direct": [100, 300, 200]})
        runs.append({**_run("direct", "http-1", 2, 9999), "counted": False, "attempt": 2})
        row = summarize(runs, ["direct"], ["http-1"])["loads"]["http-1"]["direct"]
        self.assertEqual(row["rate"], 200)
        self.assertEqual(row["runs"], 3)
        self.assertEqual(row["repeats"], 1)
        self.assertEqual(row["cpu_per_unit"]["sum"], 0.6)

    def test_ratiosPerRound(self) -> None:
        """
        A ratio is taken within each round, then the median: a slow round
        for everyone does not skew it, as a ratio of medians would.
        """
        runs = _rounds({"nfltr-plain": [10, 30, 12], "direct": [100, 300, 40]})
        self.assertEqual(round_ratios(runs, "http-1", "nfltr-plain", "direct"), [0.1, 0.1, 0.3])
        summary = summarize(runs, ["direct", "nfltr-plain"], ["http-1"])
        self.assertEqual(summary["ratios"]["http-1"]["nfltr-plain/direct"]["median"], 0.1)

    def test_roundsMissingOrZero(self) -> None:
        """
        Rounds where one side has no run, or the denominator is 0, give no
        ratio.
        """
        runs = _rounds({"nfltr-plain": [10, 30], "pagekite": [0, 5]})
        runs.append(_run("nfltr-plain", "http-1", 3, 50))
        self.assertEqual(round_ratios(runs, "http-1", "nfltr-plain", "pagekite"), [6.0])


def _summary_for_targets() -> dict[str, Any]:
    runs = []
    for row, direct, plain, e2ee, ssh in [
        ("http-1", 1000, 300, 270, 100), ("http-50", 1000, 300, 290, 200),
        ("close-50", 1000, 250, 200, 100), ("mib-50", 1000, 150, 140, 50),
        ("bulk-1", 20, 5, 4, 3), ("bulk-8", 20, 5, 4, 4),
    ]:
        runs += _rounds({"direct": [direct], "nfltr-plain": [plain], "nfltr-e2ee": [e2ee],
                         "ssh": [ssh]}, row)
    runs += _rounds({"direct-tls": [100], "share-e2ee": [29]}, "http-1")
    runs.append({"round": 1, "tool": "nfltr-plain", "row": "agents", "counted": True,
                 "agents": 200, "registered_s": 1.0, "answered_s": 1.5,
                 "relay_kib_per_tunnel": 90.0})
    for tool, seconds in (("nfltr-plain", 0.7), ("nfltr-e2ee", 1.3)):
        runs.append({"round": 1, "tool": tool, "row": "restart", "counted": True,
                     "start_to_listening": 0.5, "start_to_request": seconds})
    tools = ["direct", "direct-tls", "nfltr-plain", "nfltr-e2ee", "share-e2ee", "ssh"]
    return summarize(runs, tools, ["bulk-1", "bulk-8", "http-1", "http-50", "close-50",
                                   "mib-50"])


class TargetTests(SynchronousTestCase):
    """
    L{check_targets} compares each measured ratio with the issue's floor.
    """

    def test_checks(self) -> None:
        """
        Each target is met, missed, or not measured (None) when the run did
        not have the tools or rows for it.
        """
        checks = {c["target"]: c for c in check_targets(_summary_for_targets())}
        self.assertTrue(checks["nfltr-plain ÷ direct, http-1"]["met"])  # 0.30 >= 0.25
        self.assertFalse(checks["nfltr-plain ÷ direct, http-50"]["met"])  # 0.30 < 0.40
        self.assertTrue(checks["nfltr-plain ÷ direct, close-50"]["met"])  # 0.25
        self.assertFalse(checks["nfltr-plain ÷ direct, mib-50"]["met"])  # 0.15
        self.assertTrue(checks["nfltr-plain ÷ ssh, http-1"]["met"])  # 3.0
        self.assertTrue(checks["nfltr-plain ÷ ssh, http-50"]["met"])  # 1.5: the floor itself
        self.assertAlmostEqual(checks["nfltr-plain ÷ ssh, bulk-8"]["value"], 1.25)
        self.assertTrue(checks["nfltr-e2ee ÷ nfltr-plain, http-50"]["met"])  # 0.967
        self.assertTrue(checks["nfltr-e2ee ÷ nfltr-plain, http-1"]["met"])  # 0.9
        self.assertFalse(checks["nfltr-plain ÷ ssh, bulk-8"]["met"])
        self.assertFalse(checks["share-e2ee ÷ direct-tls, http-1"]["met"])  # 0.29
        self.assertIsNone(checks["share-e2ee ÷ direct-tls, http-50"]["met"])
        self.assertTrue(checks["relay memory per idle agent (KiB, Pss)"]["met"])
        self.assertTrue(checks["restart to a working tunnel (s), nfltr-plain"]["met"])
        self.assertFalse(checks["restart to a working tunnel (s), nfltr-e2ee"]["met"])


class ReportTests(SynchronousTestCase):
    """
    The Markdown report and the plots of a (made-up) run.
    """

    def doc(self) -> dict[str, Any]:
        summary = _summary_for_targets()
        tools = ["direct", "direct-tls", "nfltr-plain", "nfltr-e2ee", "share-e2ee", "ssh"]
        summary["setup_s"] = dict.fromkeys(tools, 1.0)
        return {
            "meta": {
                "command": "python -m bench.peers", "started": "now", "elapsed_s": 60,
                "rounds": 1, "seconds": 3, "tools_run": tools, "loads": [],
                "skipped": {"pagekite": "not installed: pagekite"},
                "environment": {k: "x" for k in ("cpu_model", "nproc", "kernel", "python",
                                                 "twisted", "pyopenssl", "openssl")},
                "versions": {k: "x" for k in ("openssh", "pagekite", "haproxy", "socat")},
                "tools": {k: "x" for k in ("nfltr", "nginx", "iperf3", "wrk")},
                "tree": {"commit": "abc1234",
                         "nfltr_status": [" M nfltr/e2ee.py", "?? nfltr/ssh/"]},
            },
            "summary": summary, "targets": check_targets(summary), "runs": [],
        }

    def test_markdown(self) -> None:
        """
        The report names the commit and nfltr/'s uncommitted changes, the
        skipped tools and why, has a rate row per load and a target row per
        check.
        """
        text = markdown(self.doc())
        self.assertIn("commit abc1234, with uncommitted changes in nfltr/ (`git status --short"
                      " nfltr`: M nfltr/e2ee.py, ?? nfltr/ssh/)", text)
        self.assertIn("`pagekite`: not installed: pagekite", text)
        self.assertIn("| http-50 | req/s | 1000 | - | 300 | 290 | - | 200 |", text)
        self.assertIn("| nfltr-plain ÷ direct, http-50 | 0.3 | >= 0.4 | **missed** |", text)
        self.assertIn("| share-e2ee ÷ direct-tls, http-50 | n/a | >= 0.3 | not measured |", text)

    def test_plots(self) -> None:
        """
        Three PNGs.
        """
        if importlib.util.find_spec("matplotlib") is None:
            raise SkipTest("matplotlib is not installed (pip install -e '.[bench]')")
        directory = Path(self.mktemp())
        directory.mkdir()
        written = plots(self.doc(), directory, "t")
        self.assertEqual([p.name for p in written], ["t_rates.png", "t_vs_direct.png",
                                                     "t_cpu.png"])
        for path in written:
            self.assertEqual(path.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")
