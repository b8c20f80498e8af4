"""
Smoke tests for the share-URL benchmark (L{bench.shares}): its pure parts,
and one tiny real run (nginx, a relay and three agents, wrk).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SkipTest, SynchronousTestCase

from bench.shares import BEGIN, END, Workload, markdown, parse_args, summarize, update_doc

ROOT = Path(__file__).resolve().parent.parent


def _run(workload: str, path: str, n: int, req_s: float) -> dict:
    return {
        "workload": workload, "path": path, "round": n, "attempt": 1, "counted": True,
        "contaminated": False, "short_bodies": False, "req_s": req_s, "errors": 0,
        "other_cores": 0.01, "busy_cores": 1.0, "nginx_cpu_s_per_1k": 0.01,
        "load_before": [0.5, 0.4, 0.3], "load_after": [0.6, 0.4, 0.3],
        **({"relay_cpu_s_per_1k": 0.2, "agent_cpu_s_per_1k": 0.3, "nfltr_cpu_s_per_1k": 0.5,
            "relay_cores": 0.3, "agent_cores": 0.4, "nginx_cores": 0.1}
           if path not in ("http", "tls") else {"nginx_cores": 0.5}),
    }


class SummaryTests(SynchronousTestCase):
    """
    Workload names, medians and per-round ratios to the direct paths.
    """

    def test_workloads(self) -> None:
        """
        C{SIZE-keep|close-N} names a file, keep-alive or not, N connections.
        """
        self.assertEqual(Workload.parse("1m-keep-50"), Workload("1m-keep-50", "1m", True, 50))
        self.assertFalse(Workload.parse("1k-close-1").keep)
        for bad in ("2k-keep-1", "1k-open-1", "1k-keep-0", "1k-keep"):
            with self.assertRaises(ValueError):
                Workload.parse(bad)
        with self.assertRaises(SystemExit):
            parse_args(["--paths", "http,carrier-pigeon"])

    def test_ratiosArePerRound(self) -> None:
        """
        A share's ratio to a direct path is the median of the ratios of runs
        of the same round; passthrough is compared with direct TLS only.
        """
        runs = []
        for n, (http, tls, e2ee) in enumerate([(100, 50, 10), (200, 100, 30), (100, 40, 12)], 1):
            runs += [
                _run("1k-keep-1", "http", n, http), _run("1k-keep-1", "tls", n, tls),
                _run("1k-keep-1", "e2ee", n, e2ee), _run("1k-keep-1", "passthrough", n, e2ee),
            ]
        paths = ["http", "tls", "e2ee", "passthrough"]
        summary = summarize([Workload.parse("1k-keep-1")], paths, runs)
        e2ee = summary["1k-keep-1 e2ee"]
        self.assertEqual(e2ee["req_s"]["median"], 12)
        self.assertEqual(e2ee["vs_tls"]["median"], 0.3)
        self.assertEqual(e2ee["vs_http"]["median"], 0.12)
        self.assertNotIn("vs_http", summary["1k-keep-1 passthrough"])
        meta = {
            "command": "python -m bench.shares", "started": "now",
            "environment": {k: "x" for k in ("cpu_model", "nproc", "kernel", "python", "twisted",
                                             "pyopenssl", "openssl")},
            "tools": {"nfltr": "x", "nginx": "x", "wrk": "x"},
            "tree": {"commit": "abc", "modified": []},
        }
        table = markdown(summary, meta)
        self.assertEqual(table.count("| 1k-keep-1 | e2ee share |"), 2)

    def test_updateDoc(self) -> None:
        """
        The tables replace what stands between the markers, nothing else.
        """
        doc = Path(self.mktemp())
        doc.write_text(f"# B\n\nbefore\n{BEGIN}\nold\n{END}\nafter\n")
        self.assertTrue(update_doc("new", doc))
        self.assertEqual(doc.read_text(), f"# B\n\nbefore\n{BEGIN}\n\nnew\n\n{END}\nafter\n")
        plain = Path(self.mktemp())
        plain.write_text("no markers\n")
        self.assertFalse(update_doc("new", plain))


class RealRunTests(SynchronousTestCase):
    """
    The benchmark end to end, tiny.
    """

    def test_tinyRun(self) -> None:
        """
        One 1-second run through the e2ee share and one directly: requests
        are served, TLS is what nfltr negotiates, and no process is left.
        """
        for tool in ("nginx", "wrk", "openssl", "setpriv"):
            if shutil.which(tool) is None:
                raise SkipTest(f"{tool} is not installed")
        out = Path(self.mktemp()).resolve()
        done = subprocess.run(
            [sys.executable, "-m", "bench.shares", "--quick", "--workloads", "1k-keep-1",
             "--paths", "http,e2ee", "--max-other", "100", "--json", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        result = json.loads(out.read_text())
        self.assertEqual(sorted(result["summary"]), ["1k-keep-1 e2ee", "1k-keep-1 http"])
        self.assertEqual(result["found"]["tls"]["e2ee"]["protocol"], "TLSv1.3")
        for run in result["runs"]:
            self.assertGreater(run["requests"], 0)
            self.assertEqual(run["errors"], 0)
        e2ee = result["summary"]["1k-keep-1 e2ee"]
        self.assertGreater(e2ee["agent_cpu_s_per_1k"]["median"], 0)
        self.assertIn("| 1k-keep-1 | e2ee share |", done.stdout)
        self.assertTrue(result["pids"])
        for pid in result["pids"]:
            self.assertFalse(os.path.exists(f"/proc/{pid}"), pid)
