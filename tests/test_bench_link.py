"""
Smoke tests for the link-pair benchmark (L{bench.link_pair}): its pure
parts, and one tiny real run in child processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from bench._profile import hot_spots
from bench._system import machine_speed, speed_words
from bench.link_pair import Case, markdown, parse_args, summarize

ROOT = Path(__file__).resolve().parent.parent


def _run(case: str, n: int, mb_s: float, cpu: float) -> dict:
    return {
        "case": case, "mode": "plain" if case == "plain" else "link", "round": n, "attempt": 1,
        "counted": True, "contaminated": False, "bytes": 1 << 20, "mb_s": mb_s,
        "dialer_cpu_s_per_gb": cpu, "listener_cpu_s_per_gb": cpu, "other_cores": 0.01,
        "dialer_cores": 0.5, "listener_cores": 0.5, "dialer_faults_per_gb": 10,
        "listener_faults_per_gb": 20,
        "load_before": [0.5, 0.4, 0.3],
    }


class SummaryTests(SynchronousTestCase):
    """
    Medians, spread and ratios to plain TLS.
    """

    def test_ratiosArePerRound(self) -> None:
        """
        A link case's ratio to plain TLS is the median of the ratios of runs
        of the same round, and the table shows each case once.
        """
        runs = [
            _run("plain", 1, 100.0, 1.0), _run("link-1", 1, 50.0, 2.0),
            _run("plain", 2, 200.0, 1.0), _run("link-1", 2, 150.0, 1.0),
            _run("plain", 3, 100.0, 1.0), _run("link-1", 3, 60.0, 1.5),
        ]
        summary = summarize([Case("plain", 1), Case("link", 1)], runs)
        self.assertEqual(summary["plain"]["mb_s"], {"median": 100.0, "min": 100.0, "max": 200.0})
        self.assertEqual(summary["link-1"]["mb_s_vs_plain"]["median"], 0.6)
        self.assertEqual(summary["link-1"]["dialer_cpu_s_per_gb_vs_plain"]["max"], 2.0)
        env = {k: "x" for k in ("cpu_model", "nproc", "kernel", "python", "twisted",
                                "pyopenssl", "openssl")}
        table = markdown(summary, env, "python -m bench.link_pair")
        self.assertEqual(table.count("| link-1 |"), 2)

    def test_badArguments(self) -> None:
        """
        Session counts must be positive numbers.
        """
        self.assertEqual(parse_args(["--sessions", "1,8"]).session_counts, [1, 8])
        with self.assertRaises(SystemExit):
            parse_args(["--sessions", "0"])


class MachineSpeedTests(SynchronousTestCase):
    """
    The two yardsticks recorded with every benchmark's environment.
    """

    def test_measured(self) -> None:
        """
        Both figures are times of something that ran: above zero, in nanoseconds (a loop
        iteration and a system call take less than a millisecond each).
        """
        speed = machine_speed()
        self.assertEqual(set(speed), {"python_loop_ns", "syscall_ns"})
        for figure in speed.values():
            self.assertTrue(0 < figure < 1e6, speed)

    def test_words(self) -> None:
        """
        A report's header says them; one made before they were recorded says nothing.
        """
        env = {"speed": {"python_loop_ns": 36.6, "syscall_ns": 271.7}}
        self.assertEqual(speed_words(env), "; Python loop 36.6 ns an iteration, getppid"
                         " 271.7 ns (bench._system.machine_speed)")
        self.assertEqual(speed_words({}), "")


class HotSpotTests(SynchronousTestCase):
    """
    Reading py-spy's collapsed stacks.
    """

    def test_selfAndTotal(self) -> None:
        """
        Self time goes to the leaf; total time to every frame on the stack
        once, without the reactor loop; line numbers and site-packages
        prefixes are dropped; samples waiting in epoll are idle; a copy is
        charged to the Python function that made it.
        """
        path = Path(self.mktemp())
        path.write_text(
            "main (bench/_child.py:70);send (/v/site-packages/OpenSSL/SSL.py:12) 3\n"
            "main (bench/_child.py:70);_write (/v/site-packages/twisted/protocols/tls.py:5);"
            "send (/v/site-packages/OpenSSL/SSL.py:12) 1\n"
            "main (bench/_child.py:70);epoll_wait (libc.so.6) 5\n"
            "main (bench/_child.py:70);recv (/v/site-packages/OpenSSL/SSL.py:40);"
            "__memmove_avx512_unaligned_erms (libc.so.6) 2\n"
        )
        spots = hot_spots(path)
        self.assertEqual((spots["samples"], spots["idle"]), (6, 5))
        self.assertEqual(spots["self"][0], {
            "function": "send (OpenSSL/SSL.py)", "samples": 4, "share": 0.6667
        })
        self.assertEqual(
            [t["function"] for t in spots["total"]],
            ["send (OpenSSL/SSL.py)", "recv (OpenSSL/SSL.py)",
             "__memmove_avx512_unaligned_erms (libc.so.6)", "_write (twisted/protocols/tls.py)"],
        )
        self.assertEqual(spots["copies"], [
            {"function": "recv (OpenSSL/SSL.py)", "samples": 2, "share": 0.3333}
        ])


class RealRunTests(SynchronousTestCase):
    """
    The benchmark end to end, tiny.
    """

    def test_tinyRun(self) -> None:
        """
        One round of every case moves its bytes through real processes on
        the epoll reactor with TCP_NODELAY, reports them, and leaves no
        child behind.
        """
        out = Path(self.mktemp()).resolve()
        done = subprocess.run(
            [sys.executable, "-m", "bench.link_pair", "--size-mb", "2", "--rounds", "1",
             "--sessions", "1,2", "--max-other", "100", "--json", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        )
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        result = json.loads(out.read_text())
        self.assertEqual(sorted(result["summary"]), ["link-1", "link-2", "plain"])
        for run in result["runs"]:
            self.assertEqual(run["bytes"], 2 << 20)
            self.assertTrue(run["tls"]["tcp_nodelay"])
            self.assertEqual(run["reactors"], ["EPollReactor"])
            for pid in run["pids"]:
                self.assertFalse(os.path.exists(f"/proc/{pid}"), pid)
        self.assertIn("| link-2 |", done.stdout)
