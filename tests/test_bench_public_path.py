"""
Smoke tests for the in-process public port benchmark (L{bench.public_path}):
its arguments, and one tiny real run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from bench.public_path import parse_args

ROOT = Path(__file__).resolve().parent.parent


class ArgumentTests(SynchronousTestCase):
    """
    The command line.
    """

    def test_sizes(self) -> None:
        """
        C{--callgrind-mb} takes two increasing sizes; sizes are positive.
        """
        self.assertEqual(parse_args(["--callgrind-mb", "4,12"]).sizes, (4, 12))
        for bad in (["--callgrind-mb", "12,4"], ["--callgrind-mb", "4"], ["--mb", "0"]):
            with self.assertRaises(SystemExit):
                parse_args(bad)


class RealRunTests(SynchronousTestCase):
    """
    The benchmark end to end, tiny.
    """

    def test_tinyRun(self) -> None:
        """
        A run moves every byte the visitor sent through the relay's and the
        agent's objects to the service, and reports the reactor thread's
        CPU per GB and, profiled, the Python calls per MiB.
        """
        out = Path(self.mktemp()).resolve()
        done = subprocess.run(
            [sys.executable, "-m", "bench.public_path", "--mb", "4", "--profile", "--top", "3",
             "--json", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        )
        self.assertEqual(done.returncode, 0, done.stderr[-2000:] + done.stdout[-2000:])
        record = json.loads(out.read_text())
        self.assertEqual(record["bytes"], 4 << 20)
        self.assertGreater(record["cpu_s_per_gb"], 0)
        self.assertGreater(record["calls_per_mib"], 0)
        self.assertEqual(len(record["top_calls_per_mib"]), 3)
