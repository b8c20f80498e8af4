"""
CPU of process trees and of the rest of the machine
(L{bench.peers.accounting}).
"""

from __future__ import annotations

import subprocess
import sys

from twisted.trial.unittest import SynchronousTestCase

from bench.peers.accounting import ProcStat, Snapshot, account, table, tree, tree_cpu


def _snapshot(t: float, processes: dict[int, ProcStat], busy: float) -> Snapshot:
    system = {"user": busy, "nice": 0.0, "system": 0.0, "idle": 0.0, "iowait": 0.0, "irq": 0.0,
              "softirq": 0.0, "steal": 0.0}
    return Snapshot(t, processes, system, [0.5, 0.5, 0.5], 0.0, 0.0)


class TreeTests(SynchronousTestCase):
    """
    Trees and their CPU.
    """

    def test_reapedChildrenCount(self) -> None:
        """
        A child that ended within the window (reaped by a process of the
        tree) still counts: its time moved into its parent's reaped time.
        """
        before = {10: ProcStat("relay", 1, 1.0, 0.0), 11: ProcStat("worker", 10, 0.5, 0.0),
                  20: ProcStat("other", 1, 5.0, 0.0)}
        after = {10: ProcStat("relay", 1, 1.5, 0.75), 20: ProcStat("other", 1, 9.0, 0.0),
                 12: ProcStat("worker", 10, 0.25, 0.0)}
        self.assertEqual(tree(before, [10]), {10, 11})
        self.assertEqual(tree(after, [10]), {10, 12})
        self.assertEqual(tree_cpu(after, [10]) - tree_cpu(before, [10]), 1.0)

    def test_others(self) -> None:
        """
        Others' cores: the machine's busy time less ours (roles, services,
        load generators, this process) and less the softirq threads, over
        the window; the biggest of them are named.
        """
        before = _snapshot(0.0, {10: ProcStat("relay", 1, 1.0, 0.0),
                                 30: ProcStat("nginx", 1, 0.0, 0.0),
                                 40: ProcStat("ksoftirqd/0", 2, 0.0, 0.0),
                                 50: ProcStat("make", 1, 0.0, 0.0),
                                 60: ProcStat("kworker/0:1-events", 2, 30.0, 0.0, 7)}, 100.0)
        after = _snapshot(2.0, {10: ProcStat("relay", 1, 2.0, 0.0),
                                30: ProcStat("nginx", 1, 0.5, 0.0),
                                40: ProcStat("ksoftirqd/0", 2, 0.25, 0.0),
                                50: ProcStat("make", 1, 0.5, 0.0),
                                # A kernel worker renames itself: the same process.
                                60: ProcStat("kworker/0:1-mm_percpu_wq", 2, 30.0, 0.0, 7)},
                          102.0)
        after.children = 0.25  # wrk
        acct = account(before, after, {"relay": [10]}, [30])
        self.assertEqual(acct["cpu_s"], {"relay": 1.0})
        self.assertEqual(acct["service_cpu_s"], 0.5)
        self.assertEqual(acct["ksoftirqd_cpu_s"], 0.25)
        self.assertEqual(acct["other_cores"], 0.0)  # 2.0 - 1.0 - 0.5 - 0.25 - 0.25 = 0
        self.assertEqual(acct["busy_cores"], 1.0)
        self.assertEqual(acct["top_others"], ["make[50] 0.50s"])

    def test_real(self) -> None:
        """
        On the real C{/proc}: a shell whose child burned CPU and ended is
        charged that CPU.
        """
        burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
        shell = subprocess.Popen(
            ["sh", "-c", f"{sys.executable} -c '{burn}'; echo burnt; read x"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        try:
            assert shell.stdout is not None
            self.assertEqual(shell.stdout.readline(), b"burnt\n")  # the child was reaped
            self.assertEqual(tree(table(), [shell.pid]), {shell.pid})
            self.assertGreaterEqual(tree_cpu(table(), [shell.pid]), 0.3)
        finally:
            shell.communicate(b"\n", timeout=10)
