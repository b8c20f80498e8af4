# -*- test-case-name: tests.test_bench_udp -*-
"""
Smoke tests for the UDP benchmark (L{bench.udp}): its options, its table,
and one tiny real run in child processes (a fraction of a second: not a
benchmark).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from bench.udp import markdown, parse_args

ROOT = Path(__file__).resolve().parent.parent


class UDPBenchTests(SynchronousTestCase):
    """
    L{bench.udp}.
    """

    def test_options(self) -> None:
        """
        Defaults are sane; impossible settings are refused.
        """
        args = parse_args([])
        self.assertEqual((args.size, args.window), (512, 32))
        for bad in (["--seconds", "0"], ["--window", "0"], ["--size", "70000"]):
            with self.assertRaises(SystemExit):
                parse_args(bad)

    def test_markdown(self) -> None:
        """
        The table shows the rate, the loss and each role's CPU.
        """
        text = markdown({"size": 512, "window": 32, "seconds": 2.0, "datagrams_per_s": 1234.4,
                         "lost": 0, "sent": 2469,
                         "cpu_ms_per_1000": {"relay": 1.25, "agent": 2.0, "connector": 3.0}})
        self.assertIn("| 1234 | 0 of 2469 | 1.2 | 2.0 | 3.0 |", text)

    def test_tinyRun(self) -> None:
        """
        A run of a fraction of a second through real processes answers
        datagrams and writes its figures.
        """
        out = Path(self.mktemp()).absolute()
        done = subprocess.run(
            [sys.executable, "-m", "bench.udp", "--seconds", "0.3", "--json", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        result = json.loads(out.read_text())
        self.assertGreater(result["answered"], 0)
        self.assertEqual(set(result["cpu_ms_per_1000"]), {"relay", "agent", "connector"})
