# -*- test-case-name: tests.bench.test_replicas -*-
"""
Tests for the replicas benchmark (L{bench.replicas}): its options, the
per-round ratios of C{cross} to C{same}, its tables, and one C{--quick}
smoke run through real processes when C{redis-server}, iperf3, wrk and
nginx are installed (not a benchmark: no speed is asserted).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from bench.replicas import ROLES, cross_vs_same, markdown, parse_args
from bench.tunnel import Workload, summarize

ROOT = Path(__file__).resolve().parent.parent.parent
TOOLS = ("redis-server", "iperf3", "wrk", "nginx", "setpriv")
#: The smoke run's bound (it takes about half a minute on a busy 2-core machine).
SMOKE_TIMEOUT = 150


def _run(workload: str, mode: str, n: int, rate: float) -> dict[str, Any]:
    key = "gbit_s" if workload.startswith("bulk") else "req_s"
    per = "cpu_s_per_gb" if key == "gbit_s" else "cpu_s_per_1k"
    return {
        "workload": workload, "mode": mode, "round": n, key: rate, "counted": True,
        "attempt": 1, "contaminated": False, "other_cores": 0.0, "busy_cores": 1.0,
        "loadgen_cpu_s": 0.1, "load_before": [0.5, 0.5, 0.5],
        **({} if mode == "direct" else {f"{role}_{per}": 0.5 for role in (*ROLES, "tunnel")}),
    }


class OptionsTests(SynchronousTestCase):
    """
    L{parse_args}.
    """

    def test_quick(self) -> None:
        """
        C{--quick} is one round of 1-second runs without warm-up or
        repeats, 20 idle sessions; the cases are direct, cross and same.
        """
        args = parse_args(["--quick"])
        self.assertEqual((args.rounds, args.seconds, args.warmup, args.retries, args.idle),
                         (1, 1, 0, 0, 20))
        self.assertEqual(args.cases, ("direct", "cross", "same"))
        self.assertEqual(parse_args([]).idle, 1000)

    def test_refused(self) -> None:
        """
        Workloads other than bulk-N and http-N, no rounds and a negative
        idle count are refused.
        """
        for bad in (["--workloads", "close-50"], ["--rounds", "0"], ["--idle", "-1"],
                    ["--workloads", "nope"]):
            with self.assertRaises(SystemExit):
                parse_args(bad)


class RatioTests(SynchronousTestCase):
    """
    L{cross_vs_same} and L{markdown}.
    """

    def summary(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        runs = [
            _run("bulk-1", "direct", 1, 10.0), _run("bulk-1", "cross", 1, 1.8),
            _run("bulk-1", "same", 1, 2.0), _run("bulk-1", "direct", 2, 10.0),
            _run("bulk-1", "cross", 2, 1.9), _run("bulk-1", "same", 2, 2.0),
            _run("http-50", "direct", 1, 1000.0), _run("http-50", "cross", 1, 400.0),
            _run("http-50", "same", 1, 500.0),
        ]
        summary = summarize([Workload("bulk-1"), Workload("http-50")], runs,
                            ("direct", "cross", "same"), ROLES)
        cross_vs_same(runs, summary)
        return runs, summary

    def test_perRound(self) -> None:
        """
        The ratio is taken round by round; the bulk target (0.9) is judged
        on their median; an HTTP load has a ratio but no target.
        """
        _, summary = self.summary()
        bulk = summary["bulk-1 cross"]
        self.assertEqual(bulk["vs_same"], {"median": 0.925, "min": 0.9, "max": 0.95})
        self.assertTrue(bulk["meets_target"])
        self.assertEqual(summary["http-50 cross"]["vs_same"]["median"], 0.8)
        self.assertNotIn("meets_target", summary["http-50 cross"])
        self.assertNotIn("vs_same", summary["bulk-1 same"])
        self.assertEqual(bulk["relay-a_cpu_s_per_gb"]["median"], 0.5)

    def test_markdown(self) -> None:
        """
        The table has each case's rate, the ratio with its mark, and the
        idle sessions' KiB per session with the target's verdict, said to
        mean little when the sessions were few.
        """
        _, summary = self.summary()
        doc = {
            "command": "python -m bench.replicas", "started": "now",
            "environment": {"cpu_model": "cpu", "nproc": 2, "kernel": "6", "python": "3",
                            "twisted": "26"},
            "tools": {"nfltr": "0", "iperf3": "3", "nginx": "1", "wrk": "4"},
            "tree": {"commit": "abc", "modified": []}, "summary": summary,
            "idle": {"sessions": 1000, "open_s": 0.1,
                     "rss_kib_before": dict.fromkeys(ROLES, 100),
                     "rss_kib_after": dict.fromkeys(ROLES, 120),
                     "kib_per_session": dict.fromkeys(ROLES, 2.0), "within_target": True},
        }
        text = markdown(doc)
        self.assertIn("| bulk-1 | cross | 1.85 Gbit/s | 0.93 (0.90 to 0.95) ✓ |", text)
        self.assertIn("| relay-a | 100 | 120 | 2.00 | n/a |", text)
        self.assertIn("(through A): met.", text)
        doc["idle"]["sessions"] = 20
        self.assertIn("met (too few sessions to tell: a smoke run).", markdown(doc))


class SmokeTests(SynchronousTestCase):
    """
    C{python -m bench.replicas --quick} through real processes.
    """

    def setUp(self) -> None:
        missing = [tool for tool in TOOLS if shutil.which(tool) is None]
        if missing:
            raise self.skipTest(f"{', '.join(missing)} not installed")

    def test_quick(self) -> None:
        """
        A C{--quick} run (two of its loads) measures every case without a
        failure, with a ratio for each cross case, and holds its idle
        sessions through replica A, reporting memory for both replicas.
        """
        out = Path(self.mktemp()).absolute()
        done = subprocess.run(
            [sys.executable, "-m", "bench.replicas", "--quick", "--workloads", "bulk-1,http-50",
             "--json", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=SMOKE_TIMEOUT, check=False,
        )
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        doc = json.loads(out.read_text())
        for load in ("bulk-1", "http-50"):
            for case in ("direct", "cross", "same"):
                entry = doc["summary"][f"{load} {case}"]
                self.assertEqual((entry["runs"], entry["failed"]), (1, 0), entry)
            self.assertIn("vs_same", doc["summary"][f"{load} cross"])
        self.assertEqual(doc["idle"]["sessions"], 20)
        self.assertEqual(set(doc["idle"]["kib_per_session"]), set(ROLES))
        self.assertEqual(doc["idle_same"]["case"], "same")
        self.assertIn("| bulk-1 | cross |", done.stdout)
